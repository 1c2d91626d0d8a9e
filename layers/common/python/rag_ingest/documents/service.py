"""The API's domain: ``DocumentQueries`` reports, lists and reads documents (the MCP function has only
it); ``DocumentService`` also issues uploads (presigned POST), retries, changes and downloads them.
Bodies are in ``schemas``, refusals in ``errors``, paging and ETags in ``paging``.

Every operation takes the caller's tenant, already validated (``rag_ingest.core.auth.tenant_of``), and
answers another tenant's document exactly like a missing one. Given the caller's
:class:`rag_ingest.core.access.Principal` (the API always passes it), a document the caller may not
read (``rag_ingest.core.access.can_read``) is answered the same way, and the listing leaves it out;
one it may read but not edit (``can_edit``) refuses a change, retry or delete with 403.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from rag_ingest.core.access import DocumentAccess, Principal, can_edit, can_manage_access, can_read
from rag_ingest.core.config import ApiEnv, DocumentsEnv
from rag_ingest.core.errors import ErrorCode, IndexArtifactsMissingError, PermanentError, StaleWriteError
from rag_ingest.core.filters import matches
from rag_ingest.core.ids import is_document_id, new_document_id
from rag_ingest.core.limits import TenantLimiter
from rag_ingest.core.metadata import MetadataError, validate_metadata
from rag_ingest.core.parsed import DocumentFormat, ParsedRange
from rag_ingest.core.ports import ApiDocuments, ArtifactReader, ChunkFieldsRefresher, DocumentReplayer, UploadPresigner
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.s3_keys import PAGES_FOLDER, artifact_key, filename_of, page_range_key, upload_key
from rag_ingest.core.upload_types import max_bytes_for, upload_format
from rag_ingest.documents.errors import (
    AccessChangeForbiddenError,
    ConcurrentUpdateError,
    ContentUnavailableError,
    DocumentNotFoundError,
    EditForbiddenError,
    NotRetryableError,
    NotUploadedError,
    ReindexUnavailableError,
    RevisionMismatchError,
)
from rag_ingest.documents.paging import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    decode_cursor,
    encode_cursor,
    if_match_revisions,
    parse_list_filter,
)
from rag_ingest.documents.schemas import (
    UNSAFE_FILENAME,
    DocumentContent,
    DocumentPage,
    DocumentPatch,
    DocumentView,
    DownloadLink,
    UploadRequest,
    UploadTicket,
)

DOWNLOAD_URL_SECONDS = 300
# Each retry is a paid workflow run; past this many a person should look at the document.
MAX_RETRIES = 10
# A filtered listing reads at most this many pages of the tenant's documents per request: the
# filter runs in code over the tenant index's pages (docs/api.md, "Listing with a filter").
MAX_FILTERED_LIST_READS = 10
# A PATCH whose conditional write lost only to a status change (not to another PATCH) reads again.
MAX_PATCH_ATTEMPTS = 3


def _ownership(principal: Principal | None, access: DocumentAccess | None) -> dict[str, Any]:
    """A new record's ``uploaded_by`` (the caller's sub) and ``access`` arguments, only those given."""
    fields: dict[str, Any] = {}
    if principal is not None and principal.subject:
        fields["uploaded_by"] = principal.subject
    if access is not None and not access.is_default:
        fields["access"] = access
    return fields


def _index_key(record: DocumentRecord) -> dict[str, str]:
    """The tenant index's key of a record: what a cursor continues after."""
    return {"document_id": record.document_id, "tenant_id": record.tenant_id, "created_at": record.created_at}


def _header_filename(filename: str) -> str:
    """Content-Disposition value: an ASCII fallback plus the exact name (RFC 6266 / 5987)."""
    fallback = UNSAFE_FILENAME.sub("_", filename) or "document.pdf"
    return f"inline; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


