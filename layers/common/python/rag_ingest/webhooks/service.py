"""Registration (the API), fan-out of a document event to the tenant's endpoints, and delivery.

Delivery is at least once: the fan-out enqueues one message per endpoint (a slow or failing
endpoint holds up nobody else), a delivery attempt is a POST with a short timeout, 2xx is
delivered, anything else is retried with exponential backoff until the message's deadline
(``retry_hours`` after the event, 24 by default), then dead-lettered.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from rag_ingest.core.errors import ApiRefusal
from rag_ingest.core.logs import logger
from rag_ingest.core.url_policy import Target, UrlPolicy, UrlRefusedError
from rag_ingest.webhooks.model import (
    DETAIL_TYPES,
    ENDPOINT_ID_PREFIX,
    EVENT_TYPES,
    MAX_DELIVERIES_SHOWN,
    MAX_ENDPOINT_ID_CHARS,
    STATUS_OF,
    DeliveryAttempt,
    DeliveryList,
    DeliveryMessage,
    DeliveryOutcome,
    EndpointList,
    EndpointRequest,
    EndpointWithSecret,
    EventType,
    WebhookEndpoint,
    view_of,
    with_secret,
)
from rag_ingest.webhooks.signing import new_secret, signed_headers

DEFAULT_MAX_ENDPOINTS = 10
DEFAULT_TIMEOUT_SECONDS = 10
DEFAULT_RETRY_HOURS = 24
DEFAULT_RETRY_BASE_SECONDS = 30
DEFAULT_RETRY_MAX_DELAY_SECONDS = 3600
# The fields of the pipeline's event detail a receiver gets (never timings or internal detail).
_DATA_FIELDS = ("page_count", "chunk_count", "failed_pages", "stage", "error_code")


class WebhookRequestError(ApiRefusal, ValueError):
    """A request the API refuses with 400 and ``code`` (one of the ``WEBHOOK_*`` codes)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class EndpointNotFoundError(ApiRefusal, LookupError):
    """No such endpoint for this tenant (another tenant's answers alike)."""

    status = 404
    code = "NOT_FOUND"

    @property
    def message(self) -> str:
        return "no such webhook endpoint"


