"""A live-status client for tests: the WebSocket the page opens, its messages collected in order."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from simple_websocket import Client, ConnectionClosed
from simple_websocket import ConnectionError as WebSocketRefused


class LiveSocket:
    """An open connection: every message it receives (parsed JSON) lands on ``messages``."""

    def __init__(self, url: str) -> None:
        self.client = Client.connect(url)
        self.messages: queue.Queue[Any] = queue.Queue()
        self.closed = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                data = self.client.receive()
                if data is not None:
                    self.messages.put(json.loads(data))
        except (ConnectionClosed, OSError):
            self.closed.set()

    def next(self, timeout: float = 10) -> Any:
        return self.messages.get(timeout=timeout)

    def drain(self) -> list[Any]:
        items = []
        while True:
            try:
                items.append(self.messages.get_nowait())
            except queue.Empty:
                return items

    @property
    def connected(self) -> bool:
        return bool(self.client.connected) and not self.closed.is_set()

    def close(self) -> None:
        if self.client.connected:
            self.client.close()


@contextmanager
def live_socket(url: str) -> Iterator[LiveSocket]:
    socket = LiveSocket(url)
    try:
        yield socket
    finally:
        socket.close()


def refusal_status(url: str) -> int | None:
    """The HTTP status of a refused upgrade, or None when the connection opened (then closed)."""
    try:
        LiveSocket(url).close()
    except WebSocketRefused as refused:
        return int(refused.status_code or 0)
    return None
