"""The optional rerank stage of search: its ordering and truncation, the lexical stand-in, the request
and response models, the environment, and the Bedrock adapter's request shape (botocore's Stubber)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from pydantic import ValidationError
from rag_ingest.adapters.reranker import BedrockReranker, foundation_model_arn
from rag_ingest.core.config import RerankEnv, SearchEnv
from rag_ingest.core.errors import ConfigurationError, PermanentError, TransientError
from rag_ingest.core.settings import RERANK_CANDIDATES, RERANK_MAX_CANDIDATES
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.query import Expand, SearchQuery
from rag_ingest.retrieval.rerank import (
    STAND_IN_NAME,
    LexicalStandInReranker,
    lexical_scores,
    rerank_depth,
    rerank_passages,
)
from rag_ingest.retrieval.search import (
    RerankSettings,
    SearchMode,
    SearchRequest,
    SearchService,
    search_passages,
)

from tests.support.fakes import CountingEmbedder

pytestmark = pytest.mark.unit


def passage(i: int, text: str | None = None) -> SearchHit:
    return SearchHit(
        chunk_id=f"c{i}",
        score=1.0 / (i + 1),
        document_id="d",
        page_start=i,
        page_end=i,
        text=text or f"passage {i}",
        retrieved_by=("bm25",),
    )


class ReversingReranker:
    """Scores the last candidate best: the opposite of the first stage's order."""

    name = "reversing"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int]] = []

    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        self.calls.append((query, list(texts), top_n))
        return [(index, float(index)) for index in reversed(range(len(texts)))][:top_n]


class Ranked:
    """A first stage of ``count`` distinct passages, in order, from both retrievers."""

    def __init__(self, count: int) -> None:
        self.hits = [passage(i) for i in range(count)]
        self.depths: list[int] = []

    def knn_search(self, query: SearchQuery, vector: object, *, k: int) -> Any:
        self.depths.append(k)
        return [SearchHit(**{**h.__dict__, "retrieved_by": ("knn",)}) for h in self.hits[:k]]

    def bm25_search(self, query: SearchQuery, *, k: int) -> Any:
        self.depths.append(k)
        return self.hits[:k]


def test_the_stage_reorders_by_the_rerankers_score_and_returns_k() -> None:
    reranker = ReversingReranker()
    hits = rerank_passages(reranker, SearchQuery(tenant_id="t", text="q", k=3), [passage(i) for i in range(10)])
    assert [h.chunk_id for h in hits] == ["c9", "c8", "c7"]
    assert [h.score for h in hits] == [9.0, 8.0, 7.0]  # the reranker's relevance scores
    assert hits[0].page_start == 9 and hits[0].retrieved_by == ("bm25",)  # the rest of the passage is kept
    assert reranker.calls == [("q", [f"passage {i}" for i in range(10)], 3)]


def test_the_stage_with_fewer_passages_than_k_returns_them_all_and_nothing_for_none() -> None:
    five = SearchQuery(tenant_id="t", text="q", k=5)
    assert [h.chunk_id for h in rerank_passages(ReversingReranker(), five, [passage(0), passage(1)])] == [
        "c1",
        "c0",
    ]
    reranker = ReversingReranker()
    assert rerank_passages(reranker, SearchQuery(tenant_id="t", text="q", k=5), []) == []
    assert reranker.calls == []  # no call for no candidates


def test_a_reranker_answering_bad_indexes_is_an_error_not_a_wrong_order() -> None:
    class Broken:
        name = "broken"

        def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
            return [(0, 1.0), (0, 0.5)]

    with pytest.raises(RuntimeError, match="broken answered indexes"):
        rerank_passages(Broken(), SearchQuery(tenant_id="t", text="q", k=2), [passage(0), passage(1)])


