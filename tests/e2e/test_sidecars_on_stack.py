"""S3 sidecars through the local stack: PDFs put straight into the bucket's upload prefix in a Bedrock
Knowledge Bases layout (``<name>.pdf`` + ``<name>.pdf.metadata.json``) load with their metadata, in
either order, searchable by filter; a bad sidecar fails its document with a clear code; a sidecar is
never a document of its own."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.core.ids import document_id_for_object

from local.client import OfflineClient

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture(scope="module")
def client(local_stack: dict[str, Any]) -> OfflineClient:
    return OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"kb-{uuid.uuid4().hex[:8]}")


def put(aws_clients: dict[str, Any], bucket: str, key: str, body: bytes) -> None:
    aws_clients["s3"].put_object(Bucket=bucket, Key=key, Body=body)


def kb_sidecar(attributes: dict[str, Any]) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


def settle(client: OfflineClient, document_ids: list[str], timeout: float = 300) -> dict[str, dict[str, Any]]:
    """Wait until intake made the records (an object put without the API has none before), then until done."""
    deadline = time.monotonic() + 60
    while any(client.request("GET", f"/documents/{d}").status_code == 404 for d in document_ids):
        assert time.monotonic() < deadline, "intake never made the records"
        time.sleep(0.5)
    return client.wait_until_done(document_ids, timeout_seconds=timeout)


def search(client: OfflineClient, query: str, where: dict[str, Any], mode: str = "hybrid") -> set[str]:
    response = client.request("POST", "/search", {"query": query, "k": 5, "mode": mode, "filter": where})
    assert response.status_code == 200, response.text
    return {passage["document_id"] for passage in response.json()["passages"]}


def test_a_kb_folder_loads_with_its_metadata_in_either_order(
    client: OfflineClient, local_stack: dict[str, Any], aws_clients: dict[str, Any]
) -> None:
    bucket, folder = local_stack["BucketName"], f"raw/{client.tenant_id}/kb"
    collection = f"lights-{uuid.uuid4().hex[:6]}"
    # Sidecar first, then its document.
    first = f"{folder}/lighthouses.pdf"
    put(aws_clients, bucket, first + ".metadata.json", kb_sidecar({
        "collection": collection,
        "year": {"value": {"type": "NUMBER", "numberValue": 1890}, "includeForEmbedding": True},
        "tags": ["coast", "history"],
    }))  # fmt: skip
    put(aws_clients, bucket, first, (SAMPLES / "lighthouses.pdf").read_bytes())
    # The document first, its sidecar once it is READY.
    second = f"{folder}/sourdough.pdf"
    put(aws_clients, bucket, second, (SAMPLES / "sourdough.pdf").read_bytes())
    first_id, second_id = document_id_for_object(bucket, first), document_id_for_object(bucket, second)
    states = settle(client, [first_id, second_id])
    assert {state["status"] for state in states.values()} == {"READY"}, states
    assert states[first_id]["metadata"] == {"collection": collection, "year": 1890, "tags": ["coast", "history"]}
    assert search(client, "lighthouse lamp", {"equals": {"key": "collection", "value": collection}}) == {first_id}
    assert search(client, "lamp", {"listContains": {"key": "tags", "value": "coast"}}, "knn") == {first_id}

    put(aws_clients, bucket, second + ".metadata.json", kb_sidecar({"collection": collection, "year": 2024}))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and client.document(second_id)["metadata"] == {}:
        time.sleep(0.5)
    late = client.document(second_id)
    assert (late["metadata"], late["revision"], late["status"]) == (
        {"collection": collection, "year": 2024},
        2,
        "READY",
    )
    where = {
        "andAll": [
            {"equals": {"key": "collection", "value": collection}},
            {"greaterThan": {"key": "year", "value": 2000}},
        ]
    }
    # The record's revision moves before intake's rewrite of the passages ends: wait for it (seconds).
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and search(client, "sourdough starter flour", where) != {second_id}:
        time.sleep(0.5)
    assert search(client, "sourdough starter flour", where) == {second_id}

    # A sidecar is never a document.
    for key in (first, second):
        sidecar_id = document_id_for_object(bucket, key + ".metadata.json")
        assert client.request("GET", f"/documents/{sidecar_id}").status_code == 404


def test_a_bad_sidecar_fails_its_document_with_a_clear_code(
    client: OfflineClient, local_stack: dict[str, Any], aws_clients: dict[str, Any]
) -> None:
    bucket, key = local_stack["BucketName"], f"raw/{client.tenant_id}/bad/urban-birds.pdf"
    put(aws_clients, bucket, key + ".metadata.json", kb_sidecar({"filename": "reserved names are refused"}))
    put(aws_clients, bucket, key, (SAMPLES / "urban-birds.pdf").read_bytes())
    document_id = document_id_for_object(bucket, key)
    state = settle(client, [document_id], timeout=120)[document_id]
    assert (state["status"], state["error_code"]) == ("FAILED", "INVALID_REQUEST")
    assert state["error_detail"].startswith(f"sidecar {key}.metadata.json: metadataAttributes.filename")
