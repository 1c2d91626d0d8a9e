"""One budget for every Embed task: the embedding model's per-minute quota, shared by all documents,
both lanes and every concurrent Lambda (docs/architecture.md, "One limiter across all Embed work").

The budget is a single timeline per model (the generic cell rate algorithm): each embedding call
costs the time its requests and tokens take at the quota's rate, and a caller *reserves* the next
free stretch of the timeline before it sends anything. A reservation is one conditional write to a
shared store (``CapacityTimeline``, DynamoDB in AWS), made once per batch of texts; the texts of the
batch are then sent one after another at their own moments inside the stretch, so no 60-second
window ever sees more than the quota, even under the strictest reading of "N per minute" (a
sliding minute), and there is no start-up burst to pay back.

A caller whose stretch would start too far ahead (more than the Embed task's wait budget) reserves
nothing and raises :class:`~rag_ingest.core.errors.EmbeddingCapacityWait`: the task ends, its
finished batches stay checkpointed, and Step Functions calls it again later under a Retry of its
own. The document's record says it is waiting for capacity meanwhile.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rag_ingest.core.errors import EmbeddingCapacityWait

MICROSECONDS = 1_000_000


@dataclass(frozen=True)
class EmbeddingQuota:
    """The model's on-demand quota (None: not enforced) and the share of it the limiter uses.

    ``headroom`` below 1 leaves room for what the limiter does not see: search queries embedded by
    the API, the clock's skew between Lambdas, another application in the same account."""

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

    def cost_us(self, requests: int, tokens: int) -> int:
        """Microseconds of the timeline ``requests`` calls carrying ``tokens`` tokens take at the
        quota's rate: the longer of the two, so neither quota is ever exceeded."""
        costs = [0.0]
        if self.requests_per_minute is not None:
            costs.append(requests * 60 * MICROSECONDS / (self.requests_per_minute * self.headroom))
        if self.tokens_per_minute is not None:
            costs.append(tokens * 60 * MICROSECONDS / (self.tokens_per_minute * self.headroom))
        return math.ceil(max(costs))


@dataclass(frozen=True)
class Reservation:
    """A stretch of the timeline: ``start_us`` (epoch microseconds) when granted; when not,
    ``queue_end_us`` says when the timeline frees up."""

    granted: bool
    start_us: int
    queue_end_us: int


class CapacityTimeline(Protocol):
    """The shared timeline (one per model): reserve ``cost_us`` starting no later than
    ``latest_start_us``, at ``now_us`` or after everything reserved before."""

    def reserve(self, scope: str, cost_us: int, now_us: int, latest_start_us: int) -> Reservation: ...


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


class CapacityLimiter:
    """Reserves a batch's stretch of the shared timeline and says when each text may be sent."""

    def __init__(
        self,
        timeline: CapacityTimeline,
        quota: EmbeddingQuota,
        scope: str,
        *,
        max_wait_seconds: float,
        clock_us: Callable[[], int] = _wall_clock_us,
    ) -> None:
        """``scope`` names the budget (the model id and Region: Bedrock's quotas are per model per
        account and Region). A batch waits at most ``max_wait_seconds`` for its stretch (pacing);
        beyond that the task gives way (waiting, which its document's status shows)."""
        if max_wait_seconds < 0:
            raise ValueError(f"max_wait_seconds must not be negative, not {max_wait_seconds}")
        self.quota = quota
        self.scope = scope
        self.max_wait_seconds = max_wait_seconds
        self._timeline = timeline
        self._clock_us = clock_us

    def schedule(self, token_counts: Sequence[int]) -> list[float]:
        """Epoch seconds at which each text (by its token count) may be sent, in order; raises
        EmbeddingCapacityWait when the timeline is booked further ahead than the wait budget."""
        costs = [self.quota.cost_us(1, tokens) for tokens in token_counts]
        now = self._clock_us()
        latest_start = now + int(self.max_wait_seconds * MICROSECONDS)
        reservation = self._timeline.reserve(self.scope, sum(costs), now, latest_start)
        if not reservation.granted:
            booked_ahead = (reservation.queue_end_us - now) / MICROSECONDS
            raise EmbeddingCapacityWait(
                f"the embedding quota of {self.scope} is booked {booked_ahead:.0f} s ahead "
                f"(a task waits at most {self.max_wait_seconds:.0f} s): retried later",
                booked_ahead_seconds=booked_ahead,
            )
        moments: list[float] = []
        at = reservation.start_us
        for cost in costs:
            moments.append(at / MICROSECONDS)
            at += cost
        return moments


def sleep_until(epoch_seconds: float, sleep: Callable[[float], None] = time.sleep) -> None:
    delay = epoch_seconds - time.time()
    if delay > 0:
        sleep(delay)
