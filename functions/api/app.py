"""HTTP API: documents (upload, list, status, change, retry, download, delete), search, cited answers,
webhooks and sources, for the caller's tenant.

This module builds the resolver and maps errors; the routes live one group a module in ``routes/``
(``ROUTE_GROUPS``); ``http_extras`` parses JSON strictly and derives 405 from the OpenAPI document.
Every 4xx/5xx has one body, ``{"error": {"code", "message"}}``: a domain refusal (``ApiRefusal``,
its status and code), Powertools' validation (400), unknown paths (404) and methods (405), bodies
over 64 KB, or 6 MB for a custom source's item (413), and anything unexpected (500, no internals).
``GET /openapi.json`` serves the OpenAPI 3 document of these routes (``routes/meta.py``).
"""

from __future__ import annotations

import binascii
import re
from functools import cache
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.errors import ApiRefusal, PermanentError, TransientError
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer

# Importing the route groups is the cold start's check: routes/common.py validates the environment
# (ApiEnv, SearchEnv). The services are built on the first request that needs them.
if __package__:  # functions.api.app: the tests, tools/openapi.py and mypy import it from the repository
    from .http_extras import MethodTable, strict_json
    from .routes import answers, documents, meta, search, sources, webhooks
    from .routes.common import admit_request
    from .routes.errors import ErrorBody, ErrorDetail, error_response
else:  # Lambda (and the local stack's worker) import app.py as a top-level module, /var/task on sys.path
    from http_extras import MethodTable, strict_json  # type: ignore[no-redef]
    from routes import answers, documents, meta, search, sources, webhooks  # type: ignore[no-redef]
    from routes.common import admit_request  # type: ignore[no-redef]
    from routes.errors import ErrorBody, ErrorDetail, error_response  # type: ignore[no-redef]

OPENAPI_TITLE = "rag-ingest API"
OPENAPI_VERSION = "1.0.0"
SECURITY_SCHEME = "idToken"
# No route takes more than a small JSON object, but a custom source's item (its content inline, under
# Lambda's 6 MB request payload: docs/sources.md): anything bigger is refused before parsing.
MAX_BODY_CHARS = 64 * 1024
MAX_ITEM_BODY_CHARS = 6 * 1024 * 1024 - MAX_BODY_CHARS
ITEM_PATH = re.compile(r"^/sources/[^/]+/items/")
# Bodies every route refuses by their type (all take JSON) before Powertools tries to parse them as forms.
FORM_MEDIA_TYPES = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})


class DecodingResolver(APIGatewayHttpResolver):
    """Route parameters percent-decoded, one segment each: Powertools matches routes on ``rawPath``,
    which keeps the client's encoding, so ``/items/caf%C3%A9`` would otherwise be the id ``caf%C3%A9``
    (docs/fuzzing.md). A decoded ``/`` stays inside its parameter."""

    def _convert_matches_into_route_keys(self, match: re.Match[str]) -> dict[str, str]:
        return {name: unquote(value) for name, value in match.groupdict().items()}


app = DecodingResolver(enable_validation=True, json_body_deserializer=strict_json)
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

# The route groups, in the order their routes are matched and documented.
ROUTE_GROUPS = (documents, search, answers, webhooks, sources, meta)
for group in ROUTE_GROUPS:
    app.include_router(group.router)
openapi_schema = meta.openapi_schema  # tools/openapi.py writes it to docs/openapi.json


# -- errors ------------------------------------------------------------------------------------
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


@app.exception_handler(ApiRefusal)
def refused(exc: ApiRefusal) -> Response[Any]:
    # Every refusal of the domain (rag_ingest.documents.errors, the webhooks', a tenant-less token,
    # a tenant's limits with their Retry-After).
    return error_response(exc.status, exc.code, exc.message, headers=exc.headers or None)


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
def _methods() -> MethodTable:
    return MethodTable(openapi_schema()["paths"])


def allowed_methods(path: str) -> tuple[str, ...]:
    """The methods served on ``path`` (empty: no such path), from the OpenAPI document's paths."""
    return _methods().allowed(path)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The tenant's requests per second, before any work (docs/api.md, "Limits per tenant").
    refusal = admit_request(event)
    if refusal is not None:
        return _answer(refusal.status, refusal.code, refusal.message, refusal.headers)
    body = event.get("body")
    headers = {str(name).lower(): str(value) for name, value in (event.get("headers") or {}).items()}
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if body and media_type in FORM_MEDIA_TYPES:
        # Powertools would parse these itself (a multipart body without a boundary raised: a 500).
        return _answer(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
    allowed = MAX_ITEM_BODY_CHARS if ITEM_PATH.match(str(event.get("rawPath", ""))) else MAX_BODY_CHARS
    limit = allowed * 4 // 3 if event.get("isBase64Encoded") else allowed
    if isinstance(body, str) and len(body) > limit:
        return _answer(413, "PAYLOAD_TOO_LARGE", f"the body is over {allowed // 1024} KB")
    return app.resolve(event, context)


def _answer(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An error answered before the resolver runs, in the one error body."""
    error = ErrorBody(error=ErrorDetail(code=code, message=message))
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON, **(headers or {})},
        "body": error.model_dump_json(),
        "isBase64Encoded": False,
    }
