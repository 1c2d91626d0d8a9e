"""Config validation of the API's keys: CORS origins, sign-in URLs and the Cognito domain prefix."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import CLI_LOOPBACK_URL, ConfigError, parse_config
from infra.constructs.api import user_pool_domain_base

pytestmark = pytest.mark.infra


@pytest.mark.parametrize(
    "origins",
    [
        ["https://docs.example.com"],
        ["http://localhost"],
        ["http://localhost:8000", "http://127.0.0.1:8080", "https://app.example.com:8443"],
    ],
)
def test_https_and_loopback_origins_are_accepted(origins: list[str]) -> None:
    assert parse_config({"allowedOrigins": origins}).allowed_origins == tuple(origins)


@pytest.mark.parametrize(
    "origin",
    [
        "http://example.com",
        "http://192.168.1.10:8000",
        "http://localhost.example.com",
        "http://127.0.0.1.nip.io",
        "*",
        "https://example.com/path",
        "ftp://example.com",
    ],
)
def test_other_origins_are_refused_at_synth(origin: str) -> None:
    with pytest.raises(ConfigError, match="allowedOrigins"):
        parse_config({"allowedOrigins": ["https://ok.example.com", origin]})


def test_sign_in_urls_default_to_the_cli_loopback() -> None:
    auth = parse_config({}).auth
    assert auth.callback_urls == (CLI_LOOPBACK_URL,) == auth.logout_urls
    assert CLI_LOOPBACK_URL == "http://localhost:8765/callback"
    assert auth.domain_prefix is None


@pytest.mark.parametrize("key", ["callbackUrls", "logoutUrls"])
@pytest.mark.parametrize(
    "url", ["http://example.com/", "http://127.0.0.1:8765/callback", "https://app.example.com/#x", "localhost:8765", ""]
)
def test_sign_in_urls_must_be_https_or_localhost(key: str, url: str) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_config({"auth": {key: [url]}})


@pytest.mark.parametrize("url", ["https://app.example.com/", "https://app.example.com:8443/cb", CLI_LOOPBACK_URL])
def test_good_sign_in_urls_are_kept(url: str) -> None:
    auth = parse_config({"auth": {"callbackUrls": [url], "logoutUrls": [url]}}).auth
    assert auth.callback_urls == (url,) == auth.logout_urls


@pytest.mark.parametrize(
    "prefix", ["My-Pool", "-pool", "pool-", "my-aws-pool", "amazon-docs", "cognito1", "a" * 64, ""]
)
def test_bad_domain_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match="domainPrefix"):
        parse_config({"auth": {"domainPrefix": prefix}})


@pytest.mark.parametrize(
    ("raw", "base"),
    [
        ({"auth": {"domainPrefix": "docs-team"}}, "docs-team"),
        ({"stackName": "RagIngest"}, "ragingest"),
        ({"stackName": "Aws-Rag-Cognito-Stack"}, "rag-stack"),
        ({"stackName": "AWS"}, "rag-ingest"),
    ],
)
def test_domain_prefix_is_configured_or_derived_from_the_stack(raw: dict[str, Any], base: str) -> None:
    assert user_pool_domain_base(parse_config(raw)) == base
