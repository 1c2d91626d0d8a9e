"""POST /search through the local stack: upload, READY, then search as the frontend does."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())


def post_search(client: OfflineClient, body: Any, *, tenant: str | None = None) -> requests.Response:
    caller = OfflineClient(api_url=client.api_url, tenant_id=tenant) if tenant else client
    return caller.request("POST", "/search", body, timeout=60)


@pytest.fixture(scope="module")
def urban_birds(client: OfflineClient) -> str:
    document_id = client.upload(SAMPLES / "urban-birds.pdf")
    state = client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert state["status"] == "READY", state
    return document_id


@pytest.mark.parametrize("mode", ["hybrid", "knn", "bm25"])
def test_search_finds_the_page_in_every_mode(client: OfflineClient, urban_birds: str, mode: str) -> None:
    sentence = EXPECTED["urban-birds.pdf"]["sentences"][0]
    response = post_search(client, {"query": sentence["text"], "k": 3, "mode": mode})

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["mode"], body["k"]) == (mode, 3)
    # Other tests of this tenant upload the same PDF: its passages then come back once, as the
    # best-ranked copy, naming the other uploads in "copies" (search never repeats a text).
    mine = [
        p for p in body["passages"] if urban_birds in [p["document_id"], *(copy["document_id"] for copy in p["copies"])]
    ]
    assert mine, body
    top = mine[0]
    assert top["filename"] == "urban-birds.pdf"
    assert top["page_start"] <= sentence["page"] <= top["page_end"]
    assert top["heading_path"]  # the samples' sections are headings
    assert top["text"] and top["score"] > 0
    assert any("<em>" in fragment for fragment in top["highlights"])
    assert set(top["retrieved_by"]) <= {"bm25", "knn"}


def test_the_query_is_embedded_in_the_embedding_servers_query_lane(
    client: OfflineClient, stack_process: OfflineStackProcess, urban_birds: str
) -> None:
    # The API function's Bedrock endpoint is the server's /lanes/query: a person's query goes
    # before the passages of documents being ingested (local.embedding_server.batcher).
    embedding_url = (stack_process.control("GET", "/_local/status") or {})["embedding_server"]["url"]

    def query_requests() -> int:
        return int(requests.get(f"{embedding_url}/_local/stats", timeout=10).json()["requests_by_lane"]["query"])

    before = query_requests()
    response = post_search(client, {"query": "pigeons on window ledges", "mode": "knn"})
    assert response.status_code == 200, response.text
    assert response.json()["passages"]
    assert query_requests() == before + 1


def test_default_mode_is_hybrid_with_five_results(client: OfflineClient, urban_birds: str) -> None:
    response = post_search(client, {"query": "birds nesting on buildings"})
    assert response.status_code == 200, response.text
    assert response.json()["mode"] == "hybrid"
    assert 0 < len(response.json()["passages"]) <= 5


def test_rerank_true_goes_through_the_embedding_servers_rerank_route(
    client: OfflineClient, stack_process: OfflineStackProcess, urban_birds: str
) -> None:
    # Off by default (cdk.json search.rerank.default): the same query reranked only when asked, the
    # scores then the reranker's (the local server's lexical stand-in, in [0, 1)).
    embedding_url = (stack_process.control("GET", "/_local/status") or {})["embedding_server"]["url"]

    def reranks() -> int:
        return int(requests.get(f"{embedding_url}/_local/stats", timeout=10).json()["reranks"])

    before = reranks()
    plain = post_search(client, {"query": "pigeons nesting on window ledges", "k": 3})
    assert plain.status_code == 200, plain.text
    assert plain.json()["reranked"] is False
    assert reranks() == before
    reranked = post_search(client, {"query": "pigeons nesting on window ledges", "k": 3, "rerank": True})
    assert reranked.status_code == 200, reranked.text
    body = reranked.json()
    assert body["reranked"] is True and 0 < len(body["passages"]) <= 3
    scores = [p["score"] for p in body["passages"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s < 1 for s in scores)
    assert reranks() == before + 1


def test_another_tenant_finds_nothing(client: OfflineClient, urban_birds: str) -> None:
    stranger = f"stranger-{uuid.uuid4().hex[:6]}"
    for mode in ("hybrid", "knn", "bm25"):
        response = post_search(client, {"query": "birds", "mode": mode, "k": 50}, tenant=stranger)
        assert response.status_code == 200
        assert response.json()["passages"] == [], mode


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{not json", "not valid JSON"),
        ('["query"]', "JSON object"),
        ({}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "birds", "k": 0}, "k"),
        ({"query": "birds", "k": 51}, "k"),
        ({"query": "birds", "mode": "semantic"}, "mode"),
        ({"query": "birds", "tenant_id": "other"}, "tenant_id"),
    ],
)
def test_bad_input_is_a_clear_400(client: OfflineClient, body: Any, reason: str) -> None:
    response = post_search(client, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert reason in error["message"]
