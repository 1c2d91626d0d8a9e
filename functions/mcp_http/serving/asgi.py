"""One API Gateway HTTP API request (payload format 2.0) through an ASGI app, and its answer as the
Lambda result API Gateway turns back into HTTP; no long-running server. May import anyio only.

The shapes: https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import anyio

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
AsgiApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


def request_scope(event: dict[str, Any], public_url: str) -> Scope:
    """The ASGI ``http`` scope of the event; scheme and server are the public URL's (API Gateway
    terminates TLS: the function never sees the client's connection)."""
    http = event.get("requestContext", {}).get("http", {})
    headers = dict(event.get("headers") or {})
    # Payload 2.0 moves cookies out of the headers; an app that reads them finds them where they were.
    if event.get("cookies"):
        headers["cookie"] = "; ".join(event["cookies"])
    url = urlsplit(public_url)
    path = str(event.get("rawPath") or http.get("path") or "/")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": str(http.get("method", "GET")).upper(),
        "scheme": url.scheme,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": str(event.get("rawQueryString") or "").encode(),
        "headers": [(name.lower().encode("latin-1"), str(value).encode("latin-1")) for name, value in headers.items()],
        "server": (url.hostname or "", url.port or (443 if url.scheme == "https" else 80)),
        "client": (str(http.get("sourceIp", "")), 0),
    }


def request_body(event: dict[str, Any]) -> bytes:
    body = event.get("body")
    if body is None:
        return b""
    return base64.b64decode(body) if event.get("isBase64Encoded") else str(body).encode()


async def respond(app: AsgiApp, scope: Scope, body: bytes) -> dict[str, Any]:
    """Run ``app`` on one request and collect its whole answer (JSON responses: nothing streams)."""
    status = 500
    headers: dict[str, str] = {}
    chunks: list[bytes] = []
    answered = anyio.Event()
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The client stays connected until the answer is complete: a disconnect earlier would cancel it.
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for name, value in message.get("headers") or []:
                key, text = bytes(name).decode("latin-1").lower(), bytes(value).decode("latin-1")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body") or b""))
            if not message.get("more_body"):
                answered.set()

    await app(scope, receive, send)
    answered.set()
    # API Gateway frames the body itself (payload 2.0: statusCode, headers, body, isBase64Encoded).
    headers.pop("content-length", None)
    raw = b"".join(chunks)
    try:
        text, encoded = raw.decode(), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(raw).decode(), True
    return {"statusCode": status, "headers": headers, "body": text, "isBase64Encoded": encoded}
