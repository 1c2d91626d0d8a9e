"""HTTP API: documents (upload, list, status, retry, download, delete) and search, for the caller's tenant.

The tenant comes from the verified JWT's claims and is validated before any use. Every 4xx/5xx
this function answers has one body, ``{"error": {"code", "message"}}``: the routes' own errors,
Powertools' validation (400), unknown paths (404) and methods (405), and anything unexpected
(500, no internals). ``GET /openapi.json`` serves the OpenAPI 3 document of these routes.
"""

from __future__ import annotations

import binascii
import json
import re
from functools import cache
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseContentModel,
    OpenAPIResponseContentSchema,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.auth import InvalidTenantError, tenant_of
from rag_ingest.core.config import ApiEnv, SearchEnv
from rag_ingest.core.errors import PermanentError, TransientError
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.documents.deletion import DeletionReport
from rag_ingest.documents.service import (
    DEFAULT_PAGE_SIZE,
    MAX_CURSOR_CHARS,
    MAX_PAGE_SIZE,
    DocumentNotFoundError,
    DocumentPage,
    DocumentView,
    DownloadLink,
    ErrorBody,
    ErrorDetail,
    GatewayError,
    InvalidCursorError,
    NotRetryableError,
    UploadRequest,
    UploadTicket,
    is_document_id,
)
from rag_ingest.retrieval.search import SearchRequest, SearchResponse
from rag_ingest.wiring import build_api

OPENAPI_TITLE = "rag-ingest API"
OPENAPI_VERSION = "1.0.0"
SECURITY_SCHEME = "idToken"
# No route takes more than a small JSON object: anything bigger is refused before parsing.
MAX_BODY_CHARS = 64 * 1024
# JSON nesting beyond this is refused (Python's parser would otherwise hit its recursion limit).
MAX_JSON_DEPTH = 32

ENV = ApiEnv.from_env()


