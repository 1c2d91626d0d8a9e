"""``WebConnector``: the web source's ``Connector``, a breadth-first crawl of one scope.

Seeds and sitemap URLs start the frontier; links (``<a href>``) and in-scope ``<link rel=canonical>``
extend it, within the scope, robots.txt, ``max_depth`` and ``max_pages`` (a cap reached sets
``truncated``). A page is an item keyed by its canonical URL, its change token the SHA-256 of its
bytes; a second URL with the same bytes is not an item. A stored ETag or Last-Modified makes the
GET conditional: a 304 lists the item with its stored token and links. 404/410 go to ``gone``, other
errors to ``failures``. The cursor is the crawl state (crawl_state). docs/sources.md, "The web source".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rag_ingest.sources.connector import (
    ItemFailure,
    ItemUnavailableError,
    KnownItem,
    KnownLookup,
    ListingPage,
    SourceItem,
)
from rag_ingest.sources.web.config import WebSourceConfig
from rag_ingest.sources.web.crawl_state import CrawlState, CursorError, Entry
from rag_ingest.sources.web.fetching import (
    HTTP_ERROR,
    ROBOTS_UNAVAILABLE,
    SITEMAP_INVALID,
    URL_REFUSED_PREFIX,
    FetchRefusedError,
    FetchResponse,
    PageFetcher,
)
from rag_ingest.sources.web.links import read_page
from rag_ingest.sources.web.pacing import RateLimiter
from rag_ingest.sources.web.robots import RobotsRules, RobotsUnavailableError
from rag_ingest.sources.web.sitemaps import MAX_SITEMAP_BYTES, MAX_SITEMAPS, SitemapError, parse_sitemap
from rag_ingest.sources.web.urls import absolute_url, canonical_url, filename_for

#: Fetches per listing page: the engine checkpoints the cursor between pages.
FETCHES_PER_PAGE = 25
#: URLs the frontier may ever hold, as a multiple of max_pages (a link farm cannot grow the cursor).
DISCOVERY_FACTOR = 4
#: Links kept with an HTML page's validators, so a 304 still extends the frontier.
MAX_STORED_LINKS = 500
MAX_STORED_LINK_CHARS = 48_000
#: Hex digits of a content hash kept to spot duplicates (64 bits: the cursor stays small).
HASH_CHARS = 16
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_GONE = (404, 410)


@dataclass
class _Outcome:
    entry: Entry
    known: KnownItem | None = None
    response: FetchResponse | None = None
    refused: FetchRefusedError | None = None


@dataclass
class _PageResult:
    items: list[SourceItem] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    failures: list[ItemFailure] = field(default_factory=list)


def _is_html(response: FetchResponse) -> bool:
    content_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type:
        return content_type in _HTML_TYPES
    head = response.body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def _charset(response: FetchResponse) -> str | None:
    for part in response.headers.get("content-type", "").split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            return value.strip("\"' ")
    return None


class WebConnector:
    """``WebConnector(config, fetcher)``; ``clock`` and ``sleep`` pace the requests (fakes in tests)."""

    def __init__(
        self,
        config: WebSourceConfig,
        fetcher: PageFetcher,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        fetches_per_page: int = FETCHES_PER_PAGE,
    ) -> None:
        self.config = config
        self.scope = config.crawl_scope
        self._fetcher = fetcher
        self._limiter = RateLimiter(1.0 / config.requests_per_second, clock, sleep)
        self._fetches_per_page = fetches_per_page
        self._robots: RobotsRules | None = None
        self._tracking = tuple(config.tracking_parameters)
        starts = (*config.seeds, *config.sitemaps)
        self._starts = frozenset({*starts, *(absolute_url(url, url, self._tracking) or url for url in starts)})
        first = (config.seeds or config.sitemaps)[0]
        self._origin = f"{first.split('://', 1)[0]}://{self.scope.host}"

    @classmethod
    def from_config(cls, config: Mapping[str, Any], fetcher: PageFetcher, **kwargs: Any) -> WebConnector:
        return cls(WebSourceConfig.model_validate(dict(config)), fetcher, **kwargs)

    # -- the Connector interface --

    def list_page(self, cursor: str | None, known: KnownLookup) -> ListingPage:
        state = self._initial_state() if cursor is None else self._resume(cursor)
        robots = self._robots_rules()
        result = _PageResult()
        budget = self._fetches_per_page
        while state.frontier and budget > 0:
            batch = self._take_batch(state, robots, min(budget, self.config.concurrency), known)
            if not batch:
                continue
            budget -= len(batch)
            for outcome in self._fetch_all(batch):
                self._absorb(outcome, state, robots, result)
        return ListingPage(
            items=tuple(result.items),
            cursor=state.to_cursor(self._origin) if state.frontier else None,
            truncated=state.truncated,
            gone=tuple(result.gone),
            failures=tuple(result.failures),
        )

    def fetch(self, item: SourceItem) -> bytes:
        try:
            response = self._get(item.uri, {}, self.config.max_page_bytes)
        except FetchRefusedError as exc:
            raise ItemUnavailableError(exc.code, exc.message) from exc
        if not 200 <= response.status < 300:
            raise ItemUnavailableError(HTTP_ERROR, f"{item.uri} answered {response.status}")
        return response.body

    # -- the crawl --

    def _initial_state(self) -> CrawlState:
        state = CrawlState()
        for seed in self.config.seeds:
            state.push("page", seed, 0)
        for sitemap in self.config.sitemaps:
            state.push("sitemap", sitemap, 0)
        return state

    def _resume(self, cursor: str) -> CrawlState:
        try:
            return CrawlState.from_cursor(cursor, self._origin)
        except CursorError as exc:
            raise ItemUnavailableError("INVALID_REQUEST", str(exc)) from exc

    def _take_batch(self, state: CrawlState, robots: RobotsRules, size: int, known: KnownLookup) -> list[_Outcome]:
        """Up to ``size`` entries off the frontier worth a fetch; the caps are applied here."""
        batch: list[_Outcome] = []
        while state.frontier and len(batch) < size:
            entry = state.frontier[0]
            if entry.url in state.done or not robots.allows(entry.url):
                state.frontier.popleft()
                continue
            if entry.kind == "sitemap":
                if state.sitemaps >= MAX_SITEMAPS:
                    state.truncated = True
                    state.frontier.popleft()
                    continue
                state.sitemaps += 1
            else:
                if state.pages >= self.config.max_pages:
                    # The cap ends the listing: what is left was not reached, so it is not gone.
                    state.truncated = True
                    state.frontier.clear()
                    break
                state.pages += 1
            state.frontier.popleft()
            batch.append(_Outcome(entry, known(entry.url) if entry.kind == "page" else None))
        return batch

    def _fetch_all(self, batch: list[_Outcome]) -> list[_Outcome]:
        if len(batch) == 1 or self.config.concurrency == 1:
            return [self._fetch_one(outcome) for outcome in batch]
        with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="web-crawl") as pool:
            return list(pool.map(self._fetch_one, batch))

    def _fetch_one(self, outcome: _Outcome) -> _Outcome:
        headers: dict[str, str] = {}
        validators = outcome.known.validators if outcome.known is not None else {}
        if validators.get("etag"):
            headers["if-none-match"] = validators["etag"]
        if validators.get("last_modified"):
            headers["if-modified-since"] = validators["last_modified"]
        cap = MAX_SITEMAP_BYTES if outcome.entry.kind == "sitemap" else self.config.max_page_bytes
        try:
            outcome.response = self._get(outcome.entry.url, headers, cap)
        except FetchRefusedError as exc:
            outcome.refused = exc
        return outcome

    def _get(self, url: str, headers: Mapping[str, str], max_bytes: int) -> FetchResponse:
        self._limiter.wait()
        return self._fetcher.get(url, headers, max_bytes, self._may_follow)

    def _may_follow(self, url: str) -> bool:
        """A redirect may go where a link may: in the scope, allowed by robots.txt."""
        try:
            target = canonical_url(url, self._tracking)
        except ValueError:
            return False
        return self.scope.contains(target) and (self._robots is None or self._robots.allows(target))

    def _robots_rules(self) -> RobotsRules:
        if self._robots is not None:
            return self._robots
        url = f"{self._origin}/robots.txt"
        try:
            self._limiter.wait()
            response = self._fetcher.get(url, {}, 1024 * 1024, self._on_host)
            rules = RobotsRules.from_response(response)
        except FetchRefusedError as exc:
            code = exc.code if exc.code.startswith(URL_REFUSED_PREFIX) else ROBOTS_UNAVAILABLE
            raise ItemUnavailableError(code, f"{url}: {exc.message}") from exc
        except RobotsUnavailableError as exc:
            raise ItemUnavailableError(ROBOTS_UNAVAILABLE, f"{url}: {exc}; nothing is crawled this sync") from exc
        self._limiter.interval = max(self._limiter.interval, rules.crawl_delay)
        self._robots = rules
        return rules

    def _on_host(self, url: str) -> bool:
        try:
            return self.scope.on_host(canonical_url(url))
        except ValueError:
            return False

    # -- what an answer adds to the listing --

    def _absorb(self, outcome: _Outcome, state: CrawlState, robots: RobotsRules, result: _PageResult) -> None:
        url = outcome.entry.url
        if self._start_failed(outcome):
            # A seed or sitemap that did not answer: what it leads to was not reached, so not gone.
            state.truncated = True
        if outcome.refused is not None:
            result.failures.append(ItemFailure(url, url, outcome.refused.code, outcome.refused.message))
            return
        response = outcome.response
        assert response is not None
        if outcome.entry.kind == "sitemap":
            self._absorb_sitemap(outcome.entry, response, state, robots, result)
        elif response.status == 304 and outcome.known is not None:
            self._absorb_unchanged(outcome.entry, outcome.known, state, robots, result)
        elif response.status in _GONE:
            result.gone.append(self._key(response.url, url))
        elif 200 <= response.status < 300:
            self._absorb_page(outcome.entry, response, state, robots, result)
        else:
            reason = f"{url} answered {response.status}"
            result.failures.append(ItemFailure(url, url, HTTP_ERROR, reason))

    def _start_failed(self, outcome: _Outcome) -> bool:
        entry = outcome.entry
        if entry.url not in self._starts:
            return False
        if outcome.refused is not None or outcome.response is None:
            return True
        return not (200 <= outcome.response.status < 300 or outcome.response.status == 304)

    def _key(self, answered: str, asked: str) -> str:
        try:
            return canonical_url(answered, self._tracking)
        except ValueError:
            return asked

    def _absorb_sitemap(
        self, entry: Entry, response: FetchResponse, state: CrawlState, robots: RobotsRules, result: _PageResult
    ) -> None:
        if response.status != 200:
            reason = f"the sitemap {entry.url} answered {response.status}"
            result.failures.append(ItemFailure(entry.url, entry.url, HTTP_ERROR, reason))
            return
        try:
            sitemap = parse_sitemap(response.body)
        except SitemapError as exc:
            result.failures.append(ItemFailure(entry.url, entry.url, SITEMAP_INVALID, f"{entry.url}: {exc}"))
            return
        for location in sitemap.locations:
            target = absolute_url(entry.url, location, self._tracking)
            if target is None or target in state.seen:
                continue  # a sitemap that lists itself, or one seen before, is read once
            if sitemap.kind == "sitemapindex":
                if self.scope.on_host(target):
                    state.push("sitemap", target, 0)
            else:
                self._enqueue(target, 0, state, robots)

    def _absorb_unchanged(
        self, entry: Entry, known: KnownItem, state: CrawlState, robots: RobotsRules, result: _PageResult
    ) -> None:
        state.done.add(entry.url)
        state.hashes.add(known.change_token[:HASH_CHARS])
        result.items.append(
            SourceItem(
                key=entry.url,
                change_token=known.change_token,
                uri=entry.url,
                filename=filename_for(entry.url, "links" in known.validators),
                validators=dict(known.validators),
            )
        )
        for link in json.loads(known.validators.get("links", "[]")):
            target = absolute_url(entry.url, str(link), self._tracking)
            if target is not None:
                self._enqueue(target, entry.depth + 1, state, robots)

    def _absorb_page(
        self, entry: Entry, response: FetchResponse, state: CrawlState, robots: RobotsRules, result: _PageResult
    ) -> None:
        key = self._key(response.url, entry.url)
        if key != entry.url and (key in state.done or not self.scope.contains(key)):
            return  # a redirect to a page already listed
        html = _is_html(response)
        links: list[str] = []
        index = True
        if html:
            page = read_page(response.body, _charset(response))
            base = absolute_url(key, page.base) if page.base else key
            base = base or key
            if not page.nofollow:
                links = list(dict.fromkeys(u for h in page.hrefs if (u := absolute_url(base, h, self._tracking))))
                links = [link for link in links if self.scope.contains(link)]
                for link in links:
                    self._enqueue(link, entry.depth + 1, state, robots)
            canonical = absolute_url(base, page.canonical, self._tracking) if page.canonical else None
            if canonical and canonical != key and self.scope.contains(canonical):
                # The page names another URL as its one spelling: that one is the item.
                if canonical not in state.seen and robots.allows(canonical):
                    state.push("page", canonical, entry.depth)
                return
            index = not page.noindex
        token = hashlib.sha256(response.body).hexdigest()
        if not index or token[:HASH_CHARS] in state.hashes:
            return  # noindex, or the same bytes as a page already listed
        state.hashes.add(token[:HASH_CHARS])
        state.done.add(key)
        result.items.append(
            SourceItem(
                key=key,
                change_token=token,
                uri=key,
                filename=filename_for(key, html),
                size_bytes=len(response.body),
                content=response.body,
                validators=self._validators(response, links if html else None),
            )
        )

    def _validators(self, response: FetchResponse, links: list[str] | None) -> dict[str, str]:
        validators = {
            name: response.headers[header]
            for name, header in (("etag", "etag"), ("last_modified", "last-modified"))
            if response.headers.get(header)
        }
        if not validators or links is None:
            return validators
        stored = json.dumps(links[:MAX_STORED_LINKS], separators=(",", ":"))
        if len(links) > MAX_STORED_LINKS or len(stored) > MAX_STORED_LINK_CHARS:
            return {}  # a 304 could not extend the frontier: always read such a page whole
        return {**validators, "links": stored}

    def _enqueue(self, url: str, depth: int, state: CrawlState, robots: RobotsRules) -> None:
        if url in state.seen or not self.scope.contains(url) or not robots.allows(url):
            return
        if depth > self.config.max_depth or len(state.seen) >= self.config.max_pages * DISCOVERY_FACTOR:
            state.truncated = True
            return
        state.push("page", url, depth)
