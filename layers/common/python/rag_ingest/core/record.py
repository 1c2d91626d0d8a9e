"""A document's record: its status and what the documents table holds about it.

The table is the source of truth for status; every write to it is a compare-and-set
(``rag_ingest.adapters.documents_table``). Imports only ``rag_ingest.core``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_ingest.core.access import OPEN_ACCESS, DocumentAccess
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.job import Lane, ObjectRef, Stage
from rag_ingest.core.parsed import DocumentFormat, FigureCounts


class DocumentStatus(StrEnum):
    AWAITING_UPLOAD = "AWAITING_UPLOAD"
    # The upload URL expired (plus a grace period) and no file came: set by the reaper.
    EXPIRED = "EXPIRED"
    QUEUED = "QUEUED"
    PROCESSING = "PROCESSING"
    READY = "READY"
    FAILED = "FAILED"
    DELETING = "DELETING"
    DELETED = "DELETED"


# Without bucket versioning a document version is its ETag, marked so it is never sent as a VersionId.
ETAG_VERSION_PREFIX = "etag:"


class Progress(BaseModel):
    done: int = 0
    total: int = 0


class CacheCounts(BaseModel):
    """The Embed stage's embedding-cache lookups for a document version: chunks found, chunks embedded."""

    hits: int = 0
    misses: int = 0


def embed_cache_part(task: int, hits: int, misses: int) -> str:
    """One Embed task's cache counts as stored in the record's set (a retried task adds the same element)."""
    return f"{task}:{hits}:{misses}"


def content_key(tenant_id: str, content_sha256: str) -> str:
    """The content index's partition: a tenant's uploads with the same bytes, never another tenant's."""
    return f"{tenant_id}#{content_sha256}"


