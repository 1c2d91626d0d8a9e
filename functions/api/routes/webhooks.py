"""The webhook routes: a tenant registers endpoints that are told when a document is ready, failed or
deleted (signed Standard Webhooks deliveries: docs/webhooks.md). The secret is returned by create
and rotate only; another tenant's endpoint answers 404 like a missing one."""

from __future__ import annotations

from functools import cache
from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from rag_ingest.core.config import WebhooksApiEnv
from rag_ingest.webhooks.model import DeliveryList, EndpointList, EndpointRequest, EndpointWithSecret
from rag_ingest.webhooks.service import WebhookService
from rag_ingest.wiring import build_webhooks

from .common import ENV, responses, tenant

WEBHOOKS_ENV = WebhooksApiEnv.from_env()


@cache
def get_webhooks() -> WebhookService:
    """The webhook service, built on first use; tests replace this function to run a fake store."""
    return build_webhooks(WEBHOOKS_ENV, ENV.tenant_limits)


router = Router()

EndpointId = Annotated[str, Path(description="An endpoint id as POST /webhooks returned it")]


@router.post(
    "/webhooks",
    summary="Register a webhook endpoint",
    description=(
        "An https URL on a public address and the events it wants (document.ready, document.failed, "
        "document.deleted). Answers the endpoint with its signing secret, shown this once. "
        "400 codes: WEBHOOK_URL_INVALID, WEBHOOK_URL_NOT_HTTPS, WEBHOOK_URL_UNRESOLVABLE, "
        "WEBHOOK_URL_FORBIDDEN_ADDRESS, WEBHOOK_EVENTS_INVALID, WEBHOOK_LIMIT_REACHED."
    ),
    responses=responses(201, 400, 403),
    tags=["webhooks"],
    operation_id="createWebhook",
)
def create_webhook(request: EndpointRequest) -> Response[EndpointWithSecret]:
    created = get_webhooks().register(tenant(router.current_event), request)
    return Response(201, content_types.APPLICATION_JSON, created)


@router.get(
    "/webhooks",
    summary="List webhook endpoints",
    description="The tenant's endpoints, oldest first, without their secrets.",
    responses=responses(200, 403),
    tags=["webhooks"],
    operation_id="listWebhooks",
)
def list_webhooks() -> EndpointList:
    return get_webhooks().list(tenant(router.current_event))


@router.delete(
    "/webhooks/<endpoint_id>",
    summary="Delete a webhook endpoint",
    description="Deliveries still queued for it are dropped.",
    responses=responses(204, 403, 404),
    tags=["webhooks"],
    operation_id="deleteWebhook",
)
def delete_webhook(endpoint_id: EndpointId) -> Response[None]:
    get_webhooks().delete(tenant(router.current_event), endpoint_id)
    return Response(204)  # no body, so no Content-Type (a JSON type on nothing broke clients: ST109)


@router.post(
    "/webhooks/<endpoint_id>/rotate-secret",
    summary="Rotate an endpoint's signing secret",
    description="A new secret, shown this once; deliveries from now on are signed with it.",
    responses=responses(200, 403, 404),
    tags=["webhooks"],
    operation_id="rotateWebhookSecret",
)
def rotate_webhook_secret(endpoint_id: EndpointId) -> EndpointWithSecret:
    return get_webhooks().rotate_secret(tenant(router.current_event), endpoint_id)


@router.get(
    "/webhooks/<endpoint_id>/deliveries",
    summary="An endpoint's recent delivery attempts",
    description=(
        "The latest attempts (at most 50, newest first, kept for 7 days): event id, type, document id, "
        "attempt number, outcome (delivered, failed: retried later, dead-lettered), the receiver's HTTP "
        "status or the error, and how long the attempt took."
    ),
    responses=responses(200, 403, 404),
    tags=["webhooks"],
    operation_id="listWebhookDeliveries",
)
def list_webhook_deliveries(endpoint_id: EndpointId) -> DeliveryList:
    return get_webhooks().deliveries(tenant(router.current_event), endpoint_id)
