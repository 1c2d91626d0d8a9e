"""bench.search_scale's CPU steal share: the part of the machine's CPU time the hypervisor gave to
other guests while a mode was measured, read with its latency figures."""

from __future__ import annotations

import pytest

from bench.search_scale import cpu_times, reference_loop_ms, steal_share

pytestmark = pytest.mark.unit


def test_steal_share_is_the_steal_delta_over_every_counted_delta() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    before = [1000, 0, 200, 5000, 10, 0, 5, 100, 0, 0]
    after = [1600, 0, 300, 5800, 10, 0, 5, 300, 0, 0]
    assert steal_share(before, after) == round(200 / (600 + 100 + 800 + 200), 3)


def test_no_counters_or_no_elapsed_time_gives_no_share() -> None:
    counters = [1, 2, 3, 4, 5, 6, 7, 8]
    assert steal_share(None, counters) is None
    assert steal_share(counters, None) is None
    assert steal_share(counters[:4], counters[:4]) is None  # a kernel without a steal column
    assert steal_share(counters, counters) is None


def test_this_machine_counts_its_cpu_time() -> None:
    times = cpu_times()
    assert times is not None and len(times) >= 8
    assert sum(times[:8]) > 0


def test_the_reference_loop_reports_its_best_and_median_time() -> None:
    loop = reference_loop_ms(repeats=5)
    assert set(loop) == {"best", "p50"}
    assert 0 < loop["best"] <= loop["p50"]
