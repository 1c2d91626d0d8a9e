"""The per-tenant rate cell's cost per API request (docs/api.md, "Limits per tenant"): ``take_request``
on moto's DynamoDB for a tenant under its rate and one at it, beside a GetItem of the same table.

``python -m bench.rate_cell`` prints p50/p95 of each (moto on this machine, not DynamoDB's latency).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from rag_ingest.adapters.tenant_usage_table import TenantUsageTable
from rag_ingest.core.limits import RateCell

from tests.support.aws import moto_server
from tests.support.operations import create_tenant_usage_table

TABLE = "tenant-usage"
CALLS = 300


def _timed(call: Callable[[], object], pause_seconds: float, count: int = CALLS) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
        time.sleep(pause_seconds)
    return times


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    return f"p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {ordered[int(len(ordered) * 0.95)] * 1000:.1f} ms"


def main() -> None:
    with moto_server():
        create_tenant_usage_table(TABLE)
        table = TenantUsageTable(TABLE)
        cell = RateCell.of(requests_per_second=50, burst_requests=100)
        busy = RateCell.of(requests_per_second=10, burst_requests=100)  # kept ahead of now: the advance path

        def now_ms() -> int:
            return int(time.time() * 1000)

        _timed(lambda: table.take_request("warm", cell, now_ms()), 0, 20)
        under = _timed(lambda: table.take_request("under", cell, now_ms()), 0.025)
        at = _timed(lambda: table.take_request("at", busy, now_ms()), 0.0, 90)
        read = _timed(lambda: table.pages_on("under", "2026-12-07"), 0.025)
        print(f"take_request, a tenant under its rate (~30/s of 50): {_summary(under)}")
        print(f"take_request, a tenant spending its burst:           {_summary(at)}")
        print(f"GetItem of the same table:                           {_summary(read)}")


if __name__ == "__main__":
    main()
