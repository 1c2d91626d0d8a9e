"""In-memory implementations of rag_ingest.core.ports, for unit tests that run in milliseconds.

Each fake keeps the contract of its adapter, not just its signature: the documents fake applies
the same compare-and-set conditions as adapters.documents_table (a write the table would refuse
raises ``StaleWriteError`` here too), the objects fake pins uploads by version, and the chunk
index ids chunks per document version so a replay overwrites. tests/unit/test_documents_contract.py
runs the same contract tests against this fake and against DocumentsTable on moto.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rag_ingest.adapters.documents_table import awaiting_upload_item
from rag_ingest.core.access import OPEN_ACCESS, DocumentAccess, Principal, can_read
from rag_ingest.core.errors import ErrorCode, PermanentError, StaleWriteError
from rag_ingest.core.filters import Filter, matches
from rag_ingest.core.ids import chunk_id, split_chunk_id, version_hash
from rag_ingest.core.job import CacheKey, ObjectRef, Stage
from rag_ingest.core.operations import ExecutionState, IndexedVersion, StoredObjectVersion
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import (
    DocumentRecord,
    DocumentStamp,
    DocumentStatus,
    QueueOutcome,
    QueueResult,
    content_key,
    embed_cache_part,
)
from rag_ingest.core.retrieval_text import SHIPPED_CONTEXT_LINE, indexed_text
from rag_ingest.ingest.embedding_cache import KEY_ATTRIBUTE, decode_entry, encode_entry
from rag_ingest.live.connections import Connection
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.ports import ParentScope
from rag_ingest.retrieval.query import SearchQuery

_IN_FLIGHT = (DocumentStatus.QUEUED, DocumentStatus.PROCESSING)
# What a new version clears (DocumentsTable.mark_queued's REMOVE clause).
_CLEARED_BY_NEW_VERSION = (
    "stage", "parsed_parts", "embedded_parts", "embed_total", "error_code", "error_detail", "page_count", "chunk_count",
    "failed_pages", "ocr_pages", "lane", "execution_arn", "replays", "last_error_code", "embed_cache_parts",
    "content_sha256", "content_key", "duplicate_of",
)  # fmt: skip


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class InMemoryDocuments:
    """Every documents port (PipelineDocuments, IntakeDocuments, ApiDocuments, ReaperDocuments, ...)."""

    def __init__(self, clock: Callable[[], str] = _now) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self._clock = clock

    # -- reads ---------------------------------------------------------------------------------
    def get(self, document_id: str) -> DocumentRecord | None:
        item = self.items.get(document_id)
        return DocumentRecord.model_validate(copy.deepcopy(item)) if item else None

    def list_by_tenant(
        self, tenant_id: str, *, limit: int, start_key: Mapping[str, str] | None = None
    ) -> tuple[list[DocumentRecord], dict[str, str] | None]:
        """Newest first without DELETED ones; the key of the last record when more follow."""
        mine = sorted(
            (i for i in self.items.values() if i["tenant_id"] == tenant_id and i["status"] != DocumentStatus.DELETED),
            key=lambda i: (i["created_at"], i["document_id"]),
            reverse=True,
        )
        if start_key:
            after = (start_key["created_at"], start_key["document_id"])
            mine = [i for i in mine if (i["created_at"], i["document_id"]) < after]
        page = [DocumentRecord.model_validate(copy.deepcopy(i)) for i in mine[:limit]]
        if len(mine) <= limit:
            return page, None
        last = page[-1]
        return page, {"document_id": last.document_id, "tenant_id": last.tenant_id, "created_at": last.created_at}

    def list_by_status(
        self, status: DocumentStatus, *, updated_before: str | None = None, updated_after: str | None = None
    ) -> Iterator[DocumentRecord]:
        # The GSI's key condition: lt / gt alone, between (inclusive) together.
        both = updated_before is not None and updated_after is not None
        for item in sorted(self.items.values(), key=lambda i: i["updated_at"]):
            updated = item["updated_at"]
            if item["status"] != status:
                continue
            if both and not (str(updated_after) <= updated <= str(updated_before)):
                continue
            if not both and updated_before is not None and not updated < updated_before:
                continue
            if not both and updated_after is not None and not updated > updated_after:
                continue
            yield DocumentRecord.model_validate(copy.deepcopy(item))

    def scan_records(self, tenant_id: str | None = None) -> Iterator[DocumentRecord]:
        for item in list(self.items.values()):
            if tenant_id is None or item["tenant_id"] == tenant_id:
                yield DocumentRecord.model_validate(copy.deepcopy(item))

    # -- an upload and its workflow --------------------------------------------------------------
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
        if document_id in self.items:
            # The table's put is conditional on attribute_not_exists; nothing in the domain catches it.
            raise ValueError(f"document {document_id} already exists")
        now = self._clock()
        self.items[document_id] = awaiting_upload_item(
            document_id=document_id,
            tenant_id=tenant_id,
            filename=filename,
            bucket=bucket,
            key=key,
            now=now,
            metadata=copy.deepcopy(dict(metadata or {})),
            uploaded_by=uploaded_by,
            access=access,
            origin=origin,
        )
        return DocumentRecord.model_validate(copy.deepcopy(self.items[document_id]))

    def mark_queued(
        self, *, document_id: str, tenant_id: str, ref: ObjectRef, event_time: str, size_bytes: int | None
    ) -> QueueResult:
        item = self.items.get(document_id)
        allowed = (
            item is None
            or (
                item["tenant_id"] == tenant_id
                and item["status"] in (DocumentStatus.AWAITING_UPLOAD, DocumentStatus.EXPIRED)
            )
            or (
                item["tenant_id"] == tenant_id
                and item.get("version") != ref.version
                and item["status"] not in (DocumentStatus.DELETING, DocumentStatus.DELETED)
                and ("event_time" not in item or item["event_time"] <= event_time)
            )
        )
        if not allowed:
            return QueueResult.not_queued(self.get(document_id), tenant_id, ref)
        now = self._clock()
        new = dict(item or {})
        for name in _CLEARED_BY_NEW_VERSION:
            new.pop(name, None)
        new.update(
            document_id=document_id,
            tenant_id=tenant_id,
            status=DocumentStatus.QUEUED.value,
            version=ref.version,
            bucket=ref.bucket,
            key=ref.key,
            filename=new.get("filename") or ref.key.rsplit("/", 1)[-1],
            attempts={},
            timings_ms={},
            event_time=event_time,
            size_bytes=size_bytes,
            created_at=new.get("created_at") or now,
            updated_at=now,
        )
        self.items[document_id] = new
        return QueueResult(QueueOutcome.QUEUED, self.get(document_id))

    def set_execution(self, document_id: str, version: str, execution_arn: str) -> None:
        allowed = (*_IN_FLIGHT, DocumentStatus.READY, DocumentStatus.FAILED)
        self._transition(document_id, version, allowed)["execution_arn"] = execution_arn

    def start_stage(self, document_id: str, version: str, stage: Stage) -> None:
        item = self._transition(document_id, version, _IN_FLIGHT)
        item.update(status=DocumentStatus.PROCESSING.value, stage=stage.value)
        if stage is not Stage.EMBED:
            item.pop("capacity_wait_until", None)
        item.setdefault("attempts", {})[stage.value] = item.get("attempts", {}).get(stage.value, 0) + 1

    def record_stage(
        self, document_id: str, version: str, stage: Stage, elapsed_ms: int, *, accumulate: bool = False, **fields: Any
    ) -> None:
        item = self._transition(document_id, version, _IN_FLIGHT)
        timings = item.setdefault("timings_ms", {})
        timings[stage.value] = (timings.get(stage.value, 0) if accumulate else 0) + elapsed_ms
        item.update(copy.deepcopy(fields))

    def confirm_current(self, document_id: str, version: str) -> None:
        self._transition(document_id, version, _IN_FLIGHT)

    def record_parsed_range(self, document_id: str, version: str, first_page: int, pages: int) -> None:
        item = self._transition(document_id, version, _IN_FLIGHT)
        item.setdefault("parsed_parts", set()).add(f"{first_page}:{pages}")

    def record_embed_plan(self, document_id: str, version: str, total_chunks: int) -> None:
        item = self._transition(document_id, version, _IN_FLIGHT)
        item["embed_total"] = total_chunks
        item.pop("embedded_parts", None)
        item.pop("embed_cache_parts", None)

    def record_embedded_part(
        self, document_id: str, version: str, task: int, chunks: int, *, cache_hits: int = 0, cache_misses: int = 0
    ) -> None:
        item = self._transition(document_id, version, _IN_FLIGHT)
        item.setdefault("embedded_parts", set()).add(f"{task}:{chunks}")
        item.setdefault("embed_cache_parts", set()).add(embed_cache_part(task, cache_hits, cache_misses))
        item.pop("capacity_wait_until", None)

    def record_capacity_wait(self, document_id: str, version: str, until: str) -> None:
        item = self._transition(document_id, version, _IN_FLIGHT)
        item["capacity_wait_until"] = until

    def find_ready_copy(self, *, tenant_id: str, content_sha256: str, document_id: str) -> str | None:
        wanted = content_key(tenant_id, content_sha256)
        for item in sorted(self.items.values(), key=lambda i: i["created_at"]):
            if (
                item.get("content_key") == wanted
                and item["document_id"] != document_id
                and item["tenant_id"] == tenant_id
                and item["status"] == DocumentStatus.READY
                and item.get("content_sha256") == content_sha256
            ):
                return str(item["document_id"])
        return None

    def mark_ready(self, document_id: str, version: str) -> None:
        item = self._transition(document_id, version, (DocumentStatus.PROCESSING,))
        item["status"] = DocumentStatus.READY.value
        item.pop("stage", None)

    def mark_failed(self, document_id: str, version: str, code: ErrorCode, detail: str) -> None:
        item = self._transition(document_id, version, _IN_FLIGHT)
        item.update(status=DocumentStatus.FAILED.value, error_code=code.value, error_detail=detail[:2000])

    # -- operator transitions ----------------------------------------------------------------------
    def requeue_for_replay(self, record: DocumentRecord, *, execution_arn: str) -> DocumentRecord:
        item = self._as_read(record, check_version=True)
        if item.get("replays", 0) != record.replays:
            raise StaleWriteError(f"document {record.document_id} changed since it was read")
        replay = record.replays + 1
        if record.error_code is not None:
            item["last_error_code"] = record.error_code.value
        for name in ("stage", "error_code", "error_detail"):
            item.pop(name, None)
        item.update(
            status=DocumentStatus.QUEUED.value, replays=replay, execution_arn=execution_arn, updated_at=self._clock()
        )
        return record.model_copy(
            update={"status": DocumentStatus.QUEUED, "replays": replay, "execution_arn": execution_arn}
        )

    def mark_stuck(self, record: DocumentRecord, detail: str) -> None:
        item = self._as_read(record, check_version=True)
        item.update(
            status=DocumentStatus.FAILED.value,
            error_code=ErrorCode.STUCK.value,
            error_detail=detail[:2000],
            updated_at=self._clock(),
        )

    def mark_source_missing(self, record: DocumentRecord, detail: str) -> None:
        if record.status not in (DocumentStatus.READY, DocumentStatus.FAILED):
            raise StaleWriteError(f"document {record.document_id} is {record.status.value}, not READY or FAILED")
        item = self._as_read(record, check_version=True)
        item.update(
            status=DocumentStatus.FAILED.value,
            error_code=ErrorCode.SOURCE_OBJECT_MISSING.value,
            error_detail=detail[:2000],
            updated_at=self._clock(),
        )

    def mark_expired(self, record: DocumentRecord, detail: str) -> None:
        item = self.items.get(record.document_id)
        if item is None or item["status"] != DocumentStatus.AWAITING_UPLOAD or item["updated_at"] != record.updated_at:
            raise StaleWriteError(f"document {record.document_id} changed since it was read")
        item.update(status=DocumentStatus.EXPIRED.value, error_detail=detail[:2000], updated_at=self._clock())

    def mark_deleting(self, document_id: str, tenant_id: str) -> DocumentRecord | None:
        item = self.items.get(document_id)
        if item is None or item["tenant_id"] != tenant_id:
            return None
        if item["status"] != DocumentStatus.DELETED:
            item.update(status=DocumentStatus.DELETING.value, updated_at=self._clock())
        return self.get(document_id)

    def mark_deleted(self, document_id: str) -> None:
        item = self.items.get(document_id)
        if item is None or item["status"] != DocumentStatus.DELETING:
            raise StaleWriteError(f"document {document_id} changed since it was read")
        for name in ("stage", "error_code", "error_detail", "execution_arn"):
            item.pop(name, None)
        now = self._clock()
        item.update(status=DocumentStatus.DELETED.value, deleted_at=now, updated_at=now)

    def update_fields(self, record: DocumentRecord, fields: Mapping[str, Any]) -> DocumentRecord:
        item = self.items.get(record.document_id)
        if (
            item is None
            or item["tenant_id"] != record.tenant_id
            or item["status"] != record.status
            or item.get("version") != record.version
            or int(item.get("revision") or 1) != record.revision
        ):
            raise StaleWriteError(f"document {record.document_id} changed since it was read")
        item.update(copy.deepcopy(dict(fields)), revision=record.revision + 1, updated_at=self._clock())
        return DocumentRecord.model_validate(copy.deepcopy(item))

    # -- the conditions ------------------------------------------------------------------------------
    def _transition(self, document_id: str, version: str, allowed: tuple[DocumentStatus, ...]) -> dict[str, Any]:
        item = self.items.get(document_id)
        if item is None or item.get("version") != version or item["status"] not in allowed:
            names = ", ".join(status.value for status in allowed)
            raise StaleWriteError(f"document {document_id} version {version} is no longer in {names}")
        item["updated_at"] = self._clock()
        return item

    def _as_read(self, record: DocumentRecord, *, check_version: bool) -> dict[str, Any]:
        item = self.items.get(record.document_id)
        if (
            item is None
            or item["status"] != record.status
            or (check_version and item.get("version") != record.version)
            or item["updated_at"] != record.updated_at
        ):
            raise StaleWriteError(f"document {record.document_id} changed since it was read")
        return item


@dataclass
class InMemoryObjects:
    """StageObjects and ObjectEraser: uploads pinned by version, JSON artifacts, every version erasable."""

    uploads: dict[tuple[str, str, str], bytes] = field(default_factory=dict)
    artifacts: dict[tuple[str, str], str] = field(default_factory=dict)
    reads: list[ObjectRef] = field(default_factory=list)
    artifact_puts: list[str] = field(default_factory=list)
    # When every upload was put (the reconciler's grace for young objects reads it).
    uploaded_at: str = "2020-01-01T00:00:00.000+00:00"

    def upload(self, bucket: str, key: str, version: str, data: bytes) -> ObjectRef:
        self.uploads[(bucket, key, version)] = data
        return ObjectRef(bucket=bucket, key=key, version=version)

    def list_versions(self, bucket: str, prefix: str) -> Iterator[StoredObjectVersion]:
        """Uploads only (artifacts are not under the uploads prefix), by key; the last put is the latest."""
        by_key: dict[str, list[str]] = {}
        for b, key, version in self.uploads:
            if b == bucket and key.startswith(prefix):
                by_key.setdefault(key, []).append(version)
        for key in sorted(by_key):
            for position, version in enumerate(reversed(by_key[key])):
                yield StoredObjectVersion(
                    key=key,
                    version_id=version,
                    etag=None,
                    is_latest=position == 0,
                    is_delete_marker=False,
                    last_modified=self.uploaded_at,
                )

    def _data(self, ref: ObjectRef) -> bytes:
        try:
            return self.uploads[(ref.bucket, ref.key, ref.version)]
        except KeyError:
            raise PermanentError(
                ErrorCode.OBJECT_NOT_FOUND, f"s3://{ref.bucket}/{ref.key} version {ref.version} is gone"
            ) from None

    def size(self, ref: ObjectRef) -> int:
        return len(self._data(ref))

    def read_range(self, ref: ObjectRef, length: int) -> bytes:
        return self._data(ref)[:length]

    def read(self, ref: ObjectRef) -> bytes:
        self.reads.append(ref)
        return self._data(ref)

    def put_json(self, bucket: str, key: str, payload: Any) -> None:
        self.artifact_puts.append(key)
        self.artifacts[(bucket, key)] = json.dumps(payload, separators=(",", ":"))

    def get_json(self, bucket: str, key: str) -> Any:
        return json.loads(self.artifacts[(bucket, key)])  # KeyError: S3's NoSuchKey, never retried

    def exists(self, bucket: str, key: str) -> bool:
        return (bucket, key) in self.artifacts

    def delete_all(self, bucket: str, prefix: str, *, exact_key: str | None = None) -> int:
        def wanted(b: str, k: str) -> bool:
            return b == bucket and k.startswith(prefix) and (exact_key is None or k == exact_key)

        uploads = [name for name in self.uploads if wanted(name[0], name[1])]
        artifacts = [name for name in self.artifacts if wanted(*name)]
        for upload in uploads:
            del self.uploads[upload]
        for artifact in artifacts:
            del self.artifacts[artifact]
        return len(uploads) + len(artifacts)


@dataclass
class InMemoryChunkIndex:
    """ChunkIndex, ChunkEraser and PassageRetriever over a dict keyed like the real index's ``_id``."""

    chunks: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: bool = False
    # Runs inside write_chunks after the chunks are in (e.g. a newer version taking over meanwhile).
    after_write: Callable[[], None] | None = None

    def ensure_index(self) -> None:
        self.created = True

    def write_chunks(self, stamp: DocumentStamp, chunks: Sequence[Chunk], vectors: Iterable[Sequence[float]]) -> int:
        if isinstance(vectors, Sequence) and len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        for chunk, vector in zip(chunks, vectors, strict=True):
            self.chunks[chunk_id(stamp.document_id, stamp.version, chunk.chunk_index)] = {
                "tenant_id": stamp.tenant_id,
                "document_id": stamp.document_id,
                "version": version_hash(stamp.version),
                "filename": stamp.filename,
                "metadata": copy.deepcopy(dict(stamp.metadata or {})),
                "created_at": stamp.created_at,
                "content_type": chunk.document_format.content_type,
                "access": stamp.access or OPEN_ACCESS,
                "uploaded_by": stamp.uploaded_by,
                "chunk": chunk,
                "embedding": list(vector),
            }
        if self.after_write is not None:
            self.after_write()
        return len(chunks)

    def _delete(self, keep: Callable[[dict[str, Any]], bool]) -> int:
        doomed = [chunk_id_ for chunk_id_, source in self.chunks.items() if not keep(source)]
        for chunk_id_ in doomed:
            del self.chunks[chunk_id_]
        return len(doomed)

    def delete_version(self, document_id: str, version: str) -> int:
        hashed = version_hash(version)
        return self._delete(lambda s: not (s["document_id"] == document_id and s["version"] == hashed))

    def delete_other_versions(self, document_id: str, keep_version: str) -> int:
        hashed = version_hash(keep_version)
        return self._delete(lambda s: s["document_id"] != document_id or s["version"] == hashed)

    def delete_document(self, document_id: str) -> int:
        return self._delete(lambda s: s["document_id"] != document_id)

    def indexed_versions(self, tenant_id: str | None = None) -> Iterator[IndexedVersion]:
        counts: dict[tuple[str, str, str], int] = {}
        for source in self.chunks.values():
            if tenant_id is None or source["tenant_id"] == tenant_id:
                key = (source["tenant_id"], source["document_id"], source["version"])
                counts[key] = counts.get(key, 0) + 1
        for (tenant, document, version), chunks in sorted(counts.items()):
            yield IndexedVersion(tenant_id=tenant, document_id=document, version_hash=version, chunks=chunks)

    def delete_chunks(self, document_id: str, version_hash: str | None = None, *, from_index: int = 0) -> int:
        def doomed(source: dict[str, Any]) -> bool:
            return (
                source["document_id"] == document_id
                and (version_hash is None or source["version"] == version_hash)
                and source["chunk"].chunk_index >= from_index
            )

        return self._delete(lambda source: not doomed(source))

    def versions_of(self, document_id: str) -> dict[str, int]:
        """Chunks per version hash of one document."""
        counts: dict[str, int] = {}
        for source in self.chunks.values():
            if source["document_id"] == document_id:
                counts[source["version"]] = counts.get(source["version"], 0) + 1
        return counts

    def _hits(
        self,
        tenant_id: str,
        score: Callable[[dict[str, Any]], float],
        k: int,
        retriever: str,
        where: Filter | None = None,
        reader: Principal | None = None,
    ) -> list[SearchHit]:
        if not tenant_id:
            raise ValueError("a tenant is required: search never crosses tenants")
        mine = [
            (score(s), i, s)
            for i, s in self.chunks.items()
            if s["tenant_id"] == tenant_id
            and (where is None or matches(where, _filter_fields(s)))
            and (reader is None or can_read(reader, _AccessOf(s)))
        ]
        mine.sort(key=lambda hit: (-hit[0], hit[1]))
        return [
            SearchHit(
                chunk_id=i,
                score=value,
                document_id=s["document_id"],
                page_start=s["chunk"].page_start,
                page_end=s["chunk"].page_end,
                text=s["chunk"].text,
                filename=s["filename"],
                heading_path=tuple(s["chunk"].heading_path),
                retrieved_by=(retriever,),
                metadata=copy.deepcopy(s.get("metadata") or {}),
            )
            for value, i, s in mine[:k]
            if value > 0
        ]

    def knn_search(self, query: SearchQuery, vector: Sequence[float], *, k: int) -> list[SearchHit]:
        def similarity(source: dict[str, Any]) -> float:
            return 1 + sum(a * b for a, b in zip(vector, source["embedding"], strict=False))

        return self._hits(query.tenant_id, similarity, k, "knn", query.where, query.reader)

    def bm25_search(self, query: SearchQuery, *, k: int) -> list[SearchHit]:
        # Like the adapter with the shipped settings, BM25 matches the chunk's text (its contextual
        # text, title and heading path first, only where that is switched on).
        words = set(query.text.lower().split())

        def overlap(source: dict[str, Any]) -> float:
            chunk = source["chunk"]
            text = indexed_text(chunk) if SHIPPED_CONTEXT_LINE else chunk.text
            return float(len(words & set(text.lower().split())))

        return self._hits(query.tenant_id, overlap, k, "bm25", query.where, query.reader)

    def parent_chunks(self, query: SearchQuery, scopes: Sequence[ParentScope]) -> list[list[SearchHit]]:
        # As the adapter: the tenant and the reader, never the query's where; by chunk index.
        readable = self._hits(query.tenant_id, lambda _source: 1.0, len(self.chunks), "parent", None, query.reader)
        readable.sort(key=lambda hit: split_chunk_id(hit.chunk_id)[2])
        return [[hit for hit in readable if scope.holds(hit)] for scope in scopes]


