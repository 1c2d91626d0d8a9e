"""The LangChain and LlamaIndex retrievers against the local stack: real PDFs uploaded with metadata
through the API, READY, then retrieved through both libraries' retrievers (sync and async) with k,
each mode and a filter on user metadata. What they return is what ``POST /search`` returns (the same
passages, in the same order, with the same scores), with the text, filename, pages and metadata; a
bad filter and a bad token raise the typed error with the API's code and message."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from rag_ingest_client.http import ApiError, upload_file
from rag_ingest_client.retrievers import langchain as lc
from rag_ingest_client.retrievers import llamaindex as li
from rag_ingest_client.uploads import declared_type

from local.client import OfflineClient
from tests.e2e.test_metadata_search import upload_with_metadata

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
CUSTOMER = f"acme-{uuid.uuid4().hex[:6]}"
# Page 3 of lighthouses.pdf is "Fresnel and the Lens"; the bread and the birds say nothing of it.
QUERY = "Fresnel lens with concentric rings of glass prisms"
ONLY_CUSTOMER = {"equals": {"key": "customer", "value": CUSTOMER}}
RECENT_CUSTOMER = {"andAll": [ONLY_CUSTOMER, {"greaterThanOrEquals": {"key": "year", "value": 2022}}]}
METADATA = {
    "lighthouses.pdf": {"customer": CUSTOMER, "year": 2024, "tags": ["maritime", "history"]},
    "urban-birds.pdf": {"customer": CUSTOMER, "year": 2021},
    "sourdough.pdf": {"customer": "someone-else", "year": 2024},
}


@pytest.fixture(scope="module")
def client(local_stack: dict[str, Any]) -> OfflineClient:
    return OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"integ-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def documents(client: OfflineClient) -> dict[str, str]:
    """filename -> document id, every one READY."""
    ids = {name: upload_with_metadata(client, SAMPLES / name, metadata) for name, metadata in METADATA.items()}
    states = client.wait_until_done(list(ids.values()), timeout_seconds=300)
    assert {state["status"] for state in states.values()} == {"READY"}, states
    return ids


def api_search(client: OfflineClient, **body: Any) -> list[dict[str, Any]]:
    response = client.request("POST", "/search", body)
    assert response.status_code == 200, response.text
    return list(response.json()["passages"])


def langchain(client: OfflineClient, **options: Any) -> lc.RagIngestRetriever:
    # client.token: a function returning a valid ID token of the local identity provider, as an
    # application passes its own sign-in.
    return lc.RagIngestRetriever(api_url=client.api_url, token=client.token, **options)


def llamaindex(client: OfflineClient, **options: Any) -> li.RagIngestRetriever:
    return li.RagIngestRetriever(client.api_url, client.token, **options)


@pytest.mark.parametrize("mode", ["hybrid", "knn", "bm25"])
def test_langchain_returns_what_the_api_returns_with_text_pages_and_metadata(
    client: OfflineClient, documents: dict[str, str], mode: str
) -> None:
    retrieved = langchain(client, k=3, mode=mode, filter=ONLY_CUSTOMER).invoke(QUERY)
    expected = api_search(client, query=QUERY, k=3, mode=mode, filter=ONLY_CUSTOMER)
    assert 1 <= len(retrieved) <= 3
    assert [(d.id, d.metadata["score"]) for d in retrieved] == [(p["chunk_id"], p["score"]) for p in expected]
    assert [d.page_content for d in retrieved] == [p["text"] for p in expected]
    scores = [document.metadata["score"] for document in retrieved]
    assert scores == sorted(scores, reverse=True)
    top = retrieved[0]
    assert "Fresnel" in top.page_content
    assert top.metadata["filename"] == "lighthouses.pdf"
    assert top.metadata["document_id"] == documents["lighthouses.pdf"]
    assert top.metadata["page_start"] <= 3 <= top.metadata["page_end"]
    # Where the passage stands on its pages: rectangles a viewer can draw (docs/formats.md).
    assert top.metadata["document_format"] == "pdf" and top.metadata["boxes"]
    assert all(top.metadata["page_start"] <= box["page"] <= top.metadata["page_end"] for box in top.metadata["boxes"])
    assert top.id is not None and top.metadata["chunk_id"] == top.id
    assert top.id.startswith(documents["lighthouses.pdf"])
    assert {key: top.metadata[key] for key in ("customer", "year", "tags")} == METADATA["lighthouses.pdf"]
    # The filter on user metadata holds: nothing of the other customer's document.
    assert documents["sourdough.pdf"] not in {document.metadata["document_id"] for document in retrieved}


@pytest.mark.parametrize("mode", ["hybrid", "knn", "bm25"])
def test_llamaindex_returns_what_the_api_returns_with_text_pages_and_metadata(
    client: OfflineClient, documents: dict[str, str], mode: str
) -> None:
    nodes = llamaindex(client, k=3, mode=mode, filter=ONLY_CUSTOMER).retrieve(QUERY)
    expected = api_search(client, query=QUERY, k=3, mode=mode, filter=ONLY_CUSTOMER)
    assert 1 <= len(nodes) <= 3
    assert [(n.node.node_id, n.score) for n in nodes] == [(p["chunk_id"], p["score"]) for p in expected]
    assert [n.node.get_content() for n in nodes] == [p["text"] for p in expected]
    scores = [node.score or 0.0 for node in nodes]
    assert scores == sorted(scores, reverse=True)
    top = nodes[0].node
    assert "Fresnel" in top.get_content()
    assert top.metadata["filename"] == "lighthouses.pdf" and top.ref_doc_id == documents["lighthouses.pdf"]
    assert top.metadata["page_start"] <= 3 <= top.metadata["page_end"]
    assert {key: top.metadata[key] for key in ("customer", "year", "tags")} == METADATA["lighthouses.pdf"]
    assert documents["sourdough.pdf"] not in {node.node.metadata["document_id"] for node in nodes}


def test_k_and_a_filter_on_user_metadata_from_both_sync_and_async(
    client: OfflineClient, documents: dict[str, str]
) -> None:
    # A query about birds, but only the customer's documents from 2022 on: the lighthouses only.
    query = "birds nesting on city buildings"
    recent = {documents["lighthouses.pdf"]}
    for retrieved in (
        langchain(client, k=2, filter=RECENT_CUSTOMER).invoke(query),
        asyncio.run(langchain(client, k=2, filter=RECENT_CUSTOMER).ainvoke(query)),
    ):
        assert len(retrieved) == 2
        assert {document.metadata["document_id"] for document in retrieved} == recent
        assert {document.metadata["year"] for document in retrieved} == {2024}
    for nodes in (
        llamaindex(client, k=2, filter=RECENT_CUSTOMER).retrieve(query),
        asyncio.run(llamaindex(client, k=2, filter=RECENT_CUSTOMER).aretrieve(query)),
    ):
        assert len(nodes) == 2
        assert {node.node.metadata["document_id"] for node in nodes} == recent
    # Without the year, the birds document ranks first for birds.
    top = langchain(client, k=4, filter=ONLY_CUSTOMER).invoke(query)[0]
    assert top.metadata["filename"] == "urban-birds.pdf" and top.metadata["year"] == 2021
    assert len(llamaindex(client, k=4, mode="knn", filter=ONLY_CUSTOMER).retrieve(query)) == 4


def test_rerank_is_passed_through_and_returns_the_reranked_order(
    client: OfflineClient, documents: dict[str, str]
) -> None:
    # The API reranks with the local server's Rerank route (a labelled lexical stand-in offline):
    # what each retriever returns with rerank=True is the API's reranked answer, not the fused one.
    expected_body = client.request("POST", "/search", {"query": QUERY, "k": 3, "filter": ONLY_CUSTOMER, "rerank": True})
    assert expected_body.status_code == 200, expected_body.text
    assert expected_body.json()["reranked"] is True
    expected = [(p["chunk_id"], p["score"]) for p in expected_body.json()["passages"]]
    fused = [
        (p["chunk_id"], p["score"]) for p in api_search(client, query=QUERY, k=3, filter=ONLY_CUSTOMER, rerank=False)
    ]
    assert expected != fused  # the reranker's scores, not the fusion's
    retrieved = langchain(client, k=3, filter=ONLY_CUSTOMER, rerank=True).invoke(QUERY)
    assert [(d.id, d.metadata["score"]) for d in retrieved] == expected
    nodes = llamaindex(client, k=3, filter=ONLY_CUSTOMER, rerank=True).retrieve(QUERY)
    assert [(n.node.node_id, n.score) for n in nodes] == expected


# Real values of every type, and documents of every format: a Word file, a deck, an HTML page, and the
# same PDF twice (its passages come back once, the other upload folded in as a copy).
REAL_METADATA = {"customer": "Zürich AG", "signed": "2024-03-01", "delta": -3, "tags": ["nda", "2024"],
                 "draft": False, "zip": "02134"}  # fmt: skip
FORMATS = SAMPLES / "formats"
REAL_FILES = {
    "harbour-manual.docx": FORMATS / "harbour-manual.docx",
    "orchard-survey.pptx": FORMATS / "orchard-survey.pptx",
    "lighthouse-keeping.html": FORMATS / "lighthouse-keeping.html",
    "lighthouses.pdf": SAMPLES / "lighthouses.pdf",
    "lighthouses-again.pdf": SAMPLES / "lighthouses.pdf",
}
REAL_QUERIES = ("berths along the northern quay", "apple trees across six orchards", "trimmed the lamp wicks",
                QUERY)  # fmt: skip


@pytest.fixture(scope="module")
def real_client(local_stack: dict[str, Any]) -> OfflineClient:
    """A tenant of its own: a PDF uploaded twice changes what the other tests' tenant would get back."""
    client = OfflineClient(api_url=local_stack["ApiUrl"], tenant_id=f"real-{uuid.uuid4().hex[:8]}")
    ids = []
    for name, path in REAL_FILES.items():
        content_type = declared_type(name, path.read_bytes()[:8])
        body = {"filename": name, "content_type": content_type, "metadata": REAL_METADATA}
        ticket = client.request("POST", "/documents", body)
        assert ticket.status_code == 201, ticket.text
        form = ticket.json()["upload"]
        upload_file(form["url"], form["fields"], path, filename=name, content_type=content_type)
        ids.append(ticket.json()["document_id"])
    states = client.wait_until_done(ids, timeout_seconds=300)
    assert {state["status"] for state in states.values()} == {"READY"}, states
    return client


