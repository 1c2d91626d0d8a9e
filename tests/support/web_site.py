"""A small web site for the web connector's integration tests and bench, served by Werkzeug on
127.0.0.1 (a free port), logging every request it receives.

Under ``/site/`` (the scope): pages linked from the index, a robots-disallowed ``/site/private/``, a
calendar trap (each month links to the next, for ever), redirects (in scope, out of scope, into the
disallowed section, to ``http://10.0.0.1/`` and ``http://169.254.169.254/``), a 404, duplicates
(tracking parameters, fragments, a byte-identical copy), a canonical link, a sitemap index with a
nested index that lists itself, a real PDF, a 200 MB page generated lazily; unlinked, a redirect
loop and a gzip bomb. ``/outside/`` is on the same host, out of scope. ``loopback_only_connections``
records every outgoing connection and refuses any not to loopback: a bug sends no packet elsewhere.
"""

from __future__ import annotations

import gzip
import hashlib
import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

REPO = Path(__file__).resolve().parents[2]
PDF = REPO / "samples" / "lighthouses.pdf"
ROBOTS_TXT = "User-agent: *\nDisallow: /site/private/\n"
BIG_PAGE_BYTES = 200 * 1024 * 1024
PRIVATE_ADDRESSES = ("10.0.0.1", "169.254.169.254")
LAST_MODIFIED = "Tue, 01 Dec 2026 10:00:00 GMT"
#: 64 MiB of spaces in about 64 KB of gzip: the cap must count the bytes inflated.
GZIP_BOMB = gzip.compress(b"<html>" + b" " * (64 * 1024 * 1024), 9)

INDEX_LINKS = (
    "about.html",
    "docs/a.html",
    "docs/b.html?utm_source=news&utm_medium=mail",
    "docs/a.html#section-2",
    "/outside/page.html",
    "private/secret.html",
    "calendar/2026/12",
    "redirect/to-c",
    "redirect/to-private",
    "redirect/to-metadata",
    "redirect/to-outside",
    "redirect/into-private",
    "missing.html",
    "copy-of-about.html",
    "alias.html",
    "files/report.pdf",
    "big.html",
    "mailto:team@example.com",
)
REDIRECTS = {
    "/site/redirect/to-c": "/site/docs/c.html",
    "/site/redirect/to-private": "http://10.0.0.1/",
    "/site/redirect/to-metadata": "http://169.254.169.254/latest/meta-data/",
    "/site/redirect/to-outside": "/outside/landing.html",
    "/site/redirect/into-private": "/site/private/secret.html",
}


def page(title: str, *links: str, head: str = "") -> bytes:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head>"
        f"<body><h1>{title}</h1><p>{title}: a page of the test site.</p><ul>{anchors}</ul></body></html>"
    ).encode()


ABOUT = page("About", "docs/a.html")
PAGES: dict[str, bytes] = {
    "/site/": page("Home", *INDEX_LINKS),
    "/site/about.html": ABOUT,
    "/site/copy-of-about.html": ABOUT,
    "/site/docs/a.html": page("Page A", "b.html", "../"),
    "/site/docs/b.html": page("Page B", "a.html"),
    "/site/docs/c.html": page("Page C"),
    "/site/alias.html": page("Alias", head='<link rel="canonical" href="/site/docs/canonical-target.html">'),
    "/site/docs/canonical-target.html": page("The canonical page"),
    "/site/private/secret.html": page("Secret"),
    "/site/only-in-sitemap.html": page("Only in the sitemap"),
    "/site/deep/only-in-nested.html": page("Only in the nested sitemap"),
    "/outside/page.html": page("Outside"),
    "/outside/landing.html": page("Outside landing"),
    "/outside/from-sitemap.html": page("Outside, from the sitemap"),
}
SITEMAPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "/site/sitemap.xml": ("sitemapindex", ("/site/sitemaps/pages.xml", "/site/sitemaps/nested.xml")),
    "/site/sitemaps/nested.xml": ("sitemapindex", ("/site/sitemaps/nested.xml", "/site/sitemaps/more.xml")),
    "/site/sitemaps/pages.xml": (
        "urlset",
        ("/site/only-in-sitemap.html", "/site/docs/a.html", "/outside/from-sitemap.html"),
    ),
    "/site/sitemaps/more.xml": ("urlset", ("/site/deep/only-in-nested.html",)),
}
#: What a crawl of the scope with max_depth 3 lists: the calendar stops three links below the index.
EXPECTED_PATHS = frozenset(
    {
        "/site/",
        "/site/about.html",
        "/site/docs/a.html",
        "/site/docs/b.html",
        "/site/docs/c.html",
        "/site/docs/canonical-target.html",
        "/site/files/report.pdf",
        "/site/only-in-sitemap.html",
        "/site/deep/only-in-nested.html",
        "/site/calendar/2026/12",
        "/site/calendar/2027/1",
        "/site/calendar/2027/2",
    }
)


