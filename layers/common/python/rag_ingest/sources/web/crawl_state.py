"""Where a crawl stands: the frontier, what was seen and emitted, the content hashes, the counts.

It is the listing's cursor: ``to_cursor`` writes it as JSON, deflated and base64-encoded (URLs are
kept relative to the scope's origin, each once), and ``from_cursor`` reads it back, so a listing
resumed after a crash goes on from its frontier and never fetches again what it has done.
Imports nothing of the project.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

VERSION = 1
_PREFIX = "web1:"
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

    def to_cursor(self, origin: str) -> str:
        """``origin`` (``scheme://host``) is dropped from the URLs that start with it."""
        queued = {entry.url for entry in self.frontier}
        rest = self.seen - queued - self.done

        def short(url: str) -> str:
            return url[len(origin) :] if url.startswith(origin + "/") else url

        data = {
            "v": VERSION,
            "frontier": [[entry.kind[0], short(entry.url), entry.depth] for entry in self.frontier],
            "done": sorted(map(short, self.done)),
            "seen": sorted(map(short, rest)),
            "hashes": sorted(self.hashes),
            "pages": self.pages,
            "sitemaps": self.sitemaps,
            "truncated": self.truncated,
        }
        packed = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)
        return _PREFIX + base64.urlsafe_b64encode(packed).decode("ascii")

    @classmethod
    def from_cursor(cls, cursor: str, origin: str) -> CrawlState:
        def long(url: str) -> str:
            return origin + url if url.startswith("/") else url

        try:
            if not cursor.startswith(_PREFIX):
                raise CursorError("not a web listing cursor")
            data = json.loads(zlib.decompress(base64.urlsafe_b64decode(cursor[len(_PREFIX) :])))
            if data.get("v") != VERSION:
                raise CursorError(f"a cursor of version {data.get('v')!r}")
            kinds: dict[str, Kind] = {"p": "page", "s": "sitemap"}
            frontier = deque(Entry(kinds[kind], long(str(url)), int(depth)) for kind, url, depth in data["frontier"])
            done = {long(url) for url in data["done"]}
            return cls(
                frontier=frontier,
                seen={long(url) for url in data["seen"]} | done | {entry.url for entry in frontier},
                done=done,
                hashes=set(data["hashes"]),
                pages=int(data["pages"]),
                sitemaps=int(data["sitemaps"]),
                truncated=bool(data["truncated"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError, zlib.error, binascii.Error) as exc:
            raise CursorError(f"not a web listing cursor: {exc}") from exc