def test_every_field_of_real_answers_reaches_both_libraries(real_client: OfflineClient) -> None:
    """Each passage the API returns for real documents of every format is, in both retrievers, its text
    and every other field but the highlights, beside the document's own metadata."""
    seen: list[dict[str, Any]] = []
    for query in REAL_QUERIES:
        # BM25's scores move while the stack still indexes an earlier test's documents: the three
        # answers are compared only when the API answered the same before and after them.
        for _ in range(5):
            answer = api_search(real_client, query=query, k=5, mode="bm25")
            documents = langchain(real_client, k=5, mode="bm25").invoke(query)
            nodes = llamaindex(real_client, k=5, mode="bm25").retrieve(query)
            if api_search(real_client, query=query, k=5, mode="bm25") == answer:
                break
        else:
            pytest.fail(f"the index kept changing under {query!r}")
        own = ("text", "highlights", "metadata")
        expected = [{**p["metadata"], **{key: value for key, value in p.items() if key not in own}} for p in answer]
        assert [d.page_content for d in documents] == [p["text"] for p in answer]
        assert [d.metadata for d in documents] == expected
        assert [n.node.metadata for n in nodes] == [{k: v for k, v in e.items() if k != "score"} for e in expected]
        seen.extend(answer)
    assert {p["document_format"] for p in seen} >= {"pdf", "docx", "pptx", "html"}
    assert all(p["metadata"] == REAL_METADATA for p in seen)
    lighthouse = next(p for p in seen if p["document_format"] == "pdf")
    assert lighthouse["boxes"] and lighthouse["copies"], lighthouse  # the second upload, folded in
    assert {lighthouse["filename"], lighthouse["copies"][0]["filename"]} == {"lighthouses.pdf", "lighthouses-again.pdf"}
    assert any(p["anchor"] for p in seen if p["document_format"] in ("docx", "html"))


