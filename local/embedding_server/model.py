"""The model the local server serves: the in-process MiniLM embedder, under the local model id."""

from __future__ import annotations

from rag_ingest.embeddings.base import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.tokens import count_tokens

from local.embedding_server.server import ServedModel
from local.embedding_server.settings import EmbeddingServerSettings


def local_minilm(settings: EmbeddingServerSettings) -> ServedModel:
    """MiniLM int8 ONNX with the settings' threads; one ONNX run per batch (batch_size = max_batch)."""
    from rag_ingest.embeddings.local import LocalMiniLMEmbedder  # lazy: onnxruntime

    embedder = LocalMiniLMEmbedder(
        model_id=LOCAL_MODEL_ID,
        dimension=MINILM_DIMENSION,
        batch_size=settings.max_batch,
        intra_op_threads=settings.intra_op_threads,
    )
    return ServedModel(
        model_id=LOCAL_MODEL_ID,
        dimension=MINILM_DIMENSION,
        max_input_tokens=embedder.max_input_tokens,
        count_tokens=count_tokens,
        embed=embedder.embed,
    )
