"""The shared embedding-quota limiter (rag_ingest.embeddings.capacity): what a batch costs, how
reservations line up, and that paced sends never exceed the quota in any sliding minute, the
strictest reading, which the local Bedrock emulation enforces (local/embedding_server/quota.py)."""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence
from typing import Any

import pytest
from rag_ingest.core.errors import EmbeddingCapacityWait, ErrorCode, TransientError, parse_failure
from rag_ingest.embeddings.bedrock import BedrockTitanEmbedder
from rag_ingest.embeddings.capacity import MICROSECONDS, CapacityLimiter, EmbeddingQuota, Reservation

from local.embedding_server.quota import SlidingWindow

pytestmark = pytest.mark.unit


class MemoryTimeline:
    """The DynamoDB timeline's rule (rag_ingest.adapters.capacity_table), in memory."""

    def __init__(self) -> None:
        self.free_at: dict[str, int] = {}
        self.writes = 0

    def reserve(self, scope: str, cost_us: int, now_us: int, latest_start_us: int) -> Reservation:
        free_at = self.free_at.get(scope)
        start = now_us if free_at is None or free_at < now_us else free_at
        if start > latest_start_us:
            return Reservation(granted=False, start_us=start, queue_end_us=start)
        self.free_at[scope] = start + cost_us
        self.writes += 1
        return Reservation(granted=True, start_us=start, queue_end_us=start + cost_us)


class FakeClock:
    def __init__(self) -> None:
        self.us = 1_000 * MICROSECONDS

    def __call__(self) -> int:
        return self.us


def test_a_call_costs_the_longer_of_its_requests_and_its_tokens() -> None:
    default = EmbeddingQuota(requests_per_minute=2000, tokens_per_minute=300_000, headroom=1.0)
    # 250 tokens at 300,000 a minute take 50 ms; one request at 2,000 a minute 30 ms.
    assert default.cost_us(1, 250) == 50_000
    low = EmbeddingQuota(requests_per_minute=60, tokens_per_minute=300_000, headroom=1.0)
    assert low.cost_us(1, 250) == 1_000_000  # the requests quota binds
    assert EmbeddingQuota(60, None, headroom=0.5).cost_us(1, 10) == 2_000_000  # half the quota: twice as long
    assert EmbeddingQuota(None, None).cost_us(3, 1000) == 0
    with pytest.raises(ValueError, match="headroom"):
        EmbeddingQuota(60, None, headroom=0)
    with pytest.raises(ValueError, match="at least 1"):
        EmbeddingQuota(0, None)