class DocumentQueries:
    """Reading the tenant's documents as a caller: a record, a page of the listing, the extracted text
    (the MCP function's, which holds no write grant); DocumentService adds what changes them."""

    def __init__(self, env: DocumentsEnv, documents: ApiDocuments, *, artifacts: ArtifactReader | None = None) -> None:
        self._env = env
        self._documents = documents
        self._artifacts = artifacts

    def get(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentView:
        return DocumentView.of(self._record(tenant_id, document_id, principal))

    def list(
        self,
        tenant_id: str,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
        filter_json: str | None = None,
        principal: Principal | None = None,
    ) -> DocumentPage:
        """One page of the tenant's documents, newest first (DELETED ones are left out); with
        ``filter_json`` (a RetrievalFilter as JSON), only those that match it; with ``principal``,
        only those it may read (a tenant admin reads all but those that deny them)."""
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise PermanentError(ErrorCode.INVALID_REQUEST, f"limit must be between 1 and {MAX_PAGE_SIZE}")
        start_key = decode_cursor(cursor, tenant_id) if cursor else None
        where = parse_list_filter(filter_json) if filter_json is not None else None
        if where is not None or principal is not None:

            def is_listed(record: DocumentRecord) -> bool:
                if principal is not None and not can_read(principal, record):
                    return False
                return where is None or matches(where, record.filter_fields)

            return self._list_filtered(tenant_id, limit, start_key, is_listed)
        records, last_key = self._documents.list_by_tenant(tenant_id, limit=limit, start_key=start_key)
        return DocumentPage(
            items=[DocumentView.of(record) for record in records if record.tenant_id == tenant_id],
            next_cursor=encode_cursor(last_key) if last_key else None,
        )

    def _list_filtered(
        self,
        tenant_id: str,
        limit: int,
        start_key: dict[str, str] | None,
        is_listed: Callable[[DocumentRecord], bool],
    ) -> DocumentPage:
        """The filter runs here, over pages of the tenant index (a DynamoDB query of the tenant's
        partition, never a scan): fine at the documents a tenant has today, and bounded per request
        (``MAX_FILTERED_LIST_READS`` pages). A page may then hold fewer than ``limit`` items and still
        a ``next_cursor`` (the last document read): follow it until it is null."""
        items: list[DocumentView] = []
        key = start_key
        for _ in range(MAX_FILTERED_LIST_READS):
            records, last_key = self._documents.list_by_tenant(tenant_id, limit=limit, start_key=key)
            for record in records:
                if record.tenant_id == tenant_id and is_listed(record):
                    items.append(DocumentView.of(record))
                    if len(items) == limit:
                        more = last_key is not None or record is not records[-1]
                        return DocumentPage(
                            items=items, next_cursor=encode_cursor(_index_key(record)) if more else None
                        )
            if last_key is None:
                return DocumentPage(items=items, next_cursor=None)
            key = dict(last_key)
        return DocumentPage(items=items, next_cursor=encode_cursor(key) if key else None)

    def content(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentContent:
        """The extracted blocks of a structured document's current version (its Parse artifact): the
        page's rendered view of a DOCX, PPTX, HTML, Markdown or text hit."""
        record = self._record(tenant_id, document_id, principal)
        if record.status in (DocumentStatus.DELETING, DocumentStatus.DELETED):
            raise DocumentNotFoundError(document_id)
        if not record.version:  # not uploaded yet: it exists, its text does not (409, as documented)
            raise ContentUnavailableError(f"the document's text is not extracted (status {record.status.value})")
        document_format = record.document_format or DocumentFormat.PDF
        if document_format is DocumentFormat.PDF:
            raise ContentUnavailableError("a PDF has no rendered view: open it at its page (GET .../download)")
        assert self._artifacts is not None
        pages_prefix = artifact_key(document_id, record.version, PAGES_FOLDER, self._env.artifacts_prefix)
        key = page_range_key(pages_prefix, 1)
        if not self._artifacts.exists(self._env.bucket_name, key):
            raise ContentUnavailableError(f"the document's text is not extracted (status {record.status.value})")
        parsed = ParsedRange.model_validate(self._artifacts.get_json(self._env.bucket_name, key))
        return DocumentContent.of(record, document_format, parsed.pages)

    def readable(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentRecord:
        """The record of a document the caller may see, else ``DocumentNotFoundError``."""
        return self._record(tenant_id, document_id, principal)

    def editable(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentRecord:
        """The record of a document the caller may change (a route that acts on a document checks
        this first: delete): 404 when it may not read it, 403 when it may read but not edit it."""
        record = self._record(tenant_id, document_id, principal)
        if principal is not None and not can_edit(principal, record):
            raise EditForbiddenError("only an editor, the uploader or a tenant admin may change or delete it")
        return record

    def _record(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentRecord:
        # An id the system never issues cannot exist: no table read (and no oversized key) for it.
        if not is_document_id(document_id):
            raise DocumentNotFoundError(document_id)
        record = self._documents.get(document_id)
        # Another tenant's document is reported exactly like a missing one.
        if record is None or record.tenant_id != tenant_id:
            raise DocumentNotFoundError(document_id)
        # So is a document the caller may not read: the same 404, nothing to tell it exists.
        if principal is not None and not can_read(principal, record):
            raise DocumentNotFoundError(document_id)
        return record


class DocumentService(DocumentQueries):
    def __init__(
        self,
        env: ApiEnv,
        documents: ApiDocuments,
        presigner: UploadPresigner,
        *,
        replayer: DocumentReplayer | None = None,
        refresher: ChunkFieldsRefresher | None = None,
        artifacts: ArtifactReader | None = None,
        limiter: TenantLimiter | None = None,
    ) -> None:
        super().__init__(env, documents, artifacts=artifacts)
        self._api_env = env
        self._limiter = limiter
        self._presigner = presigner
        self._replayer = replayer
        self._refresher = refresher

    def create_upload(self, tenant_id: str, request: UploadRequest, principal: Principal | None = None) -> UploadTicket:
        """An AWAITING_UPLOAD record (with the caller as its uploader and ``request.access``) and
        the presigned POST for its file: the declared type (rag_ingest.core.upload_types) sets the
        POST's Content-Type and size limit. The name decides nothing: Validate reads the bytes.
        With a limiter, the tenant's pages today, documents and stored bytes are checked first
        (429 or 403 ``QUOTA_EXCEEDED``) and the document counted."""
        declared_format = upload_format(request.content_type)
        max_bytes = max_bytes_for(declared_format, self._api_env.max_upload_bytes)
        try:
            metadata = validate_metadata(request.metadata) if request.metadata is not None else {}
        except MetadataError as exc:
            raise PermanentError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        document_id = new_document_id()
        key = upload_key(tenant_id, document_id, request.filename, self._api_env.raw_prefix)
        if self._limiter is not None:
            self._limiter.reserve_upload(tenant_id)
        try:
            self._documents.create_awaiting_upload(
                document_id=document_id,
                tenant_id=tenant_id,
                filename=request.filename,
                bucket=self._env.bucket_name,
                key=key,
                metadata=metadata,
                **_ownership(principal, request.access),
            )
        except BaseException:
            if self._limiter is not None:
                self._limiter.release_upload(tenant_id)  # counted, never made
            raise
        expires_in = self._api_env.upload_url_expiry_seconds
        # S3 enforces these conditions on the POST itself: exact key, declared type, size range, expiry.
        upload = self._presigner.presign_upload(
            bucket=self._env.bucket_name,
            key=key,
            content_type=declared_format.content_type,
            max_bytes=max_bytes,
            expires_in=expires_in,
        )
        return UploadTicket(
            document_id=document_id,
            status="AWAITING_UPLOAD",
            upload=upload,
            expires_at=int(time.time()) + expires_in,
            max_bytes=max_bytes,
        )

    def retry(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentView:
        """Replay a FAILED document from its first unfinished stage (the stages' checkpoints skip
        the finished ones); anything else is ``NotRetryableError``."""
        if self._replayer is None:
            raise RuntimeError("retry is not configured for this service")
        if not is_document_id(document_id):
            raise DocumentNotFoundError(document_id)
        record = self._documents.get(document_id)
        if record is None or record.tenant_id != tenant_id or record.status is DocumentStatus.DELETED:
            raise DocumentNotFoundError(document_id)
        if principal is not None and not can_read(principal, record):
            raise DocumentNotFoundError(document_id)
        if principal is not None and not can_edit(principal, record):
            raise EditForbiddenError("only an editor, the uploader or a tenant admin may retry it")
        if record.status is not DocumentStatus.FAILED:
            raise NotRetryableError(f"only a FAILED document can be retried; this one is {record.status.value}")
        if not (record.version and record.key and record.bucket):
            raise NotRetryableError("the document's upload never arrived: upload it again")
        if record.replays >= MAX_RETRIES:
            raise NotRetryableError(f"the document was already retried {record.replays} times")
        try:
            self._replayer.replay(record)
        except StaleWriteError:
            raise NotRetryableError("the document changed while retrying; reload it") from None
        return self.get(tenant_id, document_id, principal)

    def update(
        self,
        tenant_id: str,
        document_id: str,
        patch: DocumentPatch,
        *,
        if_match: str | None = None,
        principal: Principal | None = None,
    ) -> DocumentView:
        """Replace the patch's fields on the record (compare-and-set on its revision, +1), then, for a
        READY document, rewrite its current version's chunks with them (nothing parsed or embedded).
        A document in flight or FAILED: the record only (its workflow's Index and Finalize write the
        record's fields as they find them). ``if_match``: the If-Match header (412 when stale)."""
        if self._refresher is None:
            raise RuntimeError("PATCH is not configured for this service")
        fields = patch.record_fields()
        accepted = if_match_revisions(if_match) if if_match is not None else None
        for _ in range(MAX_PATCH_ATTEMPTS):
            record = self._record(tenant_id, document_id, principal)
            if record.status in (DocumentStatus.DELETING, DocumentStatus.DELETED):
                raise DocumentNotFoundError(document_id)
            if "access" in fields and principal is not None and not can_manage_access(principal, record):
                raise AccessChangeForbiddenError("only the uploader or a tenant admin may change who reads it")
            if principal is not None and not can_edit(principal, record):
                raise EditForbiddenError("only an editor, the uploader or a tenant admin may change it")
            if accepted is not None and record.revision not in accepted:
                raise RevisionMismatchError(f"the document is at revision {record.revision}")
            ready = record.status is DocumentStatus.READY
            if ready:
                self._check_rewritable(record)
            try:
                updated = self._documents.update_fields(record, fields)
            except StaleWriteError:
                current = self._documents.get(document_id)
                if current is not None and current.revision == record.revision:
                    continue  # its status or version moved (the workflow), not its fields: read again
                if accepted is not None:
                    raise RevisionMismatchError("the document changed since it was read") from None
                raise ConcurrentUpdateError("the document changed while updating it; read it and try again") from None
            if updated.status is DocumentStatus.READY:
                try:
                    self._refresher.refresh(document_id)
                except IndexArtifactsMissingError as exc:
                    raise ReindexUnavailableError(
                        f"revision {updated.revision} is saved, but its passages could not be rewritten ({exc}); "
                        "upload the document again"
                    ) from None
            return self.get(tenant_id, document_id, principal)
        raise ConcurrentUpdateError("the document kept changing while updating it; try again")

    def _check_rewritable(self, record: DocumentRecord) -> None:
        assert self._refresher is not None
        try:
            self._refresher.check(record)
        except IndexArtifactsMissingError as exc:
            message = f"the passages cannot be rewritten in place ({exc}); nothing changed"
            raise ReindexUnavailableError(message) from None

    def download(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DownloadLink:
        """A short-lived GET of the current version of the original upload, shown inline with the
        media type of what its bytes are (a PDF opens in the browser's viewer)."""
        record = self._record(tenant_id, document_id, principal)
        if record.status in (DocumentStatus.DELETING, DocumentStatus.DELETED):
            raise DocumentNotFoundError(document_id)
        if not (record.version and record.key):  # created, not uploaded yet (a make fuzz finding)
            raise NotUploadedError("the document's upload has not arrived yet")
        url = self._presigner.presign_download(
            bucket=record.bucket or self._env.bucket_name,
            key=record.key,
            version=record.version,
            content_type=(record.document_format or DocumentFormat.PDF).content_type,
            content_disposition=_header_filename(record.filename or filename_of(record.key)),
            expires_in=DOWNLOAD_URL_SECONDS,
        )
        return DownloadLink(url=url, expires_in=DOWNLOAD_URL_SECONDS)