class DocumentRecord(BaseModel):
    """A document's state as the documents table holds it: the source of truth for its status."""

    model_config = ConfigDict(extra="ignore")

    document_id: str
    tenant_id: str
    status: DocumentStatus
    filename: str | None = None
    bucket: str | None = None
    key: str | None = None
    version: str | None = None
    stage: Stage | None = None
    # Embed tasks done, as "task:chunks" (a set, so a retried task is counted once), of embed_total.
    embedded_parts: set[str] = Field(default_factory=set)
    embed_total: int | None = None
    # Set when an Embed task gave way to the shared embedding quota (ISO 8601: when the quota is
    # booked until); removed when an Embed task starts or finishes (rag_ingest.embeddings.capacity).
    capacity_wait_until: str | None = None
    # Parse ranges done, as "first_page:pages" (a set, so a retried range is counted once), of page_count.
    parsed_parts: set[str] = Field(default_factory=set)
    # Embed tasks' cache counts as "task:hits:misses" (a set, like embedded_parts). Batches a retry
    # resumed from their checkpoints are in neither count: they were looked up by the attempt that failed.
    embed_cache_parts: set[str] = Field(default_factory=set)
    # sha256 of this version's bytes, and the tenant's earlier READY document with the same bytes.
    content_sha256: str | None = None
    duplicate_of: str | None = None
    attempts: dict[str, int] = Field(default_factory=dict)
    error_code: ErrorCode | None = None
    error_detail: str | None = None
    page_count: int | None = None
    failed_pages: list[int] = Field(default_factory=list)
    # Pages read by OCR (they had no text layer); set by Parse.
    ocr_pages: int | None = None
    # Figures indexed and skipped as decoration (rag_ingest.parsing.figures); set by Chunk.
    figures: FigureCounts | None = None
    # The lane the workflow runs the document in; set by Parse once the page count is known.
    lane: Lane | None = None
    chunk_count: int | None = None
    # Chunks the Index stage wrote for this version (the reconciler compares the index with it).
    indexed_count: int | None = None
    size_bytes: int | None = None
    # What the bytes are (set by Validate; None before it ran).
    document_format: DocumentFormat | None = None
    timings_ms: dict[str, int] = Field(default_factory=dict)
    execution_arn: str | None = None
    # Deliberate re-runs so far (replays and the reaper's re-drives); the next is named replay=replays + 1.
    replays: int = 0
    # The user's metadata (rag_ingest.core.metadata), set at upload; later versions keep it
    # (mark_queued leaves it as it is). Numbers come back from DynamoDB as Decimal: see below.
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Who uploaded it through the API (the token's sub; None for an object put straight into the
    # bucket) and who else reads it (rag_ingest.core.access); later versions keep both, as metadata.
    uploaded_by: str | None = None
    access: DocumentAccess = OPEN_ACCESS
    # A source's item (rag_ingest.sources): the source, where the item lives, and the change token
    # of the version this document holds. None for an upload.
    source_id: str | None = None
    source_uri: str | None = None
    change_token: str | None = None
    # +1 on every PATCH /documents/{id} (compare-and-set on it; the API's ETag); records written
    # before it existed read as 1.
    revision: int = Field(default=1, ge=1)
    created_at: str
    updated_at: str

    @field_validator("revision", mode="before")
    @classmethod
    def _revision(cls, value: Any) -> Any:
        return 1 if value is None else int(value) if isinstance(value, Decimal) else value

    @field_validator("access", mode="before")
    @classmethod
    def _stored_access(cls, value: Any) -> Any:
        """A missing attribute (older records, open documents) is open access."""
        return OPEN_ACCESS if value is None else value

    @field_validator("metadata", mode="before")
    @classmethod
    def _plain_numbers(cls, value: Any) -> Any:
        """DynamoDB's numbers (Decimal) as int or float again; a missing attribute (older records) as {}."""
        if value is None:
            return {}
        if isinstance(value, dict):
            return {key: _plain(item) for key, item in value.items()}
        return value

    @property
    def filter_fields(self) -> dict[str, Any]:
        """What a document-listing filter matches (rag_ingest.core.filters.matches)."""
        return {
            "document_id": self.document_id,
            "filename": self.filename,
            "created_at": self.created_at,
            "content_type": (self.document_format or DocumentFormat.PDF).content_type,
            "metadata": self.metadata,
        }

    @property
    def progress(self) -> Progress | None:
        if self.embed_total is None:
            return None
        done = sum(int(part.partition(":")[2] or 0) for part in self.embedded_parts)
        return Progress(done=done, total=self.embed_total)

    @property
    def pages_parsed(self) -> int | None:
        """Pages the Parse Map has parsed so far (of ``page_count``); None before it started."""
        if not self.parsed_parts:
            return None
        return sum(int(part.partition(":")[2] or 0) for part in self.parsed_parts)

    @property
    def embedding_cache(self) -> CacheCounts | None:
        if not self.embed_cache_parts:
            return None
        counts = [part.split(":") for part in self.embed_cache_parts]
        return CacheCounts(hits=sum(int(c[1]) for c in counts), misses=sum(int(c[2]) for c in counts))


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class QueueOutcome(StrEnum):
    QUEUED = "QUEUED"  # this version is now the document's current version
    RESUME = "RESUME"  # already QUEUED for this version: (re)start its workflow, a no-op if it runs
    DUPLICATE = "DUPLICATE"  # this version is already processing or done
    REJECTED = "REJECTED"  # deleted, another tenant's, or older than the current version


@dataclass(frozen=True)
class QueueResult:
    outcome: QueueOutcome
    record: DocumentRecord | None
    reason: str = ""

    @classmethod
    def not_queued(cls, current: DocumentRecord | None, tenant_id: str, ref: ObjectRef) -> QueueResult:
        """Why a version was not queued, read from the record that refused the conditional write
        (every documents store, real or fake, explains a refusal the same way)."""
        if current is None:  # deleted in between: nothing to queue
            return cls(QueueOutcome.REJECTED, None, "document vanished during the update")
        if current.tenant_id != tenant_id:
            return cls(QueueOutcome.REJECTED, current, "object key names another tenant")
        if current.status in (DocumentStatus.DELETING, DocumentStatus.DELETED):
            return cls(QueueOutcome.REJECTED, current, f"document is {current.status.value}")
        if current.version == ref.version:
            if current.status == DocumentStatus.QUEUED:
                return cls(QueueOutcome.RESUME, current)
            return cls(QueueOutcome.DUPLICATE, current, f"version already {current.status.value}")
        return cls(QueueOutcome.REJECTED, current, "a newer version is already current")


@dataclass(frozen=True)
class DocumentStamp:
    """What every chunk of one document version carries from its record: whose document and which
    version, and the fields searches match (filename, metadata, created_at, access, uploader).
    ``ChunkIndex.write_chunks`` takes one, built once per write from the record."""

    tenant_id: str
    document_id: str
    version: str
    filename: str | None = None
    metadata: Mapping[str, Any] | None = None
    created_at: str | None = None
    access: DocumentAccess | None = None
    uploaded_by: str | None = None
    source_uri: str | None = None

    @classmethod
    def of(cls, record: DocumentRecord) -> DocumentStamp:
        """The stamp of the record's current version (a PATCH's rewrite, the reconciler's repair)."""
        if record.version is None:
            raise ValueError(f"document {record.document_id} has no version to stamp")
        return cls.for_version(record.tenant_id, record.document_id, record.version, record)

    @classmethod
    def for_version(
        cls, tenant_id: str, document_id: str, version: str, record: DocumentRecord | None
    ) -> DocumentStamp:
        """``version``'s stamp with ``record``'s fields (none without a record): the Index stage's
        run stamps its own version even when the record has moved on (its chunks are then withdrawn)."""
        if record is None:
            return cls(tenant_id, document_id, version)
        return cls(
            tenant_id,
            document_id,
            version,
            filename=record.filename,
            metadata=record.metadata,
            created_at=record.created_at,
            access=record.access,
            uploaded_by=record.uploaded_by,
            source_uri=record.source_uri,
        )
