"""Webhooks through moto's EventBridge, SQS and DynamoDB with the real handlers and a loopback receiver:
register through the API handler, publish the pipeline's event with the pipeline's publisher, let
moto's rule put it on the fan-out queue, run the fan-out and delivery handlers as an SQS event source
would (delete only what they did not report as failed), and check what the receiver got.

Also: every attempt is recorded in the webhooks table and listed by ``GET /webhooks/{id}/deliveries``
(newest first, another tenant's endpoint a 404, the endpoints' list unchanged by the attempt items);
a receiver answering 500 then 200 gets the event on the retry (the backoff is the message's
visibility, shortened here by ``WEBHOOK_RETRY_BASE_SECONDS=1``), a message that fails past its
deadline lands in the DLQ with its reason, and the delivery latency over 20 events (event published
→ POST received) is printed.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import boto3
import boto3.dynamodb.conditions
import pytest
from rag_ingest.adapters.events import EVENT_SOURCE, EventPublisher
from rag_ingest.webhooks.model import DeliveryMessage

from tests.support.aws import FakeLambdaContext, import_handler, moto_server
from tests.support.webhooks import Receiver, loopback_receiver
from tests.unit.test_api_handler import event as api_event
from tools import openapi as openapi_tool

pytestmark = pytest.mark.integration
DOCUMENT_EVENTS = ["DocumentReady", "DocumentFailed", "DocumentDeleted"]


class World:
    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.table = f"webhooks-{suffix}"
        boto3.client("dynamodb").create_table(
            TableName=self.table,
            KeySchema=[
                {"AttributeName": "tenant_id", "KeyType": "HASH"},
                {"AttributeName": "endpoint_id", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "tenant_id", "AttributeType": "S"},
                {"AttributeName": "endpoint_id", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        self.sqs = boto3.client("sqs")
        self.dlq_url = self.sqs.create_queue(QueueName=f"webhook-dlq-{suffix}")["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.fan_out_url = self.sqs.create_queue(QueueName=f"webhook-fanout-{suffix}")["QueueUrl"]
        self.delivery_url = self.sqs.create_queue(
            QueueName=f"webhook-delivery-{suffix}",
            Attributes={
                "VisibilityTimeout": "180",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "100"}),
            },
        )["QueueUrl"]
        fan_out_arn = self.sqs.get_queue_attributes(QueueUrl=self.fan_out_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        # The stack's rule (infra/constructs/webhooks.py): the pipeline's document events -> the fan-out queue.
        events = boto3.client("events")
        rule = f"webhooks-{suffix}"
        events.put_rule(Name=rule, EventPattern=json.dumps({"source": [EVENT_SOURCE], "detail-type": DOCUMENT_EVENTS}))
        events.put_targets(Rule=rule, Targets=[{"Id": "fanout", "Arn": fan_out_arn}])
        env = {
            "WEBHOOKS_TABLE": self.table,
            "WEBHOOK_DELIVERY_QUEUE_URL": self.delivery_url,
            "WEBHOOK_DEAD_LETTER_QUEUE_URL": self.dlq_url,
            "WEBHOOK_ALLOW_LOOPBACK_HTTP": "true",
            "WEBHOOK_RETRY_BASE_SECONDS": "1",
            "WEBHOOK_RETRY_MAX_DELAY_SECONDS": "60",
            "WEBHOOK_TIMEOUT_SECONDS": "5",
            "POWERTOOLS_TRACE_DISABLED": "true",
        }
        self.api = import_handler("api", {**openapi_tool.PLACEHOLDER_ENV, **env})
        self.fan_out = import_handler("webhook_fanout", env)
        self.delivery = import_handler("webhook_delivery", env)
        self.publisher = EventPublisher()

    def register(self, url: str, tenant: str, events: list[str] | None = None) -> dict[str, Any]:
        body = json.dumps({"url": url, "events": events or ["document.ready"]})
        claims = {"sub": "user-1", "custom:tenant_id": tenant}
        response = self.api.handler(api_event("POST", "/webhooks", body, claims=claims), FakeLambdaContext())
        assert response["statusCode"] == 201, response
        created: dict[str, Any] = json.loads(response["body"])
        return created

    def api_call(self, method: str, path: str, tenant: str) -> tuple[int, Any]:
        claims = {"sub": "user-1", "custom:tenant_id": tenant}
        response = self.api.handler(api_event(method, path, None, claims=claims), FakeLambdaContext())
        return response["statusCode"], json.loads(response["body"] or "null")

    def publish_ready(self, tenant: str, document_id: str) -> None:
        self.publisher.publish("DocumentReady", {"document_id": document_id, "tenant_id": tenant, "version": "v1"})

    def run_queue(self, queue_url: str, handler: ModuleType) -> int:
        """One poll of an SQS event source mapping: receive, invoke, delete what did not fail."""
        received = self.sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageSystemAttributeNames=["All"]
        ).get("Messages", [])
        if not received:
            return 0
        records = [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "eventSource": "aws:sqs",
            }
            for m in received
        ]
        result = handler.handler({"Records": records}, FakeLambdaContext())
        failed = {item["itemIdentifier"] for item in result["batchItemFailures"]}
        for message in received:
            if message["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        return len(received)

    def pump(self, seconds: float, until: Any = None) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            busy = self.run_queue(self.fan_out_url, self.fan_out) + self.run_queue(self.delivery_url, self.delivery)
            if until is not None and until():
                return
            if not busy:
                time.sleep(0.05)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with moto_server():
        yield World()


def test_a_document_event_reaches_a_loopback_receiver_signed(world: World) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    with loopback_receiver(Receiver()) as receiver:
        created = world.register(receiver.url, tenant)
        receiver.secret = created["secret"]
        other = world.register(receiver.url, f"other{tenant}")  # another tenant's endpoint: not told
        world.publish_ready(tenant, "01JWEBHOOKDOC")
        world.pump(20, until=lambda: len(receiver.received) >= 1)
        world.pump(1)
        assert len(receiver.received) == 1, receiver.received
        got = receiver.received[0]
        assert got.valid_signature, got.headers
        assert got.headers["webhook-id"].startswith("msg_")
        assert got.payload["type"] == "document.ready"
        assert got.payload["data"] == {
            "document_id": "01JWEBHOOKDOC",
            "tenant_id": tenant,
            "version": "v1",
            "status": "READY",
        }
        assert other["id"] != created["id"]


def test_a_failing_receiver_gets_it_on_the_retry_with_the_same_id(world: World) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    with loopback_receiver(Receiver(statuses=[500])) as receiver:
        receiver.secret = world.register(receiver.url, tenant)["secret"]
        world.publish_ready(tenant, "01JRETRYDOC")
        world.pump(30, until=lambda: len(receiver.received) >= 2)
        first, second = receiver.wait_for(2, timeout=1)[:2]
        assert first.headers["webhook-id"] == second.headers["webhook-id"]
        assert second.valid_signature and second.payload["data"]["document_id"] == "01JRETRYDOC"
        assert second.at - first.at >= 0.5  # the backoff, as the message's visibility
        world.pump(2)
        assert len(receiver.received) == 2  # delivered once the 200 came: not again


def test_each_attempt_is_recorded_and_listed_newest_first(world: World) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    with loopback_receiver(Receiver(statuses=[500])) as receiver:
        created = world.register(receiver.url, tenant)
        world.publish_ready(tenant, "01JRECORDEDDOC")
        world.pump(30, until=lambda: len(receiver.received) >= 2)
        world.pump(1)
    path = f"/webhooks/{created['id']}/deliveries"
    status, listed = world.api_call("GET", path, tenant)
    assert status == 200, listed
    assert listed["endpoint_id"] == created["id"]
    delivered, failed = listed["deliveries"]
    webhook_id = receiver.received[0].headers["webhook-id"]
    for attempt in (delivered, failed):
        assert attempt["webhook_id"] == webhook_id and attempt["document_id"] == "01JRECORDEDDOC"
        assert attempt["type"] == "document.ready" and attempt["event_id"] not in ("", webhook_id)
        assert 0 <= attempt["duration_ms"] < 5000
    assert (delivered["attempt"], delivered["outcome"], delivered["status_code"], delivered.get("error")) == (
        2, "delivered", 200, None,
    )  # fmt: skip
    assert (failed["attempt"], failed["outcome"], failed["status_code"], failed["error"]) == (
        1, "failed", 500, "HTTP 500",
    )  # fmt: skip
    assert delivered["at"] > failed["at"]
    # The attempts live beside the endpoint in the tenant's partition, with their TTL attribute.
    items = (
        boto3.resource("dynamodb")
        .Table(world.table)
        .query(KeyConditionExpression=boto3.dynamodb.conditions.Key("tenant_id").eq(tenant))["Items"]
    )
    attempts = [item for item in items if str(item["endpoint_id"]).startswith("dlv#")]
    assert len(attempts) == 2 and all(int(item["expires_at"]) > time.time() + 6 * 86400 for item in attempts)
    # ... and never show up as endpoints, nor for another tenant.
    status, endpoints = world.api_call("GET", "/webhooks", tenant)
    assert status == 200 and [e["id"] for e in endpoints["endpoints"]] == [created["id"]]
    status, refused = world.api_call("GET", path, f"other{tenant}")
    assert status == 404 and refused["error"]["code"] == "NOT_FOUND"
    assert world.api_call("GET", "/webhooks/wh_nosuchendpoint/deliveries", tenant)[0] == 404


def test_a_delivery_failing_past_its_deadline_is_dead_lettered(world: World) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    with loopback_receiver(Receiver(statuses=[503] * 5)) as receiver:
        created = world.register(receiver.url, tenant)
        message = DeliveryMessage(
            webhook_id="msg_expired",
            tenant_id=tenant,
            endpoint_id=created["id"],
            type="document.ready",
            body='{"type":"document.ready"}',
            deadline=int(time.time()) - 1,
        )
        world.sqs.send_message(QueueUrl=world.delivery_url, MessageBody=message.model_dump_json())
        world.pump(3)
        assert len(receiver.received) == 1
    dead = world.sqs.receive_message(
        QueueUrl=world.dlq_url, MessageAttributeNames=["All"], WaitTimeSeconds=1, MaxNumberOfMessages=10
    )["Messages"]
    mine = [m for m in dead if json.loads(m["Body"]).get("webhook_id") == "msg_expired"]
    assert len(mine) == 1
    assert "HTTP 503" in mine[0]["MessageAttributes"]["reason"]["StringValue"]
    status, listed = world.api_call("GET", f"/webhooks/{created['id']}/deliveries", tenant)
    assert status == 200
    assert [(d["outcome"], d["status_code"]) for d in listed["deliveries"]] == [("dead-lettered", 503)]


def test_delivery_latency_over_twenty_events(world: World) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    with loopback_receiver(Receiver()) as receiver:
        receiver.secret = world.register(receiver.url, tenant)["secret"]
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                world.pump(0.2)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        sent: dict[str, float] = {}
        try:
            for index in range(20):
                document_id = f"01JLATENCY{index:04d}"
                sent[document_id] = time.time()
                world.publish_ready(tenant, document_id)
                time.sleep(0.25)
            received = receiver.wait_for(20, timeout=60)
        finally:
            stop.set()
            poller.join(timeout=10)
    assert len(received) == 20 and all(r.valid_signature for r in received)
    latencies = sorted((r.at - sent[r.payload["data"]["document_id"]]) * 1000 for r in received)
    p50 = statistics.median(latencies)
    p95 = latencies[int(0.95 * len(latencies)) - 1]
    print(f"\nwebhook delivery latency over {len(latencies)} events (publish -> POST received): "
          f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {latencies[-1]:.0f} ms")  # fmt: skip
    assert p95 < 10_000
