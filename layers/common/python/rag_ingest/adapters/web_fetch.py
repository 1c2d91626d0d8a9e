"""The crawler's GET (``sources.web.fetching.PageFetcher``), through the URL policy at every hop.

Each request resolves its host with ``UrlPolicy.resolve`` (every address checked) and connects to
the checked address (adapters.pinned_http). Redirects are followed here, at most five: a target must
pass the policy, then the crawler's ``may_follow`` (scope and robots.txt), before anything connects
to it. The body is read in pieces and refused past ``max_bytes`` (gzip too, counted inflated), so an
oversized page costs at most ``max_bytes`` of reading. Imports ``core`` and ``sources.web.fetching``.
"""

from __future__ import annotations

import http.client
import ssl
import time
import zlib
from collections.abc import Callable, Mapping
from urllib.parse import urldefrag, urljoin

from rag_ingest.adapters.pinned_http import pinned_connection
from rag_ingest.core.url_policy import Target, UrlPolicy, UrlRefusedError
from rag_ingest.sources.web.fetching import (
    FETCH_FAILED,
    MAX_REDIRECTS,
    PAGE_TOO_LARGE,
    REDIRECT_REFUSED,
    TOO_MANY_REDIRECTS,
    URL_REFUSED_PREFIX,
    USER_AGENT,
    FetchRefusedError,
    FetchResponse,
)

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CONDITIONAL = frozenset({"if-none-match", "if-modified-since"})
_CHUNK = 64 * 1024
#: What is read of an answer whose body nobody uses (a 304, a 404, a 5xx).
_DISCARD_BYTES = 64 * 1024


def _refused(url: str, exc: UrlRefusedError) -> FetchRefusedError:
    code = URL_REFUSED_PREFIX + exc.code.removeprefix("WEBHOOK_URL_")
    return FetchRefusedError(code, f"{url}: {exc.message}")


class PolicyCheckedFetcher:
    """``timeout_seconds`` bounds the connection and each read; ``body_seconds`` the whole body."""

    def __init__(
        self,
        policy: UrlPolicy,
        *,
        timeout_seconds: float = 10.0,
        body_seconds: float = 60.0,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self._policy = policy
        self._timeout = timeout_seconds
        self._body_seconds = body_seconds
        self._context = context or ssl.create_default_context()

    def get(
        self, url: str, headers: Mapping[str, str], max_bytes: int, may_follow: Callable[[str], bool]
    ) -> FetchResponse:
        current, sent = url, dict(headers)
        target = self._check(current)
        for hop in range(MAX_REDIRECTS + 1):
            status, answered, body = self._request(target, sent, max_bytes)
            location = answered.get("location")
            if status not in _REDIRECTS or not location:
                return FetchResponse(status=status, url=current, headers=answered, body=body)
            if hop == MAX_REDIRECTS:
                break
            current = urldefrag(urljoin(current, location.strip()))[0]
            target = self._check(current)  # the policy first: a forbidden address is never connected to
            if not may_follow(current):
                raise FetchRefusedError(REDIRECT_REFUSED, f"{url} redirects to {current}, outside the crawl")
            # The validators were the first URL's; another URL is read whole.
            sent = {name: value for name, value in sent.items() if name.lower() not in _CONDITIONAL}
        raise FetchRefusedError(TOO_MANY_REDIRECTS, f"{url} redirects more than {MAX_REDIRECTS} times")

    def _check(self, url: str) -> Target:
        try:
            return self._policy.resolve(url)
        except UrlRefusedError as exc:
            raise _refused(url, exc) from exc

    def _request(self, target: Target, headers: Mapping[str, str], max_bytes: int) -> tuple[int, dict[str, str], bytes]:
        connection = pinned_connection(target, self._timeout, self._context)
        request_headers = {"user-agent": USER_AGENT, "accept": "*/*", "accept-encoding": "gzip", **headers}
        where = f"{target.scheme}://{target.host}:{target.port}{target.path}"
        try:
            connection.request("GET", target.path, headers=request_headers)
            response = connection.getresponse()
            answered = {name.lower(): value for name, value in response.getheaders()}
            if response.status in _REDIRECTS or not 200 <= response.status < 300:
                response.read(_DISCARD_BYTES)
                return response.status, answered, b""
            return response.status, answered, self._read_body(response, answered, max_bytes, where)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise FetchRefusedError(FETCH_FAILED, f"{where}: {exc!r}") from exc
        finally:
            connection.close()

    def _read_body(
        self, response: http.client.HTTPResponse, headers: Mapping[str, str], max_bytes: int, where: str
    ) -> bytes:
        too_large = FetchRefusedError(PAGE_TOO_LARGE, f"{where} is larger than {max_bytes} bytes")
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip", "x-gzip"):
            raise FetchRefusedError(FETCH_FAILED, f"{where}: unsupported content-encoding {encoding!r}")
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise too_large  # said up front: nothing of it is read
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding != "identity" else None
        deadline = time.monotonic() + self._body_seconds
        parts: list[bytes] = []
        raw = size = 0
        while chunk := response.read(_CHUNK):
            raw += len(chunk)
            if inflater is not None:
                chunk = inflater.decompress(chunk, max_bytes + 1 - size)
                if inflater.unconsumed_tail:
                    raise too_large
            size += len(chunk)
            if size > max_bytes or raw > max_bytes:
                raise too_large
            if time.monotonic() > deadline:
                raise FetchRefusedError(FETCH_FAILED, f"{where}: the body took over {self._body_seconds:.0f} s")
            parts.append(chunk)
        return b"".join(parts)
