"""What search needs from the world outside it: the two retrievers over the index, and a reranker.

``rag_ingest.adapters.vector_store`` and ``rag_ingest.adapters.reranker`` implement them;
``tests/support/fakes.py`` implements them in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.query import SearchQuery


class PassageRetriever(Protocol):
    """The two retrievers, each asked for ``k`` candidates of one ``SearchQuery``: both filter by its
    tenant, ``where`` and ``reader`` inside their query, never after it."""

    def knn_search(self, query: SearchQuery, vector: Sequence[float], *, k: int) -> list[SearchHit]:
        """The ``k`` chunks nearest ``vector`` (the query's text embedded), with highlighted
        fragments of the query's words."""
        ...

    def bm25_search(self, query: SearchQuery, *, k: int) -> list[SearchHit]:
        """The ``k`` chunks that best match the query's words (BM25), with highlights."""
        ...


class Reranker(Protocol):
    """Scores (query, passage text) pairs: Bedrock's ``Rerank`` (rag_ingest.adapters.reranker), or
    the lexical stand-in offline (rag_ingest.retrieval.rerank.LexicalStandInReranker)."""

    #: What scored the passages, for logs and the eval's tables.
    name: str

    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """The ``top_n`` best of ``texts`` for ``query`` as (index into ``texts``, relevance score),
        best first."""
        ...
