"""Webhook registration, fan-out and delivery (in memory: a fake store, queue, transport and clock)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from rag_ingest.core.url_policy import Target, UrlPolicy
from rag_ingest.webhooks.model import DeliveryMessage, EndpointRequest
from rag_ingest.webhooks.service import (
    EndpointNotFoundError,
    MalformedEventError,
    Outcome,
    WebhookDelivery,
    WebhookFanOut,
    WebhookRequestError,
    WebhookService,
    backoff_seconds,
)
from rag_ingest.webhooks.signing import verify

from tests.support.webhooks import MemoryEndpoints

pytestmark = pytest.mark.unit
PUBLIC = "93.184.215.14"
NOW = 1_800_000_000


class Clock:
    def __init__(self) -> None:
        self.now = float(NOW)

    def __call__(self) -> float:
        return self.now


class Dns:
    def __init__(self) -> None:
        self.answers: dict[str, list[str]] = {"hooks.example.com": [PUBLIC], "other.example.com": [PUBLIC]}

    def __call__(self, host: str, port: int) -> Sequence[str]:
        return self.answers.get(host, [])


class Queue:
    def __init__(self) -> None:
        self.sent: list[DeliveryMessage] = []

    def send(self, messages: list[DeliveryMessage]) -> None:
        self.sent.extend(messages)


class Transport:
    def __init__(self, *answers: int | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[Target, bytes, dict[str, str], float]] = []

    def post(self, target: Target, body: bytes, headers: dict[str, str], timeout_seconds: float) -> int:
        self.calls.append((target, body, headers, timeout_seconds))
        answer = self.answers.pop(0) if self.answers else 200
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def world() -> tuple[MemoryEndpoints, Dns, Clock]:
    return MemoryEndpoints(), Dns(), Clock()


def service(world: tuple[MemoryEndpoints, Dns, Clock], **kwargs: Any) -> WebhookService:
    store, dns, clock = world
    return WebhookService(store, UrlPolicy(resolver=dns), clock=clock, **kwargs)


def request(url: str = "https://hooks.example.com/in", events: Sequence[str] = ("document.ready",)) -> EndpointRequest:
    return EndpointRequest(url=url, events=list(events))


# -- registration ----------------------------------------------------------------------------------
def test_register_list_rotate_delete(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    webhooks = service(world)
    created = webhooks.register("acme", request(events=["document.failed", "document.ready"]))
    assert created.secret.startswith("whsec_") and created.id.startswith("wh_")
    assert created.events == ["document.ready", "document.failed"]  # canonical order
    listed = webhooks.list("acme").endpoints
    assert [e.id for e in listed] == [created.id]
    assert "secret" not in listed[0].model_dump()
    assert webhooks.list("globex").endpoints == []
    rotated = webhooks.rotate_secret("acme", created.id)
    assert rotated.secret != created.secret and rotated.id == created.id
    assert world[0].find("acme", created.id).secret == rotated.secret  # type: ignore[union-attr]
    webhooks.delete("acme", created.id)
    assert webhooks.list("acme").endpoints == []
    with pytest.raises(EndpointNotFoundError):
        webhooks.delete("acme", created.id)


def test_another_tenants_endpoint_is_not_found(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    webhooks = service(world)
    created = webhooks.register("acme", request())
    for call in (webhooks.delete, webhooks.rotate_secret):
        with pytest.raises(EndpointNotFoundError):
            call("globex", created.id)
        with pytest.raises(EndpointNotFoundError):
            call("acme", "../" + created.id)
    assert len(webhooks.list("acme").endpoints) == 1


@pytest.mark.parametrize(
    ("url", "events", "code"),
    [
        ("https://hooks.example.com/", ["document.updated"], "WEBHOOK_EVENTS_INVALID"),
        ("http://hooks.example.com/", ["document.ready"], "WEBHOOK_URL_NOT_HTTPS"),
        ("https://127.0.0.1/", ["document.ready"], "WEBHOOK_URL_FORBIDDEN_ADDRESS"),
        ("https://unknown.example.com/", ["document.ready"], "WEBHOOK_URL_UNRESOLVABLE"),
        ("not a url", ["document.ready"], "WEBHOOK_URL_INVALID"),
    ],
)
def test_bad_requests_have_clear_codes(
    world: tuple[MemoryEndpoints, Dns, Clock], url: str, events: list[str], code: str
) -> None:
    with pytest.raises(WebhookRequestError) as caught:
        service(world).register("acme", request(url, events))
    assert caught.value.code == code
    assert world[0].items == {}


def test_a_tenant_has_at_most_max_endpoints(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    webhooks = service(world, max_endpoints=2)
    webhooks.register("acme", request())
    webhooks.register("acme", request())
    with pytest.raises(WebhookRequestError) as caught:
        webhooks.register("acme", request())
    assert caught.value.code == "WEBHOOK_LIMIT_REACHED"
    webhooks.register("globex", request())  # per tenant


def test_a_tenants_override_sets_its_own_cap(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    # The API passes the tenant's limits (rag_ingest.core.limits: cdk.json tenants.overrides.<t>.webhooks).
    webhooks = service(world, max_endpoints=lambda tenant: 1 if tenant == "small" else 3)
    webhooks.register("small", request())
    with pytest.raises(WebhookRequestError, match="this tenant has at most 1 endpoints") as caught:
        webhooks.register("small", request())
    assert caught.value.code == "WEBHOOK_LIMIT_REACHED"
    for _ in range(3):
        webhooks.register("large", request())


# -- fan-out ---------------------------------------------------------------------------------------
def event(detail_type: str = "DocumentReady", tenant: str = "acme", event_id: str = "evt-1") -> dict[str, Any]:
    return {
        "id": event_id,
        "detail-type": detail_type,
        "source": "rag-ingest",
        "time": "2026-12-03T18:00:00Z",
        "detail": {
            "document_id": "01JDOC",
            "tenant_id": tenant,
            "version": "v1",
            "page_count": 3,
            "chunk_count": 7,
            "timings_ms": {"parse": 5},
        },
    }


def test_fan_out_one_message_per_subscribed_endpoint(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    webhooks = service(world)
    ready = webhooks.register("acme", request(events=["document.ready"]))
    both = webhooks.register("acme", request("https://other.example.com/", ["document.ready", "document.failed"]))
    webhooks.register("acme", request(events=["document.deleted"]))
    webhooks.register("globex", request(events=["document.ready"]))
    queue = Queue()
    fan_out = WebhookFanOut(world[0], queue, clock=world[2])
    assert fan_out.fan_out(event()) == 2
    assert {m.endpoint_id for m in queue.sent} == {ready.id, both.id}
    first = queue.sent[0]
    assert first.deadline == NOW + 24 * 3600 and first.type == "document.ready"
    assert json.loads(first.body) == {
        "type": "document.ready",
        "timestamp": "2026-12-03T18:00:00Z",
        "data": {
            "document_id": "01JDOC",
            "tenant_id": "acme",
            "version": "v1",
            "status": "READY",
            "page_count": 3,
            "chunk_count": 7,
        },
    }
    # Ids: one per event and endpoint, the same when the event is fanned out again.
    assert len({m.webhook_id for m in queue.sent}) == 2
    again = fan_out.messages_for(event())
    assert [m.webhook_id for m in again] == [m.webhook_id for m in queue.sent]
    assert fan_out.messages_for(event(event_id="evt-2"))[0].webhook_id != first.webhook_id
    failed = fan_out.messages_for(event("DocumentFailed"))
    assert [m.endpoint_id for m in failed] == [both.id]
    assert json.loads(failed[0].body)["data"]["status"] == "FAILED"
    assert [m.type for m in fan_out.messages_for(event("DocumentDeleted"))] == ["document.deleted"]


@pytest.mark.parametrize(
    "bad", [{}, {"detail-type": "Other", "id": "x", "detail": {}}, {"detail-type": "DocumentReady"}]
)
def test_a_malformed_event_is_refused(world: tuple[MemoryEndpoints, Dns, Clock], bad: dict[str, Any]) -> None:
    with pytest.raises(MalformedEventError):
        WebhookFanOut(world[0], Queue()).fan_out(bad)


# -- delivery --------------------------------------------------------------------------------------
def delivery_setup(
    world: tuple[MemoryEndpoints, Dns, Clock], *answers: int | Exception
) -> tuple[WebhookDelivery, Transport, DeliveryMessage, str]:
    store, dns, clock = world
    created = service(world).register("acme", request())
    queue = Queue()
    WebhookFanOut(store, queue, clock=clock).fan_out(event())
    transport = Transport(*answers)
    delivery = WebhookDelivery(store, UrlPolicy(resolver=dns), transport, clock=clock)
    return delivery, transport, queue.sent[0], created.secret


def test_a_2xx_is_delivered_signed_to_the_checked_address(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    delivery, transport, message, secret = delivery_setup(world, 204)
    result = delivery.deliver(message, attempt=1)
    assert result.outcome == Outcome.DELIVERED and result.status == 204
    target, body, headers, timeout = transport.calls[0]
    assert (target.host, target.address, target.path, timeout) == ("hooks.example.com", PUBLIC, "/in", 10)
    assert body == message.body.encode()
    assert headers["webhook-id"] == message.webhook_id
    assert verify(secret, headers, body, now=NOW)


def test_a_failure_is_retried_with_backoff_under_the_same_id(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    delivery, transport, message, _secret = delivery_setup(world, 500, TimeoutError("timed out"), 200)
    first = delivery.deliver(message, attempt=1)
    assert first.outcome == Outcome.RETRY and first.status == 500
    assert 15 <= (first.retry_after_seconds or 0) <= 30
    world[2].now += 60
    second = delivery.deliver(message, attempt=2)
    assert second.outcome == Outcome.RETRY and "TimeoutError" in second.detail
    assert 30 <= (second.retry_after_seconds or 0) <= 60
    world[2].now += 60
    assert delivery.deliver(message, attempt=3).outcome == Outcome.DELIVERED
    ids = {call[2]["webhook-id"] for call in transport.calls}
    stamps = [call[2]["webhook-timestamp"] for call in transport.calls]
    assert ids == {message.webhook_id} and len(set(stamps)) == 3  # same id, fresh timestamp and signature


def test_past_the_deadline_a_failure_expires(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    delivery, _, message, _ = delivery_setup(world, 503, 503)
    world[2].now = message.deadline - 10
    near = delivery.deliver(message, attempt=30)
    assert near.outcome == Outcome.RETRY and near.retry_after_seconds == 10  # never past the deadline
    world[2].now = message.deadline + 1
    assert delivery.deliver(message, attempt=31).outcome == Outcome.EXPIRED


def test_a_dns_answer_that_changes_to_loopback_is_never_connected_to(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    delivery, transport, message, _ = delivery_setup(world)
    world[1].answers["hooks.example.com"] = ["127.0.0.1"]  # after registration
    result = delivery.deliver(message, attempt=1)
    assert result.outcome == Outcome.RETRY and "WEBHOOK_URL_FORBIDDEN_ADDRESS" in result.detail
    assert transport.calls == []
    world[1].answers["hooks.example.com"] = [PUBLIC, "169.254.169.254"]
    assert delivery.deliver(message, attempt=2).outcome == Outcome.RETRY
    assert transport.calls == []


def test_a_deleted_or_unsubscribed_endpoint_is_dropped(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    delivery, transport, message, _ = delivery_setup(world)
    store = world[0]
    endpoint = store.find("acme", message.endpoint_id)
    assert endpoint is not None
    store.create(endpoint.model_copy(update={"events": ["document.failed"]}))
    assert delivery.deliver(message, attempt=1).outcome == Outcome.DROPPED
    store.delete("acme", message.endpoint_id)
    assert delivery.deliver(message, attempt=1).outcome == Outcome.DROPPED
    assert transport.calls == []


def test_a_rotated_secret_signs_the_next_attempt(world: tuple[MemoryEndpoints, Dns, Clock]) -> None:
    delivery, transport, message, old = delivery_setup(world)
    new = service(world).rotate_secret("acme", message.endpoint_id).secret
    delivery.deliver(message, attempt=1)
    _, body, headers, _ = transport.calls[0]
    assert verify(new, headers, body, now=NOW) and not verify(old, headers, body, now=NOW)


def test_backoff_doubles_to_the_cap_and_covers_a_day_in_a_few_dozen_attempts() -> None:
    assert [backoff_seconds(n, 30, 3600, rng=lambda: 1.0) for n in (1, 2, 3, 4, 8, 9, 40)] == [
        30, 60, 120, 240, 3600, 3600, 3600
    ]  # fmt: skip
    assert backoff_seconds(1, 30, 3600, rng=lambda: 0.0) == 15
    elapsed, attempts = 0, 0
    while elapsed < 24 * 3600:
        attempts += 1
        elapsed += backoff_seconds(attempts, 30, 3600, rng=lambda: 0.5)
    assert 25 <= attempts <= 45, attempts
