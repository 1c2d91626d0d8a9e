"""The web connector with the real, policy-checked fetcher (rag_ingest.adapters.web_fetch) against the
test site on 127.0.0.1 (tests/support/web_site.py): the exact set of pages, nothing fetched outside
the scope, nothing disallowed, no connection to a private address, the trap bounded, 304s on a
second listing, a page turned 404, a DNS answer that turns link-local, and a 200 MB page."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from rag_ingest.adapters.web_fetch import PolicyCheckedFetcher
from rag_ingest.core.url_policy import UrlPolicy
from rag_ingest.sources.connector import ItemUnavailableError, KnownItem, KnownLookup, ListingPage, SourceItem
from rag_ingest.sources.web.crawler import WebConnector
from rag_ingest.sources.web.fetching import (
    PAGE_TOO_LARGE,
    REDIRECT_REFUSED,
    TOO_MANY_REDIRECTS,
    USER_AGENT,
    FetchRefusedError,
)

from tests.support.web_memory import FakeClock
from tests.support.web_site import (
    EXPECTED_PATHS,
    PDF,
    Connections,
    WebSite,
    loopback_only_connections,
    serve_site,
)

pytestmark = pytest.mark.integration
FORBIDDEN = "WEB_URL_FORBIDDEN_ADDRESS"
MAX_PAGE_BYTES = 1024 * 1024


@pytest.fixture
def site() -> Iterator[WebSite]:
    with serve_site() as served:
        yield served


@pytest.fixture
def connections() -> Iterator[Connections]:
    with loopback_only_connections() as seen:
        yield seen


def crawler(site: WebSite, policy: UrlPolicy | None = None, root: str | None = None, **config: Any) -> WebConnector:
    base = root or site.root
    settings = {
        "seeds": [f"{base}/site/"],
        "sitemaps": [f"{base}/site/sitemap.xml"],
        "max_depth": 3,
        "max_pages": 60,
        "max_page_bytes": MAX_PAGE_BYTES,
        "concurrency": 2,
        **config,
    }
    fetcher = PolicyCheckedFetcher(policy or UrlPolicy(allow_loopback_http=True), timeout_seconds=5)
    clock = FakeClock()  # the pacing is the unit tests'; here nothing waits on it
    return WebConnector.from_config(settings, fetcher, clock=clock, sleep=clock.sleep)


def lookup(known: Mapping[str, KnownItem]) -> KnownLookup:
    def find(key: str) -> KnownItem | None:
        return known.get(key)

    return find


def list_all(connector: WebConnector, known: Mapping[str, KnownItem] | None = None) -> list[ListingPage]:
    stored = lookup(known or {})
    pages = [connector.list_page(None, stored)]
    while pages[-1].cursor is not None:
        pages.append(connector.list_page(pages[-1].cursor, stored))
    return pages


def items(pages: Sequence[ListingPage]) -> dict[str, SourceItem]:
    return {item.key: item for page in pages for item in page.items}


def failures(pages: Sequence[ListingPage]) -> dict[str, str]:
    return {failure.key: failure.code for page in pages for failure in page.failures}


def test_the_site_is_listed_exactly_and_nothing_forbidden_is_fetched(site: WebSite, connections: Connections) -> None:
    pages = list_all(crawler(site))
    listed = items(pages)
    assert set(listed) == {site.url(path) for path in EXPECTED_PATHS}
    assert listed[site.url("/site/files/report.pdf")].content == PDF.read_bytes()
    assert listed[site.url("/site/files/report.pdf")].filename == "report.pdf"
    assert (listed[site.url("/site/docs/a.html")].content or b"").startswith(b"<!doctype html>")  # gzip undone
    assert failures(pages) == {
        site.url("/site/big.html"): PAGE_TOO_LARGE,
        site.url("/site/redirect/to-private"): FORBIDDEN,
        site.url("/site/redirect/to-metadata"): FORBIDDEN,
        site.url("/site/redirect/to-outside"): REDIRECT_REFUSED,
        site.url("/site/redirect/into-private"): REDIRECT_REFUSED,
    }
    assert [key for page in pages for key in page.gone] == [site.url("/site/missing.html")]
    assert pages[-1].truncated  # the calendar goes on past max_depth

    paths = site.paths()
    assert [path for path in paths if not path.startswith("/site/") and path != "/robots.txt"] == []
    assert [path for path in paths if path.startswith("/site/private/")] == []
    assert connections.refused() == [] and set(connections.attempted) == {"127.0.0.1"}
    assert len(paths) == len(set(paths))  # nothing was fetched twice
    assert len([path for path in paths if path.startswith("/site/calendar/")]) == 3
    assert all(received.headers.get("User-Agent") == USER_AGENT for received in site.requests)
    assert site.big_bytes_sent < 16 * MAX_PAGE_BYTES  # not 200 MB


def test_the_trap_is_bounded_by_the_page_cap(site: WebSite, connections: Connections) -> None:
    pages = list_all(crawler(site, max_depth=50, max_pages=20, sitemaps=[]))
    # A redirect's hops are one page fetch: count the final answers.
    answers = [r.path for r in site.requests if r.path != "/robots.txt" and r.status not in (301, 302)]
    assert len(answers) <= 20
    assert len([path for path in answers if path.startswith("/site/calendar/")]) < 20
    assert pages[-1].truncated and pages[-1].cursor is None
    assert connections.refused() == []


def test_a_second_listing_gets_304s_and_a_removed_page_is_gone(site: WebSite, connections: Connections) -> None:
    first = items(list_all(crawler(site)))
    known = {key: KnownItem(item.change_token, item.validators) for key, item in first.items()}
    site.requests.clear()
    site.removed.add("/site/docs/b.html")

    pages = list_all(crawler(site), known)
    second = items(pages)
    assert set(second) == set(first) - {site.url("/site/docs/b.html")}
    assert sorted(key for page in pages for key in page.gone) == sorted(
        [site.url("/site/missing.html"), site.url("/site/docs/b.html")]
    )
    # c.html is reached only through a redirect: read whole (no validators for it were sent), same token.
    redirected = site.url("/site/docs/c.html")
    for key, item in second.items():
        assert item.change_token == first[key].change_token
        assert (item.content is None) == (key != redirected)
    statuses = {received.path: received.status for received in site.requests}
    assert all(statuses[path] == 304 for path in EXPECTED_PATHS - {"/site/docs/b.html", "/site/docs/c.html"})
    assert connections.refused() == []


def test_a_dns_answer_that_turns_link_local_is_refused(site: WebSite, connections: Connections) -> None:
    answers: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        assert host == "docs.site.test"
        answers.append("127.0.0.1" if len(answers) < 3 else "169.254.169.254")
        return [answers[-1]]

    policy = UrlPolicy(allow_loopback_http=True, resolver=rebinding)
    pages = list_all(crawler(site, policy, root=f"http://docs.site.test:{site.port}", sitemaps=[], concurrency=1))
    listed, failed = items(pages), failures(pages)
    assert len(listed) == 2  # the index and the first page before the answer changed
    assert failed and set(failed.values()) == {FORBIDDEN}
    assert connections.attempted == ["127.0.0.1"] * 3 and connections.refused() == []
    assert len(site.requests) == 3  # robots.txt and two pages


def test_the_policy_refuses_private_redirects_whatever_the_crawler_allows(
    site: WebSite, connections: Connections
) -> None:
    fetcher = PolicyCheckedFetcher(UrlPolicy(allow_loopback_http=True), timeout_seconds=5)
    for path in ("/site/redirect/to-private", "/site/redirect/to-metadata"):
        with pytest.raises(FetchRefusedError) as refused:
            fetcher.get(site.url(path), {}, MAX_PAGE_BYTES, lambda url: True)
        assert refused.value.code == FORBIDDEN
    assert connections.refused() == [] and site.paths() == [
        "/site/redirect/to-private",
        "/site/redirect/to-metadata",
    ]
    # In AWS (no loopback), the site itself is refused before any connection.
    with pytest.raises(FetchRefusedError) as refused:
        PolicyCheckedFetcher(UrlPolicy()).get(site.url("/site/"), {}, MAX_PAGE_BYTES, lambda url: True)
    assert refused.value.code == "WEB_URL_NOT_HTTPS"


def test_a_200_mb_page_fails_itself_after_reading_its_cap(site: WebSite, connections: Connections) -> None:
    fetcher = PolicyCheckedFetcher(UrlPolicy(allow_loopback_http=True), timeout_seconds=5)
    with pytest.raises(FetchRefusedError) as refused:
        fetcher.get(site.url("/site/big.html"), {}, MAX_PAGE_BYTES, lambda url: True)
    assert refused.value.code == PAGE_TOO_LARGE
    assert site.big_bytes_sent < 16 * MAX_PAGE_BYTES
    assert fetcher.get(site.url("/site/about.html"), {}, MAX_PAGE_BYTES, lambda url: True).status == 200


def test_a_gzip_bomb_and_a_redirect_loop_fail_with_their_codes(site: WebSite, connections: Connections) -> None:
    fetcher = PolicyCheckedFetcher(UrlPolicy(allow_loopback_http=True), timeout_seconds=5)
    with pytest.raises(FetchRefusedError) as refused:
        fetcher.get(site.url("/site/unlinked/gzip-bomb.html"), {}, MAX_PAGE_BYTES, lambda url: True)
    assert refused.value.code == PAGE_TOO_LARGE
    with pytest.raises(FetchRefusedError) as refused:
        fetcher.get(site.url("/site/unlinked/loop"), {}, MAX_PAGE_BYTES, lambda url: True)
    assert refused.value.code == TOO_MANY_REDIRECTS
    assert site.paths().count("/site/unlinked/loop") == 6  # the first request and 5 redirects


def test_a_source_on_a_forbidden_address_is_a_clear_error(connections: Connections) -> None:
    connector = WebConnector.from_config(
        {"seeds": ["http://169.254.169.254/latest/"]},
        PolicyCheckedFetcher(UrlPolicy(allow_loopback_http=True)),
    )
    with pytest.raises(ItemUnavailableError) as raised:
        connector.list_page(None, lookup({}))
    assert raised.value.code == FORBIDDEN
    assert connections.attempted == []
