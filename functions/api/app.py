"""HTTP API: issue presigned uploads and report document status. The tenant comes from the JWT."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, UnauthorizedError
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from rag_ingest.adapters.aws import client
from rag_ingest.adapters.document_operations import DocumentOperations
from rag_ingest.adapters.object_versions import ObjectVersions
from rag_ingest.adapters.status_repository import StatusRepository
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.config import ApiEnv
from rag_ingest.deletion import DocumentDeletion
from rag_ingest.documents import DocumentNotFoundError, DocumentService, UploadRequest
from rag_ingest.errors import PermanentError

ENV = ApiEnv.from_env()
TENANT_CLAIM = "custom:tenant_id"
logger = Logger()
app = APIGatewayHttpResolver()
service = DocumentService(ENV, StatusRepository(ENV.documents_table), client("s3"))
deletion = DocumentDeletion(
    documents=DocumentOperations(ENV.documents_table),
    # Connected on first use: only DELETE (and search) need OpenSearch.
    vector_store=cache(
        lambda: VectorStore(
            connect(ENV.opensearch_endpoint),
            IndexSettings(name=ENV.opensearch_index, dimension=ENV.embedding_dimension),
        )
    ),
    objects=ObjectVersions(),
    bucket=ENV.bucket_name,
    artifacts_prefix=ENV.artifacts_prefix,
)


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


@app.get("/documents/<document_id>")
def get_document(document_id: str) -> dict[str, Any]:
    try:
        return service.get(_tenant(), document_id).model_dump()
    except DocumentNotFoundError as exc:
        raise NotFoundError(f"document {document_id} not found") from exc


@app.delete("/documents/<document_id>")
def delete_document(document_id: str) -> dict[str, Any]:
    """Idempotent: deleting a DELETED document answers the same; another tenant's is a 404."""
    try:
        return deletion.delete(_tenant(), document_id).model_dump()
    except DocumentNotFoundError as exc:
        raise NotFoundError(f"document {document_id} not found") from exc


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
