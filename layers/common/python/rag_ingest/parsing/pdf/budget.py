"""What one PDF may cost the parser, and the timer that enforces a page's share.

:class:`ParseBudget` bounds each page (time, decoded content-stream bytes, extracted characters)
and each page range (time, characters). :func:`within_budget` runs one page's work under an
interval timer that interrupts it in the main thread (elsewhere the clock is checked after the
work) and turns pypdf's decompression limits into :class:`BudgetExceeded` too. Imports pypdf only.
Defaults and rationale: docs/pdf.md, "Budgets".
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TypeVar

from pypdf.errors import LimitReachedError

_T = TypeVar("_T")
_REPEAT_SECONDS = 0.05  # how often an over-budget page is interrupted again until it stops


@dataclass(frozen=True)
class ParseBudget:
    """What one PDF may cost the parser (the defaults fit in the Parse function's timeout many times).

    A real page holds well under 20,000 characters and a few hundred KB of content stream; a
    scanned or vector-heavy page more, but extracts in well under a second.
    """

    page_seconds: float = 10.0
    page_content_bytes: int = 32 * 1024 * 1024
    page_text_chars: int = 500_000
    document_seconds: float = 180.0
    # A dense 500-page book is ~3 M characters; more text than this would make Chunk the victim.
    document_text_chars: int = 5_000_000


DEFAULT_BUDGET = ParseBudget()


class _PageOverBudget(BaseException):
    """Raised by the interval timer inside pypdf. A BaseException, so pypdf's many
    ``except Exception`` handlers cannot swallow it and carry on."""


class BudgetExceeded(Exception):
    """A page went over one of its budgets (time, content bytes, characters)."""


def _interrupted_after(seconds: float, work: Callable[[], _T]) -> _T:
    """``work()``, interrupted by ``_PageOverBudget`` after ``seconds`` if this is the main thread
    (only there can a signal interrupt it); elsewhere uninterrupted (the caller checks the clock).

    The previous SIGALRM handler and timer (e.g. pytest-timeout's) are restored, the latter
    less the time spent here.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return work()

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if frame is not None and frame.f_code.co_filename == __file__:
            return  # this module is starting or ending the work; the alarm repeats if need be
        raise _PageOverBudget

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    # The alarm repeats: raised inside a weakref callback or a __del__, the exception is swallowed.
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, seconds, _REPEAT_SECONDS)
    started = time.monotonic()
    try:
        return work()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay > 0:
            remaining = max(previous_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_interval)


def within_budget(seconds: float, work: Callable[[], _T]) -> _T:
    """``work()``, or ``BudgetExceeded`` when it takes longer than ``seconds`` (or hits pypdf's limits)."""
    started = time.monotonic()
    try:
        result = _interrupted_after(seconds, work)
    except _PageOverBudget:
        raise BudgetExceeded(f"took more than {seconds:g} s") from None
    except LimitReachedError as error:
        raise BudgetExceeded(f"pypdf limit: {error}") from error
    except RecursionError as error:
        raise BudgetExceeded("nested too deeply") from error
    if time.monotonic() - started > seconds:
        raise BudgetExceeded(f"took more than {seconds:g} s")
    return result