def test_the_depth_is_the_candidates_or_k_when_larger_within_bounds() -> None:
    assert rerank_depth(5) == RERANK_CANDIDATES == 50
    assert rerank_depth(5, 20) == 20
    assert rerank_depth(30, 20) == 30
    for bad in (0, RERANK_MAX_CANDIDATES + 1):
        with pytest.raises(ValueError, match="between 1 and 100"):
            rerank_depth(5, bad)


def test_search_with_a_reranker_scores_the_first_stages_top_candidates_only() -> None:
    store = Ranked(80)
    reranker = ReversingReranker()
    query = SearchQuery(tenant_id="t", text="q", k=5)
    hits = search_passages(store, CountingEmbedder(), query, reranker=reranker, rerank_candidates=30)
    [(_, texts, top_n)] = reranker.calls
    # 30 candidates (the first stage asked each leg for 60), the 5 best by the reranker.
    assert store.depths == [60, 60]
    assert texts == [f"passage {i}" for i in range(30)] and top_n == 5
    assert [h.chunk_id for h in hits] == ["c29", "c28", "c27", "c26", "c25"]


def test_search_without_a_reranker_is_unchanged() -> None:
    store = Ranked(80)
    hits = search_passages(store, CountingEmbedder(), SearchQuery(tenant_id="t", text="q", k=5, mode=SearchMode.BM25))  # type: ignore[arg-type]
    assert [h.chunk_id for h in hits] == ["c0", "c1", "c2", "c3", "c4"]
    assert store.depths == [20]


def test_the_stand_in_prefers_passages_with_the_querys_rare_words() -> None:
    texts = [
        "the cafeteria opens at eight",
        "invoices are kept for seven years",
        "invoices go to finance",
        "",
    ]
    scores = lexical_scores("How long are invoices kept?", texts)
    assert scores[1] > scores[2] > scores[0] == scores[3] == 0.0
    assert all(0 <= s < 1 for s in scores)
    ranked = LexicalStandInReranker().rerank("How long are invoices kept?", texts, 2)
    assert [i for i, _ in ranked] == [1, 2]
    assert "not a cross-encoder" in STAND_IN_NAME


def test_the_stand_in_keeps_the_first_stages_order_on_ties() -> None:
    ranked = LexicalStandInReranker().rerank("zebra", ["a", "b", "c"], 3)
    assert [i for i, _ in ranked] == [0, 1, 2]


def test_the_request_takes_rerank_true_false_or_nothing() -> None:
    assert SearchRequest(query="q").rerank is None
    assert SearchRequest.model_validate({"query": "q", "rerank": True}).rerank is True
    assert SearchRequest.model_validate({"query": "q", "rerank": False}).rerank is False
    for bad in ("yes", 1, "true", 0.0):
        with pytest.raises(ValidationError):
            SearchRequest.model_validate({"query": "q", "rerank": bad})


def service(default: bool, reranker: ReversingReranker | None) -> SearchService:
    store = Ranked(60)
    return SearchService(
        store=lambda: store,  # type: ignore[arg-type, return-value]
        embedder=CountingEmbedder,
        reranker=(lambda: reranker) if reranker is not None else None,  # type: ignore[arg-type, return-value]
        rerank=RerankSettings(default=default, candidates=10),
    )


@pytest.mark.parametrize(
    ("default", "asked", "reranked"),
    [(False, None, False), (True, None, True), (True, False, False), (False, True, True)],
)
def test_the_deployment_default_applies_when_the_request_says_nothing(
    default: bool, asked: bool | None, reranked: bool
) -> None:
    reranker = ReversingReranker()
    # The matched passages themselves (this fake store has no sections to expand to).
    request = SearchRequest(query="q", k=3, rerank=asked, expand=Expand.NONE)
    response = service(default, reranker).search("t", request)
    assert response.reranked is reranked
    assert len(reranker.calls) == int(reranked)
    expected = ["c9", "c8", "c7"] if reranked else ["c0", "c1", "c2"]
    assert [p.chunk_id for p in response.passages] == expected


