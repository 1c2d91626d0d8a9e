"""``POST /search`` as the retrievers call it, and the passages it returns.

The API's answer is ``{query, mode, k, reranked, expand, passages: [{chunk_id, document_id,
filename, page_start, page_end, heading_path, document_format, anchor, paragraph_index, boxes,
cell_range, figure_sources, score, text, highlights, retrieved_by, copies, metadata, expanded, chunk_ids,
truncated}]}``
(docs/api.md); a refusal raises
:class:`~rag_ingest_client.http.ApiError` with the API's code and message, never an empty list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rag_ingest_client.http import ApiSession, RagIngestError, TokenSource, token_source

#: The ``mode`` values ``POST /search`` takes (``rag_ingest.retrieval.search.SearchMode``).
MODES = ("hybrid", "knn", "bm25")
#: The ``expand`` values it takes (``rag_ingest.retrieval.query.Expand``): small-to-big.
EXPANDS = ("none", "section", "page")

#: A bearer ID token, or a function that returns a fresh one (called before each request, and once
#: more after a 401: a token that expired or whose issuer's key rotated).
TokenProvider = str | Callable[[], str]


@dataclass(frozen=True)
class Passage:
    """One passage of the answer, with what the retrievers put in their documents' metadata."""

    chunk_id: str
    document_id: str
    filename: str | None
    page_start: int | None
    page_end: int | None
    score: float
    text: str
    heading_path: tuple[str, ...] = ()
    retrieved_by: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Where the passage stands (docs/formats.md, "Provenance"): the format; for a PDF its
    #: rectangles ``{page, x0, y0, x1, y1}``; for the others the section anchor and paragraph.
    document_format: str = "pdf"
    boxes: tuple[Mapping[str, Any], ...] = ()
    anchor: str | None = None
    paragraph_index: int | None = None
    #: A spreadsheet passage's cells (``Budget!A12:F40``); None for other formats.
    cell_range: str | None = None
    #: A figure's passage: what its text holds ("caption", "alt_text", "ocr", "vision"); None: text.
    figure_sources: tuple[str, ...] | None = None
    #: The other passages with the same text the API folded into this one (another upload of the
    #: same file, a repeated page): ``{chunk_id, document_id, filename, page_start, page_end}``.
    copies: tuple[Mapping[str, Any], ...] = ()
    #: Where a source's item lives (``s3://...``, ``https://...``): what to cite; None for an upload.
    source_uri: str | None = None
    #: Small-to-big (docs/api.md): what ``text`` is ("none": the matched passage, "section", "page"),
    #: the matched chunks merged into it, and whether the section or page was cut to the size cap.
    expanded: str = "none"
    chunk_ids: tuple[str, ...] = ()
    truncated: bool = False

    @classmethod
    def of(cls, item: Any) -> Passage:
        if not isinstance(item, dict):
            raise RagIngestError(f"the search answer has a passage that is not an object: {item!r:.200}")
        try:
            return cls(
                chunk_id=str(item["chunk_id"]),
                document_id=str(item["document_id"]),
                filename=item.get("filename"),
                page_start=item.get("page_start"),
                page_end=item.get("page_end"),
                score=float(item["score"]),
                text=str(item["text"]),
                heading_path=tuple(item.get("heading_path") or ()),
                retrieved_by=tuple(item.get("retrieved_by") or ()),
                metadata=dict(item.get("metadata") or {}),
                document_format=str(item.get("document_format") or "pdf"),
                boxes=tuple(dict(box) for box in item.get("boxes") or ()),
                anchor=item.get("anchor"),
                paragraph_index=item.get("paragraph_index"),
                cell_range=item.get("cell_range"),
                figure_sources=None if item.get("figure_sources") is None else tuple(item["figure_sources"]),
                copies=tuple(dict(copy) for copy in item.get("copies") or ()),
                source_uri=item.get("source_uri"),
                expanded=str(item.get("expanded") or "none"),
                chunk_ids=tuple(item.get("chunk_ids") or (item["chunk_id"],)),
                truncated=bool(item.get("truncated")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RagIngestError(f"the search answer has a passage without {exc}: {item!r:.200}") from None

    def describe(self) -> dict[str, Any]:
        """The metadata a retriever's document carries: the document's own metadata (as given at
        upload), then every field of the passage but its text and highlights; those win over a user
        key of the same name (the API refuses most at upload: document_id, filename, page_start, ...)."""
        return {
            **self.metadata,
            "document_id": self.document_id,
            "filename": self.filename,
            "page_start": self.page_start,
            "page_end": self.page_end,
            "chunk_id": self.chunk_id,
            "score": self.score,
            "heading_path": list(self.heading_path),
            "retrieved_by": list(self.retrieved_by),
            "document_format": self.document_format,
            "anchor": self.anchor,
            "paragraph_index": self.paragraph_index,
            "boxes": [dict(box) for box in self.boxes],
            "cell_range": self.cell_range,
            "figure_sources": None if self.figure_sources is None else list(self.figure_sources),
            "copies": [dict(copy) for copy in self.copies],
            "source_uri": self.source_uri,
            "expanded": self.expanded,
            "chunk_ids": list(self.chunk_ids),
            "truncated": self.truncated,
        }


class SearchClient:
    """``POST {api_url}/search`` with ``Authorization: Bearer <ID token>``."""

    def __init__(self, api_url: str, token: TokenProvider | TokenSource, timeout: float = 30.0) -> None:
        self.api_url = api_url.rstrip("/")
        self.tokens = token_source(token)
        self.timeout = timeout

    def search(self, body: Mapping[str, Any]) -> list[Passage]:
        """The passages of one search, best first; a refusal raises ``ApiError``."""
        with ApiSession(self.api_url, self.tokens, timeout=self.timeout) as session:
            return self._passages(session.call("POST", "/search", json=dict(body)))

    async def asearch(self, body: Mapping[str, Any]) -> list[Passage]:
        """:meth:`search` without blocking the event loop."""
        session = ApiSession(self.api_url, self.tokens, timeout=self.timeout)
        return self._passages(await session.acall("POST", "/search", json=dict(body)))

    def _passages(self, answer: Any) -> list[Passage]:
        passages = answer.get("passages") if isinstance(answer, dict) else None
        if not isinstance(passages, list):
            raise RagIngestError(f"POST {self.api_url}/search answered without passages: {answer!r:.300}")
        return [Passage.of(item) for item in passages]
