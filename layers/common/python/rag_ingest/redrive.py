"""Operator recovery: redrive dead-lettered upload events, and replay FAILED documents.

Redrive moves messages from the DLQ back to the ingest queue. Send-then-delete: a crash between
the two leaves a copy in both queues, never in neither, and the intake's idempotency (per object
version) absorbs the duplicate. A second run finds nothing left to move.

Replay is for documents whose message was already consumed: the record goes FAILED → QUEUED
(compare-and-set on status, version, updated_at and the replay count) and a new execution
starts, named ``execution_name(document_id, version, replay=N)``. The stages' checkpoints
(artifacts keyed by document and version) make it resume at the first unfinished stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.errors import ErrorCode, StaleWriteError
from rag_ingest.ids import execution_name
from rag_ingest.intake import PoisonMessageError, address_of, parse_queue_message
from rag_ingest.logs import logger
from rag_ingest.models import DocumentJob, DocumentRecord, DocumentStatus, QueueMessage
from rag_ingest.ports import DocumentsByStatus, ExecutionStarter, MessageQueues, ReplayDocuments

# Failures of the system, not of the file: replaying them can succeed. A user-caused code
# (ENCRYPTED_PDF, ...) fails again on the same bytes, so replay takes those only when asked.
SYSTEM_ERROR_CODES: tuple[ErrorCode, ...] = (
    ErrorCode.INTERNAL_ERROR,
    ErrorCode.TRANSIENT_RETRIES_EXHAUSTED,
    ErrorCode.TIMEOUT,
    ErrorCode.STUCK,
)

Clock = Callable[[], float]  # seconds since the epoch


def iso_before(clock: Clock, seconds: int) -> str:
    """``seconds`` before now, in the status table's ``updated_at`` format (sortable as text)."""
    moment = datetime.fromtimestamp(clock(), UTC) - timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds")


# -- requests and reports ------------------------------------------------------------------
class RedriveRequest(BaseModel):
    """Move dead-lettered messages back; every filter given must match for a message to move."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["redrive"] = "redrive"
    dry_run: bool = False
    max_messages: int = Field(default=100, ge=1, le=10_000)
    document_id: str | None = None  # only messages about this document
    # Only messages whose document's status record carries one of these error codes.
    error_codes: list[ErrorCode] | None = Field(default=None, min_length=1)
    older_than_seconds: int | None = Field(default=None, ge=0)  # sent at least this long ago
    newer_than_seconds: int | None = Field(default=None, ge=0)  # sent at most this long ago
    # Messages intake cannot parse bounce straight back to the DLQ: move them only after a fix.
    include_unparseable: bool = False


class MessageEntry(BaseModel):
    message_id: str
    document_ids: list[str] = Field(default_factory=list)
    reason: str = ""


class RedriveReport(BaseModel):
    action: Literal["redrive"] = "redrive"
    dry_run: bool
    moved: list[MessageEntry] = Field(default_factory=list)
    would_move: list[MessageEntry] = Field(default_factory=list)
    skipped: list[MessageEntry] = Field(default_factory=list)


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


class ReplayedDocument(BaseModel):
    document_id: str
    replay: int
    execution_name: str
    execution_arn: str
    previous_error_code: str | None = None


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


OperationRequest = Annotated[RedriveRequest | ReplayRequest, Field(discriminator="action")]


class _Operation(BaseModel):
    request: OperationRequest


def parse_operation(event: dict[str, object] | None) -> RedriveRequest | ReplayRequest:
    """The Redrive function's payload: ``{"action": "redrive"|"replay", ...}``; no action = redrive."""
    payload = dict(event or {})
    payload.setdefault("action", "redrive")
    return _Operation.model_validate({"request": payload}).request


# -- replay --------------------------------------------------------------------------------
class Replayer:
    """Restarts one document's workflow under a fresh replay name (used by replay and the reaper)."""

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


class DocumentsAndReplays(DocumentsByStatus, ReplayDocuments, Protocol):
    """Operations' view of the documents table: FAILED documents to replay, and the replay itself."""


