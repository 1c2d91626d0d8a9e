"""Canonical URLs, the scope test, file names, and the web source's configuration
(rag_ingest.sources.web.urls and .config)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from rag_ingest.core.url_policy import UrlPolicy
from rag_ingest.sources.web.config import WebSourceConfig
from rag_ingest.sources.web.urls import (
    InvalidUrlError,
    Scope,
    absolute_url,
    canonical_url,
    filename_for,
    folder_of,
)

pytestmark = pytest.mark.unit
TRACKING = ("utm_*", "fbclid", "gclid")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("HTTP://Docs.Example.COM:80/Guide/", "http://docs.example.com/Guide/"),
        ("https://docs.example.com:443/a", "https://docs.example.com/a"),
        ("https://docs.example.com:8443/a", "https://docs.example.com:8443/a"),
        ("https://docs.example.com", "https://docs.example.com/"),
        ("https://docs.example.com/a/./b/../c.html#part-2", "https://docs.example.com/a/c.html"),
        ("https://docs.example.com/a/b/..", "https://docs.example.com/a/"),
        ("https://docs.example.com/../../x", "https://docs.example.com/x"),
        ("https://d.example.com/p?b=2&utm_source=news&a=1&fbclid=z&UTM_MEDIUM=m", "https://d.example.com/p?a=1&b=2"),
        ("https://d.example.com/p?utm_campaign=x", "https://d.example.com/p"),
        ("https://d.example.com/a b/ü.html", "https://d.example.com/a%20b/%C3%BC.html"),
        ("https://d.example.com/a%20b", "https://d.example.com/a%20b"),
        ("https://Bücher.example/", "https://xn--bcher-kva.example/"),
    ],
)
def test_every_spelling_of_a_page_is_one_url(given: str, expected: str) -> None:
    assert canonical_url(given, TRACKING) == expected
    assert canonical_url(expected, TRACKING) == expected


@pytest.mark.parametrize("bad", ["ftp://example.com/x", "mailto:someone@example.com", "/relative", "https://u:p@h/"])
def test_only_absolute_http_urls_without_credentials(bad: str) -> None:
    with pytest.raises(InvalidUrlError):
        canonical_url(bad)


def test_links_resolve_against_the_page_and_skip_what_is_not_a_page() -> None:
    base = "https://d.example.com/guide/intro.html"
    assert absolute_url(base, "next.html#top") == "https://d.example.com/guide/next.html"
    assert absolute_url(base, "../api/") == "https://d.example.com/api/"
    assert absolute_url(base, "//other.example.com/x") == "https://other.example.com/x"
    assert [absolute_url(base, h) for h in ("#top", "mailto:a@b.c", "javascript:void(0)", " ")] == [None] * 4


def test_the_scope_is_a_host_and_a_path_prefix() -> None:
    scope = Scope(host="d.example.com", path_prefix="/guide/")
    assert scope.contains("https://d.example.com/guide/a.html")
    assert scope.contains("http://d.example.com/guide/")
    assert not scope.contains("https://d.example.com/guides/a.html")
    assert not scope.contains("https://d.example.com/")
    assert not scope.contains("https://d.example.com:8443/guide/a.html")
    assert not scope.contains("https://evil.example.com/guide/a.html")
    assert scope.on_host("https://d.example.com/sitemap.xml")


def test_file_names_come_from_the_path() -> None:
    assert filename_for("https://d.example.com/guide/", True) == "index.html"
    assert filename_for("https://d.example.com/", True) == "index.html"
    assert filename_for("https://d.example.com/guide/setup", True) == "setup.html"
    assert filename_for("https://d.example.com/files/Report%202026.pdf", False) == "Report 2026.pdf"
    assert filename_for("https://d.example.com/files/..%2F..%2Fetc", False) == "_.._etc"
    assert folder_of("https://d.example.com/guide/intro.html") == "/guide/"


def test_the_scope_defaults_to_the_first_seeds_host_and_folder() -> None:
    config = WebSourceConfig.model_validate(
        {"seeds": ["https://Docs.Example.com/guide/intro.html?utm_source=x", "https://docs.example.com/guide/b/"]}
    )
    assert config.crawl_scope == Scope(host="docs.example.com", path_prefix="/guide/")
    assert config.seeds == ["https://docs.example.com/guide/intro.html", "https://docs.example.com/guide/b/"]
    assert (config.max_pages, config.max_depth, config.max_page_bytes) == (1000, 5, 10 * 1024 * 1024)
    assert (config.requests_per_second, config.concurrency) == (2.0, 2)
    assert "utm_*" in config.tracking_parameters


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "at least one seed or sitemap"),
        ({"seeds": ["ftp://d.example.com/"]}, "not an absolute http or https URL"),
        ({"seeds": ["https://d.example.com/a/", "https://d.example.com/b/"]}, "outside the scope"),
        ({"seeds": ["https://d.example.com/"], "scope": {"host": "other.example.com"}}, "outside the scope"),
        (
            {"seeds": ["https://d.example.com/"], "sitemaps": ["https://cdn.example.com/s.xml"]},
            "not on the scope's host",
        ),
        (
            {"seeds": ["https://d.example.com/"], "scope": {"host": "d.example.com", "path_prefix": "x"}},
            "start with '/'",
        ),
        ({"seeds": ["https://d.example.com/"], "max_pages": 0}, "max_pages"),
        ({"seeds": ["https://d.example.com/"], "max_depth": 51}, "max_depth"),
        ({"seeds": ["https://d.example.com/"], "max_page_bytes": 10**12}, "max_page_bytes"),
        ({"seeds": ["https://d.example.com/"], "requests_per_second": 0}, "requests_per_second"),
        ({"seeds": ["https://d.example.com/"], "concurrency": 100}, "concurrency"),
        ({"seeds": ["https://d.example.com/"], "depth": 3}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_configuration_is_a_clear_error(config: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        WebSourceConfig.model_validate(config)


def test_the_url_policy_is_asked_about_the_scopes_host_when_a_source_is_created() -> None:
    def resolver(host: str, port: int) -> list[str]:
        return {"docs.example.com": ["93.184.215.14"], "rebound.example.com": ["169.254.169.254"]}[host]

    policy = UrlPolicy(resolver=resolver)
    assert WebSourceConfig.model_validate({"seeds": ["https://docs.example.com/"]}).policy_refusal(policy) is None
    for seed, code in [
        ("https://rebound.example.com/guide/", "WEB_URL_FORBIDDEN_ADDRESS"),
        ("https://169.254.169.254/latest/", "WEB_URL_FORBIDDEN_ADDRESS"),
        ("https://10.0.0.1/", "WEB_URL_FORBIDDEN_ADDRESS"),
        ("http://docs.example.com/", "WEB_URL_NOT_HTTPS"),
    ]:
        refusal = WebSourceConfig.model_validate({"seeds": [seed]}).policy_refusal(policy)
        assert refusal is not None and refusal[0] == code, seed
