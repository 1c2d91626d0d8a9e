"""The embedding interface and its factory.

``max_input_tokens`` is measured like :func:`rag_ingest.tokens.count_tokens` (no special
tokens), so the chunker can be checked against any embedder with the same counter.
onnxruntime is not in the Lambda layer: the local embedder's module is imported only when
the "local" provider is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

LOCAL_PROVIDER = "local"
BEDROCK_PROVIDER = "bedrock"
PROVIDERS = (LOCAL_PROVIDER, BEDROCK_PROVIDER)

#: The local model's id: what the in-process embedder and the local embedding server (which speaks
#: Bedrock's wire format) both serve, and what the local stack configures as EMBEDDING_MODEL_ID.
#: Defined here, not in ``local``, so the Bedrock embedder knows it without importing onnxruntime.
LOCAL_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIMENSION = 384


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of ``dimension`` floats, one per text, in the input order."""

    model_id: str
    dimension: int
    max_input_tokens: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def create_embedder(provider: str, model_id: str, dimension: int, bedrock_client: Any | None = None) -> Embedder:
    """Build the embedder for ``provider`` ("local" or "bedrock").

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
        return BedrockTitanEmbedder(bedrock_client, model_id=model_id, dimension=dimension)
    raise ValueError(f"unknown embedding provider {provider!r}: expected one of {', '.join(PROVIDERS)}")
