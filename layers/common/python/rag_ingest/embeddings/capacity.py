"""One budget for every Embed task: the embedding model's per-minute quota, shared by all documents,
both lanes, every concurrent Lambda and every tenant, each tenant with a fair (weighted) share.

A ledger of the last minute's bookings per model (``CapacityLedgerStore``: one DynamoDB item in AWS).
An Embed task books each text, for the ``booking_tenant``, at the earliest moment no sliding minute
holds more than the quota, nor more of that tenant's than its fair share (``FairShare``), nor more
than the quota's rate in any 6 s (``PACE_US``): one consistent read, one conditional write. A task
books at most ``book_ahead_seconds`` ahead and waits in-process for the rest; past its wait budget
it raises :class:`EmbeddingCapacityWait`. Why: docs/architecture.md.
"""

from __future__ import annotations

import math
import random
import time
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
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
    """Requests and tokens booked for ``tenant`` to be sent at ``at_us`` (epoch microseconds)."""

    at_us: int
    requests: int
    tokens: int
    tenant: str = ""


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


#: A tenant with no weight of its own (cdk.json embedding.capacity.tenantWeights) weighs this much.
DEFAULT_TENANT_WEIGHT = 1.0
#: How far past its current use, as a fraction of its fair share, room stays kept for an active
#: tenant that uses less than its share: what it finds free at once when its next document comes.
FAIR_SHARE_SLACK = 0.1
#: The share of every window no tenant may fill, kept for a tenant with no booking in it yet: its
#: first document finds room at once even beside a backfill that took the minute in one burst.
NEWCOMER_ROOM = 0.03


@dataclass(frozen=True)
class FairShare:
    """Each tenant's weight. In a window where other tenants have bookings (they are active), a
    tenant may hold the quota less the room kept for the others: for one still waiting for room (it
    has bookings ahead of now), its weighted share; for one that is not, its own use plus ``slack``
    of its share, if that is less (work-conserving: what a light tenant leaves goes to the busy one).
    ``newcomer`` of every window is kept for a tenant with no booking in it yet (alone, a tenant
    may hold the rest)."""

    weights: Mapping[str, float] = field(default_factory=dict)
    default_weight: float = DEFAULT_TENANT_WEIGHT
    slack: float = FAIR_SHARE_SLACK
    newcomer: float = NEWCOMER_ROOM

    def __post_init__(self) -> None:
        for tenant, weight in {**self.weights, "(default)": self.default_weight}.items():
            if not 0 < weight < math.inf:
                raise ValueError(f"the weight of tenant {tenant} must be a positive number, not {weight}")
        if not 0 <= self.slack <= 1:
            raise ValueError(f"slack must be in [0, 1], not {self.slack}")
        if not 0 <= self.newcomer < 1:
            raise ValueError(f"newcomer must be in [0, 1), not {self.newcomer}")

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, self.default_weight)

    def cap(self, tenant: str, used: Mapping[str, int], limit: int, waiting: Collection[str] = ()) -> float:
        """What ``tenant`` may hold in a window of ``limit`` where each active tenant holds ``used``
        and the ``waiting`` ones have bookings ahead of now."""
        others = [other for other in used if other != tenant]
        # A newcomer may take the room kept for newcomers; everyone else leaves it.
        newcomer_room = 0.0 if tenant not in used else self.newcomer * limit
        if not others:
            return limit - newcomer_room
        total = self.weight(tenant) + sum(self.weight(other) for other in others)
        kept = 0.0
        for other in others:
            share = self.weight(other) / total * limit
            kept += share if other in waiting else min(share, used[other] + self.slack * share)
        return limit - kept - newcomer_room


#: With fair shares a tenant books at most the quota's rate over any span this long (a tenth of the
#: limit in 6 s): room then frees every few seconds for others, not once a minute after a burst.
PACE_US = 6 * MICROSECONDS


#: How long a tenant that had to wait for room (an empty booking at the moment it waited for)
#: keeps the others held to their shares: long enough for it to book the room they leave.
WAITING_US = 10 * MICROSECONDS


#: Fair sharing off: one tenant's bookings are as good as another's (first come, first served).
NO_FAIR_SHARE = FairShare(slack=1.0, newcomer=0.0)


class _Timeline:
    """The bookings in time order with running totals, so any window's use is two bisections."""

    def __init__(self, bookings: Sequence[Booking]) -> None:
        self.bookings = sorted(bookings, key=lambda booking: booking.at_us)
        self.times = [booking.at_us for booking in self.bookings]

    def within(self, after_us: int, until_us: int) -> list[Booking]:
        """The bookings in (after_us, until_us]."""
        return self.bookings[bisect_right(self.times, after_us) : bisect_right(self.times, until_us)]