@dataclass(frozen=True)
class _AccessOf:
    """A stored chunk as rag_ingest.core.access.can_read reads a document."""

    source: dict[str, Any]

    @property
    def tenant_id(self) -> str:
        return str(self.source["tenant_id"])

    @property
    def uploaded_by(self) -> str | None:
        return self.source.get("uploaded_by")

    @property
    def access(self) -> DocumentAccess:
        return self.source.get("access") or OPEN_ACCESS


def _filter_fields(source: dict[str, Any]) -> dict[str, Any]:
    """A stored chunk as rag_ingest.core.filters.matches reads it."""
    return {
        "document_id": source["document_id"],
        "filename": source["filename"],
        "created_at": source.get("created_at"),
        "content_type": source.get("content_type"),
        "page_start": source["chunk"].page_start,
        "page_end": source["chunk"].page_end,
        "metadata": source.get("metadata") or {},
    }


class CountingEmbedder:
    """Deterministic vectors (the Embedder port), counting every text it is paid to embed."""

    def __init__(self, dimension: int = 4, max_input_tokens: int = 512) -> None:
        self.model_id = "fake-embedder"
        self.dimension = dimension
        self.max_input_tokens = max_input_tokens
        self.texts_embedded = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts_embedded += len(texts)
        return [[float((len(text) + i) % 7) / 7 for i in range(self.dimension)] for text in texts]


