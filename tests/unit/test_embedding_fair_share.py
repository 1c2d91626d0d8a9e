"""Fair shares of the shared embedding quota between tenants (rag_ingest.embeddings.capacity): the
cap each tenant may hold in a window, where a booking lands beside another tenant's, how far ahead a
task books, and simulated minutes of a busy tenant beside a light one and beside another busy one,
every call checked against the quota's sliding minute as the local Bedrock emulation counts it."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from rag_ingest.core.config import MAX_TENANT_WEIGHTS, StagesEnv
from rag_ingest.core.errors import ConfigurationError, EmbeddingCapacityWait
from rag_ingest.embeddings.capacity import (
    MICROSECONDS,
    NO_FAIR_SHARE,
    PACE_US,
    QUOTA_WINDOW_US,
    WAITING_US,
    WINDOW_MARGIN_US,
    Booking,
    CapacityLimiter,
    EmbeddingQuota,
    FairShare,
    booking_for,
    booking_tenant,
    earliest_start,
)

from local.embedding_server.quota import SlidingWindow
from tests.unit.test_embedding_capacity import FakeClock, MemoryLedger

pytestmark = pytest.mark.unit
WINDOW = QUOTA_WINDOW_US + WINDOW_MARGIN_US


def test_a_tenant_alone_may_hold_the_whole_quota_and_busy_tenants_split_it_by_weight() -> None:
    # The room kept for newcomers (3 %) is taken from every tenant that holds a booking; a newcomer may use it.
    assert FairShare().cap("a", {"a": 900}, 1000) == pytest.approx(970)
    assert FairShare().cap("a", {}, 1000) == 1000 and FairShare().cap("b", {"a": 970}, 1000) == pytest.approx(500)
    fair = FairShare({"big": 3.0}, newcomer=0.0)  # the shares alone
    assert fair.weight("big") == 3.0 and fair.weight("anyone") == 1.0
    assert fair.cap("a", {"a": 900}, 1000) == 1000  # alone: all of it (work-conserving)
    assert fair.cap("a", {}, 1000) == 1000
    # Two busy tenants of weight 1: half each, whatever either holds now.
    assert fair.cap("a", {"a": 900, "b": 600}, 1000) == pytest.approx(500)
    assert fair.cap("b", {"a": 900, "b": 600}, 1000) == pytest.approx(500)
    # Weight 3 against 1: three quarters and one quarter.
    assert fair.cap("big", {"big": 10, "b": 400}, 1000) == pytest.approx(750)
    assert fair.cap("b", {"big": 900, "b": 10}, 1000) == pytest.approx(250)
    # A light tenant (10 of its 500) keeps only its use and 10 % of its share: the busy one gets the rest.
    assert fair.cap("a", {"a": 900, "b": 10}, 1000) == pytest.approx(1000 - 10 - 50)
    with pytest.raises(ValueError, match="positive"):
        FairShare({"t": 0.0})
    with pytest.raises(ValueError, match="slack"):
        FairShare(slack=2.0)


def test_a_tenant_books_at_the_quotas_pace_and_a_newcomer_finds_room_at_once() -> None:
    quota = EmbeddingQuota(requests_per_minute=100, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(MemoryLedger(), quota, "m", max_wait_seconds=60, fair=FairShare(), clock_us=FakeClock())
    with booking_for("a"):
        moments = limiter.schedule([1] * 97)
    # Not the minute in one burst: a tenth of it every 6 s (PACE_US), so its bookings leave as evenly.
    bookings = limiter._store.read("m").bookings  # type: ignore[attr-defined]
    assert [b.requests for b in bookings] == [10] * 9 + [7]
    assert [b.at_us - bookings[0].at_us for b in bookings] == [i * PACE_US for i in range(10)]
    assert len(moments) == 97
    now = FakeClock().us
    with booking_for("b"):  # a newcomer's first batch goes at once, not a minute later
        assert limiter.schedule([1] * 3) == [now / MICROSECONDS] * 3


def test_a_busy_tenant_gives_the_window_back_to_a_newcomer_as_its_bookings_leave() -> None:
    quota = EmbeddingQuota(requests_per_minute=100, tokens_per_minute=None, headroom=1.0)
    fair = FairShare(newcomer=0.0)
    now = 1_000 * MICROSECONDS
    # "a" alone used the whole minute, spread over it.
    full = [Booking(now - 60 * MICROSECONDS + i * 600_000, 1, 0, "a") for i in range(100)]
    # Neither "a" nor a newcomer can book until the oldest booking leaves.
    assert earliest_start(full, 1, 0, now, quota, "a", fair) == full[0].at_us + WINDOW
    assert earliest_start(full, 1, 0, now, quota, "b", fair) == full[0].at_us + WINDOW
    # "b" holds 1 of the minute and waits for nothing: "a" may hold the minute less the room kept for
    # "b" (its 1 and 10 % of its share of 50: 94), so it waits for 6 of its 99 to leave; "b" books the
    # next room that frees up.
    light = [*full[1:], Booking(now, 1, 0, "b")]
    assert fair.cap("a", {"a": 99, "b": 1}, 100) == pytest.approx(94)
    assert earliest_start(light, 1, 0, now, quota, "b", fair) == full[1].at_us + WINDOW
    assert earliest_start(light, 1, 0, now, quota, "a", fair) == full[6].at_us + WINDOW
    # "b" waits for room (an empty booking ahead of now, or lately): "a" is held to its share, 50, and
    # waits for half its minute to leave, while "b" still books the next room.
    for said_at in (now + 2 * MICROSECONDS, now - 5 * MICROSECONDS):
        waiting = [*light, Booking(said_at, 0, 0, "b")]
        assert earliest_start(waiting, 1, 0, now, quota, "a", fair) == full[50].at_us + WINDOW
        assert earliest_start(waiting, 1, 0, now, quota, "b", fair) == full[1].at_us + WINDOW
    # A wait said more than WAITING_US ago no longer counts.
    stale = [*light, Booking(now - WAITING_US - 1, 0, 0, "b")]
    assert earliest_start(stale, 1, 0, now, quota, "a", fair) == full[6].at_us + WINDOW
    # Without fair shares the same ledger is first come, first served: "a" takes the next room.
    assert earliest_start(light, 1, 0, now, quota, "a", NO_FAIR_SHARE) == full[1].at_us + WINDOW


def test_bookings_are_the_tenant_of_the_block_they_are_made_in() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    limiter = CapacityLimiter(ledger, EmbeddingQuota(60, None, 1.0), "m", max_wait_seconds=30, clock_us=clock)
    assert booking_tenant.get() == ""
    with booking_for("acme"):
        limiter.schedule([5, 5])
    limiter.schedule([5])
    assert [(b.tenant, b.requests) for b in ledger.bookings] == [("acme", 2), ("", 1)]
    assert booking_tenant.get() == ""


class Paused(Exception):
    """A task's in-process wait, handed back to the simulation (its clock is shared by every task)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


