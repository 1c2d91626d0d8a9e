"""The embedding interface (the factory is ``factory.create_embedder``, which imports the embedders).

``max_input_tokens`` is measured like :func:`rag_ingest.core.tokens.count_tokens` (no special
tokens), so the chunker can be checked against any embedder with the same counter.
onnxruntime is not in the Lambda layer: the local embedder's module is imported only when
the "local" provider is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

LOCAL_PROVIDER = "local"
BEDROCK_PROVIDER = "bedrock"
PROVIDERS = (LOCAL_PROVIDER, BEDROCK_PROVIDER)

#: The local model's id, served in process and by the local embedding server (EMBEDDING_MODEL_ID);
#: here, not in ``local``, so the Bedrock embedder knows it without importing onnxruntime.
LOCAL_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIMENSION = 384


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of ``dimension`` floats, one per text, in the input order."""

    model_id: str
    dimension: int
    max_input_tokens: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...
