"""What one search asks (``SearchQuery``): built once from the request, passed whole to the
retrievers (rag_ingest.retrieval.ports) and the rerank stage.

May import: ``core``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rag_ingest.core.access import Principal
from rag_ingest.core.filters import Filter


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    KNN = "knn"
    BM25 = "bm25"


class Expand(StrEnum):
    """Small-to-big: what a matched chunk is returned as (rag_ingest.retrieval.expand)."""

    #: The chunk itself.
    NONE = "none"
    #: The run of the document's chunks under the same heading path.
    SECTION = "section"
    #: The document's chunks on the chunk's pages.
    PAGE = "page"


@dataclass(frozen=True)
class SearchQuery:
    """The ``k`` best passages of ``tenant_id`` for ``text``, by ``mode``; with ``where`` (a parsed
    filter), only passages that match it, and with ``reader``, only passages of documents it may
    read (rag_ingest.core.access). A retriever applies the tenant, ``where`` and ``reader`` inside its
    query, and highlights ``text``'s words when it has any. ``expand`` returns each passage's section
    or page instead of the passage alone, passages that share one merged."""

    tenant_id: str
    text: str
    k: int = 5
    mode: SearchMode | str = SearchMode.HYBRID
    where: Filter | None = None
    reader: Principal | None = None
    expand: Expand = Expand.NONE
