"""The sources' ports in memory (rag_ingest.sources.ports), connectors over a dict of items, and a
harness that syncs a source over them step by step, for the unit tests of the sync engine, its
workflow's steps and the sources service."""

from __future__ import annotations

import builtins
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rag_ingest.core.access import DocumentAccess
from rag_ingest.core.errors import StaleWriteError
from rag_ingest.documents.errors import DocumentNotFoundError
from rag_ingest.sources.connector import ItemFailure, ItemUnavailableError, KnownLookup, ListingPage, SourceItem
from rag_ingest.sources.fan_out import ItemBatch
from rag_ingest.sources.model import ItemState, Source, SourceRequest, StagedPage, SyncJob
from rag_ingest.sources.runner import SyncRunner, SyncStep
from rag_ingest.sources.service import SourceService
from rag_ingest.sources.sync import SyncEngine, content_token

TENANT = "acme"


class Crash(Exception):
    pass


class SyncHarness:
    """A tenant's source over in-memory ports, synced step by step as the workflow runs it. With
    ``fan_out``, a connector that copies server-side stages its items and the harness plays the
    workflow's Distributed Map: every batch of a staged file through ``apply_batch``."""

    def __init__(
        self,
        connector: DictConnector,
        kind: str = "s3",
        max_items: int = 1_000_000,
        *,
        fan_out: bool = False,
        batch_items: int = 2,
        staged_items: int = 4,
    ) -> None:
        self.sources, self.jobs, self.cursors = MemorySources(), MemoryJobs(), MemoryCursors()
        self.items, self.documents = MemoryItems(), MemoryDocuments()
        self.staged = MemoryStagedPages()
        counter = itertools.count(1)
        self.engine = SyncEngine(
            sources=self.sources,
            jobs=self.jobs,
            cursors=self.cursors,
            items=self.items,
            documents=self.documents,
            remover=self.documents,
            raw_prefix="raw/",
            max_items=max_items,
            new_id=lambda: f"01J{next(counter):023d}",
            staged_pages=self.staged,
            batch_items=batch_items,
            staged_items=staged_items,
        )
        self.connector = connector
        ids = itertools.count(1)
        self.schedules = MemorySchedules()
        self.service = SourceService(
            schedules=self.schedules,
            sources=self.sources,
            jobs=self.jobs,
            items=self.items,
            engine=self.engine,
            starter=self,
            validate_config=lambda kind, config: config,
            max_syncs_per_hour=3,
            new_id=lambda: f"{next(ids):026d}",
        )
        self.started: list[dict[str, Any]] = []
        view = self.service.create(
            TENANT,
            SourceRequest(kind=kind, name="docs", metadata={"team": "hr"}),  # type: ignore[arg-type]
        )
        self.source_id = view.id
        self.runner = SyncRunner(
            sources=self.sources,
            jobs=self.jobs,
            engine=self.engine,
            connectors=lambda source: self.connector,
            budget_seconds=60,
            new_id=lambda: f"{next(ids):026d}",
            fan_out=fan_out,
        )

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]:
        self.started.append(payload)
        return f"arn:{name}", True

    def sync(self, max_steps: int = 100) -> SyncJob:
        job = self.service.start_sync(TENANT, self.source_id)
        step = SyncStep(tenant_id=TENANT, source_id=self.source_id, sync_id=job.id)
        self.run(step, max_steps)
        return self.service.get_sync(TENANT, self.source_id, job.id)

    def run(self, step: SyncStep, max_steps: int = 100) -> SyncStep:
        """Steps until the sync ends, each staged file's batches applied as the Map would."""
        for _ in range(max_steps):
            if step.phase == "applying" and step.staged is not None and step.applied is None:
                step = step.model_copy(update={"applied": self.apply(step.staged)})
            step = self.runner.step(step)
            if step.phase in ("done", "failed"):
                break
        return step

    def apply(self, staged: StagedPage) -> list[dict[str, Any]]:
        """The Map over one staged file: each batch is a child's input, its output gathered."""
        batches = self.staged.files[staged.key]
        return [self.runner.apply_batch(ItemBatch.model_validate(batch)).model_dump(mode="json") for batch in batches]

    @property
    def source(self) -> Source:
        source = self.sources.get(TENANT, self.source_id)
        assert source is not None
        return source


def corpus(count: int) -> dict[str, bytes]:
    return {f"doc-{n:03d}.pdf": f"content {n}".encode() for n in range(count)}


