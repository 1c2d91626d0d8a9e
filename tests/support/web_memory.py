"""An in-memory site for the crawler's unit tests: a ``PageFetcher`` over a dict of pages that follows
redirects the way the real fetcher does (``may_follow`` asked first), answers conditional GETs, and
records every request with the fake clock's time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin

from rag_ingest.sources.web.fetching import (
    PAGE_TOO_LARGE,
    REDIRECT_REFUSED,
    FetchRefusedError,
    FetchResponse,
)


class FakeClock:
    """Time that moves only when the crawler sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self.now += seconds


@dataclass
class Page:
    body: bytes = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    location: str | None = None
    etag: str | None = None


def html(*links: str, extra: str = "", text: str = "") -> Page:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return Page(f"<!doctype html><html><head>{extra}</head><body><p>{text}</p>{anchors}</body></html>".encode())


@dataclass
class MemoryFetcher:
    pages: dict[str, Page]
    clock: FakeClock = field(default_factory=FakeClock)
    requests: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def get(
        self, url: str, headers: Mapping[str, str], max_bytes: int, may_follow: Callable[[str], bool]
    ) -> FetchResponse:
        for _ in range(6):
            self.requests.append((url, dict(headers), self.clock.now))
            page = self.pages.get(url, Page(b"not found", status=404))
            if page.location is not None:
                target = urljoin(url, page.location)
                if not may_follow(target):
                    raise FetchRefusedError(REDIRECT_REFUSED, f"{url} redirects to {target}")
                url, headers = target, {}
                continue
            answered = {"content-type": page.content_type}
            if page.etag:
                answered["etag"] = page.etag
                if headers.get("if-none-match") == page.etag:
                    return FetchResponse(304, url, answered)
            if len(page.body) > max_bytes:
                raise FetchRefusedError(PAGE_TOO_LARGE, f"{url} is over {max_bytes} bytes")
            return FetchResponse(page.status, url, answered, page.body)
        raise AssertionError("redirect loop in the test site")

    def urls(self) -> list[str]:
        return [url for url, _, _ in self.requests]
