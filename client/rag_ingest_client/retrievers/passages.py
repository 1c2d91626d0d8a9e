"""``POST /search`` as the retrievers call it: the standard library's ``urllib`` only, so the extras
add nothing but the ecosystem's own package (no boto3, no AWS code: this runs in the application).

The API's answer is ``{query, mode, k, passages: [{chunk_id, document_id, filename, page_start,
page_end, heading_path, document_format, anchor, paragraph_index, boxes, score, text, highlights,
retrieved_by, copies, metadata}]}`` (docs/api.md);
a refusal is ``{"error": {"code", "message"}}`` and raises :class:`RagIngestApiError` with both,
never an empty list.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

USER_AGENT = "rag-ingest-retriever/1"
#: The ``mode`` values ``POST /search`` takes (``rag_ingest.retrieval.search.SearchMode``).
MODES = ("hybrid", "knn", "bm25")

#: A bearer ID token, or a function that returns a fresh one (called before each request, and once
#: more after a 401: a token that expired or whose issuer's key rotated).
TokenProvider = str | Callable[[], str]


class RagIngestError(Exception):
    """The search could not be made: the API is unreachable or answered something that is not a search."""


class RagIngestApiError(RagIngestError):
    """The API refused the search: ``status`` (400, 401, 403, 503, ...), the API's ``code``
    (``INVALID_REQUEST``, ``FORBIDDEN``, ...) and its ``message`` (for a bad filter, it starts with
    the JSON path of the bad part, e.g. ``filter.orAll: ...``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")


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
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RagIngestError(f"the search answer has a passage without {exc}: {item!r:.200}") from None

    def describe(self) -> dict[str, Any]:
        """The metadata a retriever's document carries: the document's own metadata (as given at
        upload), then rag-ingest's fields, which win over a user key of the same name (the API
        refuses the reserved ones at upload: document_id, filename, page_start, page_end, ...)."""
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
        }


def search_body(
    query: str, *, k: int, mode: str, filter: Mapping[str, Any] | None, rerank: bool | None
) -> dict[str, Any]:
    """The JSON body of ``POST /search``. ``filter`` and ``rerank`` are sent only when given (an API
    without a field refuses it: the body's unknown fields are a 400)."""
    body: dict[str, Any] = {"query": query, "k": k, "mode": mode}
    if filter is not None:
        body["filter"] = dict(filter)
    if rerank is not None:
        body["rerank"] = rerank
    return body


@dataclass
class SearchClient:
    """``POST {api_url}/search`` with ``Authorization: Bearer <ID token>``."""

    api_url: str
    token: TokenProvider
    timeout: float = 30.0

    def __post_init__(self) -> None:
        self.api_url = self.api_url.rstrip("/")

    def _token(self) -> str:
        return self.token() if callable(self.token) else self.token

    def search(self, body: Mapping[str, Any]) -> list[Passage]:
        """The passages of one search, best first; a refusal raises :class:`RagIngestApiError`."""
        try:
            answer = self._post("/search", body)
        except RagIngestApiError as exc:
            if exc.status != 401 or not callable(self.token):
                raise
            # A token that expired between the provider's check and the request: once more, fresh.
            answer = self._post("/search", body)
        passages = answer.get("passages") if isinstance(answer, dict) else None
        if not isinstance(passages, list):
            raise RagIngestError(f"POST {self.api_url}/search answered without passages: {answer!r:.300}")
        return [Passage.of(item) for item in passages]

    async def asearch(self, body: Mapping[str, Any]) -> list[Passage]:
        """:meth:`search` on a worker thread, so an event loop is never blocked on the socket."""
        return await asyncio.to_thread(self.search, body)

    def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        url = f"{self.api_url}{path}"
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self._token()}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise error_of(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise RagIngestError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise RagIngestError(f"POST {url} answered something that is not JSON: {raw[:300]!r}") from None


def error_of(status: int, raw: bytes) -> RagIngestApiError:
    """The API's ``{"error": {"code", "message"}}``, or API Gateway's own ``{"message"}`` (401 from
    the authorizer, 429 from stage throttling), or the bare text."""
    text = raw.decode("utf-8", "replace")
    code, message = "", text.strip()[:300] or http.client.responses.get(status, "error")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            code, message = str(error.get("code", "")), str(error.get("message", message))
        elif isinstance(payload.get("message"), str):
            message = payload["message"]
    return RagIngestApiError(status, code, message)
