"""The document routes: start an upload, list, a document's state, change its metadata, retry, download, delete."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from rag_ingest.core.ids import is_document_id
from rag_ingest.documents.deletion import DeletionReport
from rag_ingest.documents.errors import DocumentNotFoundError
from rag_ingest.documents.paging import (
    DEFAULT_PAGE_SIZE,
    MAX_CURSOR_CHARS,
    MAX_IF_MATCH_CHARS,
    MAX_LIST_FILTER_CHARS,
    MAX_PAGE_SIZE,
    etag,
)
from rag_ingest.documents.schemas import (
    DocumentContent,
    DocumentPage,
    DocumentPatch,
    DocumentView,
    DownloadLink,
    UploadRequest,
    UploadTicket,
)

from .common import get_services, principal, responses

router = Router()

DocumentId = Annotated[str, Path(description="A document id as POST /documents returned it")]


@router.post(
    "/documents",
    summary="Start an upload",
    description="Creates the document (AWAITING_UPLOAD) and returns a presigned POST for the PDF, straight to S3.",
    responses=responses(201, 400, 403),
    tags=["documents"],
    operation_id="createDocument",
)
def create_document(request: UploadRequest) -> Response[UploadTicket]:
    caller = principal(router.current_event)
    ticket = get_services().documents.create_upload(caller.tenant_id, request, caller)
    return Response(201, content_types.APPLICATION_JSON, ticket)


@router.get(
    "/documents",
    summary="List documents",
    description=(
        "The tenant's documents, newest first; pass next_cursor back as cursor for the next page. With filter, "
        "only documents whose metadata and built-ins match it (a page may then hold fewer than limit items and "
        "still a next_cursor)."
    ),
    responses=responses(200, 400, 403),
    tags=["documents"],
    operation_id="listDocuments",
)
def list_documents(
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Page size")] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS, description="The last page's next_cursor")] = None,
    filter: Annotated[
        str | None,
        Query(
            max_length=MAX_LIST_FILTER_CHARS,
            description=(
                "A RetrievalFilter as JSON (URL-encoded), as POST /search takes it, without the page key: "
                'e.g. {"equals": {"key": "customer", "value": "acme"}}'
            ),
        ),
    ] = None,
) -> DocumentPage:
    caller = principal(router.current_event)
    documents = get_services().documents
    return documents.list(caller.tenant_id, limit=limit, cursor=cursor, filter_json=filter, principal=caller)


@router.get(
    "/documents/<document_id>",
    summary="A document's state",
    description='The ETag header is the document\'s revision ("3"): send it back as If-Match with PATCH.',
    responses=responses(200, 403, 404),
    tags=["documents"],
    operation_id="getDocument",
)
def get_document(document_id: DocumentId) -> Response[DocumentView]:
    caller = principal(router.current_event)
    view = get_services().documents.get(caller.tenant_id, document_id, caller)
    return Response(200, content_types.APPLICATION_JSON, view, headers={"ETag": etag(view.revision)})


@router.patch(
    "/documents/<document_id>",
    summary="Change a document's metadata or access",
    description=(
        "Replaces the metadata and/or access on the record (revision + 1) and, for a READY document, on every "
        "passage of its "
        "current version, without parsing or embedding again: searches see it within seconds. A document still "
        "processing or FAILED: the record only (its next Index writes it). If-Match (the ETag of GET) makes it "
        "conditional: 412 REVISION_MISMATCH when the document changed since; without it a concurrent PATCH "
        "that wins makes this one 409 CONCURRENT_UPDATE. Only an editor, the uploader or a tenant admin may change "
        "it (403 EDIT_FORBIDDEN); access only the uploader or a tenant admin (403 ACCESS_CHANGE_FORBIDDEN); a "
        "document the caller may not read is 404."
    ),
    responses=responses(200, 400, 403, 404, 409, 412),
    tags=["documents"],
    operation_id="updateDocument",
)
def update_document(
    document_id: DocumentId,
    patch: DocumentPatch,
    if_match: Annotated[
        str | None,
        Header(
            alias="if-match",
            max_length=MAX_IF_MATCH_CHARS,
            description='The revision read, as GET\'s ETag gave it ("3"); * or absent: any revision',
        ),
    ] = None,
) -> Response[DocumentView]:
    caller = principal(router.current_event)
    view = get_services().documents.update(caller.tenant_id, document_id, patch, if_match=if_match, principal=caller)
    return Response(200, content_types.APPLICATION_JSON, view, headers={"ETag": etag(view.revision)})


@router.delete(
    "/documents/<document_id>",
    summary="Delete a document",
    description=(
        "Removes the upload, its artifacts and its passages. Idempotent: a DELETED document answers the same. "
        "Only an editor, the uploader or a tenant admin may (403 EDIT_FORBIDDEN)."
    ),
    responses=responses(200, 403, 404),
    tags=["documents"],
    operation_id="deleteDocument",
)
def delete_document(document_id: DocumentId) -> DeletionReport:
    caller = principal(router.current_event)
    if not is_document_id(document_id):  # never a table key DynamoDB would refuse (e.g. over 2 KB)
        raise DocumentNotFoundError(document_id)
    # Someone who may not read the document gets the 404; a reader who is not an editor, 403.
    services = get_services()
    services.documents.editable(caller.tenant_id, document_id, caller)
    return services.deletion.delete(caller.tenant_id, document_id)


@router.post(
    "/documents/<document_id>/retry",
    summary="Retry a FAILED document",
    description=(
        "Replays the document from its first unfinished stage; 409 NOT_RETRYABLE unless it is FAILED. Only an "
        "editor, the uploader or a tenant admin may (403 EDIT_FORBIDDEN)."
    ),
    responses=responses(202, 403, 404, 409),
    tags=["documents"],
    operation_id="retryDocument",
)
def retry_document(document_id: DocumentId) -> Response[DocumentView]:
    caller = principal(router.current_event)
    view = get_services().documents.retry(caller.tenant_id, document_id, caller)
    return Response(202, content_types.APPLICATION_JSON, view)


@router.get(
    "/documents/<document_id>/content",
    summary="The extracted text of a DOCX, PPTX, HTML, Markdown or text document",
    description=(
        "The current version's text as the pipeline extracted it, page (slide) by page, block by block: a search "
        "hit's `anchor` names a heading block, `<anchor>-p<paragraph_index>` its paragraph. 409 NO_RENDERED_VIEW "
        "for a PDF (open it at its page with /download) or before the text is extracted."
    ),
    responses=responses(200, 403, 404, 409),
    tags=["documents"],
    operation_id="getDocumentContent",
)
def document_content(document_id: DocumentId) -> DocumentContent:
    caller = principal(router.current_event)
    return get_services().documents.content(caller.tenant_id, document_id, caller)


@router.get(
    "/documents/<document_id>/download",
    summary="Open the original upload",
    description=(
        "A short-lived presigned GET of the current version of the upload, shown inline with the media type of "
        "what its bytes are (application/pdf for a PDF). 409 NOT_UPLOADED before the upload arrives."
    ),
    responses=responses(200, 403, 404, 409),
    tags=["documents"],
    operation_id="downloadDocument",
)
def download_document(document_id: DocumentId) -> DownloadLink:
    caller = principal(router.current_event)
    return get_services().documents.download(caller.tenant_id, document_id, caller)
