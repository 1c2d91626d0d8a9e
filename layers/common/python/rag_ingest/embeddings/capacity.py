"""One budget for every Embed task: the embedding model's per-minute quota, shared by all documents,
both lanes and every concurrent Lambda.

A ledger of what was booked in the last minute, per model, in a shared store
(``CapacityLedgerStore``: one DynamoDB item in AWS). Before an Embed task sends a batch it books the
batch's requests and tokens at the earliest moment at which no window of the quota's length would
hold more than the quota (a sliding minute), with one consistent read and one conditional write. A
booking further ahead than the task's wait budget books nothing and raises
:class:`~rag_ingest.core.errors.EmbeddingCapacityWait`: Step Functions calls the task again later.
Why a sliding minute, and the measurements: docs/architecture.md, "One limiter across all Embed work".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rag_ingest.core.errors import EmbeddingCapacityWait, ErrorCode, PermanentError, TransientError

MICROSECONDS = 1_000_000
#: The quota's window, as Bedrock's quotas are "per minute".
QUOTA_WINDOW_US = 60 * MICROSECONDS
#: Added to the window a booking occupies: a batch's calls reach Bedrock a little after the moment
#: they were booked for, so Bedrock's minute for them ends a little later than ours.
WINDOW_MARGIN_US = 1 * MICROSECONDS
# Rounds lost to concurrent writers before a booking gives up (transient), and the longest pause
# between two, growing with full jitter: each lost round is another Embed task's booking.
_MAX_ROUNDS = 40
_MAX_PAUSE_SECONDS = 0.5


@dataclass(frozen=True)
class EmbeddingQuota:
    """The model's on-demand quota (None: not enforced) and the share of it the limiter books.

    ``headroom`` below 1 leaves room for what the limiter does not see: search queries embedded by
    the API, another application in the same account."""

    requests_per_minute: int | None
    tokens_per_minute: int | None
    headroom: float = 0.97

    def __post_init__(self) -> None:
        if not 0 < self.headroom <= 1:
            raise ValueError(f"headroom must be in (0, 1], not {self.headroom}")
        for name, value in (("requests", self.requests_per_minute), ("tokens", self.tokens_per_minute)):
            if value is not None and value < 1:
                raise ValueError(f"{name} per minute must be at least 1 (or unset), not {value}")

    @property
    def enforced(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    @property
    def request_limit(self) -> int | None:
        return None if self.requests_per_minute is None else max(1, int(self.requests_per_minute * self.headroom))

    @property
    def token_limit(self) -> int | None:
        return None if self.tokens_per_minute is None else max(1, int(self.tokens_per_minute * self.headroom))

    def fits(self, requests: int, tokens: int) -> bool:
        """Whether this much can ever be booked in one window."""
        return (self.request_limit is None or requests <= self.request_limit) and (
            self.token_limit is None or tokens <= self.token_limit
        )


@dataclass(frozen=True)
class Booking:
    """Requests and tokens booked to be sent at ``at_us`` (epoch microseconds)."""

    at_us: int
    requests: int
    tokens: int


@dataclass(frozen=True)
class Ledger:
    """The bookings that still count, and the version a writer must find to replace them (0: none yet)."""

    bookings: tuple[Booking, ...]
    version: int


class CapacityLedgerStore(Protocol):
    """The shared ledger of one budget (``scope``): read it, or replace it if nobody wrote since."""

    def read(self, scope: str) -> Ledger: ...

    def write(self, scope: str, bookings: Sequence[Booking], expected_version: int) -> bool:
        """False when the ledger is no longer at ``expected_version`` (another writer won)."""
        ...


def earliest_start(
    bookings: Sequence[Booking], requests: int, tokens: int, not_before_us: int, quota: EmbeddingQuota
) -> int:
    """The first moment at or after ``not_before_us`` and after every booking (first come, first
    served) at which a booking of ``requests`` and ``tokens`` keeps every window of the quota's
    length (plus the margin) within the quota. The caller checks ``quota.fits`` first."""
    window = QUOTA_WINDOW_US + WINDOW_MARGIN_US
    ordered = sorted(bookings, key=lambda booking: booking.at_us)
    start = max([not_before_us, *(booking.at_us for booking in ordered)])
    while True:
        # Windows that contain ``start`` hold bookings at or before it only (nothing is booked after
        # it), so the one ending at ``start`` is the fullest.
        counted = [booking for booking in ordered if booking.at_us > start - window]
        used_requests = sum(booking.requests for booking in counted)
        used_tokens = sum(booking.tokens for booking in counted)
        requests_fit = quota.request_limit is None or used_requests + requests <= quota.request_limit
        tokens_fit = quota.token_limit is None or used_tokens + tokens <= quota.token_limit
        if requests_fit and tokens_fit:
            return start
        # Not yet: try again when the oldest booking still counted leaves the window.
        start = counted[0].at_us + window


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


class CapacityLimiter:
    """Books each batch on the shared ledger and says when each of its texts may be sent."""

    def __init__(
        self,
        store: CapacityLedgerStore,
        quota: EmbeddingQuota,
        scope: str,
        *,
        max_wait_seconds: float,
        clock_us: Callable[[], int] = _wall_clock_us,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        """``scope`` names the budget (the model id and Region: Bedrock's quotas are per model per
        account and Region). A batch waits at most ``max_wait_seconds`` for its turn; beyond that
        the task gives way (waiting, which its document's status shows)."""
        if max_wait_seconds < 0:
            raise ValueError(f"max_wait_seconds must not be negative, not {max_wait_seconds}")
        self.quota = quota
        self.scope = scope
        self.max_wait_seconds = max_wait_seconds
        self._store = store
        self._clock_us = clock_us
        self._pause = pause

    def schedule(self, token_counts: Sequence[int]) -> list[float]:
        """Epoch seconds at which each text (by its token count) may be sent, in order; raises
        EmbeddingCapacityWait when the ledger is booked further ahead than the wait budget.

        Each text is booked at its own earliest moment, so a batch fills what is left of a window
        and sends the rest as the window frees up (16 texts against 60 requests a minute would
        otherwise leave 12 of every 60 unused); texts booked for the same moment are one booking,
        and the whole batch is one write."""
        for count in token_counts:
            if not self.quota.fits(1, count):
                raise PermanentError(
                    ErrorCode.EMBEDDING_CAPACITY,
                    f"a text of {count} tokens is more than the embedding quota of {self.scope} allows in a minute",
                )
        for lost in range(_MAX_ROUNDS):
            now = self._clock_us()
            ledger = self._store.read(self.scope)
            # Bookings older than a window can never count again.
            live = [b for b in ledger.bookings if b.at_us > now - QUOTA_WINDOW_US - WINDOW_MARGIN_US]
            booked: list[Booking] = []
            moments: list[int] = []
            for count in token_counts:
                at = earliest_start([*live, *booked], 1, count, now, self.quota)
                moments.append(at)
                if booked and booked[-1].at_us == at:
                    last = booked[-1]
                    booked[-1] = Booking(at, last.requests + 1, last.tokens + count)
                else:
                    booked.append(Booking(at, 1, count))
            if moments and moments[0] > now + int(self.max_wait_seconds * MICROSECONDS):
                ahead = (moments[0] - now) / MICROSECONDS
                raise EmbeddingCapacityWait(
                    f"the embedding quota of {self.scope} is booked {ahead:.0f} s ahead "
                    f"(a task waits at most {self.max_wait_seconds:.0f} s): retried later",
                    booked_ahead_seconds=ahead,
                )
            if not booked or self._store.write(self.scope, [*live, *booked], ledger.version):
                return [moment / MICROSECONDS for moment in moments]
            # Another task booked meanwhile: read again, after a pause that grows with the rounds lost.
            self._pause(random.uniform(0, min(_MAX_PAUSE_SECONDS, 0.01 * 2**lost)))
        raise TransientError(f"embedding capacity {self.scope}: {_MAX_ROUNDS} bookings lost to concurrent writers")


def sleep_until(epoch_seconds: float, sleep: Callable[[float], None] = time.sleep) -> None:
    delay = epoch_seconds - time.time()
    if delay > 0:
        sleep(delay)
