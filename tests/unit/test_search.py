"""Reciprocal rank fusion and the POST /search request model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from rag_ingest.errors import PermanentError
from rag_ingest.models import SearchHit
from rag_ingest.search import (
    RRF_RANK_CONSTANT,
    SearchMode,
    SearchRequest,
    candidates_for,
    reciprocal_rank_fusion,
    search_passages,
)

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