def earliest_start(
    bookings: Sequence[Booking],
    requests: int,
    tokens: int,
    not_before_us: int,
    quota: EmbeddingQuota,
    tenant: str = "",
    fair: FairShare = NO_FAIR_SHARE,
) -> int:
    """The first moment at or after ``not_before_us`` at which a booking of ``requests`` and
    ``tokens`` for ``tenant`` keeps every window of the quota's length (plus the margin) within the
    quota, and within the tenant's fair share (``fair``) where other tenants are active. A moment
    before bookings already made is taken if every later window that would hold it has room too.
    The caller checks ``quota.fits`` first."""
    window = QUOTA_WINDOW_US + WINDOW_MARGIN_US
    timeline = _Timeline(bookings)
    limits = (quota.request_limit, quota.token_limit)
    wanted = (requests, tokens)
    fair_share_on = fair is not NO_FAIR_SHARE
    # A tenant with bookings ahead of now, or that said lately it waits (an empty booking), wants
    # more than it holds.
    waiting = {
        b.tenant
        for b in timeline.bookings
        if b.at_us > not_before_us or (b.requests == b.tokens == 0 and b.at_us > not_before_us - WAITING_US)
    }

    mine = _Timeline([b for b in timeline.bookings if b.tenant == tenant]) if fair_share_on else None

    def paced(start: int) -> bool:
        # The spans of PACE_US holding ``start``: the one ending at it, and those ending at the tenant's
        # later bookings. A text larger than a span's allowance still goes alone in its span.
        assert mine is not None
        ends = [start, *(b.at_us for b in mine.within(start, start + PACE_US - 1))]
        for end in ends:
            counted = mine.within(end - PACE_US, end)
            for dimension, limit in enumerate(limits):
                if limit is None or not counted:
                    continue
                allowed = limit * PACE_US / QUOTA_WINDOW_US
                held = sum(b.requests if dimension == 0 else b.tokens for b in counted)
                if held + wanted[dimension] > allowed:
                    return False
        return True

    def room_at(start: int) -> bool:
        if mine is not None and not paced(start):
            return False
        # The windows holding ``start`` end in [start, start + window); their use only grows at a
        # booking's moment, so the one ending at ``start`` and those ending at later bookings are all.
        ends = [start, *(b.at_us for b in timeline.within(start, start + window - 1))]
        for end in ends:
            counted = timeline.within(end - window, end)
            for dimension, limit in enumerate(limits):
                if limit is None:
                    continue
                used: dict[str, int] = {}
                for booking in counted:
                    amount = booking.requests if dimension == 0 else booking.tokens
                    used[booking.tenant] = used.get(booking.tenant, 0) + amount
                if sum(used.values()) + wanted[dimension] > limit:
                    return False
                if fair_share_on and used.get(tenant, 0) + wanted[dimension] > fair.cap(tenant, used, limit, waiting):
                    return False
        return True

    # Room appears only when a booking leaves a window, and a moment before a later booking can
    # become possible once that booking is passed: those, in order, are the only candidates.
    candidates = sorted(
        {not_before_us}
        | {b.at_us + window for b in timeline.bookings if b.at_us + window > not_before_us}
        | {b.at_us for b in timeline.bookings if b.at_us > not_before_us}
        | ({b.at_us + PACE_US for b in mine.bookings if b.at_us + PACE_US > not_before_us} if mine else set())
    )
    for start in candidates:
        if room_at(start):
            return start
    # Past the last booking's window the ledger is empty (unreachable: that is the last candidate).
    return candidates[-1]


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


#: The tenant whose document the current Embed task embeds (set by the pipeline around each call);
#: bookings made while it is unset are the anonymous tenant's.
booking_tenant: ContextVar[str] = ContextVar("booking_tenant", default="")


@contextmanager
def booking_for(tenant_id: str) -> Iterator[None]:
    """Bookings made inside this block are ``tenant_id``'s."""
    token = booking_tenant.set(tenant_id)
    try:
        yield
    finally:
        booking_tenant.reset(token)


