"""The shared embedding-quota limiter (rag_ingest.embeddings.capacity): what a batch costs, how
reservations line up, and that paced sends never exceed the quota in any sliding minute, the
strictest reading, which the local Bedrock emulation enforces (local/embedding_server/quota.py)."""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
from rag_ingest.core.errors import EmbeddingCapacityWait, ErrorCode, PermanentError, TransientError, parse_failure
from rag_ingest.embeddings.bedrock import BedrockTitanEmbedder
from rag_ingest.embeddings.capacity import (
    MICROSECONDS,
    QUOTA_WINDOW_US,
    WINDOW_MARGIN_US,
    Booking,
    CapacityLimiter,
    EmbeddingQuota,
    Ledger,
    earliest_start,
)

from local.embedding_server.quota import SlidingWindow

pytestmark = pytest.mark.unit


class MemoryLedger:
    """The DynamoDB ledger's contract (rag_ingest.adapters.capacity_table), in memory; ``interfere``
    books something between a reader's read and its write, as a concurrent task would."""

    def __init__(self) -> None:
        self.bookings: tuple[Booking, ...] = ()
        self.version = 0
        self.writes = 0
        self.interfere: Booking | None = None

    def read(self, scope: str) -> Ledger:
        return Ledger(self.bookings, self.version)

    def write(self, scope: str, bookings: Sequence[Booking], expected_version: int) -> bool:
        if self.interfere is not None:
            self.bookings, self.version, self.interfere = (*self.bookings, self.interfere), self.version + 1, None
        if expected_version != self.version:
            return False
        self.bookings, self.version = tuple(bookings), self.version + 1
        self.writes += 1
        return True


class FakeClock:
    def __init__(self) -> None:
        self.us = 1_000 * MICROSECONDS

    def __call__(self) -> int:
        return self.us


def test_the_limits_are_the_quota_times_the_headroom() -> None:
    quota = EmbeddingQuota(requests_per_minute=2000, tokens_per_minute=300_000, headroom=0.97)
    assert (quota.request_limit, quota.token_limit) == (1940, 291_000)
    assert quota.fits(16, 4000) and not quota.fits(16, 300_000)
    assert EmbeddingQuota(None, None).fits(10**6, 10**9) and not EmbeddingQuota(None, None).enforced
    with pytest.raises(ValueError, match="headroom"):
        EmbeddingQuota(60, None, headroom=0)
    with pytest.raises(ValueError, match="at least 1"):
        EmbeddingQuota(0, None)


def test_the_earliest_start_is_when_the_window_behind_it_has_room() -> None:
    quota = EmbeddingQuota(requests_per_minute=60, tokens_per_minute=None, headroom=1.0)
    window = QUOTA_WINDOW_US + WINDOW_MARGIN_US
    now = 1_000 * MICROSECONDS
    assert earliest_start([], 16, 0, now, quota) == now  # an idle ledger: at once, a whole batch
    full = [Booking(now - 10 * MICROSECONDS, 30, 0), Booking(now, 30, 0)]
    # 60 booked in the last minute: the next 16 go when the first 30 leave the window.
    assert earliest_start(full, 16, 0, now, quota) == now - 10 * MICROSECONDS + window
    # 40 fit only when both have left.
    assert earliest_start(full, 40, 0, now, quota) == now + window
    # Before a booking already made ahead of now, where every window holding it has room ...
    later = [Booking(now + 5 * MICROSECONDS, 1, 0)]
    assert earliest_start(later, 1, 0, now, quota) == now
    # ... and not where a later window would go over: 59 at +5 s leave 1 of 60 for any window
    # holding +5 s, so 2 go once that booking's window no longer holds them.
    ahead = [Booking(now + 5 * MICROSECONDS, 59, 0)]
    assert earliest_start(ahead, 1, 0, now, quota) == now
    assert earliest_start(ahead, 2, 0, now, quota) == now + 5 * MICROSECONDS + window