def _strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity and deep nesting (both raise JSONDecodeError)."""
    depth = 0
    in_string = escaped = False
    for char in text:  # a linear pre-scan: cheap next to the 64 KB body limit
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise json.JSONDecodeError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", text, 0)
        elif char in "]}":
            depth -= 1

    def no_constants(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not JSON", text, 0)

    return json.loads(text, parse_constant=no_constants)


app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=_strict_json)
app.configure_openapi(
    title=OPENAPI_TITLE,
    version=OPENAPI_VERSION,
    description=(
        "Upload PDFs (a presigned POST straight to S3), follow their ingestion, and search them. "
        "Every route but this document needs an ID token (Authorization: Bearer); every 4xx/5xx body "
        'is {"error": {"code", "message"}}.'
    ),
    security_schemes={SECURITY_SCHEME: HTTPBearer(bearerFormat="JWT", description="The Cognito ID token")},
    security=[{SECURITY_SCHEME: []}],
)

SEARCH_ENV = SearchEnv.from_env()
services = build_api(ENV, SEARCH_ENV)
service, deletion, searcher = services.documents, services.deletion, services.search


# -- errors ------------------------------------------------------------------------------------
def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    body = ErrorBody(error=ErrorDetail(code=code, message=message)).model_dump()
    return Response(status, content_types.APPLICATION_JSON, body, headers=headers)


def _responses(success: int, *errors: int, authorized: bool = True) -> dict[int, OpenAPIResponse]:
    """The OpenAPI responses of a route: its success (schema from the return annotation) and errors."""
    responses: dict[int, OpenAPIResponse] = {success: {"description": HTTPStatus(success).phrase}}
    gateway: dict[str, OpenAPIResponseContentModel | OpenAPIResponseContentSchema] = {
        content_types.APPLICATION_JSON: {"model": GatewayError}
    }
    if authorized:
        responses[401] = {"description": "No valid token (API Gateway's JWT authorizer)", "content": gateway}
    responses[429] = {"description": "Throttled by the API stage (API Gateway)", "content": gateway}
    for status in (*errors, 500):
        responses[status] = {
            "description": HTTPStatus(status).phrase,
            "content": {content_types.APPLICATION_JSON: {"model": ErrorBody}},
        }
    return responses


DocumentId = Annotated[str, Path(description="A document id as POST /documents returned it")]


_NOT_AN_OBJECT = frozenset({"model_attributes_type", "model_type", "dict_type"})


@app.exception_handler(RequestValidationError)
def invalid_request(exc: RequestValidationError) -> Response[Any]:
    problems = []
    for error in exc.errors():
        if error.get("type") == "json_invalid":
            problems.append("the body is not valid JSON")
            continue
        if tuple(error.get("loc", ())) == ("body",) and error.get("type") in _NOT_AN_OBJECT:
            problems.append("the body must be a JSON object")
            continue
        if tuple(error.get("loc", ())) == ("body",) and error.get("type") == "missing":
            problems.append("a JSON object body is required")
            continue
        where = ".".join(str(part) for part in error.get("loc", ()) if not isinstance(part, int)) or "request"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return error_response(400, "INVALID_REQUEST", "; ".join(dict.fromkeys(problems)) or "invalid request")


@app.exception_handler(RequestUnsupportedContentType)
def unsupported_content_type(exc: RequestUnsupportedContentType) -> Response[Any]:
    return error_response(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")


@app.exception_handler([UnicodeDecodeError, binascii.Error])
def undecodable_body(exc: Exception) -> Response[Any]:
    # The event's body could not be decoded at all (bytes that are not UTF-8, bad base64).
    return error_response(400, "INVALID_REQUEST", "the body is not UTF-8 JSON")


@app.exception_handler(InvalidTenantError)
def forbidden(exc: InvalidTenantError) -> Response[Any]:
    return error_response(403, "FORBIDDEN", "the token carries no valid tenant")


@app.exception_handler(DocumentNotFoundError)
def document_not_found(exc: DocumentNotFoundError) -> Response[Any]:
    # Missing and another tenant's documents answer alike; the id is not echoed (it may be any text).
    return error_response(404, "NOT_FOUND", "no such document")


@app.exception_handler(NotRetryableError)
def not_retryable(exc: NotRetryableError) -> Response[Any]:
    return error_response(409, "NOT_RETRYABLE", str(exc))


@app.exception_handler(InvalidCursorError)
def invalid_cursor(exc: InvalidCursorError) -> Response[Any]:
    return error_response(400, "INVALID_CURSOR", str(exc))


@app.exception_handler(PermanentError)
def permanent_error(exc: PermanentError) -> Response[Any]:
    return error_response(400, exc.code.value, exc.detail)


@app.exception_handler(TransientError)
def transient_error(exc: TransientError) -> Response[Any]:
    logger.warning("transient failure", exc_info=exc)
    return error_response(503, "SERVICE_UNAVAILABLE", "try again shortly", headers={"Retry-After": "2"})


@app.exception_handler(NotFoundError)
def no_route(exc: NotFoundError) -> Response[Any]:
    """Powertools found no route: 405 (with Allow) when the path exists with other methods, else 404."""
    allowed = allowed_methods(app.current_event.path)
    if app.current_event.http_method in allowed:
        # The path has the route's shape but a parameter with characters no route accepts (e.g. a quote).
        return error_response(404, "NOT_FOUND", "no such document")
    if allowed:
        message = f"{app.current_event.http_method} is not allowed here; use {', '.join(allowed)}"
        return error_response(405, "METHOD_NOT_ALLOWED", message, headers={"Allow": ", ".join(allowed)})
    return error_response(404, "NOT_FOUND", "no such route")


@app.exception_handler(ServiceError)
def service_error(exc: ServiceError) -> Response[Any]:
    return error_response(exc.status_code, HTTPStatus(exc.status_code).name, str(exc.msg))


@app.exception_handler(Exception)
def unexpected(exc: Exception) -> Response[Any]:
    logger.exception("unhandled error")
    request_id = app.lambda_context.aws_request_id if app.lambda_context else "unknown"
    return error_response(500, "INTERNAL_ERROR", f"internal error (request {request_id})")


@cache
def _route_patterns() -> tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]:
    patterns = []
    for path, item in sorted(openapi_schema()["paths"].items()):
        regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path))
        methods = tuple(sorted(method.upper() for method in item))
        patterns.append((re.compile(regex), methods))
    return tuple(patterns)


def allowed_methods(path: str) -> tuple[str, ...]:
    """The methods served on ``path`` (empty: no such path), from the OpenAPI document's paths."""
    for pattern, methods in _route_patterns():
        if pattern.fullmatch(path):
            return methods
    return ()


def _tenant() -> str:
    """The caller's tenant from the JWT authorizer's claims, validated (InvalidTenantError → 403)."""
    authorizer = app.current_event.raw_event.get("requestContext", {}).get("authorizer") or {}
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    tenant = tenant_of(claims)
    # The access log carries the caller's sub and the request id; this line's keys add the tenant.
    logger.append_keys(tenant_id=tenant)
    return tenant


# -- routes ------------------------------------------------------------------------------------
@app.post(
    "/documents",
    summary="Start an upload",
    description="Creates the document (AWAITING_UPLOAD) and returns a presigned POST for the PDF, straight to S3.",
    responses=_responses(201, 400, 403),
    tags=["documents"],
    operation_id="createDocument",
)
def create_document(request: UploadRequest) -> Response[UploadTicket]:
    ticket = service.create_upload(_tenant(), request)
    return Response(201, content_types.APPLICATION_JSON, ticket)


