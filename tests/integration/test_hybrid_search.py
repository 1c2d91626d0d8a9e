"""Hybrid, k-NN and BM25 search against the real OpenSearch: modes, fusion, highlights and tenant
isolation, on an index of the test's own (deleted afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.retrieval.query import Expand, SearchQuery
from rag_ingest.retrieval.search import DEFAULT_FUSION, SearchMode, SearchRequest, SearchService, search_passages

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"
TENANT_A = f"tenant-a-{uuid.uuid4().hex[:6]}"
TENANT_B = f"tenant-b-{uuid.uuid4().hex[:6]}"
# tenant A owns two documents, tenant B one (which A must never see, and the reverse).
DOCUMENTS = {TENANT_A: ["lighthouses.pdf", "grfguide.pdf"], TENANT_B: ["sourdough.pdf"]}


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION)


@pytest.fixture(scope="module")
def store(embedder: Embedder) -> Iterator[VectorStore]:
    settings = IndexSettings(name=f"test-hybrid-{uuid.uuid4().hex[:8]}", dimension=MINILM_DIMENSION)
    store = VectorStore(connect(URL), settings)
    store.ensure_index()
    try:
        for tenant, names in DOCUMENTS.items():
            for name in names:
                path = SAMPLES / name if (SAMPLES / name).exists() else CORPUS / name
                pages = parse_pdf(path.read_bytes(), max_bytes=50_000_000, max_pages=100).pages
                chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)
                store.write_chunks(
                    DocumentStamp(tenant, path.stem, "v1", filename=name),
                    chunks,
                    embedder.embed([chunk.text for chunk in chunks]),
                )
        yield store
    finally:
        store.drop_index()


def test_the_vector_is_indexed_for_knn_but_not_kept_in_source(store: VectorStore, embedder: Embedder) -> None:
    [hit] = store.knn_search(SearchQuery(tenant_id=TENANT_A, text=""), embedder.embed(["Fresnel lens"])[0], k=1)
    stored = connect(URL).get(index=store.index_name, id=hit.chunk_id)["_source"]
    assert "embedding" not in stored
    assert stored["text"] == hit.text and stored["tenant_id"] == TENANT_A


@pytest.mark.parametrize("mode", list(SearchMode))
def test_each_mode_finds_the_page_that_answers(store: VectorStore, embedder: Embedder, mode: SearchMode) -> None:
    query = "How was the Fresnel lens made from rings of glass prisms?"
    hits = search_passages(store, embedder, SearchQuery(tenant_id=TENANT_A, text=query, mode=mode))
    assert hits, mode
    top = hits[0]
    assert (top.filename, top.document_id) == ("lighthouses.pdf", "lighthouses")
    assert top.page_start <= 3 <= top.page_end  # "Fresnel and the Lens" is page 3
    assert top.heading_path == ("Fresnel and the Lens",)
    if mode is not SearchMode.HYBRID:
        assert top.retrieved_by == (mode.value,)


def test_hybrid_fuses_both_retrievers_and_scores_by_reciprocal_rank(store: VectorStore, embedder: Embedder) -> None:
    hits = search_passages(store, embedder, SearchQuery(tenant_id=TENANT_A, text="define a named colour", k=5))
    assert len(hits) == 5
    assert any(set(hit.retrieved_by) == {"bm25", "knn"} for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    # RRF: at most weight / (constant + 1) per retriever
    best = (DEFAULT_FUSION.bm25_weight + DEFAULT_FUSION.knn_weight) / (DEFAULT_FUSION.rank_constant + 1)
    assert all(0 < hit.score <= best for hit in hits)


def test_highlights_mark_query_words_in_bm25_and_knn_hits(store: VectorStore, embedder: Embedder) -> None:
    [bm25] = search_passages(
        store, embedder, SearchQuery(tenant_id=TENANT_A, text="keeper candles", k=1, mode=SearchMode.BM25)
    )
    [knn] = search_passages(
        store, embedder, SearchQuery(tenant_id=TENANT_A, text="keeper candles", k=1, mode=SearchMode.KNN)
    )
    for hit in (bm25, knn):
        assert hit.highlights, hit.retrieved_by
        assert any("<em>" in fragment for fragment in hit.highlights)


def test_a_tenant_never_sees_another_tenants_passages(store: VectorStore, embedder: Embedder) -> None:
    sourdough_query = "How do I feed a sourdough starter?"
    for mode in SearchMode:
        a_hits = search_passages(
            store, embedder, SearchQuery(tenant_id=TENANT_A, text=sourdough_query, k=50, mode=mode)
        )
        b_hits = search_passages(
            store, embedder, SearchQuery(tenant_id=TENANT_B, text=sourdough_query, k=50, mode=mode)
        )
        assert {hit.filename for hit in a_hits} <= {"lighthouses.pdf", "grfguide.pdf"}, mode
        assert {hit.filename for hit in b_hits} == {"sourdough.pdf"}, mode
    stranger = search_passages(store, embedder, SearchQuery(tenant_id="nobody", text=sourdough_query, k=50))
    assert stranger == []


def test_missing_index_is_an_empty_result(embedder: Embedder) -> None:
    settings = IndexSettings(name=f"test-absent-{uuid.uuid4().hex[:8]}", dimension=MINILM_DIMENSION)
    absent = VectorStore(connect(URL), settings)
    assert search_passages(absent, embedder, SearchQuery(tenant_id=TENANT_A, text="anything")) == []


def test_search_service_answers_with_passage_views(store: VectorStore, embedder: Embedder) -> None:
    service = SearchService(store=lambda: store, embedder=lambda: embedder)
    request = SearchRequest(query="rotate a box about its centre", k=3, mode=SearchMode.HYBRID, expand=Expand.NONE)
    response = service.search(TENANT_A, request)
    assert response.mode is SearchMode.HYBRID and len(response.passages) == 3
    top = response.passages[0].model_dump()
    assert set(top) == {
        "chunk_id", "document_id", "filename", "page_start", "page_end", "heading_path",
        "document_format", "anchor", "paragraph_index", "boxes", "figure_sources", "cell_range",
        "score", "text", "highlights", "retrieved_by", "copies", "metadata", "source_uri",
        "expanded", "chunk_ids", "truncated",
    }  # fmt: skip
    assert top["filename"] == "grfguide.pdf" and top["document_format"] == "pdf" and top["anchor"] is None
    # BM25 alone never loads the embedding model.
    bm25_only = SearchService(store=lambda: store, embedder=lambda: pytest.fail("embedder loaded for BM25"))
    assert bm25_only.search(TENANT_A, SearchRequest(query="rotate", mode=SearchMode.BM25)).passages


def test_the_same_pdf_uploaded_twice_is_returned_once_with_its_copy_named(
    store: VectorStore, embedder: Embedder
) -> None:
    tenant = f"tenant-c-{uuid.uuid4().hex[:6]}"
    pages = parse_pdf((SAMPLES / "lighthouses.pdf").read_bytes(), max_bytes=50_000_000, max_pages=100).pages
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)
    vectors = embedder.embed([chunk.text for chunk in chunks])
    for document_id, filename in (("lighthouses", "lighthouses.pdf"), ("lighthouses-2", "copy of lighthouses.pdf")):
        store.write_chunks(DocumentStamp(tenant, document_id, "v1", filename=filename), chunks, vectors)
    assert len(chunks) >= 3
    for mode in SearchMode:
        hits = search_passages(
            store, embedder, SearchQuery(tenant_id=tenant, text="Fresnel lens glass prisms", k=2, mode=mode)
        )
        # Two distinct passages: BM25 finds these words in two of the PDF's chunks, each indexed twice.
        assert len(hits) == 2, mode
        assert len({hit.text for hit in hits}) == 2, mode
        for hit in hits:
            [copy] = hit.copies
            assert {hit.document_id, copy.document_id} == {"lighthouses", "lighthouses-2"}, mode
            assert (copy.page_start, copy.page_end) == (hit.page_start, hit.page_end)


def test_a_search_looks_deeper_when_copies_fill_its_first_candidates(store: VectorStore, embedder: Embedder) -> None:
    """Eight uploads of one PDF: the first 20 candidates hold only two or three texts, so the search
    asks again deeper and still returns k distinct passages, each naming copies found with it."""
    tenant = f"tenant-d-{uuid.uuid4().hex[:6]}"
    pages = parse_pdf((CORPUS / "grfguide.pdf").read_bytes(), max_bytes=50_000_000, max_pages=100).pages
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)
    vectors = embedder.embed([chunk.text for chunk in chunks])
    uploads = [f"grfguide-{n}" for n in range(8)]
    for document_id in uploads:
        store.write_chunks(DocumentStamp(tenant, document_id, "v1", filename=f"{document_id}.pdf"), chunks, vectors)
    assert len({chunk.text for chunk in chunks}) >= 6
    for mode in (SearchMode.KNN, SearchMode.HYBRID):
        hits = search_passages(
            store, embedder, SearchQuery(tenant_id=tenant, text="rotate the graph axes", k=5, mode=mode)
        )
        assert len({hit.text for hit in hits}) == 5, mode
        for hit in hits:
            documents = [hit.document_id, *(copy.document_id for copy in hit.copies)]
            assert len(set(documents)) == len(documents) > 1 and set(documents) <= set(uploads), mode
            if mode is SearchMode.KNN:  # 40 candidates: five texts, all eight uploads of each
                assert sorted(documents) == uploads
