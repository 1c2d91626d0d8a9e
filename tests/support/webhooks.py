"""Shared by the webhook tests: an in-memory endpoint store, and a loopback receiver that verifies
Standard Webhooks signatures and answers the statuses it is told to."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rag_ingest.webhooks.model import DeliveryAttempt, WebhookEndpoint
from rag_ingest.webhooks.signing import verify


class MemoryEndpoints:
    def __init__(self) -> None:
        self.items: dict[tuple[str, str], WebhookEndpoint] = {}

    def create(self, endpoint: WebhookEndpoint) -> None:
        self.items[(endpoint.tenant_id, endpoint.endpoint_id)] = endpoint

    def find(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint | None:
        return self.items.get((tenant_id, endpoint_id))

    def list_for_tenant(self, tenant_id: str) -> list[WebhookEndpoint]:
        return [e for (tenant, _), e in self.items.items() if tenant == tenant_id]

    def delete(self, tenant_id: str, endpoint_id: str) -> bool:
        return self.items.pop((tenant_id, endpoint_id), None) is not None

    def set_secret(self, tenant_id: str, endpoint_id: str, secret: str, rotated_at: str) -> WebhookEndpoint | None:
        current = self.items.get((tenant_id, endpoint_id))
        if current is None:
            return None
        updated = current.model_copy(update={"secret": secret, "secret_rotated_at": rotated_at})
        self.items[(tenant_id, endpoint_id)] = updated
        return updated


class MemoryDeliveries:
    """The delivery history (the webhooks table's attempt items), in memory; ``fail`` makes
    recording raise, as a throttled table would."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], list[DeliveryAttempt]] = {}
        self.fail = False

    def record_delivery(self, tenant_id: str, endpoint_id: str, attempt: DeliveryAttempt) -> None:
        if self.fail:
            raise RuntimeError("throttled")
        self.items.setdefault((tenant_id, endpoint_id), []).append(attempt)

    def recent_deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> list[DeliveryAttempt]:
        return sorted(self.items.get((tenant_id, endpoint_id), []), key=lambda a: a.at, reverse=True)[:limit]


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float
    valid_signature: bool

    @property
    def payload(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """``statuses``: the answers to give, in order (then 200 for ever); ``secret``: to verify with."""

    statuses: list[int] = field(default_factory=list)
    secret: str = ""
    received: list[Received] = field(default_factory=list)
    port: int = 0
    delay_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.arrived = threading.Condition(self.lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)


@contextmanager
def loopback_receiver(receiver: Receiver) -> Iterator[Receiver]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {key.lower(): value for key, value in self.headers.items()}
            if receiver.delay_seconds:
                time.sleep(receiver.delay_seconds)
            with receiver.arrived:
                valid = bool(receiver.secret) and verify(receiver.secret, headers, body, now=int(time.time()))
                receiver.received.append(Received(headers, body, time.time(), valid))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.arrived.notify_all()
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
