"""Canonical URLs and the crawl scope: one page, one key.

``canonical_url`` lowercases scheme and host, drops the default port, the fragment and the configured
tracking parameters (``*`` globs), sorts the query and resolves dot segments, so every spelling of a
page is one key. ``Scope`` admits a URL on its host (``host[:port]``) whose path starts with its
prefix. Pure functions; imports nothing of the project.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urljoin, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


class InvalidUrlError(ValueError):
    pass


def _host_port(scheme: str, hostname: str, port: int | None) -> str:
    host = hostname.rstrip(".").lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise InvalidUrlError(f"not a valid host name: {hostname!r}") from exc
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return host if port is None or port == DEFAULT_PORTS[scheme] else f"{host}:{port}"


def _clean_path(path: str) -> str:
    if not path:
        return "/"
    resolved = posixpath.normpath(path)
    # normpath drops a trailing slash and keeps a leading "//": both change what the URL names.
    if path.endswith(("/", "/.", "/..")) and resolved != "/":
        resolved += "/"
    resolved = "/" + resolved.lstrip("/")
    return quote(resolved, safe=_PATH_SAFE)


def _is_tracking(name: str, patterns: Sequence[str]) -> bool:
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in patterns)


def canonical_url(url: str, tracking_parameters: Sequence[str] = ()) -> str:
    """The page's one spelling; ``InvalidUrlError`` for anything but an absolute http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidUrlError(f"not a valid URL: {url!r}") from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise InvalidUrlError(f"not an absolute http(s) URL: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidUrlError(f"a URL with credentials: {url!r}")
    query = [
        (key, value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if not _is_tracking(key, tracking_parameters)
    ]
    return urlunsplit(
        (scheme, _host_port(scheme, parts.hostname, port), _clean_path(parts.path), urlencode(sorted(query)), "")
    )


def absolute_url(base: str, href: str, tracking_parameters: Sequence[str] = ()) -> str | None:
    """``href`` as found on the page at ``base``, canonical; None for mailto:, javascript: and the like."""
    href = href.strip()
    if not href or href.startswith("#"):
        return None
    try:
        return canonical_url(urljoin(base, href), tracking_parameters)
    except (InvalidUrlError, ValueError):
        return None


def host_of(url: str) -> str:
    """``host[:port]`` of a canonical URL."""
    return urlsplit(url).netloc


def folder_of(url: str) -> str:
    """The folder a URL's path is in: ``/guide/`` for ``/guide/intro.html`` and for ``/guide/``."""
    path = urlsplit(url).path or "/"
    return path[: path.rfind("/") + 1]


def filename_for(url: str, is_html: bool) -> str:
    """The item's file name: the path's last segment, ``index.html`` for a folder; ``.html`` is added
    to an HTML page whose name has no extension (the pipeline still decides the type from the bytes)."""
    segment = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    name = "".join(char if char.isalnum() or char in "-_.~ " else "_" for char in segment).strip(". ")
    if not name:
        return "index.html"
    if is_html and "." not in name:
        return f"{name}.html"
    return name[:200]


@dataclass(frozen=True)
class Scope:
    host: str  # host[:port], lowercase, default port dropped
    path_prefix: str = "/"

    def contains(self, url: str) -> bool:
        parts = urlsplit(url)
        return (
            parts.scheme in DEFAULT_PORTS
            and parts.netloc == self.host
            and (parts.path or "/").startswith(self.path_prefix)
        )

    def on_host(self, url: str) -> bool:
        return urlsplit(url).netloc == self.host
