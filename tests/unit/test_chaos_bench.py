"""bench/chaos.py's pure parts: the burst's mix of inputs, where each document ended, the table."""

from __future__ import annotations

import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.record import DocumentRecord, DocumentStatus

from bench.chaos import BAD_EVERY, BAD_INPUTS, FaultResult, Outcomes, Upload, burst_files, classify, table
from tests.support.pipeline_probe import VALID_SAMPLES

pytestmark = pytest.mark.unit


def record(document_id: str, status: DocumentStatus, code: ErrorCode | None = None) -> DocumentRecord:
    return DocumentRecord(
        document_id=document_id,
        tenant_id="t",
        status=status,
        error_code=code,
        created_at="2026-12-04T00:00:00.000+00:00",
        updated_at="2026-12-04T00:00:01.000+00:00",
    )


def test_one_upload_in_six_is_a_bad_input_and_every_bad_input_appears() -> None:
    files = burst_files(4 * BAD_EVERY)
    bad = [(path, code) for path, code in files if code is not None]
    assert len(files) == 4 * BAD_EVERY
    assert sorted(bad) == sorted(BAD_INPUTS.items())
    assert {path for path, code in files if code is None} == set(VALID_SAMPLES)


def test_outcomes_tell_permanent_codes_from_system_failures_lost_and_unexpected_ones() -> None:
    uploads = [
        Upload("ready", "a.pdf", None),
        Upload("bad", "not-a-pdf.pdf", "UNSUPPORTED_TYPE"),
        Upload("retries-ran-out", "b.pdf", None),
        Upload("still-processing", "c.pdf", None),
        Upload("no-record", "d.pdf", None),
        Upload("wrong-code", "encrypted.pdf", "ENCRYPTED_PDF"),
    ]
    records = {
        "ready": record("ready", DocumentStatus.READY),
        "bad": record("bad", DocumentStatus.FAILED, ErrorCode.UNSUPPORTED_TYPE),
        "retries-ran-out": record("retries-ran-out", DocumentStatus.FAILED, ErrorCode.TRANSIENT_RETRIES_EXHAUSTED),
        "still-processing": record("still-processing", DocumentStatus.PROCESSING),
        "wrong-code": record("wrong-code", DocumentStatus.FAILED, ErrorCode.CORRUPT_PDF),
    }

    outcomes = classify(uploads, records)

    assert outcomes.documents == 6 and outcomes.ready == 1
    assert outcomes.permanent == {"UNSUPPORTED_TYPE": 1, "CORRUPT_PDF": 1}
    assert outcomes.system_failures == {"TRANSIENT_RETRIES_EXHAUSTED": 1}
    assert outcomes.lost == ["still-processing", "no-record"]
    assert outcomes.unexpected == [
        "b.pdf retries-ran-out: TRANSIENT_RETRIES_EXHAUSTED, expected READY",
        "encrypted.pdf wrong-code: CORRUPT_PDF, expected ENCRYPTED_PDF",
    ]


def result(
    fault: str,
    outcomes: Outcomes,
    drift: int | None = 0,
    *,
    invocation_errors: dict[str, int] | None = None,
    error: str | None = None,
) -> FaultResult:
    return FaultResult(
        fault=fault,
        moment="m",
        moment_seen=True,
        killed="k",
        outcomes=outcomes,
        duplicates={"same_chunk_index": 0, "same_text": 0},
        drift=drift,
        drift_by_kind={"OrphanChunks": drift} if drift else {},
        serving_seconds=1.5,
        settled_seconds=None if outcomes.lost else 9.0,
        invocation_errors=invocation_errors or {},
        error=error,
    )


def test_a_fault_passes_only_with_everything_settled_as_expected_no_drift_and_no_duplicates() -> None:
    clean = Outcomes(6, 5, {"UNSUPPORTED_TYPE": 1}, {}, [], [])
    lost = Outcomes(6, 0, {}, {}, ["a"] * 6, [])
    assert result("worker", clean).passed
    assert not result("worker", clean, drift=1).passed
    assert not result("worker", clean, drift=None).passed
    assert not result("moto", lost).passed
    assert not result("worker", clean, error="recovery failed").passed
    duplicated = result("worker", clean)
    duplicated.duplicates["same_text"] = 1
    assert not duplicated.passed

    rows = table([result("worker", clean, invocation_errors={"Runtime.ExitError": 1}), result("moto", lost, drift=8)])
    assert rows.splitlines()[2:] == [
        "| worker | 6 | 5 | UNSUPPORTED_TYPE 1 | 0 | 0 | 0 | 0 | 1.5 / 9.0 | Runtime.ExitError 1 | pass |",
        "| moto | 6 | 0 | 0 | 0 | 6 | 0 | 8 (OrphanChunks 8) | 1.5 / - | 0 | FAIL |",
    ]
