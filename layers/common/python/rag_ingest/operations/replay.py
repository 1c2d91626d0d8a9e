"""Replay: re-run a document whose upload event was already consumed.

The record goes FAILED → QUEUED (compare-and-set on status, version, updated_at and the replay
count) and a new execution starts, named ``execution_name(document_id, version, replay=N)``. The
stages' checkpoints (artifacts keyed by document and version) make it resume at the first
unfinished stage. ``Replayer`` does it for one document (the API's retry and the reaper use it);
``FailedDocumentReplay`` picks the FAILED documents an operator asks for (the Redrive function's
``{"action": "replay"}`` and ``rag-ingest replay``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.core.clock import Clock, iso_before
from rag_ingest.core.errors import SYSTEM_ERROR_CODES, ErrorCode, StaleWriteError
from rag_ingest.core.ids import execution_name
from rag_ingest.core.job import DocumentJob
from rag_ingest.core.logs import logger
from rag_ingest.core.operations import ReplayedDocument
from rag_ingest.core.ports import DocumentReplayer, DocumentsByStatus, ExecutionStarter, ReplayDocuments
from rag_ingest.core.record import DocumentRecord, DocumentStatus

# Replay takes the system failures (SYSTEM_ERROR_CODES) by default: a user-caused code
# (ENCRYPTED_PDF, ...) fails again on the same bytes, so replay takes those only when asked.


class ReplayRequest(BaseModel):
    """Re-run FAILED documents: the ones named, or every FAILED one that matches the filters."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["replay"] = "replay"
    dry_run: bool = False
    document_ids: list[str] = Field(default_factory=list, max_length=1000)
    # Default: SYSTEM_ERROR_CODES when no document is named, any code when documents are named.
    error_codes: list[ErrorCode] | None = Field(default=None, min_length=1)
    older_than_seconds: int | None = Field(default=None, ge=0)  # failed at least this long ago
    newer_than_seconds: int | None = Field(default=None, ge=0)  # failed at most this long ago
    max_documents: int = Field(default=100, ge=1, le=10_000)


class DocumentEntry(BaseModel):
    document_id: str
    reason: str


class ReplayReport(BaseModel):
    action: Literal["replay"] = "replay"
    dry_run: bool
    replayed: list[ReplayedDocument] = Field(default_factory=list)
    would_replay: list[ReplayedDocument] = Field(default_factory=list)
    skipped: list[DocumentEntry] = Field(default_factory=list)
    errors: list[DocumentEntry] = Field(default_factory=list)


class Replayer:
    """Restarts one document's workflow under a fresh replay name."""

    def __init__(self, documents: ReplayDocuments, workflow: ExecutionStarter) -> None:
        self._documents = documents
        self._workflow = workflow

    def plan(self, record: DocumentRecord) -> ReplayedDocument:
        job = _job_of(record)  # the record must name the uploaded object version
        replay = record.replays + 1
        name = execution_name(record.document_id, job.version, replay=replay)
        return ReplayedDocument(
            document_id=record.document_id,
            replay=replay,
            execution_name=name,
            execution_arn=self._workflow.execution_arn(name),
            previous_error_code=record.error_code.value if record.error_code else None,
        )

    def replay(self, record: DocumentRecord) -> ReplayedDocument:
        """Reset the record (compare-and-set; ``StaleWriteError`` if it moved), then start.

        A crash between the two leaves a QUEUED record naming an execution that does not exist:
        exactly what the reaper looks for, so the document is not lost.
        """
        planned = self.plan(record)
        job = _job_of(record)
        self._documents.requeue_for_replay(record, execution_arn=planned.execution_arn)
        arn, _ = self._workflow.start(planned.execution_name, job.model_dump(exclude_none=True))
        logger.info(
            "document replayed",
            extra={"document_id": record.document_id, "execution_arn": arn, "replay": planned.replay},
        )
        return planned.model_copy(update={"execution_arn": arn})


def _job_of(record: DocumentRecord) -> DocumentJob:
    """The workflow's input for the record's current version (what intake starts it with)."""
    if not (record.version and record.bucket and record.key):
        raise ValueError("the record names no uploaded object version")
    return DocumentJob(
        document_id=record.document_id,
        tenant_id=record.tenant_id,
        bucket=record.bucket,
        key=record.key,
        version=record.version,
        size_bytes=record.size_bytes,
    )


class FailedDocumentReplay:
    """Replays the FAILED documents a request names, or every FAILED one that matches its filters."""

    def __init__(self, *, documents: DocumentsByStatus, replayer: DocumentReplayer, clock: Clock = time.time) -> None:
        self._documents = documents
        self._replayer = replayer
        self._clock = clock

    def run(self, request: ReplayRequest) -> ReplayReport:
        report = ReplayReport(dry_run=request.dry_run)
        wanted = request.error_codes or (None if request.document_ids else list(SYSTEM_ERROR_CODES))
        older, newer = request.older_than_seconds, request.newer_than_seconds
        failed_before = iso_before(self._clock, older) if older is not None else None
        failed_after = iso_before(self._clock, newer) if newer is not None else None
        for document_id in self._replay_candidates(request, failed_before, failed_after):
            if len(report.replayed) + len(report.would_replay) >= request.max_documents:
                break
            # The GSI is eventually consistent: decide on a consistent read of the record.
            record = self._documents.get(document_id)
            reason = _replay_refusal(record, wanted, failed_before, failed_after)
            if reason or record is None:
                report.skipped.append(DocumentEntry(document_id=document_id, reason=reason or "no such document"))
                continue
            try:
                if request.dry_run:
                    report.would_replay.append(self._replayer.plan(record))
                else:
                    report.replayed.append(self._replayer.replay(record))
            except StaleWriteError:
                report.skipped.append(DocumentEntry(document_id=document_id, reason="changed while replaying"))
            except Exception as exc:  # one document's trouble must not stop the others
                logger.exception("replay failed", extra={"document_id": document_id})
                report.errors.append(DocumentEntry(document_id=document_id, reason=f"{type(exc).__name__}: {exc}"))
        return report

    def _replay_candidates(self, request: ReplayRequest, before: str | None, after: str | None) -> Iterator[str]:
        if request.document_ids:
            yield from dict.fromkeys(request.document_ids)
            return
        for record in self._documents.list_by_status(DocumentStatus.FAILED, updated_before=before, updated_after=after):
            yield record.document_id


def _replay_refusal(
    record: DocumentRecord | None, wanted: list[ErrorCode] | None, before: str | None, after: str | None
) -> str:
    if record is None:
        return "no such document"
    if record.status != DocumentStatus.FAILED:
        return f"status is {record.status.value}, not FAILED"
    if wanted is not None and record.error_code not in wanted:
        code = record.error_code.value if record.error_code else "none"
        return f"filter: error code {code} not in {', '.join(c.value for c in wanted)}"
    if (before is not None and record.updated_at > before) or (after is not None and record.updated_at < after):
        return f"filter: failed at {record.updated_at}"
    if not (record.version and record.bucket and record.key):
        return "the record names no uploaded object version"
    return ""
