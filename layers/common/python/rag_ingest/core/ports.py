"""The ports: what the domain needs from the world outside it, as Protocols.

Domain modules depend on these and on the records of ``rag_ingest.core`` only; ``rag_ingest.adapters``
implements them over boto3 and opensearch-py, ``rag_ingest.wiring`` chooses the adapters, and
``tests/support/fakes.py`` implements them in memory. The documents table is one adapter seen by
each caller through a port listing only what it does; every transition is a compare-and-set (a
lost race raises ``StaleWriteError``). Narrow ports also keep the grants true:
tests/infra/test_infra_least_privilege.py credits a function with the actions its methods reach.
Telemetry and Embedder are ports kept next to their implementations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from rag_ingest.core.access import DocumentAccess
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.job import CacheKey, ObjectRef, Stage
from rag_ingest.core.operations import (
    ExecutionState,
    IndexedVersion,
    QueueMessage,
    ReplayedDocument,
    SourceItemLink,
    StoredObjectVersion,
)
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentRecord, DocumentStamp, DocumentStatus, QueueResult


# -- the documents table, by caller -------------------------------------------------------------
class DocumentReader(Protocol):
    def get(self, document_id: str) -> DocumentRecord | None:
        """A consistent read of the record; None when there is none."""
        ...


class PipelineDocuments(DocumentReader, Protocol):
    """The workflow's transitions: each one only for the version in flight (else ``StaleWriteError``)."""

    def start_stage(self, document_id: str, version: str, stage: Stage) -> None: ...

    def record_stage(
        self, document_id: str, version: str, stage: Stage, elapsed_ms: int, *, accumulate: bool = False, **fields: Any
    ) -> None: ...

    def confirm_current(self, document_id: str, version: str) -> None: ...

    def record_parsed_range(self, document_id: str, version: str, first_page: int, pages: int) -> None:
        """Progress of the Parse Map: a retried range counts once."""
        ...

    def record_embed_plan(self, document_id: str, version: str, total_chunks: int) -> None: ...

    def record_embedded_part(
        self, document_id: str, version: str, task: int, chunks: int, *, cache_hits: int = 0, cache_misses: int = 0
    ) -> None: ...

    def record_capacity_wait(self, document_id: str, version: str, until: str) -> None:
        """An Embed task gave way to the shared embedding quota, booked until ``until`` (ISO 8601):
        the document is waiting for capacity, not stuck. Cleared when an Embed task starts or ends."""
        ...

    def find_ready_copy(self, *, tenant_id: str, content_sha256: str, document_id: str) -> str | None:
        """The tenant's other READY document with these bytes (never another tenant's), if any."""
        ...

    def mark_ready(self, document_id: str, version: str) -> None: ...

    def mark_failed(self, document_id: str, version: str, code: ErrorCode, detail: str) -> None: ...


class IntakeDocuments(DocumentReader, Protocol):
    """An uploaded version becomes QUEUED (or is explained away), then names its execution; an S3
    sidecar's metadata lands on the record (``update_fields``), a bad one fails the version."""

    def update_fields(self, record: DocumentRecord, fields: Mapping[str, Any]) -> DocumentRecord: ...

    def mark_failed(self, document_id: str, version: str, code: ErrorCode, detail: str) -> None: ...

    def mark_queued(
        self, *, document_id: str, tenant_id: str, ref: ObjectRef, event_time: str, size_bytes: int | None
    ) -> QueueResult: ...

    def set_execution(self, document_id: str, version: str, execution_arn: str) -> None: ...


class ApiDocuments(DocumentReader, Protocol):
    """The API's reads, its listing (the tenant index) and the record an upload starts with."""

    def create_awaiting_upload(
        self,
        *,
        document_id: str,
        tenant_id: str,
        filename: str,
        bucket: str,
        key: str,
        metadata: Mapping[str, Any] | None = None,
        uploaded_by: str | None = None,
        access: DocumentAccess | None = None,
        origin: Mapping[str, str] | None = None,
    ) -> DocumentRecord:
        """``origin``: a source item's source_id, source_uri and change_token (rag_ingest.sources)."""
        ...

    def list_by_tenant(
        self, tenant_id: str, *, limit: int, start_key: Mapping[str, str] | None = None
    ) -> tuple[list[DocumentRecord], dict[str, str] | None]: ...

    def update_fields(self, record: DocumentRecord, fields: Mapping[str, Any]) -> DocumentRecord:
        """PATCH: ``fields`` set and ``revision`` + 1, only while the record is as ``record`` was read
        (tenant, status, version, revision), else ``StaleWriteError``; returns the record as written."""
        ...


