"""The connector interface: what a source kind implements so a sync can keep its documents current.

A connector lists a source's items a page at a time, each with a change token (a value that changes
whenever the item's content does), and reads one item's bytes. It never writes: the sync engine
decides what is new, changed, unchanged or gone, and only a listing that ends complete and
untruncated may delete. May import ``rag_ingest.core`` only. Writing one: docs/sources.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rag_ingest.core.access import DocumentAccess


@dataclass(frozen=True)
class KnownItem:
    """What the last sync stored for an item: its token and the validators a connector asked to keep
    (the web's ETag and Last-Modified, for a conditional GET)."""

    change_token: str
    validators: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceItem:
    """One item of a listing. ``key`` is its identity within the source (stable across syncs); ``uri``
    is what a citation shows (``s3://bucket/key``, ``https://...``). ``content`` is set when the
    listing already read the bytes (the crawler); otherwise the engine calls ``fetch``."""

    key: str
    change_token: str
    uri: str
    filename: str
    size_bytes: int | None = None
    content: bytes | None = None
    validators: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] | None = None
    access: DocumentAccess | None = None


@dataclass(frozen=True)
class ItemFailure:
    """An item the connector could not list or read; it fails only itself. ``code`` is one of
    ``rag_ingest.core.errors.ErrorCode``'s values or a source code (docs/sources.md, "Failures")."""

    key: str
    uri: str
    code: str
    reason: str


@dataclass(frozen=True)
class ListingPage:
    """One page of a listing. ``cursor`` is where the next page starts (opaque, JSON-safe text the
    engine checkpoints); None when the listing is over. ``truncated`` says a cap ended it early, so
    items it did not reach are not gone. ``gone`` are keys the connector saw answer "no longer
    there" (a 404 or 410), counted as misses, not deleted at once."""

    items: tuple[SourceItem, ...] = ()
    cursor: str | None = None
    truncated: bool = False
    gone: tuple[str, ...] = ()
    failures: tuple[ItemFailure, ...] = ()


class ItemUnavailableError(Exception):
    """``fetch`` could not read the item; ``code`` and the message go into the sync's failures."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Connector(Protocol):
    """A source kind's reader. ``known`` answers what the last sync stored for a key (None: new)."""

    def list_page(self, cursor: str | None, known: KnownLookup) -> ListingPage:
        """The page after ``cursor`` (None: the first). Raises ``ItemUnavailableError`` only when the
        whole listing cannot go on (the bucket is unreadable): that fails the sync, never deletes."""
        ...

    def fetch(self, item: SourceItem) -> bytes:
        """The item's bytes as listed (``ItemUnavailableError`` when it cannot be read)."""
        ...


class KnownLookup(Protocol):
    def __call__(self, key: str) -> KnownItem | None: ...
