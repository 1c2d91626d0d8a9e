"""Metadata and filters through the local stack: an upload with metadata (the API's presigned POST,
as the page does it) reaches READY; its record shows the metadata; a filtered search returns only
its passages, from every mode; the document listing filters on it; a bad filter is a 400."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from local.client import OfflineClient

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CUSTOMER = f"cust-{uuid.uuid4().hex[:8]}"


def upload_with_metadata(client: OfflineClient, path: Path, metadata: dict[str, Any]) -> str:
    ticket = client.request("POST", "/documents", {"filename": path.name, "metadata": metadata})
    assert ticket.status_code == 201, ticket.text
    body = ticket.json()
    form = body["upload"]
    sent = requests.post(
        form["url"], data=form["fields"], files={"file": (path.name, path.read_bytes(), "application/pdf")}, timeout=60
    )
    assert sent.status_code in (200, 201, 204), sent.text
    return str(body["document_id"])


@pytest.fixture(scope="module")
def client(local_stack: dict[str, Any]) -> OfflineClient:
    """A tenant of its own: the session's tenant is shared by tests that expect to be the only one
    with these samples (tests/e2e/test_pipeline.py)."""
    return OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"meta-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def documents(client: OfflineClient) -> dict[str, str]:
    tagged = upload_with_metadata(client, SAMPLES / "lighthouses.pdf", {"customer": CUSTOMER, "year": 2024})
    other = upload_with_metadata(client, SAMPLES / "sourdough.pdf", {"customer": "someone-else", "year": 2019})
    states = client.wait_until_done([tagged, other], timeout_seconds=300)
    assert {state["status"] for state in states.values()} == {"READY"}, states
    return {"tagged": tagged, "other": other}


def test_the_record_shows_its_metadata(client: OfflineClient, documents: dict[str, str]) -> None:
    assert client.document(documents["tagged"])["metadata"] == {"customer": CUSTOMER, "year": 2024}


@pytest.mark.parametrize("mode", ["hybrid", "knn", "bm25"])
def test_a_filtered_search_returns_only_matching_passages(
    client: OfflineClient, documents: dict[str, str], mode: str
) -> None:
    where = {
        "andAll": [{"equals": {"key": "customer", "value": CUSTOMER}}, {"greaterThan": {"key": "year", "value": 2020}}]
    }
    # The query is about bread (the other document; "the" and "and" give BM25 words in both):
    # the filter still keeps to the lighthouses.
    response = client.request(
        "POST", "/search", {"query": "the sourdough starter and flour", "k": 5, "mode": mode, "filter": where}
    )
    assert response.status_code == 200, response.text
    passages = response.json()["passages"]
    assert passages and {p["document_id"] for p in passages} == {documents["tagged"]}


def test_the_listing_filters_on_metadata(client: OfflineClient, documents: dict[str, str]) -> None:
    where = json.dumps({"equals": {"key": "customer", "value": CUSTOMER}})
    response = client.request("GET", f"/documents?filter={requests.utils.quote(where)}")
    assert response.status_code == 200, response.text
    assert [item["document_id"] for item in response.json()["items"]] == [documents["tagged"]]


def test_a_bad_filter_is_a_400_naming_its_path(client: OfflineClient, documents: dict[str, str]) -> None:
    response = client.request(
        "POST", "/search", {"query": "x", "filter": {"orAll": [{"equals": {"key": "a", "value": 1}}]}}
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("filter.orAll: ")
