"""Metadata filters against the real OpenSearch: every operator's query gives what the in-code
evaluation says (rag_ingest.core.filters.matches), inside both legs; a selective filter (1 % of
the chunks) still returns k passages from k-NN and BM25; metadata of one key with different types
never conflicts; an index created before metadata existed takes it after ``ensure_index``.

Runs against ``$OPENSEARCH_URL`` (default http://127.0.0.1:9200), on indexes of its own (deleted
afterwards); fails (does not skip) without a server.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.core.filters import matches, parse_filter
from rag_ingest.core.ids import chunk_id
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp
from rag_ingest.retrieval.query import SearchQuery

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
DIM = 16
TENANT = f"filters-{uuid.uuid4().hex[:6]}"
OTHER_TENANT = f"filters-other-{uuid.uuid4().hex[:6]}"
DOCUMENTS = 100  # 6 chunks each: 600 chunks
CHUNKS_PER_DOCUMENT = 6
SELECTIVE = {"equals": {"key": "customer", "value": "needle"}}  # 1 document of 100: 6 chunks, 1 %
CREATED_AT = "2026-12-01T05:00:00.000+00:00"


def _metadata(n: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "customer": "needle" if n == 37 else ("acme" if n % 2 else "globex"),
        "year": 2000 + n % 25,
        "score": n / 100,
        "signed": n % 3 == 0,
        "signed_on": f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}",
        "tags": [f"t{n % 5}", f"t{n % 7}"],
        "title": f"Contract {n} of Example & Co",
    }
    if n % 10 == 0:
        metadata["priority"] = "high"  # a string here...
    elif n % 10 == 1:
        metadata["priority"] = 3  # ...and a number on other documents: no conflict
    if n % 4 == 0:
        del metadata["score"]  # some documents lack a key
    return metadata


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(DIM)]


class Corpus:
    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self.fields: dict[str, dict[str, Any]] = {}  # chunk id -> what matches() reads


@pytest.fixture(scope="module")
def corpus() -> Iterator[Corpus]:
    settings = IndexSettings(name=f"test-filters-{uuid.uuid4().hex[:8]}", dimension=DIM)
    store = VectorStore(connect(URL), settings)
    store.ensure_index()
    corpus = Corpus(store)
    rng = random.Random(20261201)
    try:
        for n in range(DOCUMENTS):
            document_id = f"doc-{n:03d}"
            chunks = [
                Chunk(
                    chunk_index=i,
                    text=f"lease clause {i} of document {n} common",
                    page_start=1 + 2 * i,
                    page_end=2 + 2 * i if i % 2 else 1 + 2 * i,
                    char_start=0,
                    char_end=10,
                    token_count=5,
                )
                for i in range(CHUNKS_PER_DOCUMENT)
            ]
            metadata = _metadata(n)
            store.write_chunks(
                DocumentStamp(
                    TENANT,
                    document_id,
                    "v1",
                    filename=f"contract-{n:03d}.pdf",
                    metadata=metadata,
                    created_at=f"2026-12-{1 + n % 28:02d}T05:00:00.000+00:00",
                ),
                chunks,
                [_vector(rng) for _ in chunks],
            )
            for chunk in chunks:
                corpus.fields[chunk_id(document_id, "v1", chunk.chunk_index)] = {
                    "document_id": document_id,
                    "filename": f"contract-{n:03d}.pdf",
                    "created_at": f"2026-12-{1 + n % 28:02d}T05:00:00.000+00:00",
                    "content_type": "application/pdf",
                    "page_start": chunk.page_start,
                    "page_end": chunk.page_end,
                    "metadata": metadata,
                }
        # Another tenant's needle: never found.
        store.write_chunks(
            DocumentStamp(
                OTHER_TENANT,
                "other-needle",
                "v1",
                filename="x.pdf",
                metadata={"customer": "needle"},
                created_at=CREATED_AT,
            ),
            [
                Chunk(
                    chunk_index=0,
                    text="lease common",
                    page_start=1,
                    page_end=1,
                    char_start=0,
                    char_end=5,
                    token_count=2,
                )
            ],
            [_vector(rng)],
        )
        yield corpus
    finally:
        store.drop_index()


FILTERS: list[dict[str, Any]] = [
    {"equals": {"key": "customer", "value": "acme"}},
    {"equals": {"key": "year", "value": 2010}},
    {"equals": {"key": "signed", "value": True}},
    {"equals": {"key": "priority", "value": "high"}},
    {"equals": {"key": "priority", "value": 3}},
    {"equals": {"key": "signed_on", "value": "2024-03-03"}},
    {"notEquals": {"key": "customer", "value": "acme"}},
    {"notEquals": {"key": "priority", "value": 3}},
    {"greaterThan": {"key": "year", "value": 2020}},
    {"greaterThanOrEquals": {"key": "score", "value": 0.5}},
    {"lessThan": {"key": "score", "value": 0.1}},
    {"lessThanOrEquals": {"key": "year", "value": 2003}},
    {"greaterThan": {"key": "signed_on", "value": "2024-10-15"}},
    {"lessThan": {"key": "signed_on", "value": "2024-02-01T00:00:00Z"}},
    {"in": {"key": "customer", "value": ["needle", "globex"]}},
    {"in": {"key": "year", "value": [2001, 2002]}},
    {"notIn": {"key": "tags", "value": ["t1", "t2"]}},
    {"startsWith": {"key": "filename", "value": "contract-01"}},
    {"startsWith": {"key": "title", "value": "Contract 9"}},
    {"listContains": {"key": "tags", "value": "t3"}},
    {"stringContains": {"key": "title", "value": "7 of Example & Co"}},
    {"stringContains": {"key": "filename", "value": "-04"}},
    {"equals": {"key": "document_id", "value": "doc-042"}},
    {"in": {"key": "document_id", "value": ["doc-001", "doc-002"]}},
    {"equals": {"key": "content_type", "value": "application/pdf"}},
    {"greaterThanOrEquals": {"key": "created_at", "value": "2026-12-20"}},
    {"equals": {"key": "page", "value": 4}},
    {"notEquals": {"key": "page", "value": 1}},
    {"greaterThan": {"key": "page", "value": 9}},
    {"lessThanOrEquals": {"key": "page", "value": 3}},
    {"in": {"key": "page", "value": [2, 12]}},
    {"andAll": [{"equals": {"key": "customer", "value": "acme"}}, {"greaterThan": {"key": "year", "value": 2015}}]},
    {
        "orAll": [
            {"equals": {"key": "signed", "value": False}},
            {"andAll": [{"listContains": {"key": "tags", "value": "t0"}}, {"equals": {"key": "page", "value": 5}}]},
        ]
    },
    {"equals": {"key": "missing_key", "value": "x"}},
]


@pytest.mark.parametrize("raw", FILTERS, ids=lambda raw: str(raw)[:90])
def test_each_operator_selects_what_the_in_code_evaluation_selects(corpus: Corpus, raw: dict[str, Any]) -> None:
    where = parse_filter(raw)
    expected = {i for i, fields in corpus.fields.items() if matches(where, fields)}
    found = {
        hit.chunk_id
        for hit in corpus.store.bm25_search(SearchQuery(tenant_id=TENANT, text="common", where=where), k=1000)
    }
    assert found == expected
    # k-NN with a k past the corpus: the filtered leg holds exactly the matches too.
    knn = corpus.store.knn_search(
        SearchQuery(tenant_id=TENANT, text="", where=where), [0.5] * DIM, k=len(corpus.fields)
    )
    assert {hit.chunk_id for hit in knn} == expected


@pytest.mark.parametrize("k", [1, 3, 6])
def test_a_selective_filter_still_returns_k_from_both_legs(corpus: Corpus, k: int) -> None:
    where = parse_filter(SELECTIVE)
    needles = {i for i, fields in corpus.fields.items() if matches(where, fields)}
    assert len(needles) == CHUNKS_PER_DOCUMENT and len(needles) / len(corpus.fields) == 0.01
    rng = random.Random(k)
    for _ in range(5):
        knn = corpus.store.knn_search(SearchQuery(tenant_id=TENANT, text="", where=where), _vector(rng), k=k)
        assert len(knn) == k and {hit.chunk_id for hit in knn} <= needles
    bm25 = corpus.store.bm25_search(SearchQuery(tenant_id=TENANT, text="lease clause", where=where), k=k)
    assert len(bm25) == k and {hit.chunk_id for hit in bm25} <= needles
    assert all(hit.metadata == _metadata(37) for hit in [*knn, *bm25])  # the passages carry it back
    # A post-filter would have found (almost) nothing: the unfiltered top k are mostly other chunks.
    unfiltered = corpus.store.knn_search(SearchQuery(tenant_id=TENANT, text=""), _vector(rng), k=k)
    assert len({hit.chunk_id for hit in unfiltered} - needles) >= k - 1


def test_the_hybrid_search_filters_both_legs(corpus: Corpus) -> None:
    from rag_ingest.retrieval.search import search_passages

    class Embedder:
        model_id, dimension, max_input_tokens = "fixed", DIM, 512

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[0.25] * DIM for _ in texts]

    hits = search_passages(
        corpus.store, Embedder(), SearchQuery(tenant_id=TENANT, text="lease clause", k=6, where=parse_filter(SELECTIVE))
    )
    assert len(hits) == 6 and {hit.document_id for hit in hits} == {"doc-037"}
    assert any(set(hit.retrieved_by) == {"bm25", "knn"} for hit in hits)


def test_an_index_made_before_metadata_takes_it_after_ensure_index() -> None:
    name = f"test-filters-old-{uuid.uuid4().hex[:8]}"
    store = VectorStore(connect(URL), IndexSettings(name=name, dimension=DIM))
    client = connect(URL)
    old = store.mapping()
    del old["mappings"]["dynamic_templates"]
    for field in ("metadata", "created_at", "content_type"):
        del old["mappings"]["properties"][field]
    client.indices.create(index=name, body=old)
    try:
        chunk = Chunk(
            chunk_index=0, text="old chunk common", page_start=1, page_end=1, char_start=0, char_end=5, token_count=3
        )
        client.index(
            index=name,
            id="old:0",
            body={"tenant_id": TENANT, "document_id": "old", "version": "x", "chunk_index": 0, "page_start": 1,
                  "page_end": 1, "heading_path": [], "filename": "old.pdf", "text": "old chunk common",
                  "embedding": [0.1] * DIM},
            refresh=True,
        )  # fmt: skip
        store.ensure_index()
        mapping = client.indices.get_mapping(index=name)[name]["mappings"]
        assert mapping["dynamic_templates"] and "metadata" in mapping["properties"]
        store.write_chunks(
            DocumentStamp(
                TENANT,
                "new",
                "v1",
                filename="new.pdf",
                metadata={"customer": "acme", "year": 2024, "when": "2024-05-01"},
                created_at=CREATED_AT,
            ),
            [chunk],
            [[0.2] * DIM],
        )
        types = client.indices.get_mapping(index=name)[name]["mappings"]["properties"]["metadata"]["properties"]
        assert types["s"]["properties"]["customer"]["type"] == "keyword"
        assert types["n"]["properties"]["year"]["type"] == "double"
        assert types["d"]["properties"]["when"]["type"] == "date"

        def ids(raw: dict[str, Any]) -> set[str]:
            hits = store.bm25_search(SearchQuery(tenant_id=TENANT, text="common", where=parse_filter(raw)), k=10)
            return {hit.document_id for hit in hits}

        assert ids({"equals": {"key": "customer", "value": "acme"}}) == {"new"}
        assert ids({"greaterThan": {"key": "when", "value": "2024-04-30"}}) == {"new"}
        # A chunk written before content_type was indexed is a PDF (every upload was).
        assert ids({"equals": {"key": "content_type", "value": "application/pdf"}}) == {"old", "new"}
        assert ids({"notEquals": {"key": "customer", "value": "acme"}}) == {"old"}
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)