class DocumentsByStatus(DocumentReader, Protocol):
    def list_by_status(
        self, status: DocumentStatus, *, updated_before: str | None = None, updated_after: str | None = None
    ) -> Iterator[DocumentRecord]:
        """Least recently updated first, from an eventually consistent index: re-read before acting."""
        ...


class ReplayDocuments(Protocol):
    def requeue_for_replay(self, record: DocumentRecord, *, execution_arn: str) -> DocumentRecord: ...


class ReaperDocuments(DocumentsByStatus, Protocol):
    def mark_stuck(self, record: DocumentRecord, detail: str) -> None: ...

    def mark_expired(self, record: DocumentRecord, detail: str) -> None: ...


class ReconcilerDocuments(DocumentReader, Protocol):
    def scan_records(self, tenant_id: str | None = None) -> Iterator[DocumentRecord]:
        """Every record (of one tenant: its index partition), page by page, DELETED ones included."""
        ...

    def mark_source_missing(self, record: DocumentRecord, detail: str) -> None:
        """READY/FAILED → FAILED(SOURCE_OBJECT_MISSING), if nothing wrote to the record since it was read."""
        ...


class SourceItemLinks(Protocol):
    """The sources' items as the reconciler sees them (rag_ingest.adapters.sources_table)."""

    def links(self, tenant_ids: Iterable[str]) -> Iterator[SourceItemLink]:
        """The items of these tenants' sources that point at a document, skipping sources syncing now."""
        ...

    def unlink(self, link: SourceItemLink) -> None:
        """Forget the item, so the next sync of its source adds it again as a new document."""
        ...


class DeletionDocuments(DocumentReader, Protocol):
    def mark_deleting(self, document_id: str, tenant_id: str) -> DocumentRecord | None: ...

    def mark_deleted(self, document_id: str) -> None: ...


# -- objects (S3) ---------------------------------------------------------------------------------
class StageObjects(Protocol):
    """The uploaded version a job names (pinned; a vanished one is ``OBJECT_NOT_FOUND``) and the
    stages' JSON artifacts (their checkpoints)."""

    def size(self, ref: ObjectRef) -> int: ...

    def read_range(self, ref: ObjectRef, length: int) -> bytes: ...

    def read(self, ref: ObjectRef) -> bytes: ...

    def put_json(self, bucket: str, key: str, payload: Any) -> None: ...

    def get_json(self, bucket: str, key: str) -> Any: ...

    def exists(self, bucket: str, key: str) -> bool: ...


