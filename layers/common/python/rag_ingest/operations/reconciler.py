"""The reconciler: proves the documents table, the uploaded objects, the index and the sources'
items agree, per tenant and document, and repairs what is safe to repair.

Paged passes, none holding more than one entry per document: the records (stuck ones reported),
the objects (an object with no record reported; a READY or FAILED record whose upload is gone
failed ``SOURCE_OBJECT_MISSING``), the index (orphan and stale chunks deleted, a wrong count
re-indexed or replayed), the sources' items (one whose document is gone forgotten, so the next sync
adds it). Every finding is re-checked on a consistent read, every repair is idempotent and logged.
What each finding means: docs/operations.md, "The reconciler".
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from itertools import groupby

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.core.clock import Clock, iso_before
from rag_ingest.core.errors import ErrorCode, StaleWriteError
from rag_ingest.core.ids import document_id_for_object, version_hash
from rag_ingest.core.logs import logger
from rag_ingest.core.operations import IndexedVersion, StoredObjectVersion
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.ports import (
    Checkpoints,
    DocumentReplayer,
    IndexAudit,
    ObjectVersionLister,
    ReconcilerDocuments,
    SourceItemLinks,
)
from rag_ingest.core.record import ETAG_VERSION_PREFIX, DocumentRecord, DocumentStamp, DocumentStatus
from rag_ingest.core.s3_keys import (
    CHUNKS_ARTIFACT,
    EMBEDDINGS_FOLDER,
    KeyOutsideUploadsError,
    NoTenantFolderError,
    artifact_key,
    as_prefix,
    embedding_batch_key,
    filename_of,
    parse_upload_key,
)


class DriftKind(StrEnum):
    """What disagrees; the ``Kind`` dimension of the ``ReconcilerDrift`` metric."""

    ORPHAN_CHUNKS = "OrphanChunks"
    STALE_CHUNKS = "StaleChunks"
    CHUNK_COUNT_MISMATCH = "ChunkCountMismatch"
    OBJECT_WITHOUT_RECORD = "ObjectWithoutRecord"
    RECORD_WITHOUT_OBJECT = "RecordWithoutObject"
    STUCK = "Stuck"
    SOURCE_ITEM_WITHOUT_DOCUMENT = "SourceItemWithoutDocument"


#: Statuses whose record names an uploaded version that must still be in the bucket.
_HOLDS_OBJECT = frozenset(
    {DocumentStatus.QUEUED, DocumentStatus.PROCESSING, DocumentStatus.READY, DocumentStatus.FAILED}
)
_IN_FLIGHT = frozenset({DocumentStatus.QUEUED, DocumentStatus.PROCESSING})
_GONE = frozenset({DocumentStatus.DELETING, DocumentStatus.DELETED})
#: A FAILED record that already says its object is gone.
_OBJECT_GONE_CODES = frozenset({ErrorCode.OBJECT_NOT_FOUND, ErrorCode.SOURCE_OBJECT_MISSING})


class ReconcilerSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    bucket: str = Field(min_length=3)
    raw_prefix: str = "raw/"
    artifacts_prefix: str = "artifacts/"
    # The reaper's deadlines: a document past them is reported as stuck (the reaper acts on it).
    stuck_after_seconds: int = Field(ge=60)
    expire_uploads_after_seconds: int | None = Field(default=None, ge=60)
    # An object younger than this may still be on its way through intake: not yet drift.
    object_grace_seconds: int = Field(default=900, ge=0)


class ReconcileRequest(BaseModel):
    """A manual run may repair, or look at one tenant (the schedule sends none: the settings apply)."""

    model_config = ConfigDict(extra="forbid")

    repair: bool | None = None  # None: the function's configured default
    tenant_id: str | None = Field(default=None, min_length=1, max_length=128)
    object_grace_seconds: int | None = Field(default=None, ge=0)


class Finding(BaseModel):
    kind: DriftKind
    tenant_id: str | None
    document_id: str | None
    # The record's version when it has one; for chunks the index knows only the version hash.
    version: str | None = None
    version_hash: str | None = None
    key: str | None = None  # an object's key
    chunks: int | None = None  # chunks in the index concerned
    reason: str
    repairable: bool  # whether --repair fixes it
    repaired: str | None = None  # what the repair did (None: not repaired)
    error: str | None = None  # a repair that failed


class ReconcileReport(BaseModel):
    repair: bool
    tenant_id: str | None
    records: int = 0
    object_keys: int = 0
    indexed_versions: int = 0
    chunks: int = 0
    source_items: int = 0
    findings: list[Finding] = Field(default_factory=list)
    elapsed_ms: int = 0

    def counts(self) -> dict[DriftKind, int]:
        counts = dict.fromkeys(DriftKind, 0)
        for finding in self.findings:
            counts[finding.kind] += 1
        return counts

    @property
    def drift(self) -> int:
        return len(self.findings)

    @property
    def unrepaired(self) -> int:
        """Findings a repair run was meant to fix but did not (failed or refused)."""
        return sum(1 for f in self.findings if f.repairable and self.repair and f.repaired is None)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


class Reconciler:
    def __init__(
        self,
        *,
        documents: ReconcilerDocuments,
        objects: ObjectVersionLister,
        checkpoints: Checkpoints,
        index: IndexAudit,
        replayer: DocumentReplayer,
        settings: ReconcilerSettings,
        repair_by_default: bool = False,
        clock: Clock = time.time,
        source_items: SourceItemLinks | None = None,
    ) -> None:
        self._documents = documents
        self._objects = objects
        self._checkpoints = checkpoints
        self._index = index
        self._replayer = replayer
        self._settings = settings
        self._repair_by_default = repair_by_default
        self._clock = clock
        self._source_items = source_items

    def reconcile(self, request: ReconcileRequest | None = None) -> ReconcileReport:
        request = request or ReconcileRequest()
        started = time.monotonic()
        repair = self._repair_by_default if request.repair is None else request.repair
        grace = (
            self._settings.object_grace_seconds
            if request.object_grace_seconds is None
            else request.object_grace_seconds
        )
        report = ReconcileReport(repair=repair, tenant_id=request.tenant_id)
        records = {record.document_id: record for record in self._documents.scan_records(request.tenant_id)}
        report.records = len(records)
        self._stuck(records, report)
        self._objects_pass(records, request.tenant_id, grace, repair, report)
        self._index_pass(records, request.tenant_id, repair, report)
        self._sources_pass(records, request.tenant_id, repair, report)
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        logger.info(
            "reconciler finished",
            extra={
                "repair": repair,
                "tenant_id": request.tenant_id,
                "records": report.records,
                "object_keys": report.object_keys,
                "indexed_versions": report.indexed_versions,
                "chunks": report.chunks,
                "source_items": report.source_items,
                "drift": {kind.value: count for kind, count in report.counts().items() if count},
                "elapsed_ms": report.elapsed_ms,
            },
        )
        return report

    # -- 1. records past the reaper's deadlines (reported only) -----------------------------------------
    def _stuck(self, records: dict[str, DocumentRecord], report: ReconcileReport) -> None:
        deadline = iso_before(self._clock, self._settings.stuck_after_seconds)
        expire = self._settings.expire_uploads_after_seconds
        upload_deadline = iso_before(self._clock, expire) if expire is not None else None
        for record in records.values():
            late = (record.status in _IN_FLIGHT and record.updated_at < deadline) or (
                upload_deadline is not None
                and record.status == DocumentStatus.AWAITING_UPLOAD
                and record.updated_at < upload_deadline
            )
            if not late:
                continue
            report.findings.append(
                Finding(
                    kind=DriftKind.STUCK,
                    tenant_id=record.tenant_id,
                    document_id=record.document_id,
                    version=record.version,
                    reason=f"{record.status.value} since {record.updated_at}, past the reaper's deadline: "
                    "the reaper restarts or fails it (rag-ingest reap)",
                    repairable=False,
                )
            )

    # -- 2. the uploaded objects --------------------------------------------------------------------
    def _objects_pass(
        self,
        records: dict[str, DocumentRecord],
        tenant_id: str | None,
        grace: int,
        repair: bool,
        report: ReconcileReport,
    ) -> None:
        settings = self._settings
        prefix = as_prefix(settings.raw_prefix) + (f"{tenant_id}/" if tenant_id else "")
        young = _iso(self._clock() - grace)
        present: set[str] = set()  # documents whose record's version was found
        listing = self._objects.list_versions(settings.bucket, prefix)
        for key, entries in groupby(listing, key=lambda entry: entry.key):
            versions = list(entries)  # one key's versions: a handful
            report.object_keys += 1
            document_id, tenant = self._owner(key)
            record = records.get(document_id) if document_id else None
            if (
                record is not None
                and record.key == key
                and record.version
                and any(_is_record_version(version, record.version) for version in versions)
            ):
                present.add(record.document_id)
            latest = next((v for v in versions if v.is_latest), versions[0])
            if latest.is_delete_marker or latest.last_modified > young:
                continue
            if record is None or record.key != key:
                self._object_without_record(key, document_id, tenant, latest, records.get(document_id or ""), report)
        for record in records.values():
            if record.document_id in present or not self._should_hold_object(record, prefix):
                continue
            self._record_without_object(record, repair, report, records)

    def _owner(self, key: str) -> tuple[str | None, str | None]:
        try:
            parsed = parse_upload_key(key, self._settings.raw_prefix)
        except (KeyOutsideUploadsError, NoTenantFolderError):
            return None, None
        return parsed.document_id or document_id_for_object(self._settings.bucket, key), parsed.tenant_id

    def _object_without_record(
        self,
        key: str,
        document_id: str | None,
        tenant: str | None,
        latest: StoredObjectVersion,
        other: DocumentRecord | None,
        report: ReconcileReport,
    ) -> None:
        if document_id is None:
            reason = "the key names no tenant folder: intake refuses it (INVALID_OBJECT_KEY)"
        elif other is not None:
            reason = f"its document's record names another key ({other.key})"
        else:
            # A consistent read: the scan may predate a record created since.
            if self._documents.get(document_id) is not None:
                return
            reason = (
                f"no document record (uploaded {latest.last_modified}); re-put the object or redrive its "
                "dead letter to ingest it through intake"
            )
        report.findings.append(
            Finding(
                kind=DriftKind.OBJECT_WITHOUT_RECORD,
                tenant_id=tenant,
                document_id=document_id,
                version=latest.version_id,
                key=key,
                reason=reason,
                repairable=False,
            )
        )

    def _should_hold_object(self, record: DocumentRecord, prefix: str) -> bool:
        if record.status not in _HOLDS_OBJECT or not (record.version and record.key):
            return False
        if record.bucket not in (None, self._settings.bucket) or not record.key.startswith(prefix):
            return False
        return not (record.status == DocumentStatus.FAILED and record.error_code in _OBJECT_GONE_CODES)

    def _record_without_object(
        self, record: DocumentRecord, repair: bool, report: ReconcileReport, records: dict[str, DocumentRecord]
    ) -> None:
        current = self._documents.get(record.document_id)
        if current is None or current.version != record.version or current.key != record.key:
            return  # moved on since the scan
        if current.status not in _HOLDS_OBJECT or self._version_exists(current):
            return
        in_flight = current.status in _IN_FLIGHT
        finding = Finding(
            kind=DriftKind.RECORD_WITHOUT_OBJECT,
            tenant_id=current.tenant_id,
            document_id=current.document_id,
            version=current.version,
            key=current.key,
            reason=f"{current.status.value}, but s3://{current.bucket}/{current.key} version {current.version} is gone"
            + (": its workflow fails it (OBJECT_NOT_FOUND)" if in_flight else ""),
            repairable=not in_flight,
        )
        report.findings.append(finding)
        if not repair or in_flight:
            return
        detail = f"s3://{current.bucket}/{current.key} version {current.version} was deleted outside the API"
        try:
            self._documents.mark_source_missing(current, detail)
        except StaleWriteError:
            finding.error = "the record changed while reconciling"
            return
        logger.warning("record marked SOURCE_OBJECT_MISSING", extra={"document_id": current.document_id})
        finding.repaired = f"marked FAILED ({ErrorCode.SOURCE_OBJECT_MISSING.value})"
        records[current.document_id] = current.model_copy(
            update={"status": DocumentStatus.FAILED, "error_code": ErrorCode.SOURCE_OBJECT_MISSING}
        )

    def _version_exists(self, record: DocumentRecord) -> bool:
        assert record.key is not None and record.version is not None
        listing = self._objects.list_versions(self._settings.bucket, record.key)
        return any(v.key == record.key and _is_record_version(v, record.version) for v in listing)

    # -- 3. the index ------------------------------------------------------------------------------------
    def _index_pass(
        self, records: dict[str, DocumentRecord], tenant_id: str | None, repair: bool, report: ReconcileReport
    ) -> None:
        counted: set[str] = set()  # READY documents whose current version the index holds
        for indexed in self._index.indexed_versions(tenant_id):
            report.indexed_versions += 1
            report.chunks += indexed.chunks
            record = records.get(indexed.document_id)
            if (
                record is not None
                and record.status == DocumentStatus.READY
                and record.version
                and version_hash(record.version) == indexed.version_hash
            ):
                counted.add(record.document_id)
                self._check_count(record, indexed.chunks, repair, report)
                continue
            self._check_chunks(indexed, record, repair, report)
        for record in records.values():
            if record.status == DocumentStatus.READY and record.document_id not in counted:
                self._check_count(record, 0, repair, report)

    def _stale_reason(self, indexed: IndexedVersion, record: DocumentRecord | None) -> tuple[DriftKind, str] | None:
        if record is None:
            return DriftKind.ORPHAN_CHUNKS, "no document record"
        if record.status in _GONE:
            return DriftKind.STALE_CHUNKS, f"the document is {record.status.value}"
        if record.status == DocumentStatus.FAILED and record.error_code == ErrorCode.SOURCE_OBJECT_MISSING:
            return DriftKind.STALE_CHUNKS, "the document's uploaded file is gone (SOURCE_OBJECT_MISSING)"
        if (
            record.status == DocumentStatus.READY
            and record.version
            and version_hash(record.version) != indexed.version_hash
        ):
            return DriftKind.STALE_CHUNKS, f"a superseded version: the record's current version is {record.version}"
        # In flight (Index writes before READY; Finalize removes older versions), or FAILED (a replay
        # may still make it READY): the workflow's, not drift.
        return None

    def _check_chunks(
        self, indexed: IndexedVersion, record: DocumentRecord | None, repair: bool, report: ReconcileReport
    ) -> None:
        if self._stale_reason(indexed, record) is None:
            return
        current = self._documents.get(indexed.document_id)  # a consistent read: the scan may be stale
        verdict = self._stale_reason(indexed, current)
        if verdict is None:
            return
        kind, reason = verdict
        finding = Finding(
            kind=kind,
            tenant_id=indexed.tenant_id,
            document_id=indexed.document_id,
            version=current.version
            if current and current.version and version_hash(current.version) == indexed.version_hash
            else None,
            version_hash=indexed.version_hash,
            chunks=indexed.chunks,
            reason=reason,
            repairable=True,
        )
        report.findings.append(finding)
        if not repair:
            return
        try:
            deleted = self._index.delete_chunks(indexed.document_id, indexed.version_hash)
        except Exception as exc:  # one document's trouble must not stop the others
            logger.exception("reconciler could not delete chunks", extra={"document_id": indexed.document_id})
            finding.error = f"{type(exc).__name__}: {exc}"
            return
        logger.warning(
            "reconciler deleted chunks",
            extra={
                "document_id": indexed.document_id,
                "version_hash": indexed.version_hash,
                "deleted": deleted,
                "kind": kind.value,
            },
        )
        finding.repaired = f"deleted {deleted} chunks"

    def _check_count(self, record: DocumentRecord, found: int, repair: bool, report: ReconcileReport) -> None:
        expected = record.indexed_count if record.indexed_count is not None else record.chunk_count
        if expected is None or expected == found:
            return
        current = self._documents.get(record.document_id)
        if current is None or current.status != DocumentStatus.READY or current.version != record.version:
            return  # moved on since the scan
        assert current.version is not None
        finding = Finding(
            kind=DriftKind.CHUNK_COUNT_MISMATCH,
            tenant_id=current.tenant_id,
            document_id=current.document_id,
            version=current.version,
            version_hash=version_hash(current.version),
            chunks=found,
            reason=f"READY with {expected} chunks recorded, {found} in the index",
            repairable=True,
        )
        report.findings.append(finding)
        if repair:
            self._reindex(current, expected, finding)

    def _reindex(self, record: DocumentRecord, expected: int, finding: Finding) -> None:
        assert record.version is not None
        try:
            chunks = self._checkpointed_chunks(record)
            if chunks is not None and len(chunks) == expected:
                vectors = self._checkpointed_vectors(record, len(chunks))
                written = self._index.write_chunks(DocumentStamp.of(record), chunks, vectors)
                extra = self._index.delete_chunks(record.document_id, version_hash(record.version), from_index=expected)
                finding.repaired = f"re-indexed {written} chunks from the checkpoints" + (
                    f", deleted {extra} beyond them" if extra else ""
                )
            else:
                replayed = self._replayer.replay(record)
                finding.repaired = f"replayed (no usable checkpoints): {replayed.execution_name}"
        except StaleWriteError:
            finding.error = "the record changed while reconciling"
            return
        except Exception as exc:  # one document's trouble must not stop the others
            logger.exception("reconciler could not re-index", extra={"document_id": record.document_id})
            finding.error = f"{type(exc).__name__}: {exc}"
            return
        logger.warning(
            "reconciler re-indexed a document", extra={"document_id": record.document_id, "how": finding.repaired}
        )

    def _artifact(self, record: DocumentRecord, name: str) -> str:
        assert record.version is not None
        return artifact_key(record.document_id, record.version, name, self._settings.artifacts_prefix)

    def _checkpointed_chunks(self, record: DocumentRecord) -> list[Chunk] | None:
        """The chunks artifact, if it and every embedding batch after it are there."""
        key = self._artifact(record, CHUNKS_ARTIFACT)
        if not self._checkpoints.exists(self._settings.bucket, key):
            return None
        raw = self._checkpoints.get_json(self._settings.bucket, key)
        chunks = [Chunk.model_validate(item) for item in raw]
        if chunks and not self._checkpoints.exists(
            self._settings.bucket, embedding_batch_key(self._artifact(record, EMBEDDINGS_FOLDER), 0)
        ):
            return None
        return chunks

    def _checkpointed_vectors(self, record: DocumentRecord, count: int) -> Iterator[list[float]]:
        """The Embed checkpoints' vectors in chunk order, one batch in memory at a time (as Index reads them)."""
        prefix = self._artifact(record, EMBEDDINGS_FOLDER)
        produced, number = 0, 0
        while produced < count:
            batch = self._checkpoints.get_json(self._settings.bucket, embedding_batch_key(prefix, number))
            if not isinstance(batch, list) or not batch:
                raise ValueError(f"embedding checkpoint {number} of {record.document_id} is empty or not a list")
            yield from batch
            produced += len(batch)
            number += 1

    # -- 4. the sources' items ------------------------------------------------------------------
    def _sources_pass(
        self, records: dict[str, DocumentRecord], tenant_id: str | None, repair: bool, report: ReconcileReport
    ) -> None:
        """An item whose document is gone (deleted through the API, say) would stay "unchanged" on
        every sync and never come back: forgetting the item lets the next sync add it again."""
        if self._source_items is None:
            return
        tenants = [tenant_id] if tenant_id is not None else {record.tenant_id for record in records.values()}
        for link in self._source_items.links(tenants):
            report.source_items += 1
            record = records.get(link.document_id)
            if record is not None and record.status not in _GONE:
                continue
            record = self._documents.get(link.document_id)  # consistent: not a write a moment ago
            if record is not None and record.status not in _GONE:
                continue
            finding = Finding(
                kind=DriftKind.SOURCE_ITEM_WITHOUT_DOCUMENT,
                tenant_id=link.tenant_id,
                document_id=link.document_id,
                key=link.key,
                reason=f"item {link.key!r} of source {link.source_id} points at a document that is "
                f"{'gone' if record is None else record.status.value}: syncs would count it unchanged",
                repairable=True,
            )
            if repair:
                self._source_items.unlink(link)
                finding.repaired = f"item forgotten: the next sync of source {link.source_id} adds it again"
            report.findings.append(finding)


def _is_record_version(entry: StoredObjectVersion, version: str) -> bool:
    """Whether a listed entry is the record's version (a versionId, or ``etag:`` on an unversioned bucket)."""
    if entry.is_delete_marker:
        return False
    if version.startswith(ETAG_VERSION_PREFIX):
        return entry.etag is not None and entry.etag.strip('"') == version.removeprefix(ETAG_VERSION_PREFIX)
    return entry.version_id == version


def describe(findings: Iterable[Finding]) -> list[str]:
    """One line per finding, for a person (the CLI without ``--json``)."""
    lines = []
    for f in findings:
        what = f.document_id or (filename_of(f.key) if f.key else "?")
        fix = f" -> {f.repaired}" if f.repaired else (f" -> repair failed: {f.error}" if f.error else "")
        lines.append(f"{f.kind.value:20} {f.tenant_id or '-':16} {what}: {f.reason}{fix}")
    return lines
