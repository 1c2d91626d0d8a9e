"""The API's error bodies: ``{"error": {"code", "message"}}`` for every 4xx/5xx this function answers,
and API Gateway's own ``{"message"}`` (401, 429) for the OpenAPI document; a 429 is either."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from pydantic import BaseModel


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """The one body of every 4xx/5xx answer of the API."""

    error: ErrorDetail


class GatewayError(BaseModel):
    """API Gateway's own answers, before the function runs: 401 from the JWT authorizer, 429 throttling."""

    message: str


class ThrottledBody(BaseModel):
    """A 429: API Gateway's stage throttling answers ``{"message"}``; the tenant's own limits
    (``RATE_LIMITED``, ``PAGES_PER_DAY_EXCEEDED``: docs/api.md) the one error body, with Retry-After."""

    message: str | None = None
    error: ErrorDetail | None = None


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    """A route's error answer: ``status`` with the one error body."""
    body = ErrorBody(error=ErrorDetail(code=code, message=message)).model_dump()
    return Response(status, content_types.APPLICATION_JSON, body, headers=headers)
