"""The alarms' time: a source clock plus an offset that only grows, so tests step time, never wait.

The evaluator and its metric store read :meth:`AlarmClock.now`; :meth:`AlarmClock.advance` moves
it on (in-process tests, or the stack's ``/_local/alarm-clock``: :mod:`.clock_control`). Instants
taken elsewhere (an EMF line's timestamp, an execution's stop time) are on the source clock, and
:meth:`AlarmClock.from_source` places them in alarm time. :func:`manual_clock` never moves alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class AlarmClock:
    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the epoch, in alarm time."""
        return self._source() + self._offset

    def source_now(self) -> float:
        """The source clock's own reading (what SQS's send times are compared with)."""
        return self._source()

    @property
    def offset_seconds(self) -> float:
        return self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"the alarm clock only moves forward, not by {seconds} s")
        with self._lock:
            self._offset += seconds

    def from_source(self, instant: float) -> float:
        """An instant of the source clock, in alarm time."""
        return instant + self._offset


def manual_clock(start: float) -> AlarmClock:
    """A clock at ``start`` that moves only when advanced."""
    return AlarmClock(source=lambda: start)
