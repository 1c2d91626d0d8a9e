"""Where the system may send a request on a tenant's behalf (a webhook, a crawled page): the SSRF guard.

A tenant names the URL, so a delivery must not become a way into the network the function runs in
(instance metadata, private addresses, loopback). The rule runs at registration (a clear 400) and
at every delivery, whose DNS answer may have changed: every address of the answer is checked, and
the connection goes to one of them (``Target.address``) under the original host name, so nothing
resolves the name again in between. In AWS only ``https`` to public addresses; ``allow_loopback_http``
(the local stack, the tests) admits loopback receivers as well. docs/webhooks.md, "The URL policy".
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL_CHARS = 2048

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``(host, port) -> the addresses it resolves to`` (``socket.getaddrinfo`` by default).
Resolver = Callable[[str, int], Sequence[str]]


class UrlRefusedError(ValueError):
    """The URL may not receive webhooks; ``code`` says why (the API answers 400 with it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Target:
    """A checked destination: connect to ``address``, send ``host`` as Host and TLS server name."""

    scheme: str
    host: str
    port: int
    path: str  # path and query, at least "/"
    address: str


def system_resolver(host: str, port: int) -> list[str]:
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UrlRefusedError("WEBHOOK_URL_UNRESOLVABLE", f"the host {host!r} does not resolve") from exc
    return list(dict.fromkeys(str(answer[4][0]) for answer in answers))


def _unmapped(address: IpAddress) -> IpAddress:
    """An IPv4-mapped (::ffff:a.b.c.d), 6to4 or NAT64-free IPv4 view of an IPv6 address, when it has one."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
    return address


def refusal(address: IpAddress) -> str | None:
    """Why ``address`` may not receive a webhook (None: it is a public unicast address)."""
    for candidate in {address, _unmapped(address)}:
        for reason, flag in (
            ("loopback", candidate.is_loopback),
            ("private", candidate.is_private),
            ("link-local", candidate.is_link_local),
            ("multicast", candidate.is_multicast),
            ("reserved", candidate.is_reserved),
            ("unspecified", candidate.is_unspecified),
            ("site-local", isinstance(candidate, ipaddress.IPv6Address) and candidate.is_site_local),
            ("not globally routable", not candidate.is_global),
        ):
            if flag:
                return reason
    return None


class UrlPolicy:
    def __init__(self, *, allow_loopback_http: bool = False, resolver: Resolver = system_resolver) -> None:
        self.allow_loopback_http = allow_loopback_http
        self._resolve = resolver

    def check_url(self, url: str) -> tuple[str, str, int, str]:
        """The URL's (scheme, host, port, path) if its shape is acceptable (no DNS yet)."""
        if len(url) > MAX_URL_CHARS:
            raise UrlRefusedError("WEBHOOK_URL_INVALID", f"the URL is over {MAX_URL_CHARS} characters")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UrlRefusedError("WEBHOOK_URL_INVALID", "not a valid URL") from exc
        scheme, host = parts.scheme.lower(), (parts.hostname or "")
        if scheme not in ("https", "http") or not host:
            raise UrlRefusedError("WEBHOOK_URL_INVALID", "the URL must be an absolute https URL")
        if scheme == "http" and not self.allow_loopback_http:
            raise UrlRefusedError("WEBHOOK_URL_NOT_HTTPS", "webhook URLs must use https")
        if parts.username is not None or parts.password is not None:
            raise UrlRefusedError("WEBHOOK_URL_INVALID", "the URL may not carry credentials")
        if parts.fragment:
            raise UrlRefusedError("WEBHOOK_URL_INVALID", "the URL may not have a fragment")
        if any(ord(char) < 33 or ord(char) == 127 for char in url):
            raise UrlRefusedError("WEBHOOK_URL_INVALID", "the URL contains whitespace or control characters")
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return scheme, host.rstrip(".").lower(), port or (443 if scheme == "https" else 80), path

    def resolve(self, url: str) -> Target:
        """Check the URL, resolve its host now, check every address; the target pins the first one.

        Every address must pass, not just the one connected to: a name that answers with one public
        and one private address is refused (a later lookup could pick the other).
        """
        scheme, host, port, path = self.check_url(url)
        try:
            literal: IpAddress | None = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        addresses = [str(literal)] if literal is not None else list(self._resolve(host, port))
        if not addresses:
            raise UrlRefusedError("WEBHOOK_URL_UNRESOLVABLE", f"the host {host!r} does not resolve")
        for text in addresses:
            try:
                address = ipaddress.ip_address(text.split("%", 1)[0])
            except ValueError as exc:
                raise UrlRefusedError("WEBHOOK_URL_UNRESOLVABLE", f"the host {host!r} resolved to {text!r}") from exc
            why = refusal(address)
            if why is None:
                if scheme == "http":  # plain http only ever to loopback
                    raise UrlRefusedError("WEBHOOK_URL_NOT_HTTPS", "webhook URLs must use https")
                continue
            if why == "loopback" and self.allow_loopback_http:
                continue
            raise UrlRefusedError(
                "WEBHOOK_URL_FORBIDDEN_ADDRESS", f"the host {host!r} resolves to a {why} address ({address})"
            )
        return Target(scheme=scheme, host=host, port=port, path=path, address=addresses[0])
