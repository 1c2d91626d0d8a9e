"""The live-status hub against moto's server: the documents table's stream, fanned out per tenant.

The records are written by the real status repository (the code the pipeline uses), read back
through moto's DynamoDB Streams API, and delivered as the contract's message.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import ObjectRef

from local.runtime.http.live_status import LiveStatusHub, LiveStatusUnavailable, Subscription, stream_events
from tests.support.aws import moto_server

pytestmark = pytest.mark.integration


def _create_table(dynamodb: Any, name: str, stream: str | None) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "document_id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "document_id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **({"StreamSpecification": {"StreamEnabled": True, "StreamViewType": stream}} if stream else {}),
    )


@pytest.fixture(scope="module")
def table() -> Iterator[str]:
    with moto_server():
        name = f"docs-{uuid.uuid4().hex[:6]}"
        _create_table(boto3.client("dynamodb"), name, "NEW_IMAGE")
        yield name


@pytest.fixture
def hub(table: str) -> Iterator[LiveStatusHub]:
    hub = LiveStatusHub(
        dynamodb=boto3.client("dynamodb"),
        streams=boto3.client("dynamodbstreams"),
        table_name=table,
        poll_interval_seconds=0.05,
        queue_size=4,
    )
    hub.start()
    try:
        yield hub
    finally:
        hub.close()


def _awaiting_upload(repo: DocumentsTable, tenant: str) -> str:
    document_id = new_document_id()
    repo.create_awaiting_upload(
        document_id=document_id, tenant_id=tenant, filename="a.pdf", bucket="b", key=f"raw/{tenant}/{document_id}/a.pdf"
    )
    return document_id


def _next(subscription: Subscription, timeout: float = 10) -> dict[str, Any]:
    message = subscription.messages.get(timeout=timeout)
    assert message is not None
    return message


def test_changes_reach_their_tenants_subscribers_only(hub: LiveStatusHub, table: str) -> None:
    repo = DocumentsTable(table)
    before = _awaiting_upload(repo, "acme")  # written before anyone subscribed: never delivered
    acme, acme_again, other = hub.subscribe("acme"), hub.subscribe("acme"), hub.subscribe("other")
    document_id = _awaiting_upload(repo, "acme")
    ref = ObjectRef(bucket="b", key=f"raw/acme/{document_id}/a.pdf", version="v1")
    repo.mark_queued(document_id=document_id, tenant_id="acme", ref=ref, event_time="t1", size_bytes=9)

    for subscription in (acme, acme_again):
        first, second = _next(subscription), _next(subscription)
        assert first["type"] == second["type"] == "document.updated"
        assert [first["document"]["status"], second["document"]["status"]] == ["AWAITING_UPLOAD", "QUEUED"]
        assert first["document"]["document_id"] == document_id != before
    time.sleep(0.5)
    assert other.messages.empty()
    assert hub.stats()["subscribers"] == 3


def test_a_slow_subscriber_is_dropped_not_the_reader(hub: LiveStatusHub, table: str) -> None:
    repo = DocumentsTable(table)
    slow, reader = hub.subscribe("busy"), hub.subscribe("busy")
    received: list[dict[str, Any]] = []
    for _ in range(10):  # the queues hold 4: the subscriber that never reads overflows
        _awaiting_upload(repo, "busy")
        received.append(_next(reader))
    assert len(received) == 10  # the subscriber that keeps up gets every change
    assert slow.closed.is_set() and slow.reason == "the client did not keep up"
    assert hub.stats()["dropped"] == 1 and hub.stats()["subscribers"] == 1


def test_stream_events_writes_server_sent_events_and_keep_alives(hub: LiveStatusHub, table: str) -> None:
    subscription = hub.subscribe("sse")
    written: queue.Queue[bytes] = queue.Queue()
    writer = threading.Thread(
        target=stream_events, args=(subscription, written.put), kwargs={"keepalive_seconds": 0.2}, daemon=True
    )
    writer.start()
    document_id = _awaiting_upload(DocumentsTable(table), "sse")
    chunks = [written.get(timeout=10) for _ in range(3)]
    text = b"".join(chunks).decode()
    assert text.startswith("retry: 3000\n: connected\n\n")
    assert (
        f'event: document.updated\ndata: {{"type":"document.updated","document":{{"document_id":"{document_id}"' in text
    )
    assert written.get(timeout=5) == b": keep-alive\n\n"
    hub.close()  # a clean shutdown ends every stream
    writer.join(5)
    assert not writer.is_alive()


def test_a_table_without_a_stream_has_no_live_channel(table: str) -> None:
    name = f"plain-{uuid.uuid4().hex[:6]}"
    _create_table(boto3.client("dynamodb"), name, None)
    hub = LiveStatusHub(dynamodb=boto3.client("dynamodb"), streams=boto3.client("dynamodbstreams"), table_name=name)
    with pytest.raises(LiveStatusUnavailable):
        hub.start()
    with pytest.raises(LiveStatusUnavailable):
        hub.subscribe("acme")
