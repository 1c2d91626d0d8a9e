"""The model the local server serves: the in-process MiniLM embedder, under the local model id."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import LOCAL_MODEL_ID, MINILM_DIMENSION

from local.embedding_server.server import ServedModel
from local.embedding_server.settings import EmbeddingServerSettings

if TYPE_CHECKING:
    from rag_ingest.embeddings.local import LocalMiniLMEmbedder


def local_minilm(settings: EmbeddingServerSettings) -> ServedModel:
    """MiniLM int8 ONNX with the settings' threads; one ONNX run per batch (batch_size = max_batch).

    Two sessions of the same model file (the same vectors): passages in one whose idle threads sleep
    (the cores are shared with parsing and OpenSearch), the query lane in one whose threads spin
    (a person waits on each query). The query session is made on the first query, so a stack that
    only ingests never holds it (about 120 MB).
    """
    from rag_ingest.embeddings.local import LocalMiniLMEmbedder  # lazy: onnxruntime

    def embedder(*, spin_wait: bool) -> LocalMiniLMEmbedder:
        return LocalMiniLMEmbedder(
            model_id=LOCAL_MODEL_ID,
            dimension=MINILM_DIMENSION,
            batch_size=settings.max_batch,
            intra_op_threads=settings.intra_op_threads,
            spin_wait=spin_wait,
        )

    passages = embedder(spin_wait=False)
    # Only the batcher's one thread calls the embed functions, so the first query makes it once.
    query_embedder = cache(lambda: embedder(spin_wait=True))

    def embed_queries(texts: Sequence[str]) -> list[list[float]]:
        return query_embedder().embed(texts)

    return ServedModel(
        model_id=LOCAL_MODEL_ID,
        dimension=MINILM_DIMENSION,
        max_input_tokens=passages.max_input_tokens,
        count_tokens=count_tokens,
        embed=passages.embed,
        embed_queries=embed_queries,
    )
