"""robots.txt for the scope's host, read once per listing (RFC 9309 through ``protego``).

``RobotsRules.from_response`` turns the answer to ``/robots.txt`` into rules: a 200 is parsed, any
other 4xx (a missing file) allows everything, and a 5xx or a failed fetch cannot be read as
permission, so ``RobotsUnavailableError`` stops the listing (the sync fails, nothing is deleted).
Imports ``sources.web.fetching``.
"""

from __future__ import annotations

from dataclasses import dataclass

from protego import Protego

from rag_ingest.sources.web.fetching import ROBOTS_AGENT, FetchResponse

#: Google reads the first 500 KiB of a robots.txt; so do we.
MAX_ROBOTS_BYTES = 500 * 1024
#: A Crawl-delay above this is read as this (a listing page must end within a Lambda's time).
MAX_CRAWL_DELAY_SECONDS = 10.0


class RobotsUnavailableError(Exception):
    """The robots.txt answered a 5xx or could not be fetched: nothing may be crawled this sync."""


@dataclass(frozen=True)
class RobotsRules:
    parser: Protego | None  # None: everything is allowed

    @classmethod
    def from_response(cls, response: FetchResponse) -> RobotsRules:
        if response.status == 200:
            text = response.body[:MAX_ROBOTS_BYTES].decode("utf-8", errors="replace")
            return cls(Protego.parse(text))
        if 400 <= response.status < 500:
            return cls(None)
        raise RobotsUnavailableError(f"robots.txt answered {response.status}")

    def allows(self, url: str) -> bool:
        return self.parser is None or bool(self.parser.can_fetch(url, ROBOTS_AGENT))

    @property
    def crawl_delay(self) -> float:
        delay = None if self.parser is None else self.parser.crawl_delay(ROBOTS_AGENT)
        return min(float(delay or 0.0), MAX_CRAWL_DELAY_SECONDS)
