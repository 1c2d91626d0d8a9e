"""make load's rules for what a document must have become after the users stop (bench/load_aftermath.py)."""

from __future__ import annotations

import pytest

from bench.load_aftermath import (
    REVISION_KEY,
    Observed,
    RouteRow,
    Tracked,
    aftermath_table,
    judge,
    latency_table,
    problems,
)

pytestmark = pytest.mark.unit

GOOD = Tracked("doc-good", "t1", "sourdough.pdf", None)
BAD = Tracked("doc-bad", "t1", "encrypted.pdf", "ENCRYPTED_PDF")


def ready(chunks: int = 4, indexed: dict[str, int] | None = None, **fields: object) -> Observed:
    return Observed(
        status="READY",
        version="v2",
        chunk_count=chunks,
        chunks_by_version={"v2": chunks} if indexed is None else indexed,
        **fields,  # type: ignore[arg-type]
    )


def test_a_good_input_ready_with_its_chunks_once_and_a_bad_one_failed_with_its_code_pass() -> None:
    assert problems(GOOD, ready()) == []
    assert problems(BAD, Observed(status="FAILED", error_code="ENCRYPTED_PDF")) == []


def test_a_document_must_end_as_its_input_deserves() -> None:
    assert problems(GOOD, Observed(status="FAILED", error_code="INTERNAL_ERROR")) == [
        "FAILED INTERNAL_ERROR, expected READY"
    ]
    assert problems(BAD, ready()) == ["READY, expected ENCRYPTED_PDF"]
    assert problems(BAD, Observed(status="FAILED", error_code="CORRUPT_PDF")) == [
        "FAILED CORRUPT_PDF, expected ENCRYPTED_PDF"
    ]
    assert problems(GOOD, Observed(status="PROCESSING")) == ["not settled: PROCESSING"]
    assert problems(GOOD, Observed(status=None)) == ["no status record"]


def test_chunks_must_match_the_record_once_and_only_for_the_current_version() -> None:
    assert problems(GOOD, ready(indexed={"v2": 5})) == ["5 chunks indexed for the current version, the record says 4"]
    assert problems(GOOD, ready(indexed={"v2": 4, "v1": 3})) == ["3 chunks of other versions indexed"]
    assert problems(BAD, Observed(status="FAILED", error_code="ENCRYPTED_PDF", chunks_by_version={"v1": 2})) == [
        "FAILED, yet 2 chunks indexed"
    ]


def test_a_deleted_document_is_deleted_with_nothing_indexed_and_no_other_is() -> None:
    deleted = Tracked("doc-gone", "t1", "sourdough.pdf", None, deleted=True)
    assert problems(deleted, Observed(status="DELETED")) == []
    assert problems(deleted, Observed(status="DELETED", chunks_by_version={"v1": 1})) == [
        "deleted, yet 1 chunks indexed"
    ]
    assert problems(deleted, ready()) == ["deleted (200), but READY", "deleted, yet 4 chunks indexed"]
    assert problems(GOOD, Observed(status="DELETED")) == ["DELETED, but no DELETE of it answered 200"]


def test_the_last_answered_patch_is_on_the_record_and_every_passage() -> None:
    patched = Tracked("doc-p", "t1", "sourdough.pdf", None, patched_revision=7)
    assert problems(patched, ready(revision_value=7, chunk_revisions={7: 4})) == []
    assert problems(patched, ready(revision_value=6, chunk_revisions={7: 4})) == [
        f"record's {REVISION_KEY} 6, last PATCH set 7"
    ]
    assert problems(patched, ready(revision_value=7, chunk_revisions={7: 3, None: 1})) == [
        f"1 passages without the last PATCH's {REVISION_KEY}"
    ]


def test_an_upload_that_never_reached_s3_may_only_wait_for_its_bytes() -> None:
    lost = Tracked("doc-u", "t1", "sourdough.pdf", None, uploaded=False)
    assert problems(lost, Observed(status="AWAITING_UPLOAD")) == []
    assert problems(lost, ready()) == ["never uploaded, yet READY with 4 chunks indexed"]


def test_the_verdict_fails_on_a_wrong_document_drift_a_duplicate_or_a_server_error_but_not_on_503() -> None:
    documents = [(GOOD, ready()), (BAD, Observed(status="FAILED", error_code="ENCRYPTED_PDF"))]
    codes = {"POST /search": {"200": 10, "503": 2}}
    passed = judge(documents, {"t1": []}, 0, 0, codes)
    assert passed.passed and (passed.documents, passed.chunks) == (2, 4)
    assert passed.outcomes == {"READY": 1, "FAILED ENCRYPTED_PDF": 1}
    assert not judge(documents, {"t1": [{"kind": "INDEX_WITHOUT_RECORD"}]}, 0, 0, codes).passed
    assert not judge(documents, {"t1": []}, 1, 0, codes).passed
    assert not judge(documents, {"t1": []}, 0, 0, {"POST /search": {"500": 1}}).passed
    wrong = judge([(GOOD, Observed(status="FAILED", error_code="TIMEOUT"))], {}, 0, 0, {})
    assert wrong.problems == {"doc-good": ["sourdough.pdf (t1)", "FAILED TIMEOUT, expected READY"]}
    assert "| verdict | FAIL |" in aftermath_table(wrong)


def test_the_latency_table_has_a_line_per_route() -> None:
    row = RouteRow("POST /search", 120, 1, 80.0, 240.0, 410.0, 95.5, 900.0, 0.2)
    assert latency_table([row]).splitlines()[2] == "| POST /search | 120 | 1 | 80 | 240 | 410 | 96 | 900 | 0.20 |"
