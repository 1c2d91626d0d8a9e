"""One HTTP client for the CLI and the retrievers, on httpx.

- :class:`ApiSession`: JSON calls to the API as one caller, sync and async, with a bearer token
  renewed once after a 401 (:class:`BearerAuth`), a 429 waited out (:class:`RateLimitRetry`);
  :func:`post_json`, :func:`post_form`: the token endpoints; :func:`upload_file`: a file to a
  presigned POST, streamed, its progress in bytes handed to the socket; :func:`search_body`.

Every failure is a :class:`RagIngestError` whose ``str()`` is one line: :class:`Unreachable`, or
:class:`ApiError` with the status and the error's code and message, whatever the body's shape.
May import: httpx and the standard library only.
"""

from __future__ import annotations

import asyncio
import http
import json
import random
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

USER_AGENT = "rag-ingest-client/0.1"
DEFAULT_TIMEOUT_SECONDS = 30.0
UPLOAD_TIMEOUT_SECONDS = 300.0


class RagIngestError(Exception):
    """A call to rag-ingest could not be made, was refused, or its answer is unusable."""


class Unreachable(RagIngestError):
    """The server cannot be reached (refused, DNS, TLS, timeout)."""


class ApiError(RagIngestError):
    """The server answered 4xx or 5xx: ``status``, the error's ``code`` ('' when the body names none)
    and its ``message``."""

    def __init__(self, status: int, code: str, message: str, url: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.url = url
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")


def api_error(status: int, body: bytes, url: str) -> ApiError:
    """The error of a 4xx/5xx answer: the API's ``{"error": {"code", "message"}}``, API Gateway's
    ``{"message"}``, an OAuth token endpoint's ``{"error", "error_description"}``, S3's XML, or text."""
    text = body.decode("utf-8", "replace")
    code, message = "", text.strip()[:300] or _reason(status)
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            code, message = str(error.get("code", "")), str(error.get("message", message))
        elif isinstance(error, str):
            code, message = error, str(payload.get("error_description", error))
        elif isinstance(payload.get("message"), str):
            message = payload["message"]
    else:
        xml_code = re.search(r"<Code>([^<]*)</Code>", text)
        xml_message = re.search(r"<Message>([^<]*)</Message>", text)
        if xml_code:
            code, message = xml_code.group(1), xml_message.group(1) if xml_message else xml_code.group(1)
    return ApiError(status, code, message, url)


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "error"


# ---------------------------------------------------------------- tokens
class TokenSource(Protocol):
    """Gives the bearer token of each request."""

    def token(self) -> str: ...

    def invalidate(self) -> bool:
        """Forget the token the server refused (401); True when the next :meth:`token` may differ."""
        ...


class FixedToken:
    """A token as given: a 401 is final."""

    def __init__(self, value: str) -> None:
        self.value = value

    def token(self) -> str:
        return self.value

    def invalidate(self) -> bool:
        return False


class TokenFunction:
    """A function that returns a valid token, asked before each request and once more after a 401."""

    def __init__(self, function: Callable[[], str]) -> None:
        self.function = function

    def token(self) -> str:
        return self.function()

    def invalidate(self) -> bool:
        return True


def token_source(token: str | Callable[[], str] | TokenSource) -> TokenSource:
    """A token, a function giving one, or a :class:`TokenSource`, as a :class:`TokenSource`."""
    if isinstance(token, str):
        return FixedToken(token)
    if hasattr(token, "token") and hasattr(token, "invalidate"):
        return token  # type: ignore[return-value]
    if callable(token):
        return TokenFunction(token)
    raise TypeError(f"a token is a string, a function or a TokenSource, not {type(token).__name__}")


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>``; after a 401 the request is sent once more with a fresh token
    when the source can give one (an expired token, or an issuer whose key changed)."""

    def __init__(self, tokens: TokenSource) -> None:
        self.tokens = tokens

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.tokens.token()}"
        response = yield request
        if response.status_code == 401 and self.tokens.invalidate():
            request.headers["Authorization"] = f"Bearer {self.tokens.token()}"
            yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        # A token function may block (a refresh over the network): off the event loop.
        request.headers["Authorization"] = f"Bearer {await asyncio.to_thread(self.tokens.token)}"
        response = yield request
        if response.status_code == 401 and await asyncio.to_thread(self.tokens.invalidate):
            request.headers["Authorization"] = f"Bearer {await asyncio.to_thread(self.tokens.token)}"
            yield request


# ---------------------------------------------------------------- JSON calls
class RateLimitRetry:
    """How a call answered 429 is sent again: after the answer's ``Retry-After`` (seconds), or a
    backoff with jitter when it names none, at most ``attempts`` times and never for a wait longer
    than ``max_wait_seconds`` (a daily quota's wait until midnight is the caller's to see at once)."""

    def __init__(
        self,
        *,
        attempts: int = 3,
        max_wait_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.attempts = attempts
        self.max_wait_seconds = max_wait_seconds
        self.sleep = sleep
        self.async_sleep = async_sleep

    def wait_before(self, attempt: int, response: httpx.Response) -> float | None:
        """Seconds to wait before sending again after ``response`` (the ``attempt``-th, from 1), or None."""
        if response.status_code != 429 or attempt > self.attempts:
            return None
        stated = response.headers.get("Retry-After", "").strip()
        if stated.isdigit():
            wait = float(stated)
        else:
            wait = min(self.max_wait_seconds, 2.0 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        return wait if wait <= self.max_wait_seconds else None


class ApiSession:
    """JSON calls to one API (``base_url``) as one caller (``tokens``; None: no Authorization header).
    Sync calls share one connection pool until :meth:`close`; each async call has its own. A 429 is
    sent again as ``retry`` says (the API refuses a rate-limited call before doing anything)."""

    def __init__(
        self,
        base_url: str,
        tokens: TokenSource | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RateLimitRetry | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.tokens = tokens
        self.timeout = timeout
        self.retry = retry if retry is not None else RateLimitRetry()
        self._client: httpx.Client | None = None

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One request; the decoded JSON answer (None when empty). 4xx/5xx raise :class:`ApiError`."""
        if self._client is None:
            self._client = httpx.Client(**self._options())
        url = f"{self.base_url}{path}"
        attempt = 1
        while True:
            with _translated(method, url):
                response = self._client.request(method, url, json=json, params=params, headers=headers)
            wait = self.retry.wait_before(attempt, response)
            if wait is None:
                return _decoded(response, method, url)
            self.retry.sleep(wait)
            attempt += 1

    async def acall(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """:meth:`call` without blocking the event loop."""
        url = f"{self.base_url}{path}"
        attempt = 1
        async with httpx.AsyncClient(**self._options()) as client:
            while True:
                with _translated(method, url):
                    response = await client.request(method, url, json=json, params=params, headers=headers)
                wait = self.retry.wait_before(attempt, response)
                if wait is None:
                    return _decoded(response, method, url)
                await self.retry.async_sleep(wait)
                attempt += 1

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> ApiSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _options(self) -> dict[str, Any]:
        return {
            "auth": BearerAuth(self.tokens) if self.tokens is not None else None,
            "headers": {"Accept": "application/json", "User-Agent": USER_AGENT},
            "timeout": self.timeout,
        }


def post_json(url: str, body: Any, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """POST a JSON body without a token (the local identity provider's token endpoint)."""
    return _post(url, timeout, json=body)


def post_form(url: str, form: Mapping[str, str], *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """POST a form without a token (an OAuth token endpoint)."""
    return _post(url, timeout, data=dict(form))


def _post(url: str, timeout: float, **content: Any) -> Any:
    with (
        httpx.Client(headers={"Accept": "application/json", "User-Agent": USER_AGENT}, timeout=timeout) as client,
        _translated("POST", url),
    ):
        response = client.post(url, **content)
    return _decoded(response, "POST", url)


def _decoded(response: httpx.Response, method: str, url: str) -> Any:
    if response.status_code >= 400:
        raise api_error(response.status_code, response.content, _shown(url))
    raw = response.content
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise RagIngestError(f"{method} {_shown(url)} answered something that is not JSON: {raw[:300]!r}") from None


@contextmanager
def _translated(method: str, url: str) -> Iterator[None]:
    """httpx's URL and transport errors as :class:`RagIngestError` and :class:`Unreachable`."""
    try:
        yield
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as error:
        raise RagIngestError(f"{method} {url}: not an http(s) URL ({error})") from None
    except httpx.TransportError as error:
        raise Unreachable(f"cannot reach {_shown(url)}: {error or type(error).__name__}") from None


def _shown(url: str) -> str:
    """The URL without its query (a presigned URL's signature, a filter) for messages."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


# ---------------------------------------------------------------- the presigned POST
class _CountedStream(httpx.SyncByteStream):
    """A request body that reports each part's length once the transport has taken it."""

    def __init__(self, stream: httpx.SyncByteStream, on_bytes: Callable[[int], None]) -> None:
        self._stream = stream
        self._on_bytes = on_bytes

    def __iter__(self) -> Iterator[bytes]:
        for part in self._stream:
            yield part
            self._on_bytes(len(part))  # the transport asks for the next part once it has sent this one

    def close(self) -> None:
        self._stream.close()


def upload_file(
    url: str,
    fields: Mapping[str, str],
    path: Path,
    *,
    filename: str,
    content_type: str,
    on_bytes: Callable[[int], None] | None = None,
    timeout: float = UPLOAD_TIMEOUT_SECONDS,
) -> int:
    """POST ``path`` to a presigned POST ``url`` as ``multipart/form-data``: the policy ``fields``
    first, the file last (S3 ignores every field after it), streamed from disk with its exact
    ``Content-Length`` (S3 refuses a chunked POST). ``on_bytes(n)`` follows the bytes sent. Returns
    the status (S3 answers 204); a refusal raises :class:`ApiError` with S3's code."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise RagIngestError(f"the upload URL is not an http(s) URL: {url}")
    with (
        path.open("rb") as file,
        httpx.Client(headers={"User-Agent": USER_AGENT}, timeout=timeout) as client,
        _translated("POST", url),
    ):
        request = client.build_request("POST", url, data=dict(fields), files={"file": (filename, file, content_type)})
        if on_bytes is not None and isinstance(request.stream, httpx.SyncByteStream):
            request.stream = _CountedStream(request.stream, on_bytes)
        response = client.send(request)
    if response.status_code >= 300:
        raise api_error(response.status_code, response.content, _shown(url))
    return int(response.status_code)


def search_body(
    query: str,
    *,
    k: int,
    mode: str,
    filter: Mapping[str, Any] | None,
    rerank: bool | None,
    expand: str | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /search`` and ``POST /answer``. ``filter``, ``rerank`` and ``expand``
    are sent only when given (an API without a field refuses it: the body's unknown fields are a 400)."""
    body: dict[str, Any] = {"query": query, "k": k, "mode": mode}
    if filter is not None:
        body["filter"] = dict(filter)
    if rerank is not None:
        body["rerank"] = rerank
    if expand is not None:
        body["expand"] = expand
    return body
