"""The answer each stand-in on the local API port gives; ``server.py`` writes it to the socket.

Not an AWS behaviour of its own: it lets the API gateway, the static site and the control
endpoints decide a response without each owning an HTTP request handler.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    cookies: list[str] = field(default_factory=list)
    # CORS headers are added for an allowed Origin, except on a preflight answer (which has its own).
    cors: bool = True
    # A HEAD request's answer carries no body, whoever produced it.
    head: bool = False
    # Why, for the request log line (e.g. the authorizer's reason for a 401).
    note: str = ""


def json_response(
    status: int, payload: Any, *, head: bool = False, headers: dict[str, str] | None = None, note: str = ""
) -> HttpResponse:
    raw = json.dumps(payload, indent=2, default=str).encode()
    return HttpResponse(status, {"Content-Type": "application/json", **(headers or {})}, raw, head=head, note=note)
