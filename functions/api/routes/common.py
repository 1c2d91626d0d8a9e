"""What the route groups share: the services (``get_services``: built on first use from the
environment validated at the cold start, then kept by the container), the caller's tenant from the
JWT claims, and a route's OpenAPI responses."""

from __future__ import annotations

from functools import cache
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import content_types
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseContentModel,
    OpenAPIResponseContentSchema,
)
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from rag_ingest.core.access import Principal
from rag_ingest.core.auth import InvalidTenantError
from rag_ingest.core.config import AnswerEnv, ApiEnv, SearchEnv
from rag_ingest.core.limits import RateLimitedError, TenantLimiter
from rag_ingest.core.logs import logger
from rag_ingest.wiring import ApiServices, build_api, tenant_limiter

from .errors import ErrorBody, GatewayError, ThrottledBody

ENV = ApiEnv.from_env()
SEARCH_ENV = SearchEnv.from_env()
ANSWER_ENV = AnswerEnv.from_env()


@cache
def get_services() -> ApiServices:
    """The document, deletion, search and answer services; tests replace this function (or a
    service's method) to run fakes."""
    return build_api(ENV, SEARCH_ENV, ANSWER_ENV)


@cache
def get_limiter() -> TenantLimiter | None:
    """The tenants' limits (None: the stack set none); tests replace this function."""
    return tenant_limiter(ENV)


def admit_request(event: dict[str, Any]) -> RateLimitedError | None:
    """The refusal (429 ``RATE_LIMITED``) of a request over its tenant's requests per second, else
    None. A request without a valid tenant is left to its route (401 or 403 there)."""
    limiter = get_limiter()
    if limiter is None:
        return None
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    if not claims:
        return None
    try:
        tenant_id = Principal.of(claims, ENV.tenant_admin_group).tenant_id
    except InvalidTenantError:
        return None
    try:
        limiter.admit_request(tenant_id)
    except RateLimitedError as refusal:
        logger.info("request over the tenant's rate", extra={"tenant_id": tenant_id})
        return refusal
    return None


def principal(event: BaseProxyEvent) -> Principal:
    """The caller from the JWT authorizer's claims: tenant (validated, InvalidTenantError → 403), sub,
    groups (``cognito:groups``, passed as ``"[a b]"`` by the authorizer: rag_ingest.core.access) and
    whether they are in the tenant-admin group."""
    authorizer = event.raw_event.get("requestContext", {}).get("authorizer") or {}
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    caller = Principal.of(claims, ENV.tenant_admin_group)
    # The access log carries the caller's sub and the request id; this line's keys add the tenant.
    logger.append_keys(tenant_id=caller.tenant_id)
    return caller


def tenant(event: BaseProxyEvent) -> str:
    """The caller's tenant from the JWT authorizer's claims, validated (InvalidTenantError → 403)."""
    return principal(event).tenant_id


def responses(success: int, *errors: int, authorized: bool = True) -> dict[int, OpenAPIResponse]:
    """The OpenAPI responses of a route: its success (schema from the return annotation) and errors."""
    result: dict[int, OpenAPIResponse] = {success: {"description": HTTPStatus(success).phrase}}
    gateway: dict[str, OpenAPIResponseContentModel | OpenAPIResponseContentSchema] = {
        content_types.APPLICATION_JSON: {"model": GatewayError}
    }
    if authorized:
        result[401] = {"description": "No valid token (API Gateway's JWT authorizer)", "content": gateway}
    result[429] = {
        "description": (
            "Throttled: by the API stage (API Gateway, {message}) or by the tenant's limits ({error}: "
            "RATE_LIMITED, PAGES_PER_DAY_EXCEEDED) with Retry-After in seconds"
        ),
        "content": {content_types.APPLICATION_JSON: {"model": ThrottledBody}},
    }
    for status in (*errors, 500):
        result[status] = {
            "description": HTTPStatus(status).phrase,
            "content": {content_types.APPLICATION_JSON: {"model": ErrorBody}},
        }
    return result
