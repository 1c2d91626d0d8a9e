"""Dynamic batching: texts from concurrent callers, collected for a few milliseconds, embedded in one run.

One thread owns the model. It blocks for the first queued text, then keeps collecting until the
batch is full or ``max_wait`` has passed since that first text, and embeds the lot in one call
(the embedder sorts by length, so padding stays small). Each caller waits on its own future.
Search queries (the query lane) do not wait for company: they run at once, in batches of their own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import StrEnum

LOG = logging.getLogger("local.embedding_server")

EmbedFunction = Callable[[Sequence[str]], list[list[float]]]


class QueueTimeout(Exception):
    """The text waited in the queue past its deadline: its caller is given up on, so it is not embedded."""


@dataclass
class BatcherStats:
    batches: int = 0
    texts: int = 0
    largest_batch: int = 0
    # Batch size -> how many batches had it.
    batch_sizes: dict[int, int] = field(default_factory=dict)
    embed_seconds: float = 0.0
    expired: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "batches": self.batches,
            "texts": self.texts,
            "largest_batch": self.largest_batch,
            "mean_batch": round(self.texts / self.batches, 2) if self.batches else 0.0,
            "batch_sizes": {str(size): count for size, count in sorted(self.batch_sizes.items())},
            "embed_seconds": round(self.embed_seconds, 3),
            "expired": self.expired,
        }


class Lane(StrEnum):
    """Whose text it is, from the path the caller was pointed at (the local runtime sets it):
    the API function's search queries come under ``/lanes/query``, the bulk document lane's Embed
    workers under ``/lanes/bulk``, every other caller at the root (standard)."""

    QUERY = "query"
    STANDARD = "standard"
    BULK = "bulk"


_Item = tuple[str, float, "Future[list[float]]"]


class DynamicBatcher:
    """Embeds submitted texts in shared batches of at most ``max_batch``, on one thread.

    Three queues. Queries run first, at once and in batches of their own (a query that arrives
    while a batch of passages is collecting ends its window). A batch of passages takes the
    standard lane's texts first and fills what is left with the bulk lane's, which always gets at
    least one slot while it has texts waiting (so it slows down behind small documents but never
    stops: its callers' deadlines still hold). In AWS the
    lanes share the Bedrock quota by their Map concurrency; here the one model's CPU is the shared
    resource, and this is its lane priority, like the bulk workers' niceness.
    """

    def __init__(
        self,
        embed: EmbedFunction,
        *,
        max_batch: int,
        max_wait_seconds: float,
        embed_queries: EmbedFunction | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._embed = embed
        # Query batches may have an embed function of their own (the same vectors, tuned for latency).
        self._embed_queries = embed_queries or embed
        self.max_batch = max_batch
        self.max_wait_seconds = max_wait_seconds
        self._queues: dict[Lane, deque[_Item]] = {lane: deque() for lane in Lane}
        self._available = threading.Condition()
        self._closing = False
        self._stats = BatcherStats()
        self._stats_lock = threading.Lock()
        # Cleared to hold batches back (tests use it to make requests pile up deterministically).
        self._running = threading.Event()
        self._running.set()
        self._thread = threading.Thread(target=self._loop, name="embedding-batcher", daemon=True)
        self._thread.start()

    def submit(self, text: str, deadline: float = float("inf"), lane: Lane = Lane.STANDARD) -> Future[list[float]]:
        """Queue ``text``; if no batch has taken it by ``deadline`` (``time.monotonic()``), its
        future fails with :class:`QueueTimeout` instead, so no run is spent on a caller gone."""
        future: Future[list[float]] = Future()
        with self._available:
            self._queues[lane].append((text, deadline, future))
            self._available.notify()
        return future

    def pause(self) -> None:
        """Hold queued texts until :meth:`resume` (the batch in progress finishes)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def queued(self, lane: Lane | None = None) -> int:
        with self._available:
            return sum(len(q) for name, q in self._queues.items() if lane is None or name is lane)

    def stats(self) -> dict[str, object]:
        with self._stats_lock:
            return self._stats.as_dict()

    def close(self) -> None:
        self._running.set()
        with self._available:
            self._closing = True
            self._available.notify()
        self._thread.join(timeout=10)

    def _take(self, count: int) -> list[_Item]:
        """Up to ``count`` queued document texts, standard first; one slot is the bulk lane's if it
        waits. The caller holds ``_available``."""
        standard, bulk = self._queues[Lane.STANDARD], self._queues[Lane.BULK]
        bulk_share = 1 if bulk and count > 1 else 0
        taken = [standard.popleft() for _ in range(min(len(standard), count - bulk_share))]
        taken += [bulk.popleft() for _ in range(min(len(bulk), count - len(taken)))]
        return taken

    def _take_queries(self, count: int) -> list[_Item]:
        """Up to ``count`` queued queries. The caller holds ``_available``."""
        queries = self._queues[Lane.QUERY]
        return [queries.popleft() for _ in range(min(len(queries), count))]

    def _loop(self) -> None:
        while True:
            with self._available:
                while not self._closing and not any(self._queues.values()):
                    self._available.wait()
                if self._closing and not any(self._queues.values()):
                    return
                # Queries go first, in batches of their own and at once: a person waits on each, and
                # a short query batched with long passages would be padded to their length.
                batch = self._take_queries(self.max_batch)
                is_query_batch = bool(batch)
                if not is_query_batch:
                    batch = self._take(1)
            self._running.wait()
            if is_query_batch:
                with self._available:
                    batch += self._take_queries(self.max_batch - len(batch))
                self._run(batch, self._embed_queries)
                continue
            deadline = time.monotonic() + self.max_wait_seconds
            with self._available:
                while len(batch) < self.max_batch and not self._closing:
                    batch += self._take(self.max_batch - len(batch))
                    remaining = deadline - time.monotonic()
                    # A query that arrives ends the window: this batch runs now and the query's next.
                    if len(batch) >= self.max_batch or remaining <= 0 or self._queues[Lane.QUERY]:
                        break
                    self._available.wait(timeout=remaining)
            self._run(batch, self._embed)

    def _run(self, batch: list[tuple[str, float, Future[list[float]]]], embed: EmbedFunction) -> None:
        now = time.monotonic()
        live: list[tuple[str, Future[list[float]]]] = []
        expired = 0
        for text, deadline, future in batch:
            if not future.set_running_or_notify_cancel():
                continue
            if now > deadline:
                future.set_exception(QueueTimeout(f"waited {now - deadline:.1f} s past its deadline"))
                expired += 1
            else:
                live.append((text, future))
        if expired:
            with self._stats_lock:
                self._stats.expired += expired
        if not live:
            return
        started = time.perf_counter()
        try:
            vectors = embed([text for text, _ in live])
        except Exception as error:  # every caller of the batch sees the failure
            LOG.exception("embedding a batch of %d failed", len(live))
            for _, future in live:
                future.set_exception(error)
            return
        elapsed = time.perf_counter() - started
        with self._stats_lock:
            stats = self._stats
            stats.batches += 1
            stats.texts += len(live)
            stats.largest_batch = max(stats.largest_batch, len(live))
            stats.batch_sizes[len(live)] = stats.batch_sizes.get(len(live), 0) + 1
            stats.embed_seconds += elapsed
        for (_, future), vector in zip(live, vectors, strict=True):
            future.set_result(vector)