# -- the operations ------------------------------------------------------------------------
class Operations:
    """What the Redrive function and ``python -m rag_ingest.cli`` run."""

    def __init__(
        self,
        *,
        queues: MessageQueues,
        documents: DocumentsAndReplays,
        workflow: ExecutionStarter,
        dlq_url: str,
        queue_url: str,
        clock: Clock = time.time,
    ) -> None:
        self._queues = queues
        self._documents = documents
        self._replayer = Replayer(documents, workflow)
        self._dlq_url = dlq_url
        self._queue_url = queue_url
        self._clock = clock

    def run(self, request: RedriveRequest | ReplayRequest) -> RedriveReport | ReplayReport:
        if isinstance(request, ReplayRequest):
            return self.replay(request)
        return self.redrive(request)

    # -- redrive ---------------------------------------------------------------------------
    def redrive(self, request: RedriveRequest) -> RedriveReport:
        report = RedriveReport(dry_run=request.dry_run)
        seen: set[str] = set()
        held: list[str] = []  # receipt handles kept invisible until the end, so one pass sees each message once
        try:
            while len(report.moved) + len(report.would_move) < request.max_messages:
                wanted = request.max_messages - len(report.moved) - len(report.would_move)
                batch = self._queues.receive(self._dlq_url, wanted)
                if not batch:
                    break
                for message in batch:
                    if message.message_id in seen:
                        held.append(message.receipt_handle)
                        continue
                    seen.add(message.message_id)
                    entry, reason = self._judge(message, request)
                    if reason:
                        report.skipped.append(entry.model_copy(update={"reason": reason}))
                        held.append(message.receipt_handle)
                    elif request.dry_run:
                        report.would_move.append(entry)
                        held.append(message.receipt_handle)
                    else:
                        self._queues.send(self._queue_url, message.body)
                        self._queues.delete(self._dlq_url, message.receipt_handle)
                        report.moved.append(entry)
        finally:
            for receipt_handle in held:
                self._queues.release(self._dlq_url, receipt_handle)
        logger.info(
            "redrive finished",
            extra={"moved": len(report.moved), "would_move": len(report.would_move), "skipped": len(report.skipped)},
        )
        return report

    def _judge(self, message: QueueMessage, request: RedriveRequest) -> tuple[MessageEntry, str]:
        """The message's entry, and why it stays in the DLQ ("" = it moves)."""
        entry = MessageEntry(message_id=message.message_id)
        age_seconds = max(0.0, self._clock() - message.sent_timestamp_ms / 1000)
        if request.older_than_seconds is not None and age_seconds < request.older_than_seconds:
            return entry, f"filter: sent {age_seconds:.0f}s ago, not older than {request.older_than_seconds}s"
        if request.newer_than_seconds is not None and age_seconds > request.newer_than_seconds:
            return entry, f"filter: sent {age_seconds:.0f}s ago, not newer than {request.newer_than_seconds}s"
        try:
            document_ids = sorted({address_of(u.key, u.bucket).document_id for u in parse_queue_message(message.body)})
        except PoisonMessageError as exc:
            if request.include_unparseable and not (request.document_id or request.error_codes):
                return entry, ""
            return entry, f"unparseable: {exc}"
        entry.document_ids = document_ids
        if request.document_id and request.document_id not in document_ids:
            return entry, "filter: other document"
        if request.error_codes:
            codes = {self._error_code_of(document_id) for document_id in document_ids}
            if not codes & {code.value for code in request.error_codes}:
                shown = ", ".join(sorted(code or "none" for code in codes)) or "none"
                return entry, f"filter: error code {shown} not in {', '.join(c.value for c in request.error_codes)}"
        return entry, ""

    def _error_code_of(self, document_id: str) -> str | None:
        record = self._documents.get(document_id)
        return record.error_code.value if record and record.error_code else None

    # -- replay ----------------------------------------------------------------------------
    def replay(self, request: ReplayRequest) -> ReplayReport:
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
