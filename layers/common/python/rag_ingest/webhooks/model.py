"""A tenant's webhook endpoints, the API's shapes for them, and one delivery's message."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EventType = Literal["document.ready", "document.failed", "document.deleted"]
EVENT_TYPES: tuple[EventType, ...] = ("document.ready", "document.failed", "document.deleted")
#: The pipeline's EventBridge detail types (source ``rag-ingest``) and the webhook type each becomes.
DETAIL_TYPES: dict[str, EventType] = {
    "DocumentReady": "document.ready",
    "DocumentFailed": "document.failed",
    "DocumentDeleted": "document.deleted",
}
STATUS_OF: dict[EventType, str] = {
    "document.ready": "READY",
    "document.failed": "FAILED",
    "document.deleted": "DELETED",
}
ENDPOINT_ID_PREFIX = "wh_"
MAX_ENDPOINT_ID_CHARS = 64


class WebhookEndpoint(BaseModel):
    """The stored record (the webhooks table, key ``tenant_id`` + ``endpoint_id``)."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    endpoint_id: str
    url: str
    events: list[EventType]
    created_at: str
    secret: str
    secret_rotated_at: str | None = None


class EndpointRequest(BaseModel):
    """``POST /webhooks``: where to deliver and which events (checked by the service, with clear codes)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, description="An https URL on a public address")
    events: list[str] = Field(
        min_length=1, max_length=3, description="Any of document.ready, document.failed, document.deleted"
    )


class EndpointView(BaseModel):
    id: str
    url: str
    events: list[EventType]
    created_at: str


class EndpointWithSecret(EndpointView):
    secret: str = Field(description="whsec_ + base64: shown once, on create and on rotation; signs every delivery")


class EndpointList(BaseModel):
    endpoints: list[EndpointView]


def view_of(endpoint: WebhookEndpoint) -> EndpointView:
    return EndpointView(
        id=endpoint.endpoint_id, url=endpoint.url, events=endpoint.events, created_at=endpoint.created_at
    )


def with_secret(endpoint: WebhookEndpoint) -> EndpointWithSecret:
    return EndpointWithSecret(**view_of(endpoint).model_dump(), secret=endpoint.secret)


class DeliveryMessage(BaseModel):
    """One event for one endpoint (a message of the delivery queue). The secret is not in it: the
    delivery reads the endpoint (a deleted endpoint is not delivered to, a rotated secret signs)."""

    webhook_id: str  # the webhook-id header: the same on every attempt, the receiver's idempotency key
    tenant_id: str
    endpoint_id: str
    type: EventType
    body: str  # the exact JSON that is signed and sent
    deadline: int  # unix seconds: after a failed attempt past it, the message is dead-lettered