class MemorySources:
    def __init__(self) -> None:
        self.sources: dict[tuple[str, str], Source] = {}
        self.watching: set[tuple[str, str, str]] = set()

    def create(self, source: Source) -> None:
        self.sources[(source.tenant_id, source.source_id)] = source

    def get(self, tenant_id: str, source_id: str) -> Source | None:
        return self.sources.get((tenant_id, source_id))

    def list(self, tenant_id: str) -> list[Source]:
        return sorted((s for (t, _), s in self.sources.items() if t == tenant_id), key=lambda s: s.created_at)

    def replace(self, source: Source, *, expected_updated_at: str) -> None:
        current = self.get(source.tenant_id, source.source_id)
        if current is None or current.updated_at != expected_updated_at:
            raise StaleWriteError("source changed")
        self.create(source)

    def delete(self, tenant_id: str, source_id: str) -> None:
        self.sources.pop((tenant_id, source_id), None)

    def claim_sync(self, tenant_id: str, source_id: str, sync_id: str) -> bool:
        source = self.sources[(tenant_id, source_id)]
        if source.running_sync is not None:
            return False
        self.create(source.model_copy(update={"running_sync": sync_id}))
        return True

    def release_sync(self, tenant_id: str, source_id: str, sync_id: str) -> None:
        source = self.sources.get((tenant_id, source_id))
        if source is not None and source.running_sync == sync_id:
            self.create(source.model_copy(update={"running_sync": None, "last_sync": sync_id}))

    def running_syncs(self) -> builtins.list[tuple[str, str, str]]:
        return [(t, s, src.running_sync) for (t, s), src in sorted(self.sources.items()) if src.running_sync]

    def watch(self, bucket: str, tenant_id: str, source_id: str) -> None:
        self.watching.add((bucket, tenant_id, source_id))

    def unwatch(self, bucket: str, tenant_id: str, source_id: str) -> None:
        self.watching.discard((bucket, tenant_id, source_id))

    def watchers(self, bucket: str) -> builtins.list[tuple[str, str]]:
        return sorted((tenant, source) for name, tenant, source in self.watching if name == bucket)


class MemoryJobs:
    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], SyncJob] = {}

    def put(self, job: SyncJob) -> None:
        self.jobs[(job.source_id, job.id)] = job

    def get(self, source_id: str, sync_id: str) -> SyncJob | None:
        return self.jobs.get((source_id, sync_id))

    def list(self, source_id: str, limit: int) -> list[SyncJob]:
        jobs = [job for (s, _), job in self.jobs.items() if s == source_id]
        return sorted(jobs, key=lambda job: job.id, reverse=True)[:limit]


class MemoryCursors:
    def __init__(self) -> None:
        self.cursors: dict[tuple[str, str], str | None] = {}

    def save(self, source_id: str, sync_id: str, cursor: str | None) -> None:
        self.cursors[(source_id, sync_id)] = cursor

    def load(self, source_id: str, sync_id: str) -> str | None:
        return self.cursors.get((source_id, sync_id))


class MemoryItems:
    def __init__(self) -> None:
        self.states: dict[tuple[str, str], ItemState] = {}
        self.writes = 0

    def get_many(self, source_id: str, keys: Iterable[str]) -> dict[str, ItemState]:
        return {key: self.states[(source_id, key)] for key in keys if (source_id, key) in self.states}

    def put(self, state: ItemState) -> None:
        self.writes += 1
        self.states[(state.source_id, state.key)] = state

    def delete(self, source_id: str, key: str) -> None:
        self.states.pop((source_id, key), None)

    def scan(self, source_id: str) -> Iterator[ItemState]:
        return iter([state for (s, _), state in sorted(self.states.items()) if s == source_id])


@dataclass
class StoredDocument:
    tenant_id: str
    filename: str
    key: str
    metadata: dict[str, Any]
    access: DocumentAccess
    origin: dict[str, str]
    versions: list[bytes] = field(default_factory=list)


