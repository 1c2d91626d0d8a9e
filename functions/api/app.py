"""HTTP API: issue presigned uploads and report document status. The tenant comes from the JWT."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import UnauthorizedError
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from rag_ingest.adapters.aws import client
from rag_ingest.adapters.document_operations import DocumentOperations
from rag_ingest.adapters.object_versions import ObjectVersions
from rag_ingest.adapters.status_repository import StatusRepository
from rag_ingest.config import ApiEnv, SearchEnv
from rag_ingest.deletion import DocumentDeletion
from rag_ingest.documents import DocumentNotFoundError, DocumentService, UploadRequest
from rag_ingest.errors import PermanentError
from rag_ingest.search import SearchRequest, SearchService
from rag_ingest.wiring import embedder_for, vector_store_for

ENV = ApiEnv.from_env()
TENANT_CLAIM = "custom:tenant_id"
logger = Logger()
app = APIGatewayHttpResolver()
service = DocumentService(ENV, StatusRepository(ENV.documents_table), client("s3"))
SEARCH_ENV = SearchEnv.from_env()
# One OpenSearch client for DELETE and POST /search, made on first use (GET and POST /documents never need it).
vector_store = cache(
    lambda: vector_store_for(
        SEARCH_ENV.opensearch_endpoint, SEARCH_ENV.opensearch_index, SEARCH_ENV.embedding_dimension, SEARCH_ENV
    )
)
deletion = DocumentDeletion(
    documents=DocumentOperations(ENV.documents_table),
    vector_store=vector_store,
    objects=ObjectVersions(),
    bucket=ENV.bucket_name,
    artifacts_prefix=ENV.artifacts_prefix,
)
searcher = SearchService(store=vector_store, embedder=cache(lambda: embedder_for(SEARCH_ENV)))


def _tenant() -> str:
    claims = app.current_event.request_context.authorizer.jwt_claim or {}
    tenant = claims.get(TENANT_CLAIM)
    if not tenant:
        raise UnauthorizedError(f"the token carries no {TENANT_CLAIM} claim")
    return str(tenant)


def _error(status: int, code: str, message: str) -> Response[Any]:
    return Response(status, content_types.APPLICATION_JSON, {"error": {"code": code, "message": message}})


@app.post("/documents")
def create_document() -> Response[Any]:
    tenant = _tenant()
    try:
        request = UploadRequest.model_validate(app.current_event.json_body or {})
        ticket = service.create_upload(tenant, request)
    except ValidationError as exc:
        return _error(400, "INVALID_REQUEST", "; ".join(e["msg"] for e in exc.errors()))
    except PermanentError as exc:
        return _error(400, exc.code.value, exc.detail)
    return Response(201, content_types.APPLICATION_JSON, ticket.model_dump())


@app.exception_handler(DocumentNotFoundError)
def document_not_found(exc: DocumentNotFoundError) -> Response[Any]:
    # Missing and another tenant's documents answer alike (same body as Powertools' NotFoundError).
    return Response(404, content_types.APPLICATION_JSON, {"statusCode": 404, "message": f"document {exc} not found"})


@app.get("/documents/<document_id>")
def get_document(document_id: str) -> dict[str, Any]:
    return service.get(_tenant(), document_id).model_dump()


@app.delete("/documents/<document_id>")
def delete_document(document_id: str) -> dict[str, Any]:
    """Idempotent: deleting a DELETED document answers the same; another tenant's is a 404."""
    return deletion.delete(_tenant(), document_id).model_dump()


@app.post("/search")
def search() -> Response[Any]:
    """Passages of the caller's tenant for ``{"query", "k" (1..50, 5), "mode" (hybrid|knn|bm25)}``."""
    tenant = _tenant()
    try:
        body = app.current_event.json_body
    except (ValueError, TypeError):
        return _error(400, "INVALID_REQUEST", "the body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "INVALID_REQUEST", 'the body must be a JSON object like {"query": "..."}')
    try:
        result = searcher.search(tenant, SearchRequest.model_validate(body))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        return _error(400, "INVALID_REQUEST", problems)
    except PermanentError as exc:
        return _error(400, exc.code.value, exc.detail)
    return Response(200, content_types.APPLICATION_JSON, result.model_dump(mode="json"))


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
