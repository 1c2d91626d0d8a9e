"""What search needs from the world outside it: the two retrievers over the index (and the chunks
around a hit, for small-to-big), and a reranker.

``rag_ingest.adapters.vector_store`` and ``rag_ingest.adapters.reranker`` implement them;
``tests/support/fakes.py`` implements them in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rag_ingest.core.ids import split_chunk_id
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.query import Expand, SearchQuery


@dataclass(frozen=True)
class ParentScope:
    """The chunks one expanded result is drawn from (rag_ingest.retrieval.expand): of one document
    version, chunk index in ``first_chunk..last_chunk``, and for a section exactly ``heading_path``,
    for a page a page range overlapping ``page_start..page_end``."""

    document_id: str
    version_hash: str
    expand: Expand
    first_chunk: int
    last_chunk: int
    heading_path: tuple[str, ...] = ()
    page_start: int = 0
    page_end: int = 0

    def holds(self, hit: SearchHit) -> bool:
        document_id, hashed, index = split_chunk_id(hit.chunk_id)
        if (document_id, hashed) != (self.document_id, self.version_hash):
            return False
        if not self.first_chunk <= index <= self.last_chunk:
            return False
        if self.expand is Expand.SECTION:
            return hit.heading_path == self.heading_path
        return hit.page_start <= self.page_end and hit.page_end >= self.page_start


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

    def parent_chunks(self, query: SearchQuery, scopes: Sequence[ParentScope]) -> list[list[SearchHit]]:
        """Per scope, the chunks it ``holds`` that the query's tenant and ``reader`` may read, by
        chunk index (no highlights). Not the query's ``where``: a parent is its hit's context."""
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
