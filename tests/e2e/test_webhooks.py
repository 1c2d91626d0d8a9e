"""Webhooks on the local stack, with the template's own rule, queues, functions and event source
mappings (local/runtime/cloudformation/provision.py creates the rule in moto's EventBridge; the SQS poller runs the
fan-out and delivery functions): a loopback receiver registered through the API gets a signed
``document.ready`` for an uploaded PDF, a receiver that answers 500 first gets it on the retry, a
deleted document announces ``document.deleted``, and the webhook path's latency over 20 events
(PutEvents → POST received) is printed."""

from __future__ import annotations

import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from local.client import OfflineClient
from tests.support.webhooks import Receiver, loopback_receiver

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def register(client: OfflineClient, receiver: Receiver, events: list[str]) -> str:
    response = client.request("POST", "/webhooks", {"url": receiver.url, "events": events})
    assert response.status_code == 201, response.text
    receiver.secret = response.json()["secret"]
    return str(response.json()["id"])


def test_an_uploaded_pdf_is_announced_signed_retried_and_its_deletion_too(client: OfflineClient) -> None:
    with (
        loopback_receiver(Receiver()) as steady,
        loopback_receiver(Receiver(statuses=[500])) as flaky,
    ):
        steady_id = register(client, steady, ["document.ready", "document.deleted"])
        register(client, flaky, ["document.ready"])
        listed = client.request("GET", "/webhooks").json()["endpoints"]
        assert steady_id in {e["id"] for e in listed} and "secret" not in json.dumps(listed)

        document_id = client.upload(SAMPLES / "lighthouses.pdf")
        state = client.wait_until_done([document_id], timeout_seconds=300)[document_id]
        assert state["status"] == "READY", state

        [ready] = [r for r in steady.wait_for(1, timeout=60) if r.payload["type"] == "document.ready"]
        assert ready.valid_signature, ready.headers
        assert ready.payload["data"]["document_id"] == document_id
        assert ready.payload["data"]["status"] == "READY"
        assert ready.payload["data"]["tenant_id"] == client.tenant_id

        first, second = flaky.wait_for(2, timeout=90)[:2]
        assert first.headers["webhook-id"] == second.headers["webhook-id"]
        assert second.valid_signature and second.payload["data"]["document_id"] == document_id

        assert client.delete(document_id).status_code == 200
        received = steady.wait_for(2, timeout=60)
        deleted = [r for r in received if r.payload["type"] == "document.deleted"]
        assert len(deleted) == 1 and deleted[0].valid_signature
        assert deleted[0].payload["data"] == {
            "document_id": document_id,
            "tenant_id": client.tenant_id,
            "version": ready.payload["data"]["version"],
            "status": "DELETED",
        }
        assert client.request("DELETE", f"/webhooks/{steady_id}").status_code == 204


def test_webhook_latency_over_twenty_events(client: OfflineClient, aws_clients: dict[str, Any]) -> None:
    with loopback_receiver(Receiver()) as receiver:
        endpoint = register(client, receiver, ["document.ready"])
        sent: dict[str, float] = {}
        for index in range(20):
            document_id = f"latency-{uuid.uuid4().hex[:8]}-{index}"
            detail = {"document_id": document_id, "tenant_id": client.tenant_id, "version": "v1"}
            sent[document_id] = time.time()
            aws_clients["events"].put_events(
                Entries=[{"Source": "rag-ingest", "DetailType": "DocumentReady", "Detail": json.dumps(detail)}]
            )
            time.sleep(0.5)
        received = receiver.wait_for(20, timeout=120)
        client.request("DELETE", f"/webhooks/{endpoint}")
    assert len(received) == 20 and all(r.valid_signature for r in received)
    latencies = sorted((r.at - sent[r.payload["data"]["document_id"]]) * 1000 for r in received)
    p50, p95 = statistics.median(latencies), latencies[int(0.95 * len(latencies)) - 1]
    print(f"\nlocal stack webhook latency over {len(latencies)} events (PutEvents -> POST received): "
          f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {latencies[-1]:.0f} ms")  # fmt: skip