@app.get(
    "/documents",
    summary="List documents",
    description="The tenant's documents, newest first; pass next_cursor back as cursor for the next page.",
    responses=_responses(200, 400, 403),
    tags=["documents"],
    operation_id="listDocuments",
)
def list_documents(
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Page size")] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS, description="The last page's next_cursor")] = None,
) -> DocumentPage:
    return service.list(_tenant(), limit=limit, cursor=cursor)


@app.get(
    "/documents/<document_id>",
    summary="A document's state",
    responses=_responses(200, 403, 404),
    tags=["documents"],
    operation_id="getDocument",
)
def get_document(document_id: DocumentId) -> DocumentView:
    return service.get(_tenant(), document_id)


@app.delete(
    "/documents/<document_id>",
    summary="Delete a document",
    description="Removes the upload, its artifacts and its passages. Idempotent: a DELETED document answers the same.",
    responses=_responses(200, 403, 404),
    tags=["documents"],
    operation_id="deleteDocument",
)
def delete_document(document_id: DocumentId) -> DeletionReport:
    tenant = _tenant()
    if not is_document_id(document_id):  # never a table key DynamoDB would refuse (e.g. over 2 KB)
        raise DocumentNotFoundError(document_id)
    return deletion.delete(tenant, document_id)


@app.post(
    "/documents/<document_id>/retry",
    summary="Retry a FAILED document",
    description="Replays the document from its first unfinished stage; 409 NOT_RETRYABLE unless it is FAILED.",
    responses=_responses(202, 403, 404, 409),
    tags=["documents"],
    operation_id="retryDocument",
)
def retry_document(document_id: DocumentId) -> Response[DocumentView]:
    view = service.retry(_tenant(), document_id)
    return Response(202, content_types.APPLICATION_JSON, view)


@app.get(
    "/documents/<document_id>/download",
    summary="Open the original PDF",
    description="A short-lived presigned GET of the current version of the upload, shown inline as application/pdf.",
    responses=_responses(200, 403, 404),
    tags=["documents"],
    operation_id="downloadDocument",
)
def download_document(document_id: DocumentId) -> DownloadLink:
    return service.download(_tenant(), document_id)


@app.post(
    "/search",
    summary="Search passages",
    description="The tenant's passages for a query: hybrid (BM25 + k-NN fused by reciprocal rank), knn or bm25.",
    responses=_responses(200, 400, 403),
    tags=["search"],
    operation_id="searchPassages",
)
def search(request: SearchRequest) -> SearchResponse:
    return searcher.search(_tenant(), request)


@app.get(
    "/openapi.json",
    summary="This OpenAPI document",
    description="Needs no token.",
    responses=_responses(200, authorized=False),
    tags=["meta"],
    operation_id="getOpenApiDocument",
)
def openapi_document() -> Response[dict[str, Any]]:
    return Response(200, content_types.APPLICATION_JSON, openapi_schema())


@cache
def openapi_schema() -> dict[str, Any]:
    """The OpenAPI 3 document of the routes above (also checked in as docs/openapi.json).

    Powertools documents its validation failures as 422; this API answers them as 400 with the
    one error body, so the 422 entries and their schemas are taken out, and the document itself
    is marked as needing no token.
    """
    document: dict[str, Any] = json.loads(app.get_openapi_json_schema(title=OPENAPI_TITLE, version=OPENAPI_VERSION))
    for path, item in document["paths"].items():
        for operation in item.values():
            operation["responses"].pop("422", None)
            if path == "/openapi.json":
                operation["security"] = []
    schemas = document["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        if f'"#/components/schemas/{name}"' not in json.dumps({**document, "components": {}}):
            schemas.pop(name, None)
    return document


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    body = event.get("body")
    limit = MAX_BODY_CHARS * 4 // 3 if event.get("isBase64Encoded") else MAX_BODY_CHARS
    if isinstance(body, str) and len(body) > limit:
        # Refused before routing or parsing: no route takes more than a small JSON object.
        message = f"the body is over {MAX_BODY_CHARS // 1024} KB"
        error = ErrorBody(error=ErrorDetail(code="PAYLOAD_TOO_LARGE", message=message))
        return {
            "statusCode": 413,
            "headers": {"Content-Type": content_types.APPLICATION_JSON},
            "body": error.model_dump_json(),
            "isBase64Encoded": False,
        }
    return app.resolve(event, context)