class InMemoryEmbeddingCache:
    """The EmbeddingCache port: entries encoded as the DynamoDB adapter stores them, so a test can
    corrupt one (``entries[key.id]``) and see it ignored."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        self.lookups: list[int] = []  # keys asked for, per call (batch lookups, not one call per chunk)

    def lookup(self, keys: Sequence[CacheKey]) -> dict[CacheKey, list[float]]:
        self.lookups.append(len(keys))
        found = {key: decode_entry(key, self.entries.get(key.id)) for key in keys}
        return {key: vector for key, vector in found.items() if vector is not None}

    def store(self, entries: Mapping[CacheKey, Sequence[float]]) -> None:
        for key, vector in entries.items():
            entry = encode_entry(key, vector)
            self.entries[entry[KEY_ATTRIBUTE]] = entry


@dataclass
class RecordingTelemetry:
    """The Telemetry port, remembering what it was told."""

    started: list[Stage] = field(default_factory=list)
    finished: list[Stage] = field(default_factory=list)
    ready: list[dict[str, Any]] = field(default_factory=list)
    failed: list[tuple[ErrorCode, dict[str, Any]]] = field(default_factory=list)
    cache_lookups: list[tuple[str, int, int]] = field(default_factory=list)  # (document_id, hits, misses)

    def embedding_cache_used(self, document_id: str, hits: int, misses: int) -> None:
        self.cache_lookups.append((document_id, hits, misses))

    def stage_started(self, stage: Stage) -> None:
        self.started.append(stage)

    def stage_finished(self, stage: Stage, elapsed_ms: int) -> None:
        self.finished.append(stage)

    def document_ready(self, detail: dict[str, Any]) -> None:
        self.ready.append(detail)

    def document_failed(self, code: ErrorCode, detail: dict[str, Any]) -> None:
        self.failed.append((code, detail))


@dataclass
class InMemoryWorkflow:
    """ExecutionStarter and ExecutionLookup: named executions, a second start of a name is a no-op."""

    state_machine_arn: str = "arn:aws:states:us-east-1:123456789012:stateMachine:ingest"
    started: dict[str, dict[str, Any]] = field(default_factory=dict)
    states: dict[str, ExecutionState] = field(default_factory=dict)

    def execution_arn(self, name: str) -> str:
        prefix, _, machine = self.state_machine_arn.rpartition(":stateMachine:")
        return f"{prefix}:execution:{machine}:{name}"

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]:
        arn = self.execution_arn(name)
        if name in self.started:
            return arn, False
        self.started[name] = payload
        self.states[arn] = ExecutionState.RUNNING
        return arn, True

    def state(self, execution_arn: str | None) -> ExecutionState:
        return self.states.get(execution_arn or "", ExecutionState.MISSING)


class MemoryConnections:
    """The live channel's connection store in memory (rag_ingest.live.connections.ConnectionStore)."""

    def __init__(self) -> None:
        self.items: dict[str, Connection] = {}

    def put(self, connection: Connection) -> None:
        self.items[connection.connection_id] = connection

    def delete(self, connection_id: str) -> None:
        self.items.pop(connection_id, None)

    def get(self, connection_id: str) -> Connection | None:
        return self.items.get(connection_id)

    def for_tenant(self, tenant_id: str) -> list[str]:
        return sorted(c.connection_id for c in self.items.values() if c.tenant_id == tenant_id)

    def connections_for_tenant(self, tenant_id: str) -> list[Connection]:
        return [self.items[connection_id] for connection_id in self.for_tenant(tenant_id)]
