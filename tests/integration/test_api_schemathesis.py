"""make test's short seeded schemathesis run (tools/fuzz.py; make fuzz runs >= 10,000 requests): every
route as tenant A, links followed, while tenant B's document, source and webhook exist. No 5xx, no
contract break, no response to A carrying B's data, and B's objects unchanged afterwards."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tools import fuzz

pytestmark = pytest.mark.integration
SEED = 4545


def test_a_short_seeded_fuzz_run_finds_nothing(local_stack: dict[str, Any], tmp_path: Path) -> None:
    started = time.monotonic()
    report = fuzz.run(local_stack["ApiUrl"], examples=3, seed=SEED, min_requests=0, workdir=tmp_path / "fuzz")
    logs = "\n".join(path.read_text()[-4000:] for path in sorted((tmp_path / "fuzz").glob("schemathesis-*.log")))
    assert report.requests >= 200, logs
    assert report.probes_of_other_tenant > 0, "no request aimed at tenant B's objects"
    assert report.server_errors == 0, report.by_status
    assert report.contract_breaks == [], logs
    assert not any("cross-tenant" in line for line in report.failures), logs
    assert report.other_tenant_changes == []
    assert time.monotonic() - started < 240, "the seeded run should stay short"
