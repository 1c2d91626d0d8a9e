"""PATCH /documents/{id} through the local stack (moto, the real OpenSearch, the real handlers): a READY
document's metadata changes, a search filtered on the new value finds its passages within 5 s from
both legs (the k-NN leg too: the vectors survive the rewrite), the ETag and If-Match compare-and-set
(412 when stale), another tenant's document is 404, and a browser may send If-Match and read ETag."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from local.client import OfflineClient

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
VISIBLE_WITHIN_SECONDS = 5.0


def upload_with_metadata(client: OfflineClient, path: Path, metadata: dict[str, Any]) -> str:
    ticket = client.request("POST", "/documents", {"filename": path.name, "metadata": metadata})
    assert ticket.status_code == 201, ticket.text
    form = ticket.json()["upload"]
    files = {"file": (path.name, path.read_bytes(), "application/pdf")}
    sent = requests.post(form["url"], data=form["fields"], files=files, timeout=60)
    assert sent.status_code in (200, 201, 204), sent.text
    return str(ticket.json()["document_id"])


@pytest.fixture(scope="module")
def client(local_stack: dict[str, Any]) -> OfflineClient:
    return OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"patch-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def document_id(client: OfflineClient) -> str:
    document_id = upload_with_metadata(client, SAMPLES / "lighthouses.pdf", {"customer": "before", "year": 2024})
    states = client.wait_until_done([document_id], timeout_seconds=300)
    assert states[document_id]["status"] == "READY", states
    return document_id


def patch(client: OfflineClient, document_id: str, body: Any, if_match: str | None = None) -> requests.Response:
    headers = {**client._headers(), **({"If-Match": if_match} if if_match is not None else {})}
    return requests.patch(f"{client.api_url}/documents/{document_id}", json=body, headers=headers, timeout=60)


def search(client: OfflineClient, value: str, mode: str) -> list[dict[str, Any]]:
    where = {"equals": {"key": "customer", "value": value}}
    response = client.request(
        "POST", "/search", {"query": "lighthouse keeper lamp", "k": 5, "mode": mode, "filter": where}
    )
    assert response.status_code == 200, response.text
    return list(response.json()["passages"])


def test_a_patch_is_searchable_within_5_seconds_from_both_legs(client: OfflineClient, document_id: str) -> None:
    got = client.request("GET", f"/documents/{document_id}")
    assert got.status_code == 200 and got.headers["ETag"] == '"1"' and got.json()["revision"] == 1
    chunk_count = got.json()["chunk_count"]
    customer = f"after-{uuid.uuid4().hex[:6]}"

    started = time.monotonic()
    answer = patch(client, document_id, {"metadata": {"customer": customer, "tier": "gold"}}, if_match='"1"')
    assert answer.status_code == 200, answer.text
    assert answer.headers["ETag"] == '"2"'
    assert answer.json()["metadata"] == {"customer": customer, "tier": "gold"}
    answered = time.monotonic() - started
    found: dict[str, list[dict[str, Any]]] = {}
    rounds = 0
    while time.monotonic() - started < VISIBLE_WITHIN_SECONDS and len(found) < 3:
        rounds += 1
        for mode in ("knn", "bm25", "hybrid"):
            if mode not in found and (passages := search(client, customer, mode)):
                found[mode] = passages
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    print(f"PATCH answered in {answered:.2f} s; found by every mode {elapsed:.2f} s after sending ({rounds} rounds)")
    assert set(found) == {"knn", "bm25", "hybrid"}, f"after {elapsed:.1f} s only {sorted(found)} found it"
    for passages in found.values():
        assert {p["document_id"] for p in passages} == {document_id}
        assert all(p["metadata"] == {"customer": customer, "tier": "gold"} for p in passages)
    # The k-NN leg ranks by vector: every chunk still has one (a lost vector would drop it from k-NN).
    assert len(found["knn"]) == min(5, chunk_count)
    assert search(client, "before", "hybrid") == []
    document = client.document(document_id)
    assert document["revision"] == 2 and document["chunk_count"] == chunk_count and document["status"] == "READY"


def test_a_stale_if_match_is_412_and_changes_nothing(client: OfflineClient, document_id: str) -> None:
    current = client.document(document_id)
    stale = patch(client, document_id, {"metadata": {"customer": "stale"}}, if_match=f'"{current["revision"] - 1}"')
    assert stale.status_code == 412, stale.text
    assert stale.json()["error"]["code"] == "REVISION_MISMATCH"
    assert client.document(document_id)["metadata"] == current["metadata"]


def test_bad_metadata_is_a_400_naming_the_key(client: OfflineClient, document_id: str) -> None:
    answer = patch(client, document_id, {"metadata": {"filename": "x"}})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_REQUEST"
    assert "metadata.filename" in answer.json()["error"]["message"]


def test_another_tenants_document_is_404(local_stack: dict[str, Any], document_id: str) -> None:
    stranger = OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"other-{uuid.uuid4().hex[:8]}")
    answer = patch(stranger, document_id, {"metadata": {"customer": "mine"}})
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "NOT_FOUND"


def test_a_browser_may_send_if_match_and_read_the_etag(client: OfflineClient, document_id: str) -> None:
    origin = client.api_url  # the local page's origin
    preflight = requests.options(
        f"{client.api_url}/documents/{document_id}",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "PATCH",
            "Access-Control-Request-Headers": "authorization,content-type,if-match",
        },
        timeout=10,
    )
    assert preflight.status_code == 204
    assert "PATCH" in preflight.headers["Access-Control-Allow-Methods"]
    assert "if-match" in preflight.headers["Access-Control-Allow-Headers"].lower()
    got = requests.get(
        f"{client.api_url}/documents/{document_id}", headers={**client._headers(), "Origin": origin}, timeout=30
    )
    assert "etag" in got.headers["Access-Control-Expose-Headers"].lower()
