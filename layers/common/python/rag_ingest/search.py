"""Search the indexed passages of one tenant (k-NN on the query's embedding)."""

from __future__ import annotations

from rag_ingest.adapters.vector_store import SearchHit, VectorStore
from rag_ingest.embeddings.base import Embedder
from rag_ingest.errors import ErrorCode, PermanentError


def search_passages(
    store: VectorStore, embedder: Embedder, *, tenant_id: str, query: str, k: int = 5
) -> list[SearchHit]:
    if not query.strip():
        raise PermanentError(ErrorCode.INVALID_REQUEST, "the query is empty")
    if not tenant_id:
        raise PermanentError(ErrorCode.INVALID_REQUEST, "a tenant is required: search never crosses tenants")
    [vector] = embedder.embed([query])
    return store.knn_search(tenant_id=tenant_id, vector=vector, k=k)
