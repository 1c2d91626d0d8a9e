"""How ``GET /documents`` pages and filters, and how ``PATCH`` compares revisions.

The list cursor is opaque to clients: base64url of the tenant index's key of the last item
returned, checked on the way back in (shape, types, and the caller's own tenant), so a forged or
garbled cursor is a 400 and never starts a query in another tenant's partition. A document's ETag
is its revision, quoted; If-Match compares strongly (RFC 9110 13.1.1).
May import: ``core``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from rag_ingest.core.auth import TENANT_ID_PATTERN
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.filters import Filter, FilterError, parse_filter
from rag_ingest.core.ids import is_document_id
from rag_ingest.documents.errors import InvalidCursorError

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_CURSOR_CHARS = 1024
MAX_LIST_FILTER_CHARS = 8 * 1024
MAX_IF_MATCH_CHARS = 512
# A cursor is the tenant index's key of the last item returned.
_CURSOR_KEYS = frozenset({"document_id", "tenant_id", "created_at"})
_CREATED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T[0-9:.+Z-]{1,40}$")


def encode_cursor(key: Mapping[str, str]) -> str:
    raw = json.dumps(dict(key), sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, tenant_id: str) -> dict[str, str]:
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidCursorError("the cursor is too long")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw.decode())
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidCursorError("the cursor is not one this API issued") from None
    if (
        not isinstance(key, dict)
        or set(key) != _CURSOR_KEYS
        or not all(isinstance(value, str) for value in key.values())
    ):
        raise InvalidCursorError("the cursor is not one this API issued")
    if key["tenant_id"] != tenant_id or not TENANT_ID_PATTERN.fullmatch(key["tenant_id"]):
        raise InvalidCursorError("the cursor belongs to another listing")
    if not is_document_id(key["document_id"]) or not _CREATED_AT.fullmatch(key["created_at"]):
        raise InvalidCursorError("the cursor is not one this API issued")
    return key


def parse_list_filter(filter_json: str) -> Filter:
    """``GET /documents``'s ``filter`` parameter: a RetrievalFilter as JSON, without ``page``
    (documents have none); a bad one is ``PermanentError(INVALID_REQUEST)`` naming its JSON path."""
    if len(filter_json) > MAX_LIST_FILTER_CHARS:
        raise PermanentError(ErrorCode.INVALID_REQUEST, f"filter: at most {MAX_LIST_FILTER_CHARS} characters")
    try:
        raw = json.loads(filter_json, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise PermanentError(ErrorCode.INVALID_REQUEST, "filter: not valid JSON") from None
    try:
        return parse_filter(raw, "filter", allow_page=False)
    except FilterError as exc:
        raise PermanentError(ErrorCode.INVALID_REQUEST, str(exc)) from None


def etag(revision: int) -> str:
    """A document's ETag: its revision, quoted (a strong entity tag, RFC 9110 8.8.3)."""
    return f'"{revision}"'


def if_match_revisions(header: str) -> set[int] | None:
    """The revisions an If-Match header accepts: None for ``*`` (any), else those of its strong tags
    (a weak tag, or anything else, matches none: RFC 9110 13.1.1 compares strongly)."""
    if header.strip() == "*":
        return None
    revisions: set[int] = set()
    for tag in header[:MAX_IF_MATCH_CHARS].split(","):
        tag = tag.strip()
        if len(tag) >= 3 and tag[0] == tag[-1] == '"' and tag[1:-1].isdigit() and len(tag) <= 22:
            revisions.add(int(tag[1:-1]))
    return revisions


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
