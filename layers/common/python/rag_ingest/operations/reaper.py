"""The stuck-document reaper: QUEUED/PROCESSING records that stopped moving, checked against the
execution that should be moving them.

A record not updated by the deadline is a suspect, and its execution decides: still running, left
alone; gone, failed, timed out or aborted, restarted under a replay name while the replay budget
lasts; else FAILED with ``STUCK``. AWAITING_UPLOAD records past the upload URL's expiry and a grace
period become EXPIRED, counted apart (``UploadsExpired``) since the client's doing never pages.
Every write is a compare-and-set on the record as read: a worker that moves the document meanwhile
wins. The runbook: docs/operations.md, "The stuck-document reaper".
"""

from __future__ import annotations

import time
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.core.clock import Clock, iso_before
from rag_ingest.core.errors import ErrorCode, StaleWriteError
from rag_ingest.core.logs import logger, run_keys
from rag_ingest.core.operations import ExecutionState
from rag_ingest.core.ports import DocumentReplayer, ExecutionLookup, ReaperDocuments
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.telemetry import NoTelemetry, Telemetry

STUCK_STATUSES = (DocumentStatus.QUEUED, DocumentStatus.PROCESSING)
_LIVE = frozenset({ExecutionState.RUNNING, ExecutionState.PENDING_REDRIVE})
_DEAD = frozenset({ExecutionState.MISSING, ExecutionState.FAILED, ExecutionState.TIMED_OUT, ExecutionState.ABORTED})


class ReapAction(StrEnum):
    """The ``Action`` dimension of the ``DocumentsReaped`` metric."""

    # The metric's dimension value, as the alarms and dashboards read it.
    RESTARTED = "Redriven"
    MARKED_FAILED = "MarkedFailed"


class ReaperSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    stuck_after_seconds: int = Field(ge=60)
    max_redrives: int = Field(ge=0)
    max_documents: int = Field(ge=1)
    # AWAITING_UPLOAD records older than this (URL expiry + grace) become EXPIRED; None: never.
    expire_uploads_after_seconds: int | None = Field(default=None, ge=60)


class ReapRequest(BaseModel):
    """A manual run may override the configured settings (the schedule sends none)."""

    model_config = ConfigDict(extra="forbid")

    dry_run: bool = False
    stuck_after_seconds: int | None = Field(default=None, ge=60)
    max_redrives: int | None = Field(default=None, ge=0)
    max_documents: int | None = Field(default=None, ge=1)
    expire_uploads_after_seconds: int | None = Field(default=None, ge=60)
    # No execution survived and none is starting (the local stack's restart): every record is a suspect
    # whatever its age. Never on a running system (docs/operations.md, "The stuck-document reaper").
    executions_lost: bool = False


class ReapedDocument(BaseModel):
    document_id: str
    status: str  # as found
    updated_at: str
    execution_state: str | None = None  # None: an upload that never came has no execution
    replays: int
    action: ReapAction | None = None  # None: left alone
    reason: str = ""
    execution_arn: str | None = None  # the replay's, when restarted


class ReapReport(BaseModel):
    dry_run: bool
    stuck_after_seconds: int
    examined: int = 0
    redriven: list[ReapedDocument] = Field(default_factory=list)
    marked_failed: list[ReapedDocument] = Field(default_factory=list)
    left_alone: list[ReapedDocument] = Field(default_factory=list)
    expired: list[ReapedDocument] = Field(default_factory=list)

    def counts(self) -> dict[ReapAction, int]:
        return {ReapAction.RESTARTED: len(self.redriven), ReapAction.MARKED_FAILED: len(self.marked_failed)}


