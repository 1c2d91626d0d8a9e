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
#: What an attempt came to, as GET /webhooks/{id}/deliveries shows it: 2xx; a failure that is
#: retried; a failure past the message's deadline (sent to the webhook DLQ).
DeliveryOutcome = Literal["delivered", "failed", "dead-lettered"]
#: GET /webhooks/{id}/deliveries answers at most this many attempts, newest first.
MAX_DELIVERIES_SHOWN = 50
#: How long an attempt's record is kept (the table's TTL attribute ``expires_at``): a week covers
#: the 24 h retry window of every event and a few days of looking back; docs/webhooks.md.
DELIVERY_RECORD_TTL_SECONDS = 7 * 24 * 3600


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
    # For the record of each attempt (GET /webhooks/{id}/deliveries); absent in messages enqueued
    # before these fields existed (then the webhook id and the body's data.document_id stand in).
    event_id: str | None = None  # the EventBridge event's id
    document_id: str | None = None


class DeliveryAttempt(BaseModel):
    """One delivery attempt, as recorded by the delivery function and listed by the API."""

    event_id: str = Field(description="The pipeline event's id (EventBridge), the same for every endpoint")
    webhook_id: str = Field(description="The webhook-id header: the same on every attempt for this endpoint")
    type: EventType
    document_id: str | None = None
    attempt: int = Field(ge=1, description="1 for the first attempt, counting SQS receives")
    outcome: DeliveryOutcome
    status_code: int | None = Field(default=None, description="The receiver's HTTP status, when it answered")
    error: str | None = Field(
        default=None, description="Why the attempt failed (an HTTP status, no answer, a refused address)"
    )
    duration_ms: int = Field(ge=0, description="From sending the request to the answer (or the failure)")
    at: str = Field(description="When the attempt started (ISO 8601, UTC)")


class DeliveryList(BaseModel):
    """``GET /webhooks/{id}/deliveries``: the latest attempts, newest first."""

    endpoint_id: str
    deliveries: list[DeliveryAttempt]