def test_an_idle_ledger_lets_a_batch_go_at_once_and_the_next_waits_for_the_window() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    quota = EmbeddingQuota(requests_per_minute=20, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(ledger, quota, "titan@us-east-1", max_wait_seconds=120, clock_us=clock)
    first = limiter.schedule([100] * 16)
    assert first == [clock.us / MICROSECONDS] * 16  # no pacing when the minute has room
    second = limiter.schedule([100] * 16)  # 4 left in this window, 12 when the first batch leaves it
    later = (clock.us + QUOTA_WINDOW_US + WINDOW_MARGIN_US) / MICROSECONDS
    assert second == [clock.us / MICROSECONDS] * 4 + [later] * 12
    assert ledger.writes == 2  # one write per batch, not per text


def test_a_batch_fills_what_is_left_of_the_window_and_sends_the_rest_as_it_frees_up() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    quota = EmbeddingQuota(requests_per_minute=10, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(ledger, quota, "m", max_wait_seconds=120, clock_us=clock)
    moments = limiter.schedule([5] * 16)
    window = (QUOTA_WINDOW_US + WINDOW_MARGIN_US) / MICROSECONDS
    assert moments == [clock.us / MICROSECONDS] * 10 + [clock.us / MICROSECONDS + window] * 6
    assert ledger.writes == 1 and [b.requests for b in ledger.bookings] == [10, 6]
    # 4 left in the window that starts with those 6: the next batch takes them, then the next window.
    moments = limiter.schedule([5] * 8)
    assert moments == [clock.us / MICROSECONDS + window] * 4 + [clock.us / MICROSECONDS + 2 * window] * 4
    with pytest.raises(PermanentError, match="more than the embedding quota"):
        CapacityLimiter(ledger, EmbeddingQuota(None, 100, 1.0), "m", max_wait_seconds=30).schedule([101])


def test_a_task_gives_way_when_the_ledger_is_booked_past_its_wait() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    quota = EmbeddingQuota(requests_per_minute=16, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(ledger, quota, "m", max_wait_seconds=10, clock_us=clock)
    limiter.schedule([1] * 16)  # the whole minute's quota
    with pytest.raises(EmbeddingCapacityWait) as raised:
        limiter.schedule([1])
    assert raised.value.booked_ahead_seconds == pytest.approx(61.0)
    assert isinstance(raised.value, TransientError)  # code that handles transient errors still does
    assert ledger.writes == 1  # nothing booked by the refusal
    clock.us += 55 * MICROSECONDS  # 6 s ahead now: within the wait
    assert limiter.schedule([1]) == [pytest.approx(clock.us / MICROSECONDS + 6.0)]


def test_a_booking_that_lost_a_race_reads_again_and_books_after_the_winner() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    quota = EmbeddingQuota(requests_per_minute=16, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(ledger, quota, "m", max_wait_seconds=120, clock_us=clock, pause=lambda _: None)
    ledger.interfere = Booking(clock.us, 16, 0)  # another task takes the minute between read and write
    moments = limiter.schedule([1] * 4)
    assert moments == [(clock.us + QUOTA_WINDOW_US + WINDOW_MARGIN_US) / MICROSECONDS] * 4
    assert ledger.version == 2


def test_a_refused_wait_fails_the_document_with_its_own_code_when_the_workflow_stops_waiting() -> None:
    cause = json.dumps({"errorType": "EmbeddingCapacityWait", "errorMessage": "booked 90 s ahead"})
    assert parse_failure("EmbeddingCapacityWait", cause) == (ErrorCode.EMBEDDING_CAPACITY, "booked 90 s ahead")


@pytest.mark.parametrize(
    ("quota", "tokens_per_text", "tasks", "some_give_way"),
    [
        # The default quota: tokens bind; 12 tasks soon book a minute ahead, past a task's 30 s.
        (EmbeddingQuota(2000, 300_000), 230, 12, True),
        # A new account's: requests bind; 6 tasks of 16 requests a batch book past it at once.
        (EmbeddingQuota(60, 300_000), 230, 6, True),
        # Two tasks at the default quota, each a batch a second: below the quota, never waiting.
        (EmbeddingQuota(2000, 300_000), 230, 2, False),
    ],
)
def test_concurrent_tasks_never_exceed_the_quota_in_any_sliding_minute(
    quota: EmbeddingQuota, tokens_per_text: int, tasks: int, some_give_way: bool
) -> None:
    """Embed tasks, each sending batches of 16 texts one after another, all booking one ledger,
    simulated for ten minutes: every call is checked, when it reaches the model (up to 0.9 s after
    its booked moment), against sliding-minute windows of the quota itself, as the local Bedrock
    emulation counts; and the throughput is near the quota (its headroom, 97 %, times 60 s of
    every 61 the window margin takes: 95.4 %)."""
    ledger, clock = MemoryLedger(), FakeClock()
    arrival = random.Random(7)
    start = clock.us
    requests = SlidingWindow(quota.requests_per_minute or 10**12)
    tokens = SlidingWindow(quota.tokens_per_minute or 10**12)
    limiter = CapacityLimiter(ledger, quota, "m", max_wait_seconds=30, clock_us=clock)
    # (when the task next asks for a batch, task number); a batch's calls are done 1 s after its moment.
    ready = [(start, task) for task in range(tasks)]
    sent = given_way = 0
    horizon = start + 600 * MICROSECONDS
    arrivals: list[float] = []
    while ready:
        at, task = heapq.heappop(ready)
        if at >= horizon:
            continue
        clock.us = at
        try:
            moments = limiter.schedule([tokens_per_text] * 16)
        except EmbeddingCapacityWait:
            given_way += 1
            heapq.heappush(ready, (at + 10 * MICROSECONDS, task))  # Step Functions calls it again later
            continue
        arrivals.extend(moment + arrival.uniform(0, 0.9) for moment in moments)
        sent += len(moments)
        heapq.heappush(ready, (int(moments[-1] * MICROSECONDS) + MICROSECONDS, task))
    for now in sorted(arrivals):
        assert requests.fits(1, now) and tokens.fits(tokens_per_text, now), f"over the quota at {now}"
        requests.record(1, now)
        tokens.record(tokens_per_text, now)
    ceiling = min(
        (quota.requests_per_minute or 10**12) * 10,
        (quota.tokens_per_minute or 10**12) * 10 // tokens_per_text,
        tasks * 16 * 600,  # what the tasks can send at a batch a second each
    )
    assert sent >= 0.93 * ceiling, (sent, ceiling)
    assert (given_way > 0) is some_give_way


class RecordingClient:
    """A bedrock-runtime client that answers at once and records what it was sent."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def invoke_model(self, **kwargs: Any) -> dict[str, Any]:
        text = json.loads(kwargs["body"])["inputText"]
        self.texts.append(text)

        class Body:
            @staticmethod
            def read() -> bytes:
                return json.dumps({"embedding": [0.0] * 256, "inputTextTokenCount": 1}).encode()

        return {"body": Body()}


class BookingLimiter:
    """Records the token counts it was asked to book; answers moments in the past (no sleeping)."""

    def __init__(self, refuse: bool = False, part: int = 1000) -> None:
        self.asked: list[tuple[list[int], bool]] = []
        self.refuse = refuse
        self.part = part  # texts booked a call, as a limiter with a horizon books them

    def schedule(self, token_counts: Sequence[int], *, give_way: bool = True) -> list[float]:
        self.asked.append((list(token_counts), give_way))
        if self.refuse:
            raise EmbeddingCapacityWait("booked", booked_ahead_seconds=42.0)
        return [0.0] * min(self.part, len(token_counts))


def test_the_bedrock_embedder_books_its_texts_before_it_sends_any() -> None:
    client, limiter = RecordingClient(), BookingLimiter()
    embedder = BedrockTitanEmbedder(
        client,
        dimension=256,
        count_tokens=len,
        limiter=limiter,  # type: ignore[arg-type]
    )
    vectors = embedder.embed(["ab", "cde", "f"])
    assert len(vectors) == 3
    assert limiter.asked == [([2, 3, 1], True)]
    assert sorted(client.texts) == ["ab", "cde", "f"]
    # A limiter that books a few texts at a time: the rest is asked for, and never gives way.
    for concurrency in (1, 4):
        client, limiter = RecordingClient(), BookingLimiter(part=2)
        embedder = BedrockTitanEmbedder(
            client,
            dimension=256,
            count_tokens=len,
            limiter=limiter,  # type: ignore[arg-type]
            max_concurrency=concurrency,
        )
        assert len(embedder.embed(["ab", "cde", "f", "gh", "ijk"])) == 5
        assert limiter.asked == [([2, 3, 1, 2, 3], True), ([1, 2, 3], False), ([3], False)]
        assert sorted(client.texts) == ["ab", "cde", "f", "gh", "ijk"]

    refusing = BookingLimiter(refuse=True)
    client = RecordingClient()
    embedder = BedrockTitanEmbedder(client, dimension=256, count_tokens=len, limiter=refusing)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingCapacityWait):
        embedder.embed(["ab"])
    assert client.texts == []  # nothing paid for when the quota is booked
