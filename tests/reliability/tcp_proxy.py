"""A small TCP proxy on a free loopback port, for real network faults between the Lambda workers
and OpenSearch: ``refuse()`` closes the port (connections are refused, open ones are cut, as
when the server goes down), ``restore()`` opens it again on the same port, and
``hold(marker, seconds)`` delays a request whose bytes contain ``marker`` (a slow write)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass

from local.runtime.harness import free_port

RECEIVE_BYTES = 65536


@dataclass
class _Hold:
    marker: bytes
    seconds: float
    remaining: int


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._holds: list[_Hold] = []
        self._stopping = threading.Event()
        self.accepted = 0
        self.held = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._listener is not None

    def restore(self) -> None:
        """Accept connections again (on the same port)."""
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            self._listener = listener
        threading.Thread(target=self._accept_loop, args=(listener,), name="tcp-proxy-accept", daemon=True).start()

    def refuse(self) -> None:
        """The outage: close the port and cut every open connection (keep-alive ones included)."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, set()
        if listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would not on Linux.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for connection in connections:
            _close(connection)

    def hold(self, marker: bytes, seconds: float, times: int = 1) -> None:
        """Delay the next ``times`` requests whose bytes contain ``marker`` by ``seconds``."""
        with self._lock:
            self._holds.append(_Hold(marker, seconds, times))

    def stop(self) -> None:
        self._stopping.set()
        self.refuse()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return  # refused or stopped: the listener is closed
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:  # the outage began meanwhile
                    _close(client)
                    _close(upstream)
                    return
                self._connections.update((client, upstream))
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        tail = b""  # the end of the previous block: a marker may straddle two reads
        try:
            while True:
                data = source.recv(RECEIVE_BYTES)
                if not data:
                    break
                if from_client:
                    delay = self._take_hold(tail + data)
                    tail = data[-256:]
                    if delay:
                        time.sleep(delay)
                target.sendall(data)
        except OSError:
            pass
        finally:
            for connection in (source, target):
                _close(connection)
            with self._lock:
                self._connections.difference_update((source, target))

    def _take_hold(self, data: bytes) -> float:
        with self._lock:
            for hold in self._holds:
                if hold.marker in data:
                    hold.remaining -= 1
                    if hold.remaining == 0:
                        self._holds.remove(hold)
                    self.held += 1
                    return hold.seconds
        return 0.0


def _close(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        connection.close()
