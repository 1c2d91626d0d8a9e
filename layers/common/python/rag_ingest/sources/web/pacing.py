"""Politeness: the per-host request rate, on a clock and a sleep that are given (tests pass fakes).

``RateLimiter.wait`` hands out start times ``interval`` seconds apart to any number of threads and
sleeps until the caller's; concurrency is bounded by the crawler's worker count. Imports nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class RateLimiter:
    def __init__(self, interval: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.interval = interval
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = self._clock()
            slot = now if self._next is None else max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            self._sleep(slot - now)
