"""make bench-sync-web: the web connector, with its real fetcher, over the test site on 127.0.0.1.

Serves tests/support/web_site.py (robots-disallowed section, calendar trap, redirects to 10.0.0.1 and
169.254.169.254, a 404, duplicates, a canonical link, nested sitemaps, a PDF, a 200 MB page) and
lists it four times on the real clock: a first sync, a second with the stored validators, one
resumed from its cursor every 5 fetches, and one with a page cap and no depth cap (the trap).
Prints pages found against expected and the forbidden fetch counts, which must be 0 (exit 1
otherwise); a guard refuses and counts any connection not to loopback. Imports ``tests.support``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from rag_ingest.adapters.web_fetch import PolicyCheckedFetcher
from rag_ingest.core.url_policy import UrlPolicy
from rag_ingest.sources.connector import KnownItem, ListingPage, SourceItem
from rag_ingest.sources.web.crawler import FETCHES_PER_PAGE, WebConnector

from tests.support.web_site import EXPECTED_PATHS, Connections, WebSite, loopback_only_connections, serve_site


@dataclass
class Run:
    name: str
    seconds: float
    requests: int
    robots_fetches: int
    pages_found: int
    pages_expected: int
    missing: list[str]
    unexpected: list[str]
    not_modified: int
    gone: int
    failures: dict[str, int]
    truncated: bool
    outside_scope: int
    disallowed: int
    private_connections: int
    calendar_fetches: int
    listing_pages: int
    largest_cursor_bytes: int
    big_page_mib_sent: float


def _list(
    new_connector: Callable[[], WebConnector], known: Mapping[str, KnownItem], resume: bool
) -> tuple[list[ListingPage], int]:
    """``resume``: a new connector for every page, from the cursor alone, as a new Lambda would."""

    def find(key: str) -> KnownItem | None:
        return known.get(key)

    connector = new_connector()
    pages = [connector.list_page(None, find)]
    largest = len(pages[-1].cursor or "")
    while pages[-1].cursor is not None:
        connector = new_connector() if resume else connector
        pages.append(connector.list_page(pages[-1].cursor, find))
        largest = max(largest, len(pages[-1].cursor or ""))
    return pages, largest


def run(
    name: str,
    site: WebSite,
    connections: Connections,
    config: dict[str, Any],
    known: Mapping[str, KnownItem],
    expected: frozenset[str] | None,
    fetches_per_page: int = FETCHES_PER_PAGE,
) -> tuple[Run, dict[str, SourceItem]]:
    site.requests.clear()
    connections.attempted.clear()
    big_before = site.big_bytes_sent

    def new_connector() -> WebConnector:
        fetcher = PolicyCheckedFetcher(UrlPolicy(allow_loopback_http=True))
        return WebConnector.from_config(config, fetcher, fetches_per_page=fetches_per_page)

    started = time.perf_counter()
    pages, largest_cursor = _list(new_connector, known, resume=fetches_per_page != FETCHES_PER_PAGE)
    seconds = time.perf_counter() - started
    items = {item.key: item for page in pages for item in page.items}
    found = {key.removeprefix(site.root) for key in items}
    failures: dict[str, int] = {}
    for page in pages:
        for failure in page.failures:
            failures[failure.code] = failures.get(failure.code, 0) + 1
    paths = site.paths()
    return (
        Run(
            name=name,
            seconds=round(seconds, 3),
            requests=len(paths),
            robots_fetches=paths.count("/robots.txt"),
            pages_found=len(found),
            pages_expected=len(expected) if expected is not None else -1,
            missing=sorted(expected - found) if expected is not None else [],
            unexpected=sorted(found - expected) if expected is not None else [],
            not_modified=sum(1 for received in site.requests if received.status == 304),
            gone=sum(len(page.gone) for page in pages),
            failures=failures,
            truncated=pages[-1].truncated,
            outside_scope=sum(1 for path in paths if not path.startswith("/site/") and path != "/robots.txt"),
            disallowed=sum(1 for path in paths if path.startswith("/site/private/")),
            private_connections=len(connections.refused()),
            calendar_fetches=sum(1 for path in paths if path.startswith("/site/calendar/")),
            listing_pages=len(pages),
            largest_cursor_bytes=largest_cursor,
            big_page_mib_sent=round((site.big_bytes_sent - big_before) / 1024 / 1024, 1),
        ),
        items,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests-per-second", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--report", help="also write the runs as JSON to this file")
    args = parser.parse_args(argv)

    runs: list[Run] = []
    with serve_site() as site, loopback_only_connections() as connections:
        config = {
            "seeds": [site.url("/site/")],
            "sitemaps": [site.url("/site/sitemap.xml")],
            "max_depth": 3,
            "max_pages": 60,
            "max_page_bytes": 1024 * 1024,
            "requests_per_second": args.requests_per_second,
            "concurrency": args.concurrency,
        }
        first, items = run("first sync", site, connections, config, {}, EXPECTED_PATHS)
        runs.append(first)
        known = {key: KnownItem(item.change_token, item.validators) for key, item in items.items()}
        second, _ = run("second sync (validators)", site, connections, config, known, EXPECTED_PATHS)
        runs.append(second)
        paged = "resumed: 5 fetches a page, a new connector for each"
        runs.append(run(paged, site, connections, config, {}, EXPECTED_PATHS, fetches_per_page=5)[0])
        trap = {**config, "max_depth": 50, "max_pages": 20, "sitemaps": []}
        runs.append(run("trap: max_pages 20, max_depth 50", site, connections, trap, {}, None)[0])

    for measured in runs:
        print(f"{measured.name}:")
        if measured.pages_expected >= 0:
            print(f"  pages found {measured.pages_found} / expected {measured.pages_expected}", end="")
            print(f" (missing {measured.missing or 0}, unexpected {measured.unexpected or 0})")
        else:
            print(f"  pages found {measured.pages_found}, calendar fetches {measured.calendar_fetches}")
        print(
            f"  requests {measured.requests} (robots.txt: {measured.robots_fetches}, 304: {measured.not_modified})"
            f" in {measured.seconds:.2f} s"
        )
        print(f"  gone {measured.gone}, failures {measured.failures}, truncated {measured.truncated}")
        print(
            f"  fetches outside the scope {measured.outside_scope}, disallowed {measured.disallowed},"
            f" to a private address {measured.private_connections}"
        )
        print(f"  listing pages {measured.listing_pages}, largest cursor {measured.largest_cursor_bytes} bytes")
        print(f"  the 200 MB page: {measured.big_page_mib_sent} MiB sent by the server (the cap is 1 MiB)")
    if args.report:
        with open(args.report, "w") as out:
            json.dump({"runs": [asdict(r) for r in runs]}, out, indent=2)

    forbidden = sum(r.outside_scope + r.disallowed + r.private_connections for r in runs)
    exact = all(not r.missing and not r.unexpected for r in runs) and (
        runs[2].requests - runs[2].robots_fetches == runs[0].requests - runs[0].robots_fetches
    )
    trap_bounded = runs[-1].truncated and runs[-1].pages_found <= 20
    if forbidden or not exact or not trap_bounded:
        print("FAILED: forbidden fetches, a page set that differs, or an unbounded trap", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