@dataclass(frozen=True)
class Received:
    method: str
    path: str  # with the query
    headers: dict[str, str]
    status: int


@dataclass
class WebSite:
    port: int = 0
    requests: list[Received] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # paths that answer 404 from now on
    big_bytes_sent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.root + path

    def paths(self) -> list[str]:
        return [received.path for received in self.requests]

    def sitemap(self, kind: str, locations: tuple[str, ...]) -> bytes:
        entry = "url" if kind == "urlset" else "sitemap"
        body = "".join(f"<{entry}><loc>{self.root}{location}</loc></{entry}>" for location in locations)
        return (
            f'<?xml version="1.0"?><{kind} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</{kind}>'.encode()
        )

    def answer(self, request: Request) -> Response:
        path = request.path
        if path in self.removed:
            return Response(b"gone", status=404)
        if path == "/robots.txt":
            return Response(ROBOTS_TXT, mimetype="text/plain")
        if path in REDIRECTS:
            return Response(b"", status=302, headers={"location": REDIRECTS[path]})
        if path == "/site/unlinked/loop":  # a redirect to itself, for ever
            return Response(b"", status=302, headers={"location": "/site/unlinked/loop"})
        if path == "/site/unlinked/gzip-bomb.html":
            bomb = Response(GZIP_BOMB, mimetype="text/html")
            bomb.headers["content-encoding"] = "gzip"
            return bomb
        if path == "/site/big.html":
            return Response(self._big_page(), mimetype="text/html", direct_passthrough=True)
        if path == "/site/files/report.pdf":
            return self._conditional(request, Response(PDF.read_bytes(), mimetype="application/pdf"))
        if path in SITEMAPS:
            return Response(self.sitemap(*SITEMAPS[path]), mimetype="application/xml")
        if path.startswith("/site/calendar/"):
            return self._conditional(request, self._html(request, self._month(path)))
        if path in PAGES:
            return self._conditional(request, self._html(request, PAGES[path]))
        return Response(b"not found", status=404)

    def _month(self, path: str) -> bytes:
        year, month = (int(part) for part in path.removeprefix("/site/calendar/").split("/")[:2])
        after = (year + 1, 1) if month == 12 else (year, month + 1)
        return page(f"Calendar {year}-{month}", f"/site/calendar/{after[0]}/{after[1]}")

    def _html(self, request: Request, body: bytes) -> Response:
        response = Response(body, mimetype="text/html")
        response.set_etag(hashlib.sha256(body).hexdigest()[:32])
        if "gzip" in request.headers.get("accept-encoding", ""):
            response.set_data(gzip.compress(body))
            response.headers["content-encoding"] = "gzip"
        return response

    def _conditional(self, request: Request, response: Response) -> Response:
        if response.get_etag()[0] is None:
            response.set_etag(hashlib.sha256(response.get_data()).hexdigest()[:32])
        response.headers["last-modified"] = LAST_MODIFIED
        return response.make_conditional(request)

    def _big_page(self) -> Iterator[bytes]:
        chunk = b"<p>" + b"a" * (1024 * 1024 - 7) + b"</p>\n"
        for _ in range(BIG_PAGE_BYTES // len(chunk)):
            with self._lock:
                self.big_bytes_sent += len(chunk)
            yield chunk

    def wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        response = self.answer(request)
        full_path = request.full_path.rstrip("?")
        with self._lock:
            self.requests.append(Received(request.method, full_path, dict(request.headers), response.status_code))
        return response(environ, start_response)


@contextmanager
def serve_site() -> Iterator[WebSite]:
    site = WebSite()
    server = make_server("127.0.0.1", 0, site.wsgi, threaded=True)
    site.port = server.port
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@dataclass
class Connections:
    attempted: list[str] = field(default_factory=list)

    def refused(self) -> list[str]:
        return [address for address in self.attempted if not _loopback(address)]


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@contextmanager
def loopback_only_connections() -> Iterator[Connections]:
    """Every ``socket.create_connection`` in the process is recorded; any but to loopback raises."""
    seen = Connections()
    original = socket.create_connection

    def guarded(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        seen.attempted.append(str(address[0]))
        if not _loopback(str(address[0])):
            raise OSError(f"the test guard refuses a connection to {address[0]}")
        return original(address, *args, **kwargs)

    socket.create_connection = guarded  # type: ignore[assignment]
    try:
        yield seen
    finally:
        socket.create_connection = original
