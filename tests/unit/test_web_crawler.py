"""The web connector's crawl (rag_ingest.sources.web.crawler) over an in-memory site and a fake clock:
scope, robots.txt, caps, duplicates, canonical links, conditional GETs, gone pages, failures, the
cursor, pacing and sitemaps."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from rag_ingest.sources.connector import ItemUnavailableError, KnownItem, KnownLookup, ListingPage, SourceItem
from rag_ingest.sources.web.crawler import WebConnector
from rag_ingest.sources.web.fetching import HTTP_ERROR, PAGE_TOO_LARGE, REDIRECT_REFUSED, ROBOTS_UNAVAILABLE

from tests.support.web_memory import MemoryFetcher, Page, html

pytestmark = pytest.mark.unit
ROOT = "https://d.example.com"
ROBOTS = Page(b"User-agent: *\nDisallow: /docs/private/\n", content_type="text/plain")


def site(**overrides: Page) -> dict[str, Page]:
    pages = {
        f"{ROOT}/robots.txt": ROBOTS,
        f"{ROOT}/docs/": html("a.html", "b.html?utm_source=mail#top", "private/secret.html", "/elsewhere/x.html"),
        f"{ROOT}/docs/a.html": html("b.html", "https://other.example.com/docs/", text="a"),
        f"{ROOT}/docs/b.html": html("/docs/", text="b"),
        f"{ROOT}/docs/private/secret.html": html(text="secret"),
        f"{ROOT}/elsewhere/x.html": html(text="outside"),
    }
    pages.update({f"{ROOT}{path}": page for path, page in overrides.items()})
    return pages


def connector(fetcher: MemoryFetcher, **config: Any) -> WebConnector:
    settings: dict[str, Any] = {"seeds": [f"{ROOT}/docs/"], "requests_per_second": 10, "concurrency": 1, **config}
    return WebConnector.from_config(settings, fetcher, clock=fetcher.clock, sleep=fetcher.clock.sleep)


def lookup(known: Mapping[str, KnownItem]) -> KnownLookup:
    def find(key: str) -> KnownItem | None:
        return known.get(key)

    return find


NOTHING_KNOWN = lookup({})


def list_all(
    crawler: WebConnector, known: Mapping[str, KnownItem] | None = None, cursor: str | None = None
) -> list[ListingPage]:
    stored = lookup(known or {})
    pages = [crawler.list_page(cursor, stored)]
    while pages[-1].cursor is not None:
        pages.append(crawler.list_page(pages[-1].cursor, stored))
    return pages


def items(pages: list[ListingPage]) -> dict[str, SourceItem]:
    return {item.key: item for page in pages for item in page.items}


def test_a_crawl_lists_the_scope_and_nothing_else() -> None:
    fetcher = MemoryFetcher(site())
    pages = list_all(connector(fetcher))
    listed = items(pages)
    assert sorted(listed) == [f"{ROOT}/docs/", f"{ROOT}/docs/a.html", f"{ROOT}/docs/b.html"]
    page_a = listed[f"{ROOT}/docs/a.html"]
    assert page_a.uri == page_a.key and page_a.filename == "a.html"
    assert page_a.content == fetcher.pages[f"{ROOT}/docs/a.html"].body
    assert page_a.change_token == hashlib.sha256(page_a.content).hexdigest()
    assert listed[f"{ROOT}/docs/"].filename == "index.html"
    # robots.txt once, each page once (b.html's tracking parameter and fragment are the same page).
    assert fetcher.urls() == [f"{ROOT}/robots.txt", f"{ROOT}/docs/", f"{ROOT}/docs/a.html", f"{ROOT}/docs/b.html"]
    assert all(request[1].get("if-none-match") is None for request in fetcher.requests)
    assert not pages[-1].truncated and pages[-1].gone == () and pages[-1].failures == ()


def test_the_same_bytes_at_another_url_are_one_item() -> None:
    copy = site()[f"{ROOT}/docs/a.html"]
    fetcher = MemoryFetcher(site(**{"/docs/": html("a.html", "copy-of-a.html"), "/docs/copy-of-a.html": copy}))
    listed = items(list_all(connector(fetcher)))
    assert f"{ROOT}/docs/copy-of-a.html" in fetcher.urls()
    assert sorted(listed) == [f"{ROOT}/docs/", f"{ROOT}/docs/a.html", f"{ROOT}/docs/b.html"]


def test_a_canonical_link_in_scope_names_the_item() -> None:
    alias = html("a.html", extra='<link rel="canonical" href="/docs/real.html">', text="alias")
    outside = html(extra=f'<link rel="canonical" href="{ROOT}/other/x.html">', text="canonical outside the scope")
    fetcher = MemoryFetcher(
        site(**{"/docs/": html("alias.html", "own.html"), "/docs/alias.html": alias, "/docs/own.html": outside})
    )
    fetcher.pages[f"{ROOT}/docs/real.html"] = html(text="real")
    listed = items(list_all(connector(fetcher)))
    assert f"{ROOT}/docs/real.html" in listed and f"{ROOT}/docs/alias.html" not in listed
    assert f"{ROOT}/docs/own.html" in listed  # a canonical outside the scope is not followed
    assert f"{ROOT}/docs/a.html" in listed  # the alias's links are still read


def test_a_calendar_trap_is_bounded_by_the_depth_cap() -> None:
    fetcher = MemoryFetcher(site(**{"/docs/": html("cal/1")}))
    for month in range(1, 100):
        fetcher.pages[f"{ROOT}/docs/cal/{month}"] = html(f"/docs/cal/{month + 1}", text=f"month {month}")
    pages = list_all(connector(fetcher, max_depth=3))
    assert sorted(items(pages)) == [f"{ROOT}/docs/", f"{ROOT}/docs/cal/1", f"{ROOT}/docs/cal/2", f"{ROOT}/docs/cal/3"]
    assert pages[-1].truncated  # pages it did not reach are not gone


def test_the_page_cap_ends_the_listing_truncated() -> None:
    fetcher = MemoryFetcher(site(**{"/docs/": html("cal/1")}))
    for month in range(1, 100):
        fetcher.pages[f"{ROOT}/docs/cal/{month}"] = html(f"/docs/cal/{month + 1}", text=f"month {month}")
    pages = list_all(connector(fetcher, max_pages=7, max_depth=50))
    assert len(items(pages)) == 7
    assert len(fetcher.requests) == 1 + 7  # robots.txt and seven pages
    assert pages[-1].truncated and pages[-1].cursor is None


def test_a_second_listing_asks_conditionally_and_a_304_keeps_the_token_and_the_links() -> None:
    pages = site()
    for url, page in pages.items():
        page.etag = f'"{hashlib.md5(url.encode()).hexdigest()}"'
    first = items(list_all(connector(MemoryFetcher(pages))))
    known = {key: KnownItem(item.change_token, item.validators) for key, item in first.items()}
    assert all("etag" in known_item.validators for known_item in known.values())

    fetcher = MemoryFetcher(pages)
    second = items(list_all(connector(fetcher), known))
    assert sorted(second) == sorted(first)  # what lies behind an unchanged page is still reached
    for key, item in second.items():
        assert item.change_token == first[key].change_token and item.content is None
    conditional = [url for url, headers, _ in fetcher.requests if headers.get("if-none-match")]
    assert sorted(conditional) == sorted(first)


def test_gone_pages_and_failures() -> None:
    fetcher = MemoryFetcher(
        site(
            **{
                "/docs/": html("a.html", "gone.html", "removed.html", "broken.html", "big.html", "moved.html"),
                "/docs/gone.html": Page(status=410),
                "/docs/broken.html": Page(b"oops", status=503),
                "/docs/big.html": Page(b"x" * 5000),
                "/docs/moved.html": Page(location="https://other.example.com/"),
            }
        )
    )
    pages = list_all(connector(fetcher, max_page_bytes=4096))
    gone = [key for page in pages for key in page.gone]
    failures = {failure.key: failure.code for page in pages for failure in page.failures}
    assert sorted(gone) == [f"{ROOT}/docs/gone.html", f"{ROOT}/docs/removed.html"]
    assert failures == {
        f"{ROOT}/docs/broken.html": HTTP_ERROR,
        f"{ROOT}/docs/big.html": PAGE_TOO_LARGE,
        f"{ROOT}/docs/moved.html": REDIRECT_REFUSED,
    }
    assert f"{ROOT}/docs/a.html" in items(pages)  # each failure fails only itself


@pytest.mark.parametrize("seed", [Page(status=404), Page(b"down", status=503)])
def test_a_seed_that_does_not_answer_leaves_the_listing_truncated_so_nothing_is_deleted(seed: Page) -> None:
    fetcher = MemoryFetcher(site(**{"/docs/": seed}))
    pages = list_all(connector(fetcher))
    assert items(pages) == {}
    assert pages[-1].truncated
    healthy = list_all(connector(MemoryFetcher(site())))
    assert not healthy[-1].truncated


def test_a_redirect_in_scope_lists_the_target_once() -> None:
    fetcher = MemoryFetcher(site(**{"/docs/": html("old.html", "a.html"), "/docs/old.html": Page(location="a.html")}))
    listed = items(list_all(connector(fetcher)))
    assert f"{ROOT}/docs/old.html" not in listed and f"{ROOT}/docs/a.html" in listed
    assert fetcher.urls().count(f"{ROOT}/docs/a.html") == 1


def test_a_redirect_into_a_disallowed_section_is_not_followed() -> None:
    fetcher = MemoryFetcher(site(**{"/docs/": html("sneaky.html"), "/docs/sneaky.html": Page(location="private/x")}))
    pages = list_all(connector(fetcher))
    assert [failure.code for page in pages for failure in page.failures] == [REDIRECT_REFUSED]
    assert not any("/private/" in url for url in fetcher.urls())


def test_a_listing_resumed_from_its_cursor_fetches_nothing_twice() -> None:
    whole = MemoryFetcher(site())
    expected = items(list_all(connector(whole)))

    fetcher = MemoryFetcher(site())
    settings = {"seeds": [f"{ROOT}/docs/"], "requests_per_second": 10, "concurrency": 1}
    crawler = WebConnector.from_config(
        settings, fetcher, clock=fetcher.clock, sleep=fetcher.clock.sleep, fetches_per_page=1
    )
    paged = [crawler.list_page(None, NOTHING_KNOWN)]
    assert len(paged[0].items) == 1 and paged[0].cursor is not None
    # A new connector (a new Lambda) resumes from the checkpointed cursor.
    fetcher.requests.clear()
    resumed = WebConnector.from_config(
        settings, fetcher, clock=fetcher.clock, sleep=fetcher.clock.sleep, fetches_per_page=1
    )
    paged += list_all(resumed, cursor=paged[0].cursor)
    assert sorted(items(paged)) == sorted(expected)
    page_fetches = [url for url in fetcher.urls() if not url.endswith("/robots.txt")]
    assert sorted(page_fetches) == sorted(set(expected) - {paged[0].items[0].key})


def test_requests_are_paced_per_host_and_robots_crawl_delay_slows_them() -> None:
    fetcher = MemoryFetcher(site())
    list_all(connector(fetcher, requests_per_second=2))
    times = [at for _, _, at in fetcher.requests]
    assert [round(b - a, 3) for a, b in itertools.pairwise(times)] == [0.5, 0.5, 0.5]

    slow = MemoryFetcher(site(**{"/robots.txt": Page(b"User-agent: *\nCrawl-delay: 3\n", content_type="text/plain")}))
    list_all(connector(slow, requests_per_second=2))
    times = [at for _, _, at in slow.requests]
    assert [round(b - a, 3) for a, b in itertools.pairwise(times)][1:] == [3.0, 3.0, 3.0]


def test_concurrent_fetches_list_the_same_items() -> None:
    serial = items(list_all(connector(MemoryFetcher(site()), concurrency=1)))
    parallel = items(list_all(connector(MemoryFetcher(site()), concurrency=3)))
    assert {key: item.change_token for key, item in parallel.items()} == {
        key: item.change_token for key, item in serial.items()
    }


def test_robots_txt_missing_allows_all_failing_stops_the_listing() -> None:
    missing = MemoryFetcher(site(**{"/robots.txt": Page(status=404)}))
    assert f"{ROOT}/docs/private/secret.html" in items(list_all(connector(missing)))
    failing = MemoryFetcher(site(**{"/robots.txt": Page(status=503)}))
    with pytest.raises(ItemUnavailableError) as raised:
        connector(failing).list_page(None, NOTHING_KNOWN)
    assert raised.value.code == ROBOTS_UNAVAILABLE
    assert failing.urls() == [f"{ROOT}/robots.txt"]


SITEMAP_NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def sitemap(kind: str, *locations: str) -> Page:
    entry = "url" if kind == "urlset" else "sitemap"
    body = "".join(f"<{entry}><loc>{ROOT}{loc}</loc></{entry}>" for loc in locations)
    return Page(f"<{kind} {SITEMAP_NS}>{body}</{kind}>".encode(), content_type="application/xml")


def test_sitemap_indexes_are_followed_and_a_sitemap_that_lists_itself_ends() -> None:
    fetcher = MemoryFetcher(
        site(
            **{
                "/sitemap.xml": sitemap("sitemapindex", "/sitemap.xml", "/sm/nested.xml", "/sm/pages.xml"),
                "/sm/nested.xml": sitemap("sitemapindex", "/sm/nested.xml", "/sitemap.xml", "/sm/more.xml"),
                "/sm/pages.xml": sitemap("urlset", "/docs/only-in-sitemap.html", "/docs/a.html", "/elsewhere/y"),
                "/sm/more.xml": sitemap("urlset", "/docs/deep/nested.html", "/docs/private/x.html"),
                "/docs/only-in-sitemap.html": html(text="only in the sitemap"),
                "/docs/deep/nested.html": html(text="nested"),
            }
        )
    )
    pages = list_all(connector(fetcher, sitemaps=[f"{ROOT}/sitemap.xml"]))
    listed = items(pages)
    assert f"{ROOT}/docs/only-in-sitemap.html" in listed and f"{ROOT}/docs/deep/nested.html" in listed
    sitemap_fetches = [url for url in fetcher.urls() if url.endswith(".xml")]
    assert sorted(sitemap_fetches) == sorted(
        f"{ROOT}{path}" for path in ("/sitemap.xml", "/sm/nested.xml", "/sm/pages.xml", "/sm/more.xml")
    )
    assert not any("/private/" in url or "/elsewhere/" in url for url in fetcher.urls())


def test_a_noindex_page_is_not_an_item_but_its_links_are_read() -> None:
    fetcher = MemoryFetcher(
        site(**{"/docs/": html("a.html", extra='<meta name="robots" content="noindex">', text="hub")})
    )
    listed = items(list_all(connector(fetcher)))
    assert f"{ROOT}/docs/" not in listed and f"{ROOT}/docs/a.html" in listed


def test_fetch_reads_an_items_bytes() -> None:
    fetcher = MemoryFetcher(site())
    crawler = connector(fetcher)
    crawler.list_page(None, NOTHING_KNOWN)
    item = SourceItem(key=f"{ROOT}/docs/a.html", change_token="t", uri=f"{ROOT}/docs/a.html", filename="a.html")
    assert crawler.fetch(item) == fetcher.pages[f"{ROOT}/docs/a.html"].body
    with pytest.raises(ItemUnavailableError):
        crawler.fetch(SourceItem(key="k", change_token="t", uri=f"{ROOT}/docs/none.html", filename="n.html"))


def test_the_cursor_is_compact_text_and_a_foreign_one_is_refused() -> None:
    fetcher = MemoryFetcher(site())
    settings = {"seeds": [f"{ROOT}/docs/"], "requests_per_second": 10, "concurrency": 1}
    crawler = WebConnector.from_config(
        settings, fetcher, clock=fetcher.clock, sleep=fetcher.clock.sleep, fetches_per_page=1
    )
    cursor = crawler.list_page(None, NOTHING_KNOWN).cursor
    assert cursor is not None and cursor.isascii() and ROOT not in cursor
    for bad in ("", "web1:not-base64!", '{"frontier": []}'):
        with pytest.raises(ItemUnavailableError):
            crawler.list_page(bad, NOTHING_KNOWN)