def test_asking_for_reranking_where_none_is_configured_is_a_clear_400() -> None:
    with pytest.raises(PermanentError, match="reranking is not configured"):
        service(False, None).search("t", SearchRequest(query="q", rerank=True))


def test_rerank_settings_refuse_candidates_out_of_bounds() -> None:
    with pytest.raises(ValueError, match="between 1 and 100"):
        RerankSettings(candidates=101)


def test_the_environment_has_off_by_default_and_validates_each_variable() -> None:
    env = RerankEnv.from_env({})
    assert (env.search_rerank_default, env.search_rerank_model_id, env.search_rerank_candidates) == (
        False,
        "amazon.rerank-v1:0",
        50,
    )
    env = RerankEnv.from_env(
        {
            "SEARCH_RERANK_DEFAULT": "true",
            "SEARCH_RERANK_MODEL_ID": "cohere.rerank-v3-5:0",
            "SEARCH_RERANK_CANDIDATES": "100",
        }
    )
    assert (env.search_rerank_default, env.search_rerank_model_id, env.search_rerank_candidates) == (
        True,
        "cohere.rerank-v3-5:0",
        100,
    )
    assert "SEARCH_RERANK_MODEL_ID" in SearchEnv.variable_names()
    for name, value in [
        ("SEARCH_RERANK_MODEL_ID", "amazon.titan-embed-text-v2:0"),
        ("SEARCH_RERANK_CANDIDATES", "0"),
        ("SEARCH_RERANK_CANDIDATES", "101"),
        ("SEARCH_RERANK_DEFAULT", "maybe"),
    ]:
        with pytest.raises(ConfigurationError, match=name):
            RerankEnv.from_env({name: value})


def agent_runtime(region: str = "eu-central-1") -> Any:
    return boto3.client("bedrock-agent-runtime", region_name=region, aws_access_key_id="x", aws_secret_access_key="x")


def test_the_model_arn_is_the_foundation_models_in_the_clients_region_and_partition() -> None:
    assert foundation_model_arn("amazon.rerank-v1:0", "ca-central-1") == (
        "arn:aws:bedrock:ca-central-1::foundation-model/amazon.rerank-v1:0"
    )
    assert foundation_model_arn("m", "cn-north-1").startswith("arn:aws-cn:bedrock:cn-north-1::")
    assert BedrockReranker("cohere.rerank-v3-5:0", agent_runtime()).model_arn.endswith(
        "eu-central-1::foundation-model/cohere.rerank-v3-5:0"
    )


def test_the_adapter_sends_bedrocks_rerank_request_and_reads_its_results() -> None:
    client = agent_runtime()
    reranker = BedrockReranker("amazon.rerank-v1:0", client)
    long_text = "x" * 40_000
    with Stubber(client) as stub:
        stub.add_response(
            "rerank",
            {"results": [{"index": 2, "relevanceScore": 0.9}, {"index": 0, "relevanceScore": 0.4}]},
            {
                "queries": [{"type": "TEXT", "textQuery": {"text": "q"}}],
                "sources": [
                    {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
                    for t in ("a", "x" * 32_000, "c")
                ],
                "rerankingConfiguration": {
                    "type": "BEDROCK_RERANKING_MODEL",
                    "bedrockRerankingConfiguration": {
                        "numberOfResults": 2,
                        "modelConfiguration": {"modelArn": reranker.model_arn},
                    },
                },
            },
        )
        assert reranker.rerank("q", ["a", long_text, "c"], 2) == [(2, 0.9), (0, 0.4)]


def test_the_adapter_turns_throttling_into_a_transient_error() -> None:
    client = agent_runtime()
    with Stubber(client) as stub:
        for _ in range(3):  # the client's own retries first
            stub.add_client_error("rerank", "ThrottlingException", http_status_code=429)
        with pytest.raises(TransientError, match=re.escape("Rerank with amazon.rerank-v1:0")):
            BedrockReranker("amazon.rerank-v1:0", client).rerank("q", ["a"], 1)
