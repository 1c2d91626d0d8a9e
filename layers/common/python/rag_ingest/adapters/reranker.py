"""Bedrock's ``Rerank`` (bedrock-agent-runtime) as the search's ``Reranker`` port.

One ``TEXT`` query and the passages as ``INLINE`` ``TEXT`` sources (1 to 1,000 a call, each cut to
32,000 characters); ``numberOfResults`` and the model's ARN in ``rerankingConfiguration``; the
answer's ``results`` (``index``, ``relevanceScore``) best first, with a ``nextToken`` while more
remain. The request shape, models, Regions and permissions, with their sources: docs/retrieval.md,
"Reranking".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rag_ingest.adapters.aws import bedrock_agent_runtime_client, translated

MAX_TEXT_CHARS = 32_000
MAX_SOURCES = 1_000


def foundation_model_arn(model_id: str, region: str) -> str:
    """The ``modelArn`` Rerank takes: ``arn:<partition>:bedrock:<region>::foundation-model/<model id>``."""
    partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    return f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"


class BedrockReranker:
    """``Rerank`` with one reranker model; ``client`` is a bedrock-agent-runtime client."""

    def __init__(self, model_id: str, client: Any = None) -> None:
        self.client = client if client is not None else bedrock_agent_runtime_client()
        self.model_id = model_id
        self.model_arn = foundation_model_arn(model_id, self.client.meta.region_name)
        self.name = f"bedrock:{model_id}"

    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        if not texts:
            return []
        if len(texts) > MAX_SOURCES:
            raise ValueError(f"Rerank takes at most {MAX_SOURCES} sources, got {len(texts)}")
        request: dict[str, Any] = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query[:MAX_TEXT_CHARS]}}],
            "sources": [
                {
                    "type": "INLINE",
                    "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": (text or " ")[:MAX_TEXT_CHARS]}},
                }
                for text in texts
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": max(1, min(top_n, len(texts))),
                    "modelConfiguration": {"modelArn": self.model_arn},
                },
            },
        }
        ranked: list[tuple[int, float]] = []
        with translated(f"Rerank with {self.model_id}", catch=(ClientError, BotoCoreError)):
            while True:
                response = self.client.rerank(**request)
                ranked.extend((int(r["index"]), float(r["relevanceScore"])) for r in response["results"])
                token = response.get("nextToken")
                if not token or len(ranked) >= top_n:
                    break
                request["nextToken"] = token
        ranked.sort(key=lambda pair: -pair[1])
        return ranked[:top_n]
