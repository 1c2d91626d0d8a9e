"""The reaper's decision per execution state, with in-memory stand-ins for the table and Step Functions."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from rag_ingest.core.errors import ErrorCode, StaleWriteError
from rag_ingest.core.operations import ExecutionState, ReplayedDocument
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.telemetry import NoTelemetry
from rag_ingest.operations.reaper import ReapAction, Reaper, ReaperSettings, ReapRequest

pytestmark = pytest.mark.unit
NOW = 1_800_000_000.0
OLD = "2020-01-01T00:00:00.000+00:00"


class FakeDocuments:
    def __init__(self, *records: DocumentRecord) -> None:
        self.records = {r.document_id: r for r in records}
        self.stuck: dict[str, str] = {}
        self.expired: dict[str, str] = {}
        self.lose_races = False

    def list_by_status(self, status: DocumentStatus, *, updated_before: str | None = None) -> Iterator[DocumentRecord]:
        for record in sorted(self.records.values(), key=lambda r: r.updated_at):
            if record.status == status and (updated_before is None or record.updated_at < updated_before):
                yield record

    def get(self, document_id: str) -> DocumentRecord | None:
        return self.records.get(document_id)

    def mark_stuck(self, record: DocumentRecord, detail: str) -> None:
        if self.lose_races:
            raise StaleWriteError("moved")
        self.stuck[record.document_id] = detail

    def mark_expired(self, record: DocumentRecord, detail: str) -> None:
        if self.lose_races:
            raise StaleWriteError("uploaded meanwhile")
        self.expired[record.document_id] = detail


class FakeExecutions:
    def __init__(self, states: dict[str | None, ExecutionState]) -> None:
        self.states = states

    def state(self, execution_arn: str | None) -> ExecutionState:
        return self.states.get(execution_arn, ExecutionState.MISSING)


class FakeReplayer:
    def __init__(self) -> None:
        self.replayed: list[str] = []

    def plan(self, record: DocumentRecord) -> ReplayedDocument:
        name = f"{record.document_id}-r{record.replays + 1}"
        return ReplayedDocument(document_id=record.document_id, replay=record.replays + 1, execution_name=name,
                                execution_arn=f"arn:{name}")  # fmt: skip

    def replay(self, record: DocumentRecord) -> ReplayedDocument:
        self.replayed.append(record.document_id)
        return self.plan(record)


def record(document_id: str, status: str = "PROCESSING", **fields: Any) -> DocumentRecord:
    values: dict[str, Any] = {
        "document_id": document_id,
        "tenant_id": "acme",
        "status": status,
        "bucket": "b",
        "key": f"raw/acme/{document_id}/a.pdf",
        "version": "v1",
        "created_at": OLD,
        "updated_at": OLD,
        "execution_arn": f"arn:{document_id}",
        **fields,
    }
    return DocumentRecord.model_validate(values)


class RecordingTelemetry(NoTelemetry):
    def __init__(self) -> None:
        self.failed: list[tuple[ErrorCode, dict[str, Any]]] = []

    def document_failed(self, code: ErrorCode, detail: dict[str, Any]) -> None:
        self.failed.append((code, detail))


def reaper(
    documents: FakeDocuments,
    executions: FakeExecutions,
    replayer: FakeReplayer,
    telemetry: RecordingTelemetry | None = None,
    **settings: int,
) -> Reaper:
    return Reaper(
        documents=documents,  # type: ignore[arg-type]
        executions=executions,  # type: ignore[arg-type]
        replayer=replayer,  # type: ignore[arg-type]
        settings=ReaperSettings(
            stuck_after_seconds=settings.get("stuck_after_seconds", 1800),
            max_redrives=settings.get("max_redrives", 2),
            max_documents=settings.get("max_documents", 100),
            expire_uploads_after_seconds=settings.get("expire_uploads_after_seconds"),
        ),
        telemetry=telemetry,
        clock=lambda: NOW,
    )


@pytest.mark.parametrize(
    ("state", "action"),
    [
        (ExecutionState.RUNNING, None),
        (ExecutionState.PENDING_REDRIVE, None),
        (ExecutionState.FAILED, ReapAction.RESTARTED),
        (ExecutionState.TIMED_OUT, ReapAction.RESTARTED),
        (ExecutionState.ABORTED, ReapAction.RESTARTED),
        (ExecutionState.MISSING, ReapAction.RESTARTED),
        # "Succeeded" but the record is not READY: re-running would not explain it; a human must look.
        (ExecutionState.SUCCEEDED, ReapAction.MARKED_FAILED),
    ],
)
def test_decision_by_execution_state(state: ExecutionState, action: ReapAction | None) -> None:
    documents = FakeDocuments(record("d1"))
    replayer = FakeReplayer()
    report = reaper(documents, FakeExecutions({"arn:d1": state}), replayer).reap()
    taken = {ReapAction.RESTARTED: report.redriven, ReapAction.MARKED_FAILED: report.marked_failed}
    if action is None:
        assert [d.document_id for d in report.left_alone] == ["d1"] and replayer.replayed == []
    else:
        assert [d.document_id for d in taken[action]] == ["d1"]
        assert [d.execution_state for d in taken[action]] == [state.value]
    assert ("d1" in documents.stuck) == (action is ReapAction.MARKED_FAILED)


def test_replay_budget_then_stuck_and_announced() -> None:
    documents = FakeDocuments(record("spent", replays=2, stage="EMBED"), record("fresh", replays=1))
    replayer, telemetry = FakeReplayer(), RecordingTelemetry()
    report = reaper(documents, FakeExecutions({}), replayer, telemetry, max_redrives=2).reap()
    assert replayer.replayed == ["fresh"]
    assert [d.document_id for d in report.marked_failed] == ["spent"]
    assert "2 replays already (max 2)" in documents.stuck["spent"]
    assert "PROCESSING since 2020-01-01" in documents.stuck["spent"]
    [(code, detail)] = telemetry.failed
    assert code is ErrorCode.STUCK
    assert detail == {
        "document_id": "spent",
        "tenant_id": "acme",
        "version": "v1",
        "stage": "EMBED",
        "error_code": "STUCK",
        "error_detail": documents.stuck["spent"],
    }


def test_a_record_without_an_object_version_cannot_be_redriven() -> None:
    documents = FakeDocuments(record("nover", status="QUEUED", version=None))
    report = reaper(documents, FakeExecutions({}), FakeReplayer()).reap()
    assert [d.document_id for d in report.marked_failed] == ["nover"]


def test_dry_run_changes_nothing_and_overrides_apply() -> None:
    documents = FakeDocuments(record("a"), record("b", replays=5))
    replayer = FakeReplayer()
    telemetry = RecordingTelemetry()
    report = reaper(documents, FakeExecutions({}), replayer, telemetry).reap(ReapRequest(dry_run=True, max_redrives=10))
    assert {d.document_id for d in report.redriven} == {"a", "b"}
    assert replayer.replayed == [] and documents.stuck == {}
    dry_stuck = reaper(documents, FakeExecutions({}), replayer, telemetry).reap(ReapRequest(dry_run=True))
    assert [d.document_id for d in dry_stuck.marked_failed] == ["b"] and telemetry.failed == []


def test_fresh_records_and_the_per_run_limit() -> None:
    recent = "2099-01-01T00:00:00.000+00:00"
    documents = FakeDocuments(record("old1"), record("old2"), record("new", updated_at=recent))
    report = reaper(documents, FakeExecutions({}), FakeReplayer(), max_documents=1).reap()
    assert report.examined == 1 and len(report.redriven) == 1


def test_executions_lost_makes_every_in_flight_record_a_suspect_and_the_execution_still_decides() -> None:
    """The local stack's start after a stop: no execution survived, none is starting yet."""
    just_now = iso_at(1)
    documents = FakeDocuments(
        record("gone", updated_at=just_now), record("queued", status="QUEUED", updated_at=just_now),
        record("running", updated_at=just_now),
    )  # fmt: skip
    executions = FakeExecutions({"arn:running": ExecutionState.RUNNING})
    replayer = FakeReplayer()
    report = reaper(documents, executions, replayer).reap(ReapRequest(executions_lost=True))
    assert sorted(replayer.replayed) == ["gone", "queued"]
    assert [d.document_id for d in report.left_alone] == ["running"]
    assert report.stuck_after_seconds == 0
    assert reaper(documents, executions, FakeReplayer()).reap().examined == 0  # the default deadline: too fresh
    with pytest.raises(ValueError):
        ReapRequest(stuck_after_seconds=0)  # an operator's deadline is a minute at least


