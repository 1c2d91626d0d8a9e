"""Reciprocal rank fusion and the POST /search request model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from rag_ingest.errors import PermanentError
from rag_ingest.models import PassageCopy, SearchHit
from rag_ingest.search import (
    RRF_RANK_CONSTANT,
    PassageView,
    SearchMode,
    SearchRequest,
    candidates_for,
    collapse_copies,
    reciprocal_rank_fusion,
    search_passages,
)

from tests.support.fakes import CountingEmbedder

pytestmark = pytest.mark.unit


def hit(chunk_id: str, retriever: str, highlights: tuple[str, ...] = ()) -> SearchHit:
    return SearchHit(
        chunk_id=chunk_id,
        score=99.0,
        document_id="d",
        page_start=1,
        page_end=1,
        text=chunk_id,
        highlights=highlights,
        retrieved_by=(retriever,),
    )


def test_rrf_rewards_agreement_between_retrievers() -> None:
    bm25 = [hit("a", "bm25"), hit("b", "bm25"), hit("c", "bm25")]
    knn = [hit("c", "knn"), hit("d", "knn"), hit("b", "knn")]
    fused = reciprocal_rank_fusion([bm25, knn], k=4)
    assert [h.chunk_id for h in fused] == ["c", "b", "a", "d"]
    assert fused[0].score == pytest.approx(1 / (RRF_RANK_CONSTANT + 3) + 1 / (RRF_RANK_CONSTANT + 1))
    assert fused[0].retrieved_by == ("bm25", "knn")
    assert fused[2].retrieved_by == ("bm25",)


def test_rrf_ties_keep_the_first_lists_order_and_k_cuts() -> None:
    fused = reciprocal_rank_fusion([[hit("a", "bm25")], [hit("b", "knn")]], k=1)
    assert [h.chunk_id for h in fused] == ["a"]


def test_rrf_keeps_highlights_from_whichever_retriever_has_them() -> None:
    fused = reciprocal_rank_fusion([[hit("a", "bm25")], [hit("a", "knn", ("<em>x</em>",))]], k=1)
    assert fused[0].highlights == ("<em>x</em>",)


def test_candidate_depth_grows_with_k_within_bounds() -> None:
    assert candidates_for(1) == 20
    assert candidates_for(10) == 40
    assert candidates_for(50) == 100


def test_request_defaults() -> None:
    request = SearchRequest(query="  what is a factor?  ")
    assert (request.query, request.k, request.mode) == ("what is a factor?", 5, SearchMode.HYBRID)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": ""},
        {"query": "   "},
        {"query": "x" * 1001},
        {"query": "q", "k": 0},
        {"query": "q", "k": 51},
        {"query": "q", "k": "5"},
        {"query": "q", "k": 2.5},
        {"query": "q", "mode": "semantic"},
        {"query": "q", "tenant_id": "someone-else"},
    ],
)
def test_bad_requests_are_rejected(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SearchRequest.model_validate(body)


def test_search_refuses_a_missing_tenant_before_any_query() -> None:
    with pytest.raises(PermanentError, match="tenant"):
        search_passages(None, None, tenant_id="", query="q")  # type: ignore[arg-type]


def passage(chunk_id: str, text: str, document_id: str = "d", retriever: str = "bm25") -> SearchHit:
    return SearchHit(
        chunk_id=chunk_id, score=1.0, document_id=document_id, page_start=1, page_end=2, text=text,
        filename=f"{document_id}.pdf", retrieved_by=(retriever,),
    )  # fmt: skip


def test_collapse_keeps_the_best_ranked_passage_of_a_text_and_names_the_others() -> None:
    hits = [
        passage("a:1", "The keeper lit  the lamp.", "a"),
        passage("b:7", "Something else entirely.", "b"),
        passage("c:1", "the keeper lit the\nlamp.", "c"),  # same text: case and white space differ
        passage("a:9", "The keeper lit the lamp.", "a"),  # repeated inside a document
    ]
    collapsed = collapse_copies(hits)
    assert [h.chunk_id for h in collapsed] == ["a:1", "b:7"]
    assert collapsed[0].copies == (
        PassageCopy("c:1", "c", "c.pdf", 1, 2),
        PassageCopy("a:9", "a", "a.pdf", 1, 2),
    )
    assert collapsed[1].copies == ()
    assert collapse_copies([]) == []


class DuplicatingRetriever:
    """Every passage is indexed twice (the same PDF uploaded under two names): ranks alternate copies."""

    def __init__(self, distinct: int) -> None:
        self.texts = [f"passage number {i} about lighthouses" for i in range(distinct)]
        self.depths: list[int] = []

    def _hits(self, k: int, retriever: str) -> list[SearchHit]:
        self.depths.append(k)
        ranked = [
            passage(f"{doc}:{i}", text, doc, retriever)
            for i, text in enumerate(self.texts)
            for doc in ("original", "renamed-copy")
        ]
        return ranked[:k]

    def knn_search(
        self, *, tenant_id: str, vector: object, k: int = 5, highlight_text: str | None = None
    ) -> list[SearchHit]:
        return self._hits(k, "knn")

    def bm25_search(self, *, tenant_id: str, query: str, k: int = 5) -> list[SearchHit]:
        return self._hits(k, "bm25")


@pytest.mark.parametrize("mode", list(SearchMode))
def test_every_mode_returns_k_distinct_texts_when_every_passage_has_a_copy(mode: SearchMode) -> None:
    store = DuplicatingRetriever(distinct=30)
    hits = search_passages(store, CountingEmbedder(), tenant_id="t", query="lighthouses", k=5, mode=mode)  # type: ignore[arg-type]
    assert len(hits) == 5
    assert len({h.text for h in hits}) == 5
    assert all(h.document_id == "original" for h in hits)
    assert all([c.document_id for c in h.copies] == ["renamed-copy"] for h in hits)
    assert all(depth == candidates_for(5) for depth in store.depths)


def test_the_api_view_lists_the_copies() -> None:
    [hit] = collapse_copies([passage("a:1", "same", "a"), passage("b:1", "same", "b")])
    view = PassageView.of(hit).model_dump()
    assert view["copies"] == [
        {"chunk_id": "b:1", "document_id": "b", "filename": "b.pdf", "page_start": 1, "page_end": 2}
    ]
    assert PassageView.of(passage("c:1", "alone", "c")).model_dump()["copies"] == []
