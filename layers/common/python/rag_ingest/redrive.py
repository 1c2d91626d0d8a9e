"""Replay dead-lettered upload events into the ingest queue, safely.

Send-then-delete: a crash between the two leaves a copy in both queues, never in neither, and
the intake's idempotency (per object version) absorbs the duplicate.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.adapters.queues import QueueMessage, Queues
from rag_ingest.intake import PoisonMessageError, address_of, parse_queue_message

logger = logging.getLogger(__name__)


class RedriveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: bool = False
    max_messages: int = Field(default=100, ge=1, le=10_000)
    document_id: str | None = None  # only messages about this document


class SkippedMessage(BaseModel):
    message_id: str
    reason: str


class RedriveReport(BaseModel):
    dry_run: bool
    moved: list[str] = Field(default_factory=list)
    would_move: list[str] = Field(default_factory=list)
    skipped: list[SkippedMessage] = Field(default_factory=list)


def _documents_in(message: QueueMessage) -> set[str]:
    try:
        return {address_of(u.key, u.bucket).document_id for u in parse_queue_message(message.body)}
    except PoisonMessageError:
        return set()


def redrive(queues: Queues, *, dlq_url: str, queue_url: str, request: RedriveRequest) -> RedriveReport:
    report = RedriveReport(dry_run=request.dry_run)
    seen: set[str] = set()
    held: list[str] = []  # receipt handles kept invisible until the end, so one pass sees each message once
    while len(report.moved) + len(report.would_move) < request.max_messages:
        wanted = request.max_messages - len(report.moved) - len(report.would_move)
        batch = queues.receive(dlq_url, wanted)
        if not batch:
            break
        for message in batch:
            if message.message_id in seen:
                held.append(message.receipt_handle)
                continue
            seen.add(message.message_id)
            if request.document_id and request.document_id not in _documents_in(message):
                report.skipped.append(SkippedMessage(message_id=message.message_id, reason="filter: other document"))
                held.append(message.receipt_handle)
            elif request.dry_run:
                report.would_move.append(message.message_id)
                held.append(message.receipt_handle)
            else:
                queues.send(queue_url, message.body)
                queues.delete(dlq_url, message.receipt_handle)
                report.moved.append(message.message_id)
    for receipt_handle in held:
        queues.release(dlq_url, receipt_handle)
    logger.info(
        "redrive finished",
        extra={"moved": len(report.moved), "would_move": len(report.would_move), "skipped": len(report.skipped)},
    )
    return report
