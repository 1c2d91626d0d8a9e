"""What the operator tools read through their ports: object versions, indexed versions,
executions, queue messages and replays. Imports only ``rag_ingest.core``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel


@dataclass(frozen=True)
class StoredObjectVersion:
    """One entry of a versioned bucket's listing (S3 ListObjectVersions): a version or a delete marker."""

    key: str
    version_id: str
    etag: str | None
    is_latest: bool
    is_delete_marker: bool
    last_modified: str  # ISO 8601, UTC


@dataclass(frozen=True)
class IndexedVersion:
    """How many chunks the index holds for one (tenant, document, version hash)."""

    tenant_id: str
    document_id: str
    version_hash: str
    chunks: int


@dataclass(frozen=True)
class SourceItemLink:
    """A source's item and the document its state says it became."""

    tenant_id: str
    source_id: str
    key: str
    document_id: str


class ExecutionState(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABORTED = "ABORTED"
    PENDING_REDRIVE = "PENDING_REDRIVE"
    # Never started, or past Step Functions' 90-day retention of closed executions.
    MISSING = "MISSING"


@dataclass(frozen=True)
class QueueMessage:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    sent_timestamp_ms: int


class ReplayedDocument(BaseModel):
    document_id: str
    replay: int
    execution_name: str
    execution_arn: str
    previous_error_code: str | None = None
