"""A search result: one indexed passage a retriever returned, and the copies folded into it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rag_ingest.core.parsed import DocumentFormat, FigureSource, PassageBox
from rag_ingest.retrieval.query import Expand


@dataclass(frozen=True)
class PassageCopy:
    """Another indexed passage with the same text as a search result (the same PDF uploaded twice,
    or a page repeated inside one document): named, so the result can say where else it is."""

    chunk_id: str
    document_id: str
    filename: str | None
    page_start: int
    page_end: int


@dataclass(frozen=True)
class SearchHit:
    """One indexed passage a retriever returned for a query."""

    chunk_id: str
    score: float
    document_id: str
    page_start: int
    page_end: int
    text: str
    filename: str | None = None
    #: Where a source's item lives (``s3://...``, ``https://...``); None for an upload.
    source_uri: str | None = None
    heading_path: tuple[str, ...] = ()
    document_format: DocumentFormat = DocumentFormat.PDF
    anchor: str | None = None
    paragraph_index: int | None = None
    boxes: tuple[PassageBox, ...] = field(default=(), hash=False)
    #: A figure's passage: what its text holds (caption, alt_text, ocr, vision); None: text.
    figure_sources: tuple[FigureSource, ...] | None = None
    #: XLSX, CSV: the cells the passage's rows come from (``Budget!A12:F40``).
    cell_range: str | None = None
    highlights: tuple[str, ...] = ()
    #: The retrievers that found it ("knn", "bm25"); a hybrid hit may have both.
    retrieved_by: tuple[str, ...] = ()
    #: Lower-ranked passages with the same text, folded into this one (search never repeats a text).
    copies: tuple[PassageCopy, ...] = ()
    #: The document's metadata as its chunk holds it (rag_ingest.core.metadata); None: none indexed.
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    #: Small-to-big (rag_ingest.retrieval.expand): what ``text`` is, the matched chunks merged into
    #: this result (best first), and whether the parent's text was cut to the size cap.
    expanded: Expand = Expand.NONE
    chunk_ids: tuple[str, ...] = ()
    truncated: bool = False

    def as_copy(self) -> PassageCopy:
        return PassageCopy(self.chunk_id, self.document_id, self.filename, self.page_start, self.page_end)
