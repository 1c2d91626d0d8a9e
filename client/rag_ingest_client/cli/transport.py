"""HTTP for the CLI with the standard library only (the package ships in the Lambda layer, which has
no ``requests``): JSON calls to the API, form posts to the token endpoints, and the presigned POST
to S3 as a streamed multipart body whose progress is the bytes really handed to the socket."""

from __future__ import annotations

import http.client
import json
import mimetypes
import os
import re
import secrets
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

CHUNK_BYTES = 64 * 1024
USER_AGENT = "rag-ingest-cli/1"


class CliError(Exception):
    """Ends a command with a one-line message on stderr and exit code 1 (never a traceback)."""


class NetworkError(CliError):
    """The server cannot be reached (refused, DNS, TLS, timeout)."""


class HttpError(CliError):
    """The server answered 4xx/5xx; ``code`` is the API's error code when its body has one."""

    def __init__(self, status: int, code: str, message: str, url: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.url = url
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")


def error_of(status: int, body: bytes, url: str) -> HttpError:
    """The API's ``{"error": {"code", "message"}}``, API Gateway's ``{"message"}``, or S3's XML error."""
    text = body.decode("utf-8", "replace")
    code, message = "", text.strip()[:300] or http.client.responses.get(status, "error")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            code, message = str(error.get("code", "")), str(error.get("message", message))
        elif isinstance(payload.get("message"), str):
            message = payload["message"]
        if isinstance(error, str):  # OAuth token endpoints: {"error": "invalid_grant", ...}
            code, message = error, str(payload.get("error_description", error))
    else:
        xml_code = re.search(r"<Code>([^<]*)</Code>", text)
        xml_message = re.search(r"<Message>([^<]*)</Message>", text)
        if xml_code:
            code, message = xml_code.group(1), xml_message.group(1) if xml_message else xml_code.group(1)
    return HttpError(status, code, message, url)


def request_json(
    method: str,
    url: str,
    *,
    body: Any = None,
    form: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """One request; the decoded JSON answer (None when empty). 4xx/5xx raise :class:`HttpError`."""
    data: bytes | None = None
    all_headers = {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
    if body is not None:
        data = json.dumps(body).encode()
        all_headers["Content-Type"] = "application/json"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        all_headers["Content-Type"] = "application/x-www-form-urlencoded"
    request = urllib.request.Request(url, data=data, headers=all_headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        raise error_of(exc.code, exc.read(), url) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise NetworkError(f"cannot reach {_origin(url)}: {reason}") from None
    return status, json.loads(raw) if raw.strip() else None


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class MultipartBody:
    """``multipart/form-data`` for a presigned POST: the policy fields, then the file (S3 ignores
    every field after ``file``). Streamed from disk in chunks; its length is known up front, so it is
    sent with a ``Content-Length`` (S3 refuses chunked POSTs)."""

    fields: Mapping[str, str]
    path: Path
    filename: str
    content_type: str = "application/pdf"
    boundary: str = field(default_factory=lambda: f"rag-ingest-{secrets.token_hex(16)}")

    @property
    def header(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def _preamble(self) -> bytes:
        parts = [
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n{value}\r\n'
            for name, value in self.fields.items()
        ]
        parts.append(
            f"--{self.boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="{_quote(self.filename)}"\r\n'
            f"Content-Type: {self.content_type}\r\n\r\n"
        )
        return "".join(parts).encode()

    def _epilogue(self) -> bytes:
        return f"\r\n--{self.boundary}--\r\n".encode()

    @property
    def file_size(self) -> int:
        return self.path.stat().st_size

    def __len__(self) -> int:
        return len(self._preamble()) + self.file_size + len(self._epilogue())

    def chunks(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        yield self._preamble()
        with self.path.open("rb") as stream:
            yield from _read_chunks(stream, chunk_bytes)
        yield self._epilogue()


def _read_chunks(stream: BinaryIO, chunk_bytes: int) -> Iterator[bytes]:
    while chunk := stream.read(chunk_bytes):
        yield chunk


def _quote(value: str) -> str:
    # RFC 7578: quotes and line breaks in a disposition parameter are percent-encoded.
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def guess_content_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def post_multipart(
    url: str, body: MultipartBody, *, on_bytes: Callable[[int], None] | None = None, timeout: float = 300.0
) -> int:
    """POST ``body`` to ``url`` (a presigned POST), calling ``on_bytes(n)`` after each chunk is sent.

    Returns the status (S3 answers 204); a refusal (policy, size) raises :class:`HttpError` with S3's code.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"the upload URL is not an http(s) URL: {url}")
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.putrequest("POST", path)
        connection.putheader("Content-Type", body.header)
        connection.putheader("Content-Length", str(len(body)))
        connection.putheader("User-Agent", USER_AGENT)
        connection.endheaders()
        for chunk in body.chunks():
            connection.send(chunk)
            if on_bytes:
                on_bytes(len(chunk))
        response = connection.getresponse()
        answer = response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise NetworkError(f"upload to {_origin(url)} failed: {exc}") from None
    finally:
        connection.close()
    if response.status >= 300:
        raise error_of(response.status, answer, url)
    return int(response.status)


def config_home() -> Path:
    """``$XDG_CONFIG_HOME/rag-ingest`` (``~/.config/rag-ingest`` by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rag-ingest"