def test_a_lost_race_leaves_the_document_alone_and_announces_nothing() -> None:
    documents = FakeDocuments(record("d1", replays=9))
    documents.lose_races = True
    telemetry = RecordingTelemetry()
    report = reaper(documents, FakeExecutions({}), FakeReplayer(), telemetry).reap()
    assert report.marked_failed == [] and report.left_alone[0].reason == "changed while reaping"
    assert telemetry.failed == []


# --- uploads that never arrive -------------------------------------------------------------


def iso_at(seconds_before_now: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_before_now, UTC).isoformat(timespec="milliseconds")


EXPIRE_AFTER = 900 + 3600  # the URL's expiry plus the grace


def awaiting(document_id: str, age_seconds: float) -> DocumentRecord:
    stamp = iso_at(age_seconds)
    return record(document_id, "AWAITING_UPLOAD", version=None, execution_arn=None, created_at=stamp, updated_at=stamp)


def test_uploads_past_url_expiry_plus_grace_expire_and_younger_ones_wait() -> None:
    documents = FakeDocuments(awaiting("stale", EXPIRE_AFTER + 60), awaiting("young", EXPIRE_AFTER - 60))
    report = reaper(documents, FakeExecutions({}), FakeReplayer(), expire_uploads_after_seconds=EXPIRE_AFTER).reap()
    assert [d.document_id for d in report.expired] == ["stale"]
    assert report.expired[0].action is None and report.expired[0].execution_state is None
    assert set(documents.expired) == {"stale"}
    assert "no file was uploaded" in documents.expired["stale"]
    # Not a reaped document: DocumentsReaped (which pages) counts only redrives and STUCK failures.
    assert report.counts() == {ReapAction.RESTARTED: 0, ReapAction.MARKED_FAILED: 0}


def test_without_the_setting_nothing_expires() -> None:
    documents = FakeDocuments(awaiting("stale", 10 * EXPIRE_AFTER))
    report = reaper(documents, FakeExecutions({}), FakeReplayer()).reap()
    assert report.expired == [] and documents.expired == {}


def test_a_dry_run_reports_expiries_without_writing() -> None:
    documents = FakeDocuments(awaiting("stale", EXPIRE_AFTER + 60))
    report = reaper(documents, FakeExecutions({}), FakeReplayer()).reap(
        ReapRequest(dry_run=True, expire_uploads_after_seconds=EXPIRE_AFTER)
    )
    assert [d.document_id for d in report.expired] == ["stale"] and documents.expired == {}


def test_an_upload_that_lands_while_reaping_wins() -> None:
    documents = FakeDocuments(awaiting("racing", EXPIRE_AFTER + 60))
    documents.lose_races = True
    report = reaper(documents, FakeExecutions({}), FakeReplayer(), expire_uploads_after_seconds=EXPIRE_AFTER).reap()
    assert report.expired == []
    assert [(d.document_id, d.reason) for d in report.left_alone] == [("racing", "changed while reaping")]
