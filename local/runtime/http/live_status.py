"""Live status over Server-Sent Events: the local side of the WebSocket API's contract.

``GET /_local/live?token=<ID token>`` (EventSource cannot send headers) streams, for the token's
tenant only, and of it only the documents the token's principal may read
(``rag_ingest.core.access.can_read``, as the AWS pusher decides)::

    event: document.updated
    data: {"type": "document.updated", "document": <the JSON of GET /documents/{id}>}

and a comment line every ``keepalive_seconds`` (15 s) so proxies and the browser keep the
connection. In AWS the WebSocket API is fed by the documents table's DynamoDB stream; here the
same stream is read from moto (DescribeStream, GetShardIterator, GetRecords), each NewImage
deserialized with boto3's TypeDeserializer and turned into the message by
:func:`rag_ingest.live.updates.update_for`, the function the AWS fan-out uses.

One reader thread serves every subscriber. It reads only while someone is subscribed (moto keeps
every shard iterator it hands out, so an idle reader would grow its memory), starting at the
stream's LATEST position, taken when the first subscriber arrives and before its response starts,
so no change after a subscription is missed. Each subscriber has a bounded queue: a subscriber
that does not keep up is dropped (its stream ends; the page reconnects and re-reads the list),
never the reader.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from rag_ingest.core.access import Principal, can_read
from rag_ingest.live.updates import DOCUMENT_UPDATED, update_for

LOG = logging.getLogger("local.runtime.live")

KEEPALIVE_SECONDS = 15.0
POLL_INTERVAL_SECONDS = 0.25
QUEUE_SIZE = 256
# EventSource reconnects after this many milliseconds when the stream ends.
RETRY_MILLISECONDS = 3000


class LiveStatusUnavailable(RuntimeError):
    """The documents table has no stream (or the stack is not ready): no live channel."""


@dataclass(eq=False)
class Subscription:
    tenant_id: str
    # Who subscribed (None: the whole tenant, as before access existed; the live route always sets it).
    principal: Principal | None = None
    messages: queue.Queue[dict[str, Any] | None] = field(default_factory=lambda: queue.Queue(QUEUE_SIZE))
    closed: threading.Event = field(default_factory=threading.Event)
    reason: str = ""

    def close(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.closed.set()


class LiveStatusHub:
    """Reads the documents table's stream and fans each change out to its tenant's subscribers."""

    def __init__(
        self,
        *,
        dynamodb: Any,
        streams: Any,
        table_name: str,
        poll_interval_seconds: float = POLL_INTERVAL_SECONDS,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self._dynamodb = dynamodb
        self._streams = streams
        self.table_name = table_name
        self.poll_interval_seconds = poll_interval_seconds
        self.queue_size = queue_size
        self._deserializer = TypeDeserializer()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._subscribers: set[Subscription] = set()
        self._iterator: str | None = None
        self._stream_arn: str | None = None
        self._shard_id: str | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.published = 0
        self.dropped = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        description = self._dynamodb.describe_table(TableName=self.table_name)["Table"]
        self._stream_arn = description.get("LatestStreamArn")
        view = (description.get("StreamSpecification") or {}).get("StreamViewType")
        if not self._stream_arn or view not in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            raise LiveStatusUnavailable(
                f"table {self.table_name} has no stream with new images (StreamViewType {view!r})"
            )
        self._thread = threading.Thread(target=self._run, name="live-status-reader", daemon=True)
        self._thread.start()
        LOG.info("live status: reading %s", self._stream_arn)

    def close(self) -> None:
        self._stopping.set()
        with self._wake:
            subscribers = list(self._subscribers)
            self._subscribers.clear()
            self._wake.notify_all()
        for subscription in subscribers:
            subscription.close("the local stack is stopping")
            with contextlib.suppress(queue.Full):
                subscription.messages.put_nowait(None)
        if self._thread is not None:
            self._thread.join(5)

    # -- subscribers --------------------------------------------------------------------------

    def subscribe(self, tenant_id: str, principal: Principal | None = None) -> Subscription:
        """A subscription to ``tenant_id``'s changes from now on (the stream position is taken here),
        of the documents ``principal`` may read."""
        if self._stopping.is_set() or self._thread is None:
            raise LiveStatusUnavailable("the live channel is not running")
        if principal is not None and principal.tenant_id != tenant_id:
            raise ValueError("the principal is of another tenant")
        subscription = Subscription(tenant_id, principal, queue.Queue(self.queue_size))
        with self._wake:
            if self._iterator is None:
                self._iterator = self._latest_iterator()
            self._subscribers.add(subscription)
            self._wake.notify_all()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"subscribers": len(self._subscribers), "published": self.published, "dropped": self.dropped}

    # -- the reader ---------------------------------------------------------------------------

    def _latest_iterator(self) -> str:
        if self._shard_id is None:
            shards = self._streams.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"]
            # moto has one shard per table; in AWS the open shard is the last one.
            self._shard_id = str(shards[-1]["ShardId"])
        response = self._streams.get_shard_iterator(
            StreamArn=self._stream_arn, ShardId=self._shard_id, ShardIteratorType="LATEST"
        )
        return str(response["ShardIterator"])

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._wake:
                if not self._subscribers:
                    self._iterator = None  # resume at LATEST for the next subscriber
                    self._wake.wait(1.0)
                    continue
                iterator = self._iterator
            try:
                if iterator is None:
                    with self._lock:
                        self._iterator = iterator = self._latest_iterator()
                response = self._streams.get_records(ShardIterator=iterator, Limit=1000)
            except Exception:
                LOG.exception("live status: reading the stream failed; resuming at its latest position")
                with self._lock:
                    self._shard_id = None
                    self._iterator = None
                self._stopping.wait(1.0)
                continue
            with self._lock:
                if self._iterator == iterator:
                    self._iterator = response.get("NextShardIterator")
            records = response.get("Records") or []
            for record in records:
                self._publish(record)
            if not records:
                self._stopping.wait(self.poll_interval_seconds)

    def _publish(self, record: Mapping[str, Any]) -> None:
        image = (record.get("dynamodb") or {}).get("NewImage")
        if not image:
            return  # a REMOVE: the document's last update (DELETED) was already pushed
        try:
            item = {name: self._deserializer.deserialize(value) for name, value in image.items()}
            update = update_for(item)
        except Exception as exc:
            LOG.warning("live status: record %s is not a document: %s", record.get("eventID"), exc)
            return
        with self._lock:
            targets = [
                s
                for s in self._subscribers
                if s.tenant_id == update.tenant_id and (s.principal is None or can_read(s.principal, update.record))
            ]
        for subscription in targets:
            try:
                subscription.messages.put_nowait(update.message)
                self.published += 1
            except queue.Full:
                # A slow client is dropped, not the reader: its stream ends and the page reconnects.
                self.dropped += 1
                self.unsubscribe(subscription)
                subscription.close("the client did not keep up")
                LOG.warning("live status: dropped a slow subscriber of tenant %s", subscription.tenant_id)


def stream_events(
    subscription: Subscription,
    write: Callable[[bytes], None],
    *,
    keepalive_seconds: float = KEEPALIVE_SECONDS,
) -> None:
    """Write the subscription's messages as Server-Sent Events until it closes or the client goes.

    ``write`` sends and flushes; an ``OSError`` from it (the client left) ends the stream.
    """
    write(f"retry: {RETRY_MILLISECONDS}\n: connected\n\n".encode())
    last_write = time.monotonic()
    while not subscription.closed.is_set():
        wait = max(0.05, min(1.0, keepalive_seconds - (time.monotonic() - last_write)))
        try:
            message = subscription.messages.get(timeout=wait)
        except queue.Empty:
            if time.monotonic() - last_write >= keepalive_seconds:
                write(b": keep-alive\n\n")
                last_write = time.monotonic()
            continue
        if message is None or subscription.closed.is_set():
            break
        data = json.dumps(message, separators=(",", ":"))
        write(f"event: {DOCUMENT_UPDATED}\ndata: {data}\n\n".encode())
        last_write = time.monotonic()
