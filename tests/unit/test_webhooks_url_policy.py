"""The SSRF guard: only https to public addresses in AWS; every refused class of address, at
registration and again at delivery (a DNS answer that changes after registration)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from rag_ingest.core.url_policy import UrlPolicy, UrlRefusedError

pytestmark = pytest.mark.unit
PUBLIC = "93.184.215.14"


def resolver_of(answers: dict[str, Sequence[str]]):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> Sequence[str]:
        return answers[host]

    return resolve


def refused(policy: UrlPolicy, url: str) -> str:
    with pytest.raises(UrlRefusedError) as caught:
        policy.resolve(url)
    return caught.value.code


def test_a_public_https_url_is_accepted_and_pinned_to_the_checked_address() -> None:
    policy = UrlPolicy(resolver=resolver_of({"hooks.example.com": [PUBLIC]}))
    target = policy.resolve("https://hooks.example.com/in?x=1")
    assert (target.scheme, target.host, target.port, target.path, target.address) == (
        "https",
        "hooks.example.com",
        443,
        "/in?x=1",
        PUBLIC,
    )


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",  # loopback
        "127.9.9.9",
        "::1",
        "10.0.0.5",  # private
        "172.16.3.4",
        "192.168.1.1",
        "fd00::1",  # unique local
        "169.254.169.254",  # link-local: the instance metadata service
        "fe80::1",
        "224.0.0.1",  # multicast
        "ff02::1",
        "240.0.0.1",  # reserved
        "0.0.0.0",  # unspecified
        "::",
        "100.64.0.1",  # shared address space (carrier-grade NAT): not global
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "::ffff:10.0.0.1",  # IPv4-mapped private
        "::ffff:169.254.169.254",
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "192.0.2.1",  # documentation
        "fec0::1",  # site-local
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1 (refused as reserved, like every 64:ff9b::/96 address)
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo of 10.0.0.1
    ],
)
def test_every_non_public_address_class_is_refused(address: str) -> None:
    policy = UrlPolicy(resolver=resolver_of({"evil.example": [address]}))
    assert refused(policy, "https://evil.example/") == "WEBHOOK_URL_FORBIDDEN_ADDRESS"
    # A literal address in the URL is checked the same way.
    host = f"[{address}]" if ":" in address else address
    assert refused(UrlPolicy(), f"https://{host}/") == "WEBHOOK_URL_FORBIDDEN_ADDRESS"


def test_one_bad_address_in_the_answer_refuses_the_name() -> None:
    policy = UrlPolicy(resolver=resolver_of({"mixed.example": [PUBLIC, "10.1.2.3"]}))
    assert refused(policy, "https://mixed.example/") == "WEBHOOK_URL_FORBIDDEN_ADDRESS"


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://hooks.example.com/", "WEBHOOK_URL_NOT_HTTPS"),
        ("ftp://hooks.example.com/", "WEBHOOK_URL_INVALID"),
        ("hooks.example.com/in", "WEBHOOK_URL_INVALID"),
        ("https://user:pw@hooks.example.com/", "WEBHOOK_URL_INVALID"),
        ("https://hooks.example.com/#frag", "WEBHOOK_URL_INVALID"),
        ("https://hooks.example.com:99999/", "WEBHOOK_URL_INVALID"),
        ("https://hooks.example.com/a b", "WEBHOOK_URL_INVALID"),
        ("https://hooks.example.com/" + "a" * 2100, "WEBHOOK_URL_INVALID"),
    ],
)
def test_malformed_and_plain_http_urls_are_refused(url: str, code: str) -> None:
    policy = UrlPolicy(resolver=resolver_of({"hooks.example.com": [PUBLIC]}))
    assert refused(policy, url) == code


def test_loopback_receivers_only_when_allowed() -> None:
    local = UrlPolicy(allow_loopback_http=True, resolver=resolver_of({"localhost": ["127.0.0.1"]}))
    assert local.resolve("http://127.0.0.1:8080/hook").address == "127.0.0.1"
    assert local.resolve("http://localhost:8080/hook").address == "127.0.0.1"
    # The setting admits loopback, nothing else: private addresses stay refused ...
    assert refused(local, "http://10.0.0.1/") == "WEBHOOK_URL_FORBIDDEN_ADDRESS"
    assert refused(local, "http://169.254.169.254/latest/meta-data/") == "WEBHOOK_URL_FORBIDDEN_ADDRESS"
    # ... and plain http to a public address too.
    public = UrlPolicy(allow_loopback_http=True, resolver=resolver_of({"hooks.example.com": [PUBLIC]}))
    assert refused(public, "http://hooks.example.com/") == "WEBHOOK_URL_NOT_HTTPS"
    # Off (AWS): loopback is refused.
    assert refused(UrlPolicy(), "https://127.0.0.1/") == "WEBHOOK_URL_FORBIDDEN_ADDRESS"


def test_the_answer_is_checked_again_at_every_resolution() -> None:
    answers: dict[str, Sequence[str]] = {"rebind.example": [PUBLIC]}
    policy = UrlPolicy(resolver=resolver_of(answers))
    assert policy.resolve("https://rebind.example/").address == PUBLIC  # registration
    answers["rebind.example"] = ["127.0.0.1"]  # DNS rebinding after registration
    assert refused(policy, "https://rebind.example/") == "WEBHOOK_URL_FORBIDDEN_ADDRESS"


def test_an_unresolvable_host_is_refused() -> None:
    assert refused(UrlPolicy(resolver=resolver_of({"none.example": []})), "https://none.example/") == (
        "WEBHOOK_URL_UNRESOLVABLE"
    )
    # The system resolver: the reserved .invalid name never resolves.
    assert refused(UrlPolicy(), "https://no-such-host.invalid/") == "WEBHOOK_URL_UNRESOLVABLE"