class Reaper:
    def __init__(
        self,
        *,
        documents: ReaperDocuments,
        executions: ExecutionLookup,
        replayer: DocumentReplayer,
        settings: ReaperSettings,
        telemetry: Telemetry | None = None,
        clock: Clock = time.time,
    ) -> None:
        self._documents = documents
        # A document failed here is reported like one failed by MarkFailed: the DocumentFailed
        # event (the frontend learns it) and the DocumentsFailed metric (SystemFailuresAlarm).
        self._telemetry = telemetry or NoTelemetry()
        self._executions = executions
        self._replayer = replayer
        self._settings = settings
        self._clock = clock

    def reap(self, request: ReapRequest | None = None) -> ReapReport:
        request = request or ReapRequest()
        settings = self._settings.model_copy(
            update={
                name: value
                for name in ("stuck_after_seconds", "max_redrives", "max_documents", "expire_uploads_after_seconds")
                if (value := getattr(request, name)) is not None
            }
        )
        stuck_after = 0 if request.executions_lost else settings.stuck_after_seconds
        report = ReapReport(dry_run=request.dry_run, stuck_after_seconds=stuck_after)
        deadline = iso_before(self._clock, stuck_after)
        for status in STUCK_STATUSES:
            for suspect in self._documents.list_by_status(status, updated_before=deadline):
                if report.examined >= settings.max_documents:
                    break
                report.examined += 1
                # The GSI lags the table: decide on a consistent read.
                record = self._documents.get(suspect.document_id)
                if record is None or record.status != status or record.updated_at >= deadline:
                    continue
                with run_keys(document_id=record.document_id, tenant_id=record.tenant_id):
                    self._decide(record, settings, request.dry_run, report)
        if settings.expire_uploads_after_seconds is not None:
            self._expire_uploads(settings.expire_uploads_after_seconds, settings, request.dry_run, report)
        logger.info(
            "reaper finished",
            extra={
                "examined": report.examined,
                "redriven": len(report.redriven),
                "marked_failed": len(report.marked_failed),
                "left_alone": len(report.left_alone),
                "expired": len(report.expired),
            },
        )
        return report

    def _expire_uploads(self, after_seconds: int, settings: ReaperSettings, dry_run: bool, report: ReapReport) -> None:
        deadline = iso_before(self._clock, after_seconds)
        awaiting = DocumentStatus.AWAITING_UPLOAD
        for suspect in self._documents.list_by_status(awaiting, updated_before=deadline):
            if report.examined >= settings.max_documents:
                break
            report.examined += 1
            record = self._documents.get(suspect.document_id)  # the GSI lags: decide on a consistent read
            if record is None or record.status != awaiting or record.updated_at >= deadline:
                continue
            detail = f"no file was uploaded: awaiting since {record.updated_at}, expired after {after_seconds} s"
            found = ReapedDocument(
                document_id=record.document_id,
                status=record.status.value,
                updated_at=record.updated_at,
                replays=record.replays,
                reason=detail,  # no ReapAction: those are DocumentsReaped's dimension, and expiry is not one
            )
            with run_keys(document_id=record.document_id, tenant_id=record.tenant_id):
                if not dry_run:
                    try:
                        self._documents.mark_expired(record, detail)
                    except StaleWriteError:  # the upload arrived (or a delete) meanwhile: it wins
                        report.left_alone.append(
                            found.model_copy(update={"action": None, "reason": "changed while reaping"})
                        )
                        continue
                    logger.info("upload expired", extra={"awaiting_since": record.updated_at})
            report.expired.append(found)

    def _decide(self, record: DocumentRecord, settings: ReaperSettings, dry_run: bool, report: ReapReport) -> None:
        state = self._executions.state(record.execution_arn)
        found = ReapedDocument(
            document_id=record.document_id,
            status=record.status.value,
            updated_at=record.updated_at,
            execution_state=state.value,
            replays=record.replays,
        )
        if state in _LIVE:
            # A document waiting for the shared embedding quota is such a one: its Embed tasks give
            # way and are called again (rag_ingest.embeddings.capacity); the record says so.
            waiting = " (waiting for embedding capacity)" if record.capacity_wait_until else ""
            report.left_alone.append(found.model_copy(update={"reason": f"execution still running{waiting}"}))
            return
        restartable = state in _DEAD and record.version and record.bucket and record.key
        if restartable and record.replays < settings.max_redrives:
            self._restart(record, found, dry_run, report)
            return
        if not restartable:
            why = f"execution {state.value} but the record is {record.status.value}"
        else:
            why = f"execution {state.value}; {record.replays} replays already (max {settings.max_redrives})"
        detail = f"{record.status.value} since {record.updated_at}: {why}"
        if not dry_run:
            try:
                self._documents.mark_stuck(record, detail)
            except StaleWriteError:
                report.left_alone.append(found.model_copy(update={"reason": "changed while reaping"}))
                return
            logger.warning("document marked stuck", extra={"document_id": record.document_id, "detail": detail})
            # After the write: a lost race must not announce a failure that did not happen. A
            # publish error fails the run (ReaperErrorsAlarm); the record is FAILED either way.
            self._telemetry.document_failed(
                ErrorCode.STUCK,
                {
                    "document_id": record.document_id,
                    "tenant_id": record.tenant_id,
                    "version": record.version,
                    "stage": record.stage.value if record.stage else None,
                    "error_code": ErrorCode.STUCK.value,
                    "error_detail": detail,
                },
            )
        report.marked_failed.append(found.model_copy(update={"action": ReapAction.MARKED_FAILED, "reason": detail}))

    def _restart(self, record: DocumentRecord, found: ReapedDocument, dry_run: bool, report: ReapReport) -> None:
        reason = f"execution {found.execution_state} without closing the record"
        try:
            planned = self._replayer.plan(record) if dry_run else self._replayer.replay(record)
        except StaleWriteError:
            report.left_alone.append(found.model_copy(update={"reason": "changed while reaping"}))
            return
        report.redriven.append(
            found.model_copy(
                update={"action": ReapAction.RESTARTED, "reason": reason, "execution_arn": planned.execution_arn}
            )
        )
