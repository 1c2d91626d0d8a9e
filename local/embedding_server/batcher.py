"""Dynamic batching: texts from concurrent callers, collected for a few milliseconds, embedded in one run.

One thread owns the model. It blocks for the first queued text, then keeps collecting until the
batch is full or ``max_wait`` has passed since that first text, and embeds the lot in one call
(the embedder sorts by length, so padding stays small). Each caller waits on its own future.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

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


class DynamicBatcher:
    """Embeds submitted texts in shared batches of at most ``max_batch``, on one thread."""

    def __init__(self, embed: EmbedFunction, *, max_batch: int, max_wait_seconds: float) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._embed = embed
        self.max_batch = max_batch
        self.max_wait_seconds = max_wait_seconds
        self._queue: queue.Queue[tuple[str, float, Future[list[float]]] | None] = queue.Queue()
        self._stats = BatcherStats()
        self._stats_lock = threading.Lock()
        # Cleared to hold batches back (tests use it to make requests pile up deterministically).
        self._running = threading.Event()
        self._running.set()
        self._thread = threading.Thread(target=self._loop, name="embedding-batcher", daemon=True)
        self._thread.start()

    def submit(self, text: str, deadline: float = float("inf")) -> Future[list[float]]:
        """Queue ``text``; if no batch has taken it by ``deadline`` (``time.monotonic()``), its
        future fails with :class:`QueueTimeout` instead, so no run is spent on a caller gone."""
        future: Future[list[float]] = Future()
        self._queue.put((text, deadline, future))
        return future

    def pause(self) -> None:
        """Hold queued texts until :meth:`resume` (the batch in progress finishes)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def queued(self) -> int:
        return self._queue.qsize()

    def stats(self) -> dict[str, object]:
        with self._stats_lock:
            return self._stats.as_dict()

    def close(self) -> None:
        self._running.set()
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            self._running.wait()
            batch = [first]
            deadline = time.monotonic() + self.max_wait_seconds
            closing = False
            while len(batch) < self.max_batch:
                remaining = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    break
                batch.append(item)
            self._run(batch)
            if closing:
                return

    def _run(self, batch: list[tuple[str, float, Future[list[float]]]]) -> None:
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
            vectors = self._embed([text for text, _ in live])
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
