"""Reciprocal rank fusion (weighted), its settings, and the POST /search request model."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest
from aws_xray_sdk.core.context import Context
from aws_xray_sdk.core.exceptions.exceptions import SegmentNotFoundException
from aws_xray_sdk.core.recorder import AWSXRayRecorder
from aws_xray_sdk.sdk_config import SDKConfig
from pydantic import ValidationError
from rag_ingest.core.config import FusionEnv, IndexParamsEnv
from rag_ingest.core.errors import ConfigurationError, PermanentError, TransientError
from rag_ingest.core.tracing import in_callers_trace, tracer
from rag_ingest.retrieval.hits import PassageCopy, SearchHit
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import (
    DEFAULT_FUSION,
    RRF_RANK_CONSTANT,
    FusionSettings,
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
    assert candidates_for(10) == 20
    assert candidates_for(25) == 50
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
        search_passages(None, None, SearchQuery(tenant_id="", text="q"))  # type: ignore[arg-type]


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
    """Every passage is indexed ``copies`` times (the same PDF uploaded under other names): the
    copies of a text rank next to each other."""

    def __init__(self, distinct: int, copies: int = 2) -> None:
        self.texts = [f"passage number {i} about lighthouses" for i in range(distinct)]
        self.documents = ["original", "renamed-copy", *(f"copy-{n}" for n in range(2, copies))]
        self.depths: list[int] = []

    def _hits(self, k: int, retriever: str) -> list[SearchHit]:
        self.depths.append(k)
        ranked = [
            passage(f"{doc}:{i}", text, doc, retriever) for i, text in enumerate(self.texts) for doc in self.documents
        ]
        return ranked[:k]

    def knn_search(self, query: SearchQuery, vector: object, *, k: int) -> list[SearchHit]:
        return self._hits(k, "knn")

    def bm25_search(self, query: SearchQuery, *, k: int) -> list[SearchHit]:
        return self._hits(k, "bm25")


@pytest.mark.parametrize("mode", list(SearchMode))
def test_every_mode_returns_k_distinct_texts_when_every_passage_has_a_copy(mode: SearchMode) -> None:
    store = DuplicatingRetriever(distinct=30)
    hits = search_passages(store, CountingEmbedder(), SearchQuery(tenant_id="t", text="lighthouses", k=5, mode=mode))  # type: ignore[arg-type]
    assert len(hits) == 5
    assert len({h.text for h in hits}) == 5
    assert all(h.document_id == "original" for h in hits)
    assert all([c.document_id for c in h.copies] == ["renamed-copy"] for h in hits)
    assert all(depth == candidates_for(5) for depth in store.depths)


@pytest.mark.parametrize("mode", list(SearchMode))
def test_a_search_looks_deeper_when_copies_leave_fewer_than_k_texts(mode: SearchMode) -> None:
    store = DuplicatingRetriever(distinct=30, copies=5)
    hits = search_passages(store, CountingEmbedder(), SearchQuery(tenant_id="t", text="lighthouses", k=10, mode=mode))  # type: ignore[arg-type]
    assert [h.text for h in hits] == store.texts[:10]
    assert all(len(h.copies) == 4 for h in hits)
    # 20 candidates hold 4 texts, 40 hold 8, 80 hold 16: each pass twice as deep, each leg alike.
    legs = 2 if mode is SearchMode.HYBRID else 1
    assert store.depths == [depth for depth in (20, 40, 80) for _ in range(legs)]


def test_a_deeper_search_stops_at_the_maximum_depth() -> None:
    store = DuplicatingRetriever(distinct=30, copies=10)
    hits = search_passages(store, CountingEmbedder(), SearchQuery(tenant_id="t", text="q", k=20, mode=SearchMode.KNN))  # type: ignore[arg-type]
    assert store.depths == [40, 80, 100]
    assert len(hits) == 10  # 100 candidates hold 10 texts: as many as there are, not an error


def test_a_search_does_not_look_deeper_when_the_tenant_has_nothing_more() -> None:
    store = DuplicatingRetriever(distinct=3, copies=2)
    hits = search_passages(store, CountingEmbedder(), SearchQuery(tenant_id="t", text="q", k=10))  # type: ignore[arg-type]
    assert len(hits) == 3
    assert store.depths == [20, 20]  # one pass: neither leg filled its 20


def test_the_api_view_lists_the_copies() -> None:
    [hit] = collapse_copies([passage("a:1", "same", "a"), passage("b:1", "same", "b")])
    view = PassageView.of(hit).model_dump()
    assert view["copies"] == [
        {"chunk_id": "b:1", "document_id": "b", "filename": "b.pdf", "page_start": 1, "page_end": 2}
    ]
    assert PassageView.of(passage("c:1", "alone", "c")).model_dump()["copies"] == []


def test_weighted_rrf_scales_each_lists_contribution() -> None:
    bm25 = [hit("a", "bm25"), hit("b", "bm25")]
    knn = [hit("b", "knn"), hit("a", "knn")]
    fused = reciprocal_rank_fusion([bm25, knn], k=2, weights=(0.5, 2.0), rank_constant=10)
    assert [h.chunk_id for h in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx(0.5 / 12 + 2.0 / 11)
    assert fused[1].score == pytest.approx(0.5 / 11 + 2.0 / 12)


def test_a_list_of_weight_zero_orders_nothing_but_still_adds_its_hits() -> None:
    fused = reciprocal_rank_fusion([[hit("a", "bm25"), hit("b", "bm25")], [hit("c", "knn")]], k=3, weights=(0, 1))
    assert [h.chunk_id for h in fused] == ["c", "a", "b"]
    assert [h.score for h in fused[1:]] == [0.0, 0.0]


def test_rrf_needs_one_weight_per_list() -> None:
    with pytest.raises(ValueError, match="weights"):
        reciprocal_rank_fusion([[hit("a", "bm25")], [hit("a", "knn")]], k=1, weights=(1.0,))


@pytest.mark.parametrize(
    "settings",
    [
        {"bm25_weight": -1.0},
        {"bm25_weight": 0.0, "knn_weight": 0.0},
        {"rank_constant": -1},
        {"min_candidates": 0},
        {"min_candidates": 101},
        {"candidates_per_result": 0},
    ],
)
def test_fusion_settings_refuse_what_cannot_rank(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        FusionSettings(**settings)  # type: ignore[arg-type]


def test_fusion_settings_set_each_legs_depth() -> None:
    fusion = FusionSettings(min_candidates=10, candidates_per_result=3)
    assert [fusion.candidates_for(k) for k in (1, 5, 50)] == [10, 15, 100]
    assert candidates_for(7) == DEFAULT_FUSION.candidates_for(7)


class RecordingRetriever(DuplicatingRetriever):
    def __init__(self) -> None:
        super().__init__(distinct=3)
        self.texts = ["alpha", "beta", "gamma"]

    def knn_search(self, query: SearchQuery, vector: object, *, k: int) -> list[SearchHit]:
        return list(reversed(self._hits(k, "knn")))


def test_hybrid_search_fuses_with_the_given_weights_and_depth() -> None:
    store = RecordingRetriever()
    knn_led = FusionSettings(bm25_weight=0.1, knn_weight=1.0, min_candidates=4, candidates_per_result=1)
    hits = search_passages(store, CountingEmbedder(), SearchQuery(tenant_id="t", text="q", k=2), fusion=knn_led)  # type: ignore[arg-type]
    assert store.depths == [4, 4]
    # k-NN's list is BM25's reversed: with BM25 weighted down, k-NN's order wins.
    assert [h.text for h in hits] == ["beta", "alpha"]
    bm25_led = FusionSettings(bm25_weight=1.0, knn_weight=0.1, min_candidates=4, candidates_per_result=1)
    hits = search_passages(store, CountingEmbedder(), SearchQuery(tenant_id="t", text="q", k=2), fusion=bm25_led)  # type: ignore[arg-type]
    assert [h.text for h in hits] == ["alpha", "beta"]


def test_fusion_comes_from_the_environment_with_the_tuned_defaults() -> None:
    assert FusionEnv.from_env({}).fusion == DEFAULT_FUSION
    env = FusionEnv.from_env(
        {
            "SEARCH_BM25_WEIGHT": "0.5",
            "SEARCH_KNN_WEIGHT": "2",
            "SEARCH_RRF_RANK_CONSTANT": "10",
            "SEARCH_MIN_CANDIDATES": "30",
            "SEARCH_CANDIDATES_PER_RESULT": "3",
        }
    )
    assert env.fusion == FusionSettings(
        bm25_weight=0.5, knn_weight=2.0, rank_constant=10, min_candidates=30, candidates_per_result=3
    )


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"SEARCH_BM25_WEIGHT": "-1"}, "SEARCH_BM25_WEIGHT"),
        ({"SEARCH_KNN_WEIGHT": "heavy"}, "SEARCH_KNN_WEIGHT"),
        ({"SEARCH_BM25_WEIGHT": "0", "SEARCH_KNN_WEIGHT": "0"}, "cannot both be 0"),
        ({"SEARCH_RRF_RANK_CONSTANT": "-5"}, "SEARCH_RRF_RANK_CONSTANT"),
        ({"SEARCH_MIN_CANDIDATES": "500"}, "SEARCH_MIN_CANDIDATES"),
    ],
)
def test_a_bad_fusion_environment_fails_naming_the_variable(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        FusionEnv.from_env(environ)


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OPENSEARCH_MERGE_SEGMENTS_PER_TIER": "1"}, "OPENSEARCH_MERGE_SEGMENTS_PER_TIER"),
        ({"OPENSEARCH_MERGE_FLOOR_SEGMENT_MB": "-1"}, "OPENSEARCH_MERGE_FLOOR_SEGMENT_MB"),
    ],
)
def test_a_bad_merge_policy_environment_fails_naming_the_variable(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        IndexParamsEnv.from_env(environ)


def test_the_merge_policy_goes_into_a_new_index_and_zero_leaves_it_to_the_cluster() -> None:
    from rag_ingest.adapters.vector_store import VectorStore
    from rag_ingest.wiring import index_settings_for

    shipped = VectorStore(None, index_settings_for("i", 4)).mapping()["settings"]["index"]  # type: ignore[arg-type]
    assert shipped["merge.policy.segments_per_tier"] == 4 and shipped["merge.policy.floor_segment"] == "256mb"
    params = IndexParamsEnv.from_env(
        {"OPENSEARCH_MERGE_SEGMENTS_PER_TIER": "0", "OPENSEARCH_MERGE_FLOOR_SEGMENT_MB": "0"}
    )
    cluster = VectorStore(None, index_settings_for("i", 4, params)).mapping()["settings"]["index"]  # type: ignore[arg-type]
    assert not any(name.startswith("merge.") for name in cluster)


class OverlapProbe(DuplicatingRetriever):
    """Each step waits (bounded) for the step that must already run when the legs overlap: BM25
    for the embedding, the k-NN request for BM25. Run one after the other, each wait times out."""

    WAIT_SECONDS = 5.0

    def __init__(self) -> None:
        super().__init__(distinct=30)
        self.bm25_started = threading.Event()
        self.knn_started = threading.Event()
        self.bm25_saw_knn = False
        self.threads: dict[str, str] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads["embed"] = threading.current_thread().name
        self.bm25_started.wait(self.WAIT_SECONDS)
        return CountingEmbedder().embed(texts)

    def knn_search(self, query: SearchQuery, vector: object, *, k: int) -> list[SearchHit]:
        self.threads["knn"] = threading.current_thread().name
        self.knn_started.set()
        return super().knn_search(query, vector, k=k)

    def bm25_search(self, query: SearchQuery, *, k: int) -> list[SearchHit]:
        self.threads["bm25"] = threading.current_thread().name
        self.bm25_started.set()
        self.bm25_saw_knn = self.knn_started.wait(self.WAIT_SECONDS)
        return super().bm25_search(query, k=k)


def test_a_hybrid_search_sends_bm25_while_the_query_is_embedded_and_knn_runs() -> None:
    probe = OverlapProbe()
    started = time.monotonic()
    hits = search_passages(probe, probe, SearchQuery(tenant_id="t", text="lighthouses", k=5))  # type: ignore[arg-type]
    assert len(hits) == 5
    assert probe.bm25_saw_knn  # BM25 was still running when the k-NN request went out
    assert time.monotonic() - started < OverlapProbe.WAIT_SECONDS  # and no wait timed out
    assert probe.threads["bm25"] != probe.threads["knn"] == probe.threads["embed"]


def test_a_failing_bm25_leg_fails_the_hybrid_search_with_its_error() -> None:
    class FailingBm25(DuplicatingRetriever):
        def bm25_search(self, query: SearchQuery, *, k: int) -> list[SearchHit]:
            raise TransientError("OpenSearch search: 503")

    with pytest.raises(TransientError, match="503"):
        search_passages(FailingBm25(distinct=3), CountingEmbedder(), SearchQuery(tenant_id="t", text="q", k=2))  # type: ignore[arg-type]


def test_a_thread_given_the_callers_trace_records_under_the_callers_subsegment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Powertools switches the SDK off outside Lambda (for the whole process): on for this test only.
    monkeypatch.setattr(SDKConfig, "_SDKConfig__SDK_ENABLED", True)
    recorder = AWSXRayRecorder()
    recorder.configure(context=Context(), sampling=False, context_missing="RUNTIME_ERROR")
    monkeypatch.setattr(tracer, "disabled", False)
    monkeypatch.setattr(tracer, "provider", recorder)

    def leg() -> str:
        with recorder.in_subsegment("## bm25_search"):
            return threading.current_thread().name

    recorder.begin_segment("search")
    caller = recorder.begin_subsegment("## search_passages")
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            thread = pool.submit(in_callers_trace(leg)).result()
            # The SDK keeps the entity per thread: without it the other thread has none.
            with pytest.raises(SegmentNotFoundException):
                pool.submit(leg).result()
    finally:
        recorder.clear_trace_entities()
    assert thread != threading.current_thread().name
    assert [subsegment.name for subsegment in caller.subsegments] == ["## bm25_search"]