class MemoryDocuments:
    """Records and the stack bucket's objects: each put is one version (one pipeline run in the stack)."""

    def __init__(self) -> None:
        self.documents: dict[str, StoredDocument] = {}
        self.tokens: dict[str, str] = {}
        self.deleted: list[str] = []

    def upsert_record(
        self,
        *,
        tenant_id: str,
        document_id: str,
        filename: str,
        key: str,
        metadata: Mapping[str, Any],
        access: DocumentAccess,
        origin: Mapping[str, str],
    ) -> None:
        versions = self.documents[document_id].versions if document_id in self.documents else []
        self.documents[document_id] = StoredDocument(
            tenant_id, filename, key, dict(metadata), access, dict(origin), versions
        )

    def stored_token(self, key: str) -> str | None:
        return self.tokens.get(key)

    def put_bytes(self, key: str, body: bytes, change_token: str) -> None:
        document = next(doc for doc in self.documents.values() if doc.key == key)
        document.versions.append(body)
        self.tokens[key] = change_token

    def bucket(self) -> str:
        return "stack-bucket"

    def delete(self, tenant_id: str, document_id: str) -> object:
        document = self.documents.pop(document_id, None)
        if document is None or document.tenant_id != tenant_id:
            raise DocumentNotFoundError(document_id)
        self.tokens.pop(document.key, None)
        self.deleted.append(document_id)
        return None

    def runs(self) -> int:
        """Pipeline runs so far: one per version written."""
        return sum(len(doc.versions) for doc in self.documents.values())


class MemorySchedules:
    def __init__(self) -> None:
        self.schedules: dict[tuple[str, str], str] = {}

    def set(self, tenant_id: str, source_id: str, expression: str) -> None:
        self.schedules[(tenant_id, source_id)] = expression

    def clear(self, tenant_id: str, source_id: str) -> None:
        self.schedules.pop((tenant_id, source_id), None)


class DictConnector:
    """A listing over ``items`` (key -> bytes), ``page_size`` a page; the token is the bytes' hash.
    ``fail_keys`` fail their fetch; ``stop_after_pages`` makes the listing raise (a crash) there."""

    def __init__(self, items: Mapping[str, bytes], page_size: int = 3) -> None:
        self.items = dict(items)
        self.page_size = page_size
        self.fetches: list[str] = []
        self.fail_keys: set[str] = set()
        self.gone: tuple[str, ...] = ()
        self.truncate_at: int | None = None
        self.failures: tuple[ItemFailure, ...] = ()

    def list_page(self, cursor: str | None, known: KnownLookup) -> ListingPage:
        keys = sorted(self.items)
        start = json.loads(cursor)["next"] if cursor else 0
        end = start + self.page_size
        if self.truncate_at is not None and end >= self.truncate_at:
            end = self.truncate_at
        page = [self._item(key) for key in keys[start:end]]
        last = end >= len(keys) or (self.truncate_at is not None and end >= self.truncate_at)
        return ListingPage(
            items=tuple(page),
            cursor=None if last else json.dumps({"next": end}),
            truncated=self.truncate_at is not None and self.truncate_at < len(keys),
            gone=self.gone if last else (),
            failures=self.failures if start == 0 else (),
        )

    def fetch(self, item: SourceItem) -> bytes:
        self.fetches.append(item.key)
        if item.key in self.fail_keys:
            raise ItemUnavailableError("ITEM_UNREADABLE", f"{item.key} answered 500")
        return self.items[item.key]

    def _item(self, key: str) -> SourceItem:
        return SourceItem(key=key, change_token=content_token(self.items[key]), uri=f"test://{key}", filename=key)


class MemoryStagedPages:
    """Staged files as the workflow's Map reads them: JSON, by key."""

    def __init__(self) -> None:
        self.files: dict[str, list[dict[str, Any]]] = {}

    def write(self, source_id: str, sync_id: str, number: int, batches: list[dict[str, Any]]) -> StagedPage:
        key = f"sources/{source_id}/{sync_id}/staged/{number:06d}.json"
        self.files[key] = json.loads(json.dumps(batches))
        return StagedPage(bucket="stack-bucket", key=key)


class CopyingDictConnector(DictConnector):
    """A ``DictConnector`` whose items the engine copies server-side into ``documents``, as the S3
    connector's are (so a sync over it fans out to the workflow's Map)."""

    def __init__(self, items: Mapping[str, bytes], documents: MemoryDocuments, page_size: int = 3) -> None:
        super().__init__(items, page_size)
        self.documents = documents
        self.copies: list[str] = []

    def copy_into(self, item: SourceItem, bucket: str, key: str, metadata: Mapping[str, str]) -> str:
        self.copies.append(item.key)
        if item.key in self.fail_keys:
            raise ItemUnavailableError("ITEM_UNREADABLE", f"{item.key} answered 500")
        self.documents.put_bytes(key, self.items[item.key], item.change_token)
        return f"v{len(self.copies)}"
