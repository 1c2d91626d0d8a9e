"""What search needs from the world outside it: the two retrievers over the index, and a reranker.

``rag_ingest.adapters.vector_store`` and ``rag_ingest.adapters.reranker`` implement them;
``tests/support/fakes.py`` implements them in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rag_ingest.core.access import Principal
from rag_ingest.core.filters import Filter
from rag_ingest.retrieval.hits import SearchHit


class PassageRetriever(Protocol):
    """The two retrievers; both filter by tenant inside the query, and by what ``reader`` may read
    (rag_ingest.core.access) when one is given."""

    def knn_search(
        self,
        *,
        tenant_id: str,
        vector: Sequence[float],
        k: int = 5,
        highlight_text: str | None = None,
        where: Filter | None = None,
        reader: Principal | None = None,
    ) -> list[SearchHit]: ...

    def bm25_search(
        self,
        *,
        tenant_id: str,
        query: str,
        k: int = 5,
        where: Filter | None = None,
        reader: Principal | None = None,
    ) -> list[SearchHit]:
        """``where`` (a parsed filter, rag_ingest.core.filters) and ``reader`` narrow both retrievers
        inside their query."""
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
