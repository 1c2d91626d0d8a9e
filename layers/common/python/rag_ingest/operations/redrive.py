"""Redrive: move dead-lettered upload events from the DLQ back to the ingest queue.

Send-then-delete: a crash between the two leaves a copy in both queues, never in neither, and the
intake's idempotency (per object version) absorbs the duplicate. A second run finds nothing left
to move.

The Redrive function (and ``rag-ingest redrive|replay``) also takes replays of FAILED documents
(rag_ingest.operations.replay): ``parse_operator_request`` reads its payload and ``Recovery`` runs either.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.core.clock import Clock
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.logs import logger
from rag_ingest.core.operations import QueueMessage
from rag_ingest.core.ports import DocumentReader, MessageQueues
from rag_ingest.documents.intake import PoisonMessageError, address_of, parse_queue_message
from rag_ingest.operations.replay import FailedDocumentReplay, ReplayReport, ReplayRequest


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


class DeadLetterRedrive:
    def __init__(
        self,
        *,
        queues: MessageQueues,
        documents: DocumentReader,
        dlq_url: str,
        queue_url: str,
        clock: Clock = time.time,
    ) -> None:
        self._queues = queues
        self._documents = documents
        self._dlq_url = dlq_url
        self._queue_url = queue_url
        self._clock = clock

    def run(self, request: RedriveRequest) -> RedriveReport:
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
                    entry, reason = self._decide(message, request)
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

    def _decide(self, message: QueueMessage, request: RedriveRequest) -> tuple[MessageEntry, str]:
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


# -- the Redrive function's payload: a redrive, or a replay --------------------------------------
OperatorRequest = Annotated[RedriveRequest | ReplayRequest, Field(discriminator="action")]


class _OperatorPayload(BaseModel):
    request: OperatorRequest


def parse_operator_request(event: dict[str, object] | None) -> RedriveRequest | ReplayRequest:
    """The Redrive function's payload: ``{"action": "redrive"|"replay", ...}``; no action = redrive."""
    payload = dict(event or {})
    payload.setdefault("action", "redrive")
    return _OperatorPayload.model_validate({"request": payload}).request


class Recovery:
    """What the Redrive function and ``rag-ingest redrive|replay`` run."""

    def __init__(self, redrive: DeadLetterRedrive, replay: FailedDocumentReplay) -> None:
        self._redrive = redrive
        self._replay = replay

    def run(self, request: RedriveRequest | ReplayRequest) -> RedriveReport | ReplayReport:
        if isinstance(request, ReplayRequest):
            return self.replay(request)
        return self.redrive(request)

    def redrive(self, request: RedriveRequest) -> RedriveReport:
        return self._redrive.run(request)

    def replay(self, request: ReplayRequest) -> ReplayReport:
        return self._replay.run(request)