BAD_FILTER = {"orAll": [{"equals": {"key": "customer", "value": "x"}}]}  # orAll needs two or more


def test_a_bad_filter_raises_the_typed_error_with_its_json_path(
    client: OfflineClient, documents: dict[str, str]
) -> None:
    calls = [
        lambda: langchain(client, filter=BAD_FILTER).invoke(QUERY),
        lambda: asyncio.run(langchain(client, filter=BAD_FILTER).ainvoke(QUERY)),
        lambda: llamaindex(client, filter=BAD_FILTER).retrieve(QUERY),
        lambda: asyncio.run(llamaindex(client, filter=BAD_FILTER).aretrieve(QUERY)),
    ]
    for call in calls:
        with pytest.raises(ApiError) as raised:
            call()
        assert (raised.value.status, raised.value.code) == (400, "INVALID_REQUEST")
        assert raised.value.message.startswith("filter.orAll: "), raised.value.message


def test_a_token_the_api_refuses_raises_instead_of_returning_nothing(
    client: OfflineClient, documents: dict[str, str]
) -> None:
    with pytest.raises(ApiError) as raised:
        lc.RagIngestRetriever(api_url=client.api_url, token="not-a-token").invoke(QUERY)
    assert raised.value.status == 401
    with pytest.raises(ApiError) as raised:
        li.RagIngestRetriever(client.api_url, "not-a-token", k=1).retrieve(QUERY)
    assert raised.value.status == 401


@pytest.mark.parametrize("example", ["langchain_rag.py", "llamaindex_rag.py"])
def test_the_documented_examples_run_against_the_stack(
    client: OfflineClient, documents: dict[str, str], example: str
) -> None:
    """docs/integrations.md's two applications, as files (tests/unit/test_integrations.py holds
    the doc to them): offline they print the passages, then the prompt an LLM would get."""
    env = {
        **os.environ,
        "RAG_INGEST_API_URL": client.api_url,
        "RAG_INGEST_TOKEN": client.token(),
        "CUSTOMER": CUSTOMER,
    }
    env.pop("BEDROCK_MODEL_ID", None)
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / example)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    passages = [re.fullmatch(r"(\d\.\d{4}) (\S+) pp\. (\d+)-(\d+)", line) for line in lines[:3]]
    assert all(passages), lines[:3]
    first = passages[0]
    assert first is not None and first.group(2) == "lighthouses.pdf" and int(first.group(3)) <= 3 <= int(first.group(4))
    scores = [float(match.group(1)) for match in passages if match]
    assert scores == sorted(scores, reverse=True)
    prompt = "\n".join(lines[3:])
    assert prompt.startswith(("System: Answer from the context only", "Answer from the context only"))
    assert "In 1822 the French engineer Augustin Fresnel" in prompt
    assert "Who made the lens that lighthouses use, and when?" in lines[-1]
    assert "sourdough" not in prompt.lower()  # another customer's document
