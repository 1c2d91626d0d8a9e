"""Intake re-checks the tenant segment of an uploaded object's key (the API's tenant rule,
``rag_ingest.auth.validate_tenant_id``): an invalid one is rejected for good, never queued,
never started, and never retried through the DLQ."""

from __future__ import annotations

from typing import Any

import pytest
from rag_ingest.adapters.status_repository import QueueOutcome, QueueResult
from rag_ingest.ids import document_id_for_object, new_document_id
from rag_ingest.intake import IntakeService, UnattributableObjectError, UploadedObject, address_of

pytestmark = pytest.mark.unit


class RecordingStatus:
    def __init__(self) -> None:
        self.queued: list[dict[str, Any]] = []
        self.executions: list[tuple[str, str, str]] = []

    def mark_queued(self, **fields: Any) -> QueueResult:
        self.queued.append(fields)
        return QueueResult(QueueOutcome.QUEUED, None)

    def set_execution(self, document_id: str, version: str, arn: str) -> None:
        self.executions.append((document_id, version, arn))


class RecordingWorkflow:
    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]:
        self.started.append(name)
        return f"arn:aws:states:us-east-1:123456789012:execution:sm:{name}", True


def uploaded(key: str) -> UploadedObject:
    return UploadedObject(bucket="docs", key=key, version="v1", size_bytes=10, event_time="2026-12-01T05:00:00Z")


INVALID_SEGMENTS = ["a b", "x" * 65, "ümlaut", "acme.corp", "..", "a%2Fb", "tenant!"]


@pytest.mark.parametrize("segment", INVALID_SEGMENTS)
def test_an_invalid_tenant_segment_is_unattributable(segment: str) -> None:
    with pytest.raises(UnattributableObjectError):
        address_of(f"raw/{segment}/{new_document_id()}/file.pdf", "docs")


@pytest.mark.parametrize("segment", INVALID_SEGMENTS)
def test_intake_rejects_it_without_queueing_or_starting(segment: str) -> None:
    status, workflow = RecordingStatus(), RecordingWorkflow()
    key = f"raw/{segment}/{new_document_id()}/file.pdf"
    result = IntakeService(status, workflow).ingest(uploaded(key))  # type: ignore[arg-type]
    assert result.outcome == QueueOutcome.REJECTED.value
    assert result.document_id == document_id_for_object("docs", key)
    assert "tenant" in result.reason
    assert status.queued == [] and workflow.started == []


@pytest.mark.parametrize("segment", ["acme", "A_b-9", "x" * 64])
def test_a_valid_tenant_segment_is_queued_and_started(segment: str) -> None:
    status, workflow = RecordingStatus(), RecordingWorkflow()
    document_id = new_document_id()
    result = IntakeService(status, workflow).ingest(uploaded(f"raw/{segment}/{document_id}/file.pdf"))  # type: ignore[arg-type]
    assert result.outcome == QueueOutcome.QUEUED.value
    assert [q["tenant_id"] for q in status.queued] == [segment]
    assert len(workflow.started) == 1