class CapacityLimiter:
    """Books each batch on the shared ledger and says when each of its texts may be sent."""

    def __init__(
        self,
        store: CapacityLedgerStore,
        quota: EmbeddingQuota,
        scope: str,
        *,
        max_wait_seconds: float,
        fair: FairShare = NO_FAIR_SHARE,
        book_ahead_seconds: float | None = None,
        clock_us: Callable[[], int] = _wall_clock_us,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        """``scope`` names the budget (the model id and Region: Bedrock's quotas are per model per
        account and Region). A batch waits at most ``max_wait_seconds`` for its turn; beyond that
        the task gives way (waiting, which its document's status shows). ``book_ahead_seconds``
        bounds how far ahead of now a batch's first text is booked (None: as far as the wait): a
        task waits for the rest in-process, so a tenant that comes later finds room that soon."""
        if max_wait_seconds < 0:
            raise ValueError(f"max_wait_seconds must not be negative, not {max_wait_seconds}")
        if book_ahead_seconds is not None and book_ahead_seconds <= 0:
            raise ValueError(f"book_ahead_seconds must be positive (or unset), not {book_ahead_seconds}")
        self.quota = quota
        self.scope = scope
        self.max_wait_seconds = max_wait_seconds
        self.fair = fair
        self.book_ahead_seconds = book_ahead_seconds
        self._store = store
        self._clock_us = clock_us
        self._pause = pause

    def schedule(self, token_counts: Sequence[int], *, give_way: bool = True) -> list[float]:
        """Epoch seconds at which each of the first texts (by their token counts) may be sent, in
        order, booked for ``booking_tenant``: all of them, or with ``book_ahead_seconds`` the ones
        whose moment is within it (at least one; the caller asks again for the rest). Raises
        EmbeddingCapacityWait when there is no room within the wait budget, unless ``give_way`` is
        False (the rest of a batch already being sent: it waits in-process, at most about a window).

        Each text is booked at its own earliest moment, so a batch fills what is left of a window
        and sends the rest as the window frees up (16 texts against 60 requests a minute would
        otherwise leave 12 of every 60 unused); texts booked for the same moment are one booking,
        and what is booked is one write."""
        for count in token_counts:
            if not self.quota.fits(1, count):
                raise PermanentError(
                    ErrorCode.EMBEDDING_CAPACITY,
                    f"a text of {count} tokens is more than the embedding quota of {self.scope} allows in a minute",
                )
        tenant = booking_tenant.get()
        began = self._clock_us()
        wait_us = int(self.max_wait_seconds * MICROSECONDS)
        ahead_us = None if self.book_ahead_seconds is None else int(self.book_ahead_seconds * MICROSECONDS)
        lost = 0
        while True:
            now = self._clock_us()
            ledger = self._store.read(self.scope)
            # Bookings older than a window can never count again.
            live = [b for b in ledger.bookings if b.at_us > now - QUOTA_WINDOW_US - WINDOW_MARGIN_US]
            booked: list[Booking] = []
            moments: list[int] = []
            beyond: int | None = None  # the first text's moment, when it is past the horizon
            for count in token_counts:
                at = earliest_start([*live, *booked], 1, count, now, self.quota, tenant, self.fair)
                if ahead_us is not None and at > now + ahead_us:
                    beyond = None if moments else at
                    break  # not booked now: a later call books it, nearer its moment
                moments.append(at)
                same = next((i for i, b in enumerate(booked) if b.at_us == at), None)
                if same is None:
                    booked.append(Booking(at, 1, count, tenant))
                else:
                    booked[same] = Booking(at, booked[same].requests + 1, booked[same].tokens + count, tenant)
            first = moments[0] if moments else beyond
            if beyond is not None and not any(b.tenant == tenant and b.at_us > now for b in live):
                # Waiting without a booking ahead: an empty one says so (the tenant wants room), so
                # that busier tenants are held to their shares meanwhile. Lost to a race, it is not retried.
                self._store.write(self.scope, [*live, Booking(beyond, 0, 0, tenant)], ledger.version)
            if first is not None and give_way and first > began + wait_us:
                ahead = (first - now) / MICROSECONDS
                raise EmbeddingCapacityWait(
                    f"the embedding quota of {self.scope} has no room for {tenant or 'this task'} for "
                    f"{ahead:.0f} s (a task waits at most {self.max_wait_seconds:.0f} s): retried later",
                    booked_ahead_seconds=ahead,
                )
            if beyond is not None and ahead_us is not None:
                # Room within the wait, beyond the horizon: wait here, then look again (the room may
                # go to a tenant below its share meanwhile).
                self._pause((beyond - ahead_us - now) / MICROSECONDS)
                continue
            if not booked or self._store.write(self.scope, [*live, *booked], ledger.version):
                return [moment / MICROSECONDS for moment in moments]
            # Another task booked meanwhile: read again, after a pause that grows with the rounds lost.
            lost += 1
            if lost >= _MAX_ROUNDS:
                raise TransientError(
                    f"embedding capacity {self.scope}: {_MAX_ROUNDS} bookings lost to concurrent writers"
                )
            self._pause(random.uniform(0, min(_MAX_PAUSE_SECONDS, 0.01 * 2**lost)))


def sleep_until(epoch_seconds: float, sleep: Callable[[float], None] = time.sleep) -> None:
    delay = epoch_seconds - time.time()
    if delay > 0:
        sleep(delay)