class EndpointStore(Protocol):
    def create(self, endpoint: WebhookEndpoint) -> None: ...
    def find(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None: ...
    def list_for_tenant(self, tenant_id: str) -> list[WebhookEndpoint]: ...
    def delete(self, tenant_id: str, endpoint_id: str) -> bool: ...
    def set_secret(self, tenant_id: str, endpoint_id: str, secret: str, rotated_at: str) -> WebhookEndpoint | None: ...


class DeliveryHistory(Protocol):
    """Where each delivery attempt is recorded (the webhooks table), and read back by the API."""

    def record_delivery(self, tenant_id: str, endpoint_id: str, attempt: DeliveryAttempt) -> None: ...
    def recent_deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> list[DeliveryAttempt]: ...


class DeliveryQueue(Protocol):
    def send(self, messages: list[DeliveryMessage]) -> None: ...


class Transport(Protocol):
    def post(self, target: Target, body: bytes, headers: dict[str, str], timeout_seconds: float) -> int:
        """The response status; raises ``OSError`` when no response came (refused, reset, timeout)."""
        ...


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def is_endpoint_id(value: str) -> bool:
    return (
        value.startswith(ENDPOINT_ID_PREFIX)
        and len(value) <= MAX_ENDPOINT_ID_CHARS
        and value[len(ENDPOINT_ID_PREFIX) :].isalnum()
        and value.isascii()
    )


# -- registration ----------------------------------------------------------------------------------
class WebhookService:
    def __init__(
        self,
        store: EndpointStore,
        policy: UrlPolicy,
        *,
        max_endpoints: int | Callable[[str], int] = DEFAULT_MAX_ENDPOINTS,
        history: DeliveryHistory | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._policy = policy
        # A number for every tenant, or the tenant's own (its limits override: rag_ingest.core.limits).
        self._max_endpoints = max_endpoints if callable(max_endpoints) else lambda _tenant: max_endpoints
        self._history = history
        self._clock = clock

    def register(self, tenant_id: str, request: EndpointRequest) -> EndpointWithSecret:
        unknown = sorted(set(request.events) - set(EVENT_TYPES))
        if unknown:
            raise WebhookRequestError(
                "WEBHOOK_EVENTS_INVALID", f"unknown events {unknown}; choose from {', '.join(EVENT_TYPES)}"
            )
        try:
            self._policy.resolve(request.url)  # the shape, the scheme, and where the host resolves now
        except UrlRefusedError as exc:
            raise WebhookRequestError(exc.code, exc.message) from exc
        limit = self._max_endpoints(tenant_id)
        if len(self._store.list_for_tenant(tenant_id)) >= limit:
            raise WebhookRequestError("WEBHOOK_LIMIT_REACHED", f"this tenant has at most {limit} endpoints")
        events: list[EventType] = [event for event in EVENT_TYPES if event in request.events]
        endpoint = WebhookEndpoint(
            tenant_id=tenant_id,
            endpoint_id=ENDPOINT_ID_PREFIX + secrets.token_hex(12),
            url=request.url,
            events=events,
            created_at=_iso(self._clock()),
            secret=new_secret(),
        )
        self._store.create(endpoint)
        return with_secret(endpoint)

    def list(self, tenant_id: str) -> EndpointList:
        endpoints = sorted(self._store.list_for_tenant(tenant_id), key=lambda e: (e.created_at, e.endpoint_id))
        return EndpointList(endpoints=[view_of(endpoint) for endpoint in endpoints])

    def delete(self, tenant_id: str, endpoint_id: str) -> None:
        if not is_endpoint_id(endpoint_id) or not self._store.delete(tenant_id, endpoint_id):
            raise EndpointNotFoundError(endpoint_id)

    def rotate_secret(self, tenant_id: str, endpoint_id: str) -> EndpointWithSecret:
        if not is_endpoint_id(endpoint_id):
            raise EndpointNotFoundError(endpoint_id)
        updated = self._store.set_secret(tenant_id, endpoint_id, new_secret(), _iso(self._clock()))
        if updated is None:
            raise EndpointNotFoundError(endpoint_id)
        return with_secret(updated)

    def deliveries(self, tenant_id: str, endpoint_id: str, limit: int = MAX_DELIVERIES_SHOWN) -> DeliveryList:
        """The endpoint's latest attempts, newest first (another tenant's endpoint: not found)."""
        if not is_endpoint_id(endpoint_id) or self._store.find(tenant_id, endpoint_id) is None:
            raise EndpointNotFoundError(endpoint_id)
        limit = max(1, min(limit, MAX_DELIVERIES_SHOWN))
        attempts = self._history.recent_deliveries(tenant_id, endpoint_id, limit) if self._history else []
        return DeliveryList(endpoint_id=endpoint_id, deliveries=attempts[:limit])


# -- fan-out ---------------------------------------------------------------------------------------
def webhook_id_for(event_id: str, endpoint_id: str) -> str:
    """Stable for one event and one endpoint: a re-run fan-out enqueues the same id again."""
    return "msg_" + hashlib.sha256(f"{event_id}:{endpoint_id}".encode()).hexdigest()[:32]


def payload_for(event_type: EventType, detail: dict[str, Any], timestamp: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "document_id": detail["document_id"],
        "tenant_id": detail["tenant_id"],
        "version": detail.get("version"),
        "status": STATUS_OF[event_type],
    }
    data.update({name: detail[name] for name in _DATA_FIELDS if detail.get(name) is not None})
    return {"type": event_type, "timestamp": timestamp, "data": data}


class MalformedEventError(ValueError):
    """Not one of the pipeline's document events."""


class WebhookFanOut:
    def __init__(
        self,
        store: EndpointStore,
        queue: DeliveryQueue,
        *,
        retry_hours: int = DEFAULT_RETRY_HOURS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._queue = queue
        self._retry_seconds = retry_hours * 3600
        self._clock = clock

    def messages_for(self, event: dict[str, Any]) -> list[DeliveryMessage]:
        """One message per endpoint of the event's tenant subscribed to its type."""
        try:
            event_type = DETAIL_TYPES[event["detail-type"]]
            detail = event["detail"]
            tenant_id, event_id = str(detail["tenant_id"]), str(event["id"])
            detail["document_id"]
        except (KeyError, TypeError) as exc:
            raise MalformedEventError(f"not a document event: {exc!r}") from exc
        timestamp = str(event.get("time") or _iso(self._clock()))
        body = json.dumps(payload_for(event_type, detail, timestamp), separators=(",", ":"), sort_keys=True)
        deadline = int(self._clock()) + self._retry_seconds
        return [
            DeliveryMessage(
                webhook_id=webhook_id_for(event_id, endpoint.endpoint_id),
                tenant_id=tenant_id,
                endpoint_id=endpoint.endpoint_id,
                type=event_type,
                body=body,
                deadline=deadline,
                event_id=event_id,
                document_id=str(detail["document_id"]),
            )
            for endpoint in self._store.list_for_tenant(tenant_id)
            if event_type in endpoint.events
        ]

    def fan_out(self, event: dict[str, Any]) -> int:
        messages = self.messages_for(event)
        if messages:
            self._queue.send(messages)
        return len(messages)


# -- delivery --------------------------------------------------------------------------------------
class Outcome(StrEnum):
    DELIVERED = "delivered"
    DROPPED = "dropped"  # the endpoint is gone, or no longer wants this type
    RETRY = "retry"
    EXPIRED = "expired"  # failed past the deadline: dead-lettered


@dataclass(frozen=True)
class DeliveryResult:
    outcome: Outcome
    detail: str
    status: int | None = None
    retry_after_seconds: int | None = None
    duration_ms: int | None = None  # the POST's, when one was sent


#: What the record of an attempt says for each outcome (a dropped message is not recorded: its
#: endpoint is gone or no longer wants the type).
RECORDED_OUTCOMES: dict[Outcome, DeliveryOutcome] = {
    Outcome.DELIVERED: "delivered",
    Outcome.RETRY: "failed",
    Outcome.EXPIRED: "dead-lettered",
}


def _document_id_of(message: DeliveryMessage) -> str | None:
    if message.document_id:
        return message.document_id
    try:
        value = json.loads(message.body)["data"]["document_id"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(value) if value is not None else None


def backoff_seconds(attempt: int, base: int, cap: int, rng: Callable[[], float] = random.random) -> int:
    """Exponential with equal jitter: attempt 1 waits base/2..base, doubling up to the cap."""
    delay = min(cap, base * 2 ** max(0, min(attempt - 1, 30)))
    return max(1, int(delay / 2 + rng() * delay / 2))


class WebhookDelivery:
    def __init__(
        self,
        store: EndpointStore,
        policy: UrlPolicy,
        transport: Transport,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        retry_base_seconds: int = DEFAULT_RETRY_BASE_SECONDS,
        retry_max_delay_seconds: int = DEFAULT_RETRY_MAX_DELAY_SECONDS,
        history: DeliveryHistory | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._policy = policy
        self._transport = transport
        self._timeout = timeout_seconds
        self._base = retry_base_seconds
        self._cap = retry_max_delay_seconds
        self._history = history
        self._clock = clock
        self._monotonic = monotonic

    def deliver(self, message: DeliveryMessage, attempt: int) -> DeliveryResult:
        """One attempt (``attempt`` counts from 1), recorded when the endpoint still wants it."""
        started_at = self._clock()
        result = self._attempt(message, attempt)
        self._record(message, attempt, result, started_at)
        return result

    def _attempt(self, message: DeliveryMessage, attempt: int) -> DeliveryResult:
        endpoint = self._store.find(message.tenant_id, message.endpoint_id)
        if endpoint is None or message.type not in endpoint.events:
            return DeliveryResult(Outcome.DROPPED, "the endpoint was deleted or unsubscribed")
        status: int | None = None
        started = self._monotonic()
        try:
            # Resolved and checked now, connected to the checked address (DNS may have changed).
            target = self._policy.resolve(endpoint.url)
            body = message.body.encode()
            headers = signed_headers(endpoint.secret, message.webhook_id, int(self._clock()), body)
            started = self._monotonic()
            status = self._transport.post(target, body, headers, self._timeout)
            took = self._elapsed_ms(started)
            if 200 <= status < 300:
                return DeliveryResult(Outcome.DELIVERED, f"HTTP {status}", status, duration_ms=took)
            detail = f"HTTP {status}"
        except UrlRefusedError as exc:
            detail = f"{exc.code}: {exc.message}"
            took = 0  # refused before anything was sent
        except OSError as exc:
            detail = f"no response: {exc.__class__.__name__}: {exc}"
            took = self._elapsed_ms(started)
        now = int(self._clock())
        if now >= message.deadline:
            return DeliveryResult(Outcome.EXPIRED, detail, status, duration_ms=took)
        delay = min(backoff_seconds(attempt, self._base, self._cap), max(1, message.deadline - now))
        return DeliveryResult(Outcome.RETRY, detail, status, delay, duration_ms=took)

    def _elapsed_ms(self, started: float) -> int:
        return max(0, round((self._monotonic() - started) * 1000))

    def _record(self, message: DeliveryMessage, attempt: int, result: DeliveryResult, started_at: float) -> None:
        outcome = RECORDED_OUTCOMES.get(result.outcome)
        if self._history is None or outcome is None:
            return
        record = DeliveryAttempt(
            event_id=message.event_id or message.webhook_id,
            webhook_id=message.webhook_id,
            type=message.type,
            document_id=_document_id_of(message),
            attempt=max(1, attempt),
            outcome=outcome,
            status_code=result.status,
            error=None if result.outcome == Outcome.DELIVERED else result.detail[:500],
            duration_ms=result.duration_ms or 0,
            at=_iso(started_at),
        )
        try:
            self._history.record_delivery(message.tenant_id, message.endpoint_id, record)
        except Exception:  # the record is for people looking; it never turns a delivery into a retry
            logger.warning(
                "webhook delivery attempt not recorded",
                extra={"webhook_id": message.webhook_id, "endpoint_id": message.endpoint_id},
                exc_info=True,
            )