def test_a_batch_books_one_stretch_and_its_texts_are_spaced_inside_it() -> None:
    timeline, clock = MemoryTimeline(), FakeClock()
    quota = EmbeddingQuota(requests_per_minute=60, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(timeline, quota, "titan@us-east-1", max_wait_seconds=30, clock_us=clock)
    first = limiter.schedule([100, 100, 100])
    assert [round(m - first[0], 6) for m in first] == [0.0, 1.0, 2.0]
    assert first[0] == clock.us / MICROSECONDS  # an idle timeline starts now: no burst to pay back
    second = limiter.schedule([100, 100])
    assert second[0] == pytest.approx(first[0] + 3.0)  # after everything booked before
    assert timeline.writes == 2  # one write per batch, not per text


def test_a_task_gives_way_when_the_timeline_is_booked_past_its_wait() -> None:
    timeline, clock = MemoryTimeline(), FakeClock()
    quota = EmbeddingQuota(requests_per_minute=60, tokens_per_minute=None, headroom=1.0)
    limiter = CapacityLimiter(timeline, quota, "m", max_wait_seconds=10, clock_us=clock)
    limiter.schedule([1] * 16)  # books 16 s
    with pytest.raises(EmbeddingCapacityWait) as raised:
        limiter.schedule([1])
    assert raised.value.booked_ahead_seconds == pytest.approx(16.0)
    assert isinstance(raised.value, TransientError)  # code that handles transient errors still does
    assert timeline.free_at["m"] == clock.us + 16 * MICROSECONDS  # nothing booked by the refusal
    clock.us += 7 * MICROSECONDS  # 9 s ahead now: within the wait
    assert limiter.schedule([1])[0] == pytest.approx((clock.us + 9 * MICROSECONDS) / MICROSECONDS)


def test_a_refused_wait_fails_the_document_with_its_own_code_when_the_workflow_stops_waiting() -> None:
    cause = json.dumps({"errorType": "EmbeddingCapacityWait", "errorMessage": "booked 90 s ahead"})
    assert parse_failure("EmbeddingCapacityWait", cause) == (ErrorCode.EMBEDDING_CAPACITY, "booked 90 s ahead")


@pytest.mark.parametrize(
    ("quota", "tokens_per_text", "tasks", "some_give_way"),
    [
        # The default quota: tokens bind; 12 tasks' batches queue less than the 30 s a task waits.
        (EmbeddingQuota(2000, 300_000), 230, 12, False),
        # A new account's: requests bind; 6 tasks' batches of 16 s each queue longer than that.
        (EmbeddingQuota(60, 300_000), 230, 6, True),
    ],
)
def test_concurrent_tasks_never_exceed_the_quota_in_any_sliding_minute(
    quota: EmbeddingQuota, tokens_per_text: int, tasks: int, some_give_way: bool
) -> None:
    """Embed tasks, each sending batches of 16 texts one after another, all booking one timeline,
    simulated for five minutes: every send is checked against sliding-minute windows of the quota
    itself (the headroom is the limiter's only margin), and the throughput is near the quota."""
    timeline, clock = MemoryTimeline(), FakeClock()
    start = clock.us
    requests = SlidingWindow(quota.requests_per_minute or 10**12)
    tokens = SlidingWindow(quota.tokens_per_minute or 10**12)
    limiter = CapacityLimiter(timeline, quota, "m", max_wait_seconds=30, clock_us=clock)
    # (when the task next asks for a batch, task number); the latency of a call is 60 ms.
    ready = [(start, task) for task in range(tasks)]
    sent = given_way = 0
    horizon = start + 300 * MICROSECONDS
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
        for moment in moments:
            now = moment
            assert requests.fits(1, now) and tokens.fits(tokens_per_text, now), f"over the quota at {now}"
            requests.record(1, now)
            tokens.record(tokens_per_text, now)
            sent += 1
        heapq.heappush(ready, (int(moments[-1] * MICROSECONDS) + 60_000, task))
    ceiling = min(
        (quota.requests_per_minute or 10**12) * 5,
        (quota.tokens_per_minute or 10**12) * 5 // tokens_per_text,
    )
    assert sent >= 0.95 * ceiling, (sent, ceiling)
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

    def __init__(self, refuse: bool = False) -> None:
        self.asked: list[Sequence[int]] = []
        self.refuse = refuse

    def schedule(self, token_counts: Sequence[int]) -> list[float]:
        self.asked.append(list(token_counts))
        if self.refuse:
            raise EmbeddingCapacityWait("booked", booked_ahead_seconds=42.0)
        return [0.0] * len(token_counts)


def test_the_bedrock_embedder_books_its_texts_before_it_sends_any() -> None:
    client, limiter = RecordingClient(), BookingLimiter()
    embedder = BedrockTitanEmbedder(
        client, dimension=256, count_tokens=len, limiter=limiter  # type: ignore[arg-type]
    )
    vectors = embedder.embed(["ab", "cde", "f"])
    assert len(vectors) == 3
    assert limiter.asked == [[2, 3, 1]]
    assert sorted(client.texts) == ["ab", "cde", "f"]

    refusing = BookingLimiter(refuse=True)
    client = RecordingClient()
    embedder = BedrockTitanEmbedder(client, dimension=256, count_tokens=len, limiter=refusing)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingCapacityWait):
        embedder.embed(["ab"])
    assert client.texts == []  # nothing paid for when the quota is booked
