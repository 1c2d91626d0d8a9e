"""make bench-aws's pure parts: the quota's ceiling for a corpus (which quota binds, the sliding
window's bound, quotas off or 0) and the embedding server's counters read from /_local/stats."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench.aws.__main__ import SYSTEMS, table
from bench.aws.ceiling import EmbeddingCounters, Quota, ceiling

pytestmark = pytest.mark.unit


def stats(**quota: Any) -> dict[str, Any]:
    """The shape of the server's /_local/stats, with the figures a test cares about."""
    return {
        "requests": 75,
        "throttled": 12,
        "throttled_in_flight": 2,
        "quota": {
            "requests_per_minute": 60,
            "tokens_per_minute": 300_000,
            "admitted": 63,
            "admitted_tokens": 17_000,
            "throttled": {"requests_per_minute": 9, "tokens_per_minute": 1},
            **quota,
        },
    }


def test_the_requests_quota_binds_at_low_quota() -> None:
    limit = ceiling(pages=98, requests=283, tokens=64_672, quota=Quota(60, 300_000))
    assert limit.binding == "requests"
    assert limit.minutes == pytest.approx(283 / 60)
    assert limit.pages_per_second == pytest.approx(98 / (60 * 283 / 60))
    # 283 requests need 5 sliding windows of 60: the last can open 4 minutes after the first.
    assert limit.sliding_window_minimum_seconds == 240


def test_the_tokens_quota_binds_when_it_is_the_slower() -> None:
    limit = ceiling(pages=98, requests=283, tokens=64_672, quota=Quota(2_000, 300_000))
    assert limit.binding == "tokens"
    assert limit.pages_per_second == pytest.approx(98 / (60 * 64_672 / 300_000))
    # The whole corpus fits in one minute's quota: the window sets no bound.
    assert limit.sliding_window_minimum_seconds == 0


def test_a_quota_not_enforced_drops_out_and_none_enforced_is_no_ceiling() -> None:
    assert ceiling(10, 120, 10**9, Quota(60, None)).binding == "requests"
    unlimited = ceiling(10, 120, 1_000, Quota(None, None))
    assert unlimited.binding is None
    assert unlimited.pages_per_second is None
    assert unlimited.sliding_window_minimum_seconds is None


def test_a_quota_of_zero_allows_nothing() -> None:
    limit = ceiling(10, 5, 100, Quota(0, 300_000))
    assert limit.pages_per_second == 0.0
    assert limit.sliding_window_minimum_seconds == math.inf


def test_the_ceiling_reports_its_formula_and_inputs() -> None:
    reported = ceiling(98, 283, 64_672, Quota(60, 300_000)).as_dict()
    assert reported["formula"] == "pages / (60 * max(requests / requests_per_minute, tokens / tokens_per_minute))"
    assert (reported["requests"], reported["tokens"], reported["binding"]) == (283, 64_672, "requests")


def test_counters_come_from_the_servers_stats() -> None:
    counters = EmbeddingCounters.from_stats(stats())
    assert (counters.calls, counters.admitted, counters.admitted_tokens) == (75, 63, 17_000)
    # Throttles by cause; the in-flight limit (the server's own, not Bedrock's) is counted apart but included.
    assert counters.throttled == 12
    assert counters.as_dict()["throttled_in_flight"] == 2
    assert Quota.from_stats(stats()) == Quota(60, 300_000)
    assert Quota.from_stats(stats(requests_per_minute=None)) == Quota(None, 300_000)


def test_counters_since_a_baseline_leave_out_what_came_before_the_clock() -> None:
    warm_up = {"requests": 9, "quota": {"admitted": 7, "admitted_tokens": 900, "throttled": {"requests_per_minute": 2}}}
    after = EmbeddingCounters.from_stats(stats()).since(EmbeddingCounters.from_stats(warm_up))
    assert (after.calls, after.admitted, after.admitted_tokens) == (75 - 9, 63 - 7, 17_000 - 900)
    assert after.throttled == 12 - 2


def test_a_server_without_a_profile_has_no_throttles_by_quota() -> None:
    plain = {"requests": 4, "quota": {"requests_per_minute": None, "tokens_per_minute": None, "admitted": 0}}
    counters = EmbeddingCounters.from_stats(plain)
    assert (counters.calls, counters.throttled) == (4, 0)


def row(system: str, pages_per_second: float, *, headline: bool = True, failed: int = 0) -> dict[str, Any]:
    return {
        "system": system,
        "label": SYSTEMS[system].label,
        "headline": headline,
        "pages_per_second": pages_per_second,
        "chunks_per_second": 3 * pages_per_second,
        "ceiling": ceiling(98, 283, 64_672, Quota(60, 300_000)).as_dict(),
        "percent_of_ceiling": None if failed else 50.0,
        "embedding": EmbeddingCounters.from_stats(stats()).as_dict(),
        "documents": 6,
        "documents_failed": failed,
        "seconds": 400.0,
    }


def test_the_table_compares_rag_ingest_with_the_best_complete_headline_peer() -> None:
    rendered = table(
        [
            row("rag-ingest", 0.3),
            row("langchain", 0.9, failed=5),  # fast because it gave five documents up
            row("llamaindex", 0.2),
            row("langchain+retries", 0.6, headline=False),
        ]
    )
    assert "rag-ingest / best peer (llamaindex), pages/s: 1.50x" in rendered
    assert "| n/a (documents failed) | 75 (63) | 12 | 5 of 6 |" in rendered
    assert "(requests: 283 calls, 64,672 tokens) | 50 % |" in rendered


def test_no_ratio_when_rag_ingest_failed_documents() -> None:
    rendered = table([row("rag-ingest", 0.3, failed=1), row("llamaindex", 0.2)])
    assert rendered.endswith("rag-ingest / best peer: n/a (documents failed)")
