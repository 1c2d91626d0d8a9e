"""robots.txt rules (rag_ingest.sources.web.robots) and sitemap parsing (.sitemaps): what a missing
or failing robots.txt means, and sitemaps that are gzipped, hostile or not sitemaps at all."""

from __future__ import annotations

import gzip

import pytest
from rag_ingest.sources.web.fetching import FetchResponse
from rag_ingest.sources.web.robots import RobotsRules, RobotsUnavailableError
from rag_ingest.sources.web.sitemaps import MAX_SITEMAP_BYTES, SitemapError, parse_sitemap

pytestmark = pytest.mark.unit
ROBOTS = b"""User-agent: *
Disallow: /private/
Crawl-delay: 1.5

User-agent: rag-ingest-crawler
Disallow: /no-rag/
Allow: /no-rag/but-this.html
"""


def answer(status: int, body: bytes = b"") -> FetchResponse:
    return FetchResponse(status=status, url="https://d.example.com/robots.txt", body=body)


def test_the_group_naming_the_crawler_applies() -> None:
    rules = RobotsRules.from_response(answer(200, ROBOTS))
    assert not rules.allows("https://d.example.com/no-rag/page.html")
    assert rules.allows("https://d.example.com/no-rag/but-this.html")
    # Only the most specific group applies (RFC 9309): /private/ is the other agents' rule.
    assert rules.allows("https://d.example.com/private/x.html")
    general = RobotsRules.from_response(answer(200, b"User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n"))
    assert not general.allows("https://d.example.com/private/x.html")
    assert general.crawl_delay == 3.0


def test_a_missing_robots_txt_allows_everything() -> None:
    for status in (404, 410, 403):
        assert RobotsRules.from_response(answer(status)).allows("https://d.example.com/private/x")


@pytest.mark.parametrize("status", [500, 503])
def test_a_failing_robots_txt_allows_nothing(status: int) -> None:
    with pytest.raises(RobotsUnavailableError):
        RobotsRules.from_response(answer(status))


def test_a_huge_crawl_delay_is_bounded() -> None:
    assert RobotsRules.from_response(answer(200, b"User-agent: *\nCrawl-delay: 86400\n")).crawl_delay == 10.0


URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc> https://d.example.com/a.html </loc><lastmod>2026-12-01</lastmod></url>
  <url><loc>https://d.example.com/b.html</loc></url>
</urlset>"""
INDEX = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://d.example.com/s1.xml</loc></sitemap>
  <sitemap><loc>https://d.example.com/index.xml</loc></sitemap>
</sitemapindex>"""


def test_a_urlset_and_an_index() -> None:
    pages = parse_sitemap(URLSET)
    assert pages.kind == "urlset"
    assert pages.locations == ("https://d.example.com/a.html", "https://d.example.com/b.html")
    index = parse_sitemap(INDEX)
    assert index.kind == "sitemapindex"
    assert index.locations == ("https://d.example.com/s1.xml", "https://d.example.com/index.xml")


def test_a_gzipped_sitemap() -> None:
    assert parse_sitemap(gzip.compress(URLSET)).locations == parse_sitemap(URLSET).locations


def test_a_gzip_bomb_is_refused_without_inflating_it_all() -> None:
    bomb = gzip.compress(b"<urlset>" + b" " * (MAX_SITEMAP_BYTES + 10))
    with pytest.raises(SitemapError, match="inflates past"):
        parse_sitemap(bomb)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
            b"<urlset><url><loc>&lol2;</loc></url></urlset>",
            "document type declaration",
        ),
        (
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><urlset><url><loc>&e;</loc></url></urlset>',
            "document type declaration",
        ),
        (b"<html><body>not a sitemap</body></html>", "not a sitemap"),
        (b"<urlset><url><loc>https://d.example.com/a", "not well-formed"),
    ],
)
def test_hostile_or_wrong_sitemaps_are_clear_errors(body: bytes, message: str) -> None:
    with pytest.raises(SitemapError, match=message):
        parse_sitemap(body)
