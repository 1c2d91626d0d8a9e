"""Where a crawl stands: the frontier, what was seen and emitted, the content hashes, the counts.

It is the listing's cursor: ``to_cursor`` writes compact JSON text the sync engine checkpoints, and
``from_cursor`` reads it back, so a listing resumed after a crash goes on from its frontier and
never fetches again what it has done. Imports nothing of the project.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

VERSION = 1
Kind = Literal["page", "sitemap"]


class CursorError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    kind: Kind
    url: str
    depth: int


@dataclass
class CrawlState:
    frontier: deque[Entry] = field(default_factory=deque)
    seen: set[str] = field(default_factory=set)  # every URL ever put on the frontier
    done: set[str] = field(default_factory=set)  # the keys of the items emitted
    hashes: set[str] = field(default_factory=set)  # the change tokens (content hashes) emitted
    pages: int = 0  # page fetches made (max_pages)
    sitemaps: int = 0  # sitemap fetches made
    truncated: bool = False

    def push(self, kind: Kind, url: str, depth: int) -> None:
        self.seen.add(url)
        self.frontier.append(Entry(kind, url, depth))

    def to_cursor(self) -> str:
        return json.dumps(
            {
                "v": VERSION,
                "frontier": [[entry.kind[0], entry.url, entry.depth] for entry in self.frontier],
                "seen": sorted(self.seen),
                "done": sorted(self.done),
                "hashes": sorted(self.hashes),
                "pages": self.pages,
                "sitemaps": self.sitemaps,
                "truncated": self.truncated,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_cursor(cls, cursor: str) -> CrawlState:
        try:
            data = json.loads(cursor)
            if data.get("v") != VERSION:
                raise CursorError(f"a cursor of version {data.get('v')!r}")
            kinds: dict[str, Kind] = {"p": "page", "s": "sitemap"}
            return cls(
                frontier=deque(Entry(kinds[kind], str(url), int(depth)) for kind, url, depth in data["frontier"]),
                seen=set(data["seen"]),
                done=set(data["done"]),
                hashes=set(data["hashes"]),
                pages=int(data["pages"]),
                sitemaps=int(data["sitemaps"]),
                truncated=bool(data["truncated"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CursorError(f"not a web listing cursor: {exc}") from exc