def _pause(seconds: float) -> None:
    raise Paused(seconds)


def test_a_task_books_at_most_its_horizon_ahead_and_waits_for_the_rest_in_process() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    quota = EmbeddingQuota(requests_per_minute=16, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(
        ledger, quota, "m", max_wait_seconds=90, book_ahead_seconds=2, clock_us=clock, pause=_pause
    )
    limiter.schedule([1] * 16)  # the minute, at once
    with pytest.raises(Paused) as paused:  # room in 61 s: within the wait, beyond the horizon
        limiter.schedule([1])
    assert paused.value.seconds == pytest.approx(59.0)
    # Nothing booked while it waits, but it says that it waits: an empty booking at its moment.
    assert ledger.writes == 2 and ledger.bookings[-1] == Booking(clock.us + WINDOW, 0, 0, "")
    with pytest.raises(Paused):  # said once: asking again writes nothing more
        limiter.schedule([1])
    assert ledger.writes == 2
    clock.us += 59 * MICROSECONDS
    assert limiter.schedule([1]) == [pytest.approx(clock.us / MICROSECONDS + 2.0)]
    # Past the wait it gives way, as before.
    short = CapacityLimiter(ledger, quota, "m", max_wait_seconds=10, book_ahead_seconds=2, clock_us=clock)
    short.schedule([1] * 15)  # the rest of this window: the next room is a minute away
    with pytest.raises(EmbeddingCapacityWait):
        short.schedule([1])


@dataclass
class Simulated:
    sent: dict[str, int]  # texts sent per tenant in the measured span
    waits: dict[str, list[float]]  # per light-tenant batch: seconds from asking to its last text's moment


def simulate(
    limiter_for: dict[str, CapacityLimiter],
    clock: FakeClock,
    quota: EmbeddingQuota,
    *,
    busy: Sequence[tuple[str, int]],
    light: Sequence[tuple[str, float, int]] = (),
    seconds: int = 600,
    tokens_per_text: int = 230,
) -> Simulated:
    """``busy`` tenants' tasks (tenant, tasks) each send batches of 16 one after another, as an
    Embed Map does; a ``light`` tenant (tenant, every seconds, texts) asks for one small batch at that
    interval, as a 1-page document's Embed task does. A task that gives way is called again 10 s
    later. Every text is checked when it reaches the model (0.5 s after its moment) against the
    quota's own sliding minutes."""
    start = clock.us
    end = start + seconds * MICROSECONDS
    # (when, sequence, tenant, texts left, asked at, texts sent of the batch); asked at is kept
    # across waits and give-ways; a batch partly sent asks for the rest without giving way.
    ready: list[tuple[int, int, str, int, int, int]] = []
    sequence = 0
    for tenant, tasks in busy:
        for _ in range(tasks):
            ready.append((start, sequence, tenant, 16, start, 0))
            sequence += 1
    for tenant, every, texts in light:
        at = start + int(every * MICROSECONDS)
        while at < end:
            ready.append((at, sequence, tenant, texts, at, 0))
            sequence += 1
            at += int(every * MICROSECONDS)
    heapq.heapify(ready)
    light_tenants = {tenant for tenant, _, _ in light}
    requests = SlidingWindow(quota.requests_per_minute or 10**12)
    tokens = SlidingWindow(quota.tokens_per_minute or 10**12)
    arrivals: list[float] = []
    sent: dict[str, int] = defaultdict(int)
    waits: dict[str, list[float]] = defaultdict(list)
    while ready:
        at, _, tenant, texts, asked, done = heapq.heappop(ready)
        if at >= end:
            continue
        clock.us = at
        sequence += 1
        try:
            with booking_for(tenant):
                moments = limiter_for[tenant].schedule([tokens_per_text] * texts, give_way=done == 0)
        except Paused as paused:
            heapq.heappush(ready, (at + int(paused.seconds * MICROSECONDS), sequence, tenant, texts, asked, done))
            continue
        except EmbeddingCapacityWait:
            heapq.heappush(ready, (at + 10 * MICROSECONDS, sequence, tenant, texts, asked, done))
            continue
        arrivals.extend(moment + 0.5 for moment in moments)
        sent[tenant] += len(moments)
        if len(moments) < texts:  # the rest of the batch: booked when the first of it nears
            heapq.heappush(ready, (at, sequence, tenant, texts - len(moments), asked, done + len(moments)))
        elif tenant in light_tenants:
            waits[tenant].append(moments[-1] - asked / MICROSECONDS)
        else:
            last = int(moments[-1] * MICROSECONDS) + MICROSECONDS
            heapq.heappush(ready, (last, sequence, tenant, 16, last, 0))
    for now in sorted(arrivals):
        assert requests.fits(1, now) and tokens.fits(tokens_per_text, now), f"over the quota at {now}"
        requests.record(1, now)
        tokens.record(tokens_per_text, now)
    return Simulated(dict(sent), dict(waits))


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


QUOTA = EmbeddingQuota(2000, 300_000)  # the default; tokens bind at 230 tokens a text
CEILING_PER_MINUTE = QUOTA.token_limit // 230 if QUOTA.token_limit else 0  # 1,265 texts


def _limiters(fair: FairShare, book_ahead: float | None, clock: FakeClock, *tenants: str) -> dict[str, CapacityLimiter]:
    ledger = MemoryLedger()
    return {
        tenant: CapacityLimiter(
            ledger,
            QUOTA,
            "m",
            max_wait_seconds=30,
            fair=fair,
            book_ahead_seconds=book_ahead,
            clock_us=clock,
            pause=_pause,
        )
        for tenant in tenants
    }


def test_a_light_tenant_beside_a_backfill_waits_seconds_and_the_backfill_keeps_the_quota() -> None:
    """Four Embed tasks of tenant A keep asking for batches for ten minutes; tenant B asks for
    3 texts every 5 s. With fair shares and a 2 s horizon, B's batches go within a few seconds, A
    sends nearly the whole quota; first come, first served, B waits behind A's half minute of bookings."""
    clock = FakeClock()
    fair = simulate(_limiters(FairShare(), 2.0, clock, "A", "B"), clock, QUOTA, busy=[("A", 4)], light=[("B", 5, 3)])
    assert len(fair.waits["B"]) == 119 and fair.sent["B"] == 3 * 119  # every batch of B went
    assert _p95(fair.waits["B"]) <= 3.5, sorted(fair.waits["B"])[-10:]
    ceiling = CEILING_PER_MINUTE * 10 * 60 / 61  # the window margin takes 1 s of every 61
    assert fair.sent["A"] + fair.sent["B"] >= 0.93 * ceiling  # less the 3 % kept for newcomers
    assert fair.sent["A"] >= 0.9 * ceiling  # B's 357 texts are 3 % of it

    clock = FakeClock()
    fifo = simulate(_limiters(NO_FAIR_SHARE, None, clock, "A", "B"), clock, QUOTA, busy=[("A", 4)], light=[("B", 5, 3)])
    assert _p95(fifo.waits["B"]) >= 25  # behind A's bookings, up to the 30 s a task waits, and give-ways


def test_a_tenant_alone_still_gets_the_whole_quota() -> None:
    clock = FakeClock()
    alone = simulate(_limiters(FairShare(), 2.0, clock, "A"), clock, QUOTA, busy=[("A", 4)])
    assert alone.sent["A"] >= 0.97 * CEILING_PER_MINUTE * 10 * 60 / 61


@pytest.mark.parametrize(("weights", "expected"), [({}, 1.0), ({"A": 3.0}, 3.0), (None, 2.0)])
def test_two_busy_tenants_share_the_quota_by_their_weights(weights: dict[str, float] | None, expected: float) -> None:
    """A with 6 tasks and B with 3, each wanting more than the quota: first come, first served
    (``None``) they split it by their tasks, 2 to 1; fair, by their weights; the quota is used."""
    clock = FakeClock()
    fair, ahead = (NO_FAIR_SHARE, None) if weights is None else (FairShare(weights), 2.0)
    both = simulate(_limiters(fair, ahead, clock, "A", "B"), clock, QUOTA, busy=[("A", 6), ("B", 3)])
    assert both.sent["A"] / both.sent["B"] == pytest.approx(expected, rel=0.1), both.sent
    assert both.sent["A"] + both.sent["B"] >= 0.95 * CEILING_PER_MINUTE * 10 * 60 / 61


def test_tenant_weights_come_from_the_environment_as_json_and_are_checked() -> None:
    base = {
        "BUCKET_NAME": "bucket",
        "DOCUMENTS_TABLE": "documents",
        "MAX_FILE_BYTES": "100",
        "MAX_PAGES": "10",
        "CHUNK_TOKENS": "300",
        "CHUNK_OVERLAP_TOKENS": "60",
        "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9200",
        "OPENSEARCH_INDEX": "chunks",
        "EMBEDDING_PROVIDER": "bedrock",
        "EMBEDDING_MODEL_ID": "amazon.titan-embed-text-v2:0",
        "EMBEDDING_DIMENSION": "1024",
    }
    env = StagesEnv.from_env(base)
    assert env.embedding_capacity_tenant_weights == {} and env.embedding_capacity_book_ahead_seconds == 2.0
    env = StagesEnv.from_env(
        {
            **base,
            "EMBEDDING_CAPACITY_TENANT_WEIGHTS": '{"acme":3,"globex":0.5}',
            "EMBEDDING_CAPACITY_BOOK_AHEAD_SECONDS": "4",
        }
    )
    assert env.embedding_capacity_tenant_weights == {"acme": 3.0, "globex": 0.5}
    assert env.embedding_capacity_book_ahead_seconds == 4.0
    for bad in ('{"acme":0}', '{"acme":-1}', '{"a b":1}', '{"acme":1001}', "[1]", "{"):
        with pytest.raises(ConfigurationError, match="EMBEDDING_CAPACITY_TENANT_WEIGHTS"):
            StagesEnv.from_env({**base, "EMBEDDING_CAPACITY_TENANT_WEIGHTS": bad})
    too_many = {f"t{i}": 1 for i in range(MAX_TENANT_WEIGHTS + 1)}
    with pytest.raises(ConfigurationError, match="at most"):
        StagesEnv.from_env({**base, "EMBEDDING_CAPACITY_TENANT_WEIGHTS": str(too_many).replace("'", '"')})
