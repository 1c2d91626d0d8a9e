"""Builds the configured embedder; kept apart from ``base`` so the embedders can import ``base``
without a cycle. onnxruntime is not in the Lambda layer: the local embedder's module is imported
only when the "local" provider is asked for."""

from __future__ import annotations

from typing import Any

from rag_ingest.embeddings.base import BEDROCK_PROVIDER, LOCAL_PROVIDER, PROVIDERS, Embedder
from rag_ingest.embeddings.capacity import CapacityLimiter


def create_embedder(
    provider: str,
    model_id: str,
    dimension: int,
    bedrock_client: Any | None = None,
    *,
    limiter: CapacityLimiter | None = None,
) -> Embedder:
    """Build the embedder for ``provider`` ("local" or "bedrock"); a ``limiter`` paces Bedrock's
    calls on the shared quota (the in-process model has none).

    Raises ``ValueError`` for an unknown provider, a model id the provider does not serve, a
    dimension the model cannot produce, or "bedrock" without a ``bedrock-runtime`` client.
    """
    if provider == LOCAL_PROVIDER:
        from rag_ingest.embeddings.local import LocalMiniLMEmbedder  # lazy: needs onnxruntime

        return LocalMiniLMEmbedder(model_id=model_id, dimension=dimension)
    if provider == BEDROCK_PROVIDER:
        from rag_ingest.embeddings.bedrock import BedrockTitanEmbedder

        if bedrock_client is None:
            raise ValueError("the bedrock embedding provider needs a bedrock-runtime client")
        return BedrockTitanEmbedder(bedrock_client, model_id=model_id, dimension=dimension, limiter=limiter)
    raise ValueError(f"unknown embedding provider {provider!r}: expected one of {', '.join(PROVIDERS)}")
