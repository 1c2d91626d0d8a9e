"""The local embedding server's Rerank route (its own process, as the local stack runs it), called
through the real boto3 bedrock-agent-runtime client and BedrockReranker, as POST /search does."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from rag_ingest.adapters.reranker import BedrockReranker, foundation_model_arn
from rag_ingest.retrieval.rerank import STAND_IN_NAME, LexicalStandInReranker

from local.embedding_server.process import EmbeddingServerProcess
from tests.support.model_server import client_of, running_model_server

pytestmark = pytest.mark.integration

QUERY = "How long are invoices kept?"
TEXTS = [
    "The cafeteria opens at eight and serves breakfast until ten.",
    "Invoices are kept for seven years, then shredded; invoices under dispute are kept longer.",
    "Parking permits are renewed every January.",
    "Receipts and invoices go to the finance team within a week.",
]


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingServerProcess]:
    with running_model_server() as process:
        yield process


def agent_runtime(endpoint: str) -> Any:
    return client_of("bedrock-agent-runtime", endpoint)


def test_bedrock_reranker_through_the_server_ranks_like_the_stand_in(server: EmbeddingServerProcess) -> None:
    reranker = BedrockReranker("amazon.rerank-v1:0", agent_runtime(server.url))
    assert reranker.model_arn == "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"

    ranked = reranker.rerank(QUERY, TEXTS, 3)

    assert [index for index, _ in ranked] == [1, 3, 0]
    assert ranked == LexicalStandInReranker().rerank(QUERY, TEXTS, 3)
    assert all(0 <= score < 1 for _, score in ranked)
    assert ranked[0][1] > ranked[1][1] > ranked[2][1]
    with urllib.request.urlopen(server.url + "/_local/stats", timeout=5) as response:
        assert json.loads(response.read())["reranks"] >= 1


def test_the_request_shape_is_botocores_and_the_answer_is_labelled(server: EmbeddingServerProcess) -> None:
    client = agent_runtime(server.url)
    seen: dict[str, Any] = {}

    def capture(request: Any, **_: Any) -> None:
        seen["url"], seen["body"] = request.url, json.loads(request.body)

    client.meta.events.register("before-send.bedrock-agent-runtime.Rerank", capture)
    response = client.rerank(
        queries=[{"type": "TEXT", "textQuery": {"text": QUERY}}],
        sources=[
            {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": text}}}
            for text in TEXTS
        ],
        rerankingConfiguration={
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": 2,
                "modelConfiguration": {"modelArn": foundation_model_arn("cohere.rerank-v3-5:0", "us-west-2")},
            },
        },
    )
    assert seen["url"] == server.url + "/rerank"
    assert set(seen["body"]) == {"queries", "sources", "rerankingConfiguration"}
    assert [result["index"] for result in response["results"]] == [1, 3]
    assert response["ResponseMetadata"]["HTTPHeaders"]["x-local-reranker"] == STAND_IN_NAME


def test_an_unknown_model_is_resource_not_found(server: EmbeddingServerProcess) -> None:
    reranker = BedrockReranker("amazon.titan-embed-text-v2:0", agent_runtime(server.url))
    with pytest.raises(ClientError) as raised:
        reranker.rerank(QUERY, TEXTS, 2)
    assert raised.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_too_many_sources_are_refused_before_sending(server: EmbeddingServerProcess) -> None:
    reranker = BedrockReranker("amazon.rerank-v1:0", agent_runtime(server.url))
    with pytest.raises(ValueError, match="at most 1000"):
        reranker.rerank(QUERY, ["x"] * 1001, 5)
