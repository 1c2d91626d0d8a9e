"""``rag-ingest ask`` over the live channel: the answer's text printed as the model writes it.

The live channel is the stack's WebSocket API (``WebSocketUrl`` in AWS, ``LiveUrl`` locally), signed
in with the ID token as ``?token=``. It sends ``{"action": "answer", "request_id", "request"}`` and
reads that request's events until ``answer.completed`` (docs/answers.md, "Streaming").
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

from simple_websocket import Client, ConnectionClosed
from simple_websocket import ConnectionError as WebSocketRefused

from rag_ingest_client.cli.errors import CliError

#: How long the answer may pause between two events before the command gives up.
EVENT_TIMEOUT_SECONDS = 60.0


class LiveUnavailable(Exception):
    """The live channel could not be opened: ask over HTTP instead."""


def answer_events(
    live_url: str, token: str, request: dict[str, Any], *, timeout: float = EVENT_TIMEOUT_SECONDS
) -> Iterator[dict[str, Any]]:
    """The events of one answer, ending with ``answer.completed``; ``answer.failed`` raises CliError."""
    request_id = f"cli-{uuid.uuid4().hex[:12]}"
    try:
        socket = Client.connect(f"{live_url}?{urlencode({'token': token})}")
    except (WebSocketRefused, OSError) as exc:
        raise LiveUnavailable(str(exc)) from exc
    try:
        socket.send(json.dumps({"action": "answer", "request_id": request_id, "request": request}))
        deadline = time.monotonic() + timeout
        while True:
            raw = socket.receive(timeout=max(0.0, deadline - time.monotonic()))
            if raw is None:
                raise CliError(f"the answer stopped arriving (nothing for {timeout:.0f} s)")
            event = json.loads(raw)
            if event.get("request_id") != request_id:
                continue  # a document update, or another request's event
            deadline = time.monotonic() + timeout
            if event.get("type") == "answer.failed":
                error = event.get("error") or {}
                raise CliError(f"no answer: {error.get('code')}: {error.get('message')}")
            yield event
            if event.get("type") == "answer.completed":
                return
    except ConnectionClosed as exc:
        raise CliError("the live channel closed before the answer was complete") from exc
    finally:
        socket.close()


def stream_answer(live_url: str, token: str, request: dict[str, Any], write: Callable[[str], None]) -> dict[str, Any]:
    """Writes the answer's text as it streams (the whole text at once when nothing streamed: an
    unsupported answer); returns the whole response (``POST /answer``'s)."""
    written = False
    for event in answer_events(live_url, token, request):
        if event["type"] == "answer.delta":
            write(str(event.get("text") or ""))
            written = True
        elif event["type"] == "answer.completed":
            answer = dict(event["answer"])
            if not written:
                write(str(answer.get("answer") or ""))
            return answer
    raise CliError("the live channel ended without an answer")