class SidecarObjects(Protocol):
    def read_current(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        """The current version of ``key`` (at most ``max_bytes`` + 1 bytes of it), None when there is none."""
        ...


class ObjectEraser(Protocol):
    def delete_all(self, bucket: str, prefix: str, *, exact_key: str | None = None) -> int:
        """Delete every version under ``prefix`` (only of ``exact_key`` when given); returns how many."""
        ...


class ObjectVersionLister(Protocol):
    def list_versions(self, bucket: str, prefix: str) -> Iterator[StoredObjectVersion]:
        """Every version and delete marker under ``prefix``, page by page, by key (newest first within a key)."""
        ...


class Checkpoints(Protocol):
    """A version's stage artifacts, read back (the reconciler re-indexes from them)."""

    def get_json(self, bucket: str, key: str) -> Any: ...

    def exists(self, bucket: str, key: str) -> bool: ...


class UploadPresigner(Protocol):
    """URLs a browser uses without credentials: the upload's POST and a download's GET."""

    def presign_upload(
        self, *, bucket: str, key: str, content_type: str, max_bytes: int, expires_in: int
    ) -> dict[str, Any]:
        """``{"url", "fields"}`` of a POST that only accepts this key, type and size range."""
        ...

    def presign_download(
        self,
        *,
        bucket: str,
        key: str,
        version: str,
        content_type: str,
        content_disposition: str,
        expires_in: int,
    ) -> str: ...


# -- the embedding cache (rag_ingest.ingest.embedding_cache) ----------------------------------------------
class EmbeddingCache(Protocol):
    """Vectors by what was embedded (``CacheKey``), per tenant. Both calls take many keys at once."""

    def lookup(self, keys: Sequence[CacheKey]) -> dict[CacheKey, list[float]]:
        """The intact entries among ``keys``; a missing, partial or corrupt entry is left out (a miss)."""
        ...

    def store(self, entries: Mapping[CacheKey, Sequence[float]]) -> None:
        """Keep each vector under its key (overwriting): called only with vectors the model returned."""
        ...


# -- the chunk index (OpenSearch), by caller ------------------------------------------------------
class ChunkIndex(Protocol):
    """What Index and Finalize write: chunk ids are per document version, so a replay overwrites."""

    def ensure_index(self) -> None: ...

    def write_chunks(self, stamp: DocumentStamp, chunks: Sequence[Chunk], vectors: Iterable[Sequence[float]]) -> int:
        """Index ``chunks`` with ``vectors`` (one each, in order; read as they are written, so a big
        document's vectors never have to be in memory at once), each carrying ``stamp``: its
        document's metadata and created_at (what filters match), access and uploader (what a
        reader's search matches). Raises ValueError if the counts differ."""
        ...

    def delete_version(self, document_id: str, version: str) -> int: ...

    def delete_other_versions(self, document_id: str, keep_version: str) -> int: ...


class ArtifactReader(Protocol):
    """The stages' JSON artifacts, read back (a PATCH rewrites chunks from them)."""

    def get_json(self, bucket: str, key: str) -> Any: ...

    def exists(self, bucket: str, key: str) -> bool: ...


class ChunkFieldsRefresher(Protocol):
    """Rewrites a READY document's chunks with its record's current fields (metadata), from the Index
    stage's inputs: nothing parsed or embedded again (rag_ingest.ingest.chunk_rewrite.ChunkRewriter)."""

    def check(self, record: DocumentRecord) -> None:
        """Raise ``IndexArtifactsMissingError`` unless ``record``'s version can be rewritten."""
        ...

    def refresh(self, document_id: str) -> int:
        """Chunks rewritten (0: nothing to rewrite: not READY, or superseded meanwhile); raises
        ``IndexArtifactsMissingError`` when the chunks or vectors artifacts are gone."""
        ...


class ChunkEraser(Protocol):
    def delete_document(self, document_id: str) -> int: ...


class IndexAudit(ChunkIndex, Protocol):
    """What the reconciler reads from and repairs in the index."""

    def indexed_versions(self, tenant_id: str | None = None) -> Iterator[IndexedVersion]:
        """Chunks per (tenant, document, version hash), paged (a composite aggregation): never the chunks."""
        ...

    def delete_chunks(self, document_id: str, version_hash: str | None = None, *, from_index: int = 0) -> int:
        """Delete the document's chunks (of one version hash; from chunk ``from_index`` on); returns how many."""
        ...


# -- the workflow, the queues, events -------------------------------------------------------------
class ExecutionStarter(Protocol):
    def execution_arn(self, name: str) -> str: ...

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]:
        """Start the named execution; returns (execution ARN, started now?). A name already used is a no-op."""
        ...


class ExecutionLookup(Protocol):
    def state(self, execution_arn: str | None) -> ExecutionState: ...


class MessageQueues(Protocol):
    def receive(self, queue_url: str, max_messages: int, visibility_timeout: int = 60) -> list[QueueMessage]: ...

    def send(self, queue_url: str, body: str) -> str: ...

    def delete(self, queue_url: str, receipt_handle: str) -> None: ...

    def release(self, queue_url: str, receipt_handle: str) -> None:
        """Make a message we looked at but keep visible again at once."""
        ...


class EventSink(Protocol):
    def publish(self, detail_type: str, detail: dict[str, Any]) -> None: ...


class DocumentReplayer(Protocol):
    """Restarts one document's workflow under a fresh replay name (``replay.Replayer``)."""

    def plan(self, record: DocumentRecord) -> ReplayedDocument: ...

    def replay(self, record: DocumentRecord) -> ReplayedDocument: ...
