"""The record of each delivery attempt (what GET /webhooks/{id}/deliveries lists): written by the
delivery for every attempt that reached a decision, read back per endpoint, tenant-scoped."""

from __future__ import annotations

import pytest
from rag_ingest.core.url_policy import Target, UrlPolicy
from rag_ingest.webhooks.model import MAX_DELIVERIES_SHOWN, DeliveryMessage, EndpointRequest
from rag_ingest.webhooks.service import EndpointNotFoundError, Outcome, WebhookDelivery, WebhookFanOut, WebhookService

from tests.support.webhooks import MemoryDeliveries, MemoryEndpoints
from tests.unit.test_webhooks_service import Clock, Dns, Queue, Transport, event

pytestmark = pytest.mark.unit


class Ticks:
    """A monotonic clock; the transport below advances it by the time each POST "takes"."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class TimedTransport(Transport):
    def __init__(self, ticks: Ticks, seconds: float, *answers: int | Exception) -> None:
        super().__init__(*answers)
        self.ticks = ticks
        self.seconds = seconds

    def post(self, target: Target, body: bytes, headers: dict[str, str], timeout_seconds: float) -> int:
        self.ticks.now += self.seconds
        return super().post(target, body, headers, timeout_seconds)


def setup(
    *answers: int | Exception, seconds: float = 0.25
) -> tuple[WebhookService, WebhookDelivery, MemoryDeliveries, DeliveryMessage, Clock, Dns]:
    store, history, clock, dns = MemoryEndpoints(), MemoryDeliveries(), Clock(), Dns()
    webhooks = WebhookService(store, UrlPolicy(resolver=dns), clock=clock, history=history)
    webhooks.register("acme", EndpointRequest(url="https://hooks.example.com/in", events=["document.ready"]))
    queue = Queue()
    WebhookFanOut(store, queue, clock=clock).fan_out(event())
    ticks = Ticks()
    delivery = WebhookDelivery(
        store,
        UrlPolicy(resolver=dns),
        TimedTransport(ticks, seconds, *answers),
        history=history,
        clock=clock,
        monotonic=ticks,
    )
    return webhooks, delivery, history, queue.sent[0], clock, dns


def test_fan_out_carries_the_event_and_document_ids() -> None:
    *_, message, _clock, _dns = setup()
    assert message.event_id == "evt-1" and message.document_id == "01JDOC"


def test_each_attempt_is_recorded_with_its_outcome_status_and_duration() -> None:
    webhooks, delivery, _history, message, clock, _ = setup(500, TimeoutError("timed out"), 204)
    assert delivery.deliver(message, attempt=1).outcome == Outcome.RETRY
    clock.now += 60
    assert delivery.deliver(message, attempt=2).outcome == Outcome.RETRY
    clock.now += 60
    assert delivery.deliver(message, attempt=3).outcome == Outcome.DELIVERED
    listed = webhooks.deliveries("acme", message.endpoint_id)
    assert listed.endpoint_id == message.endpoint_id
    rows = [(d.attempt, d.outcome, d.status_code, d.duration_ms) for d in listed.deliveries]
    assert rows == [(3, "delivered", 204, 250), (2, "failed", None, 250), (1, "failed", 500, 250)]  # newest first
    newest, timed_out, first = listed.deliveries
    assert newest.error is None and first.error == "HTTP 500" and "TimeoutError" in (timed_out.error or "")
    assert {d.event_id for d in listed.deliveries} == {"evt-1"}
    assert {d.webhook_id for d in listed.deliveries} == {message.webhook_id}
    assert {(d.type, d.document_id) for d in listed.deliveries} == {("document.ready", "01JDOC")}
    assert first.at.startswith("2027-01-15T08:00:00") and newest.at.startswith("2027-01-15T08:02:00")


def test_a_failure_past_the_deadline_is_recorded_dead_lettered() -> None:
    webhooks, delivery, _, message, clock, _ = setup(503)
    clock.now = message.deadline + 1
    assert delivery.deliver(message, attempt=31).outcome == Outcome.EXPIRED
    [record] = webhooks.deliveries("acme", message.endpoint_id).deliveries
    assert (record.outcome, record.status_code, record.attempt) == ("dead-lettered", 503, 31)


def test_a_refused_address_is_recorded_without_a_request() -> None:
    webhooks, delivery, _, message, _, dns = setup()
    dns.answers["hooks.example.com"] = ["10.0.0.7"]
    delivery.deliver(message, attempt=1)
    [record] = webhooks.deliveries("acme", message.endpoint_id).deliveries
    assert record.outcome == "failed" and record.duration_ms == 0
    assert record.status_code is None and "WEBHOOK_URL_FORBIDDEN_ADDRESS" in (record.error or "")


def test_a_dropped_message_is_not_recorded() -> None:
    webhooks, delivery, history, message, _, _ = setup()
    webhooks.delete("acme", message.endpoint_id)
    assert delivery.deliver(message, attempt=1).outcome == Outcome.DROPPED
    assert history.items == {}


def test_a_recording_failure_never_turns_a_delivery_into_a_retry() -> None:
    _, delivery, history, message, _, _ = setup(200)
    history.fail = True
    assert delivery.deliver(message, attempt=1).outcome == Outcome.DELIVERED


def test_an_old_message_without_the_new_fields_still_records_its_document() -> None:
    webhooks, delivery, _, message, _, _ = setup()
    old = DeliveryMessage.model_validate(message.model_dump(exclude={"event_id", "document_id"}))
    delivery.deliver(old, attempt=1)
    [record] = webhooks.deliveries("acme", message.endpoint_id).deliveries
    assert record.document_id == "01JDOC" and record.event_id == message.webhook_id


def test_deliveries_are_tenant_scoped_and_bounded() -> None:
    webhooks, delivery, _, message, clock, _ = setup()
    for attempt in range(1, MAX_DELIVERIES_SHOWN + 6):
        clock.now += 1
        delivery.deliver(message, attempt=attempt)
    listed = webhooks.deliveries("acme", message.endpoint_id).deliveries
    assert len(listed) == MAX_DELIVERIES_SHOWN and listed[0].attempt == MAX_DELIVERIES_SHOWN + 5
    assert len(webhooks.deliveries("acme", message.endpoint_id, limit=500).deliveries) == MAX_DELIVERIES_SHOWN
    for tenant, endpoint_id in (("globex", message.endpoint_id), ("acme", "wh_missing"), ("acme", "../x")):
        with pytest.raises(EndpointNotFoundError):
            webhooks.deliveries(tenant, endpoint_id)


def test_without_a_history_an_endpoint_lists_none() -> None:
    store, clock = MemoryEndpoints(), Clock()
    webhooks = WebhookService(store, UrlPolicy(resolver=Dns()), clock=clock)
    created = webhooks.register("acme", EndpointRequest(url="https://hooks.example.com/in", events=["document.ready"]))
    assert webhooks.deliveries("acme", created.id).deliveries == []
