"""The reconciler over the ports' in-memory fakes: each kind of drift found, each repair made, and a
second repair run that changes nothing."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from rag_ingest.core.access import DocumentAccess
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.ids import document_id_for_object, version_hash
from rag_ingest.core.operations import SourceItemLink
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp, DocumentStatus
from rag_ingest.core.s3_keys import CHUNKS_ARTIFACT, EMBEDDINGS_FOLDER, artifact_key, embedding_batch_key, upload_key
from rag_ingest.operations.reconciler import (
    DriftKind,
    Finding,
    Reconciler,
    ReconcileReport,
    ReconcileRequest,
    ReconcilerSettings,
    describe,
)
from rag_ingest.operations.replay import Replayer
from ulid import ULID

from tests.support.fakes import InMemoryChunkIndex, InMemoryDocuments, InMemoryObjects, InMemoryWorkflow

pytestmark = pytest.mark.unit

BUCKET = "docs-bucket"
# API-shaped document ids (ULIDs) by a readable name: the key raw/{tenant}/{id}/{file} names its document.
D = {
    name: str(ULID.from_bytes(hashlib.sha256(name.encode()).digest()[:16]))
    for name in (
        "healthy",
        "short-no-checkpoints",
        "short",
        "superseded",
        "orphan",
        "deleted",
        "object-gone",
        "in-flight-object-gone",
        "stuck",
        "doc-a",
        "doc-b",
        "doc",
        "mine",
        "theirs",
        "processing",
        "private",
    )
}
OLD = "2020-01-01T00:00:00.000+00:00"
NOW = time.time()


def _chunks(count: int) -> list[Chunk]:
    return [
        Chunk(chunk_index=i, text=f"passage {i}", page_start=1, page_end=1, char_start=0, char_end=9, token_count=2)
        for i in range(count)
    ]


class World:
    def __init__(self) -> None:
        self.documents = InMemoryDocuments()
        self.objects = InMemoryObjects()
        self.index = InMemoryChunkIndex()
        self.workflow = InMemoryWorkflow()

    def record(
        self,
        document_id: str,
        status: DocumentStatus,
        *,
        tenant: str = "acme",
        version: str | None = "v1",
        **fields: Any,
    ) -> str:
        key = upload_key(tenant, document_id, "a.pdf")
        self.documents.items[document_id] = {
            "document_id": document_id,
            "tenant_id": tenant,
            "status": status.value,
            "filename": "a.pdf",
            "bucket": BUCKET,
            "key": key,
            "version": version,
            "created_at": OLD,
            "updated_at": fields.pop("updated_at", "2099-01-01T00:00:00.000+00:00"),
            **fields,
        }
        return key

    def ready(
        self,
        document_id: str,
        chunks: int,
        *,
        indexed: int | None = None,
        checkpoints: bool = True,
        version: str = "v1",
    ) -> None:
        key = self.record(document_id, DocumentStatus.READY, version=version, chunk_count=chunks, indexed_count=chunks)
        self.objects.upload(BUCKET, key, version, b"%PDF")
        made = _chunks(chunks)
        self.put_chunks(document_id, version, chunks if indexed is None else indexed)
        if checkpoints:
            chunks_key = artifact_key(document_id, version, CHUNKS_ARTIFACT)
            self.objects.put_json(BUCKET, chunks_key, [c.model_dump() for c in made])
            prefix = artifact_key(document_id, version, EMBEDDINGS_FOLDER)
            for number, first in enumerate(range(0, chunks, 2)):
                size = min(2, chunks - first)
                self.objects.put_json(BUCKET, embedding_batch_key(prefix, number), [[0.3, 0.4]] * size)

    def put_chunks(self, document_id: str, version: str, count: int, *, first: int = 0, tenant: str = "acme") -> None:
        self.index.write_chunks(
            DocumentStamp(tenant, document_id, version, filename="a.pdf"),
            _chunks(count)[first:],
            [[0.0]] * (count - first),
        )

    def reconciler(self, *, grace: int = 0) -> Reconciler:
        return Reconciler(
            documents=self.documents,
            objects=self.objects,
            checkpoints=self.objects,
            index=self.index,
            replayer=Replayer(self.documents, self.workflow),
            settings=ReconcilerSettings(
                bucket=BUCKET, stuck_after_seconds=1800, expire_uploads_after_seconds=3600, object_grace_seconds=grace
            ),
            clock=lambda: NOW,
        )


def _kinds(report: ReconcileReport) -> dict[tuple[DriftKind, str | None], Finding]:
    return {(f.kind, f.document_id): f for f in report.findings}


def test_a_consistent_state_has_no_drift() -> None:
    world = World()
    world.ready(D["doc-a"], 3)
    world.ready(D["doc-b"], 5)
    report = world.reconciler().reconcile()
    assert report.findings == []
    assert (report.records, report.object_keys, report.indexed_versions, report.chunks) == (2, 2, 2, 8)


@pytest.fixture
def damaged() -> World:
    world = World()
    world.ready(D["healthy"], 3)
    world.ready(D["short"], 4, indexed=2)  # chunks dropped from the index: checkpoints re-index it
    world.ready(D["short-no-checkpoints"], 3, indexed=1, checkpoints=False)  # replayed
    world.ready(D["superseded"], 2, version="v2")
    world.put_chunks(D["superseded"], "v1", 5)
    world.put_chunks(D["orphan"], "v9", 2)
    world.record(D["deleted"], DocumentStatus.DELETED)
    world.put_chunks(D["deleted"], "v1", 3)
    world.ready(D["object-gone"], 2)
    del world.objects.uploads[(BUCKET, upload_key("acme", D["object-gone"], "a.pdf"), "v1")]
    key = world.record(D["in-flight-object-gone"], DocumentStatus.PROCESSING)  # its workflow fails it by itself
    world.objects.upload(BUCKET, "raw/acme/loose.pdf", "v7", b"%PDF")  # put without the API, never ingested
    world.record(D["stuck"], DocumentStatus.PROCESSING, updated_at=OLD)
    world.objects.upload(BUCKET, upload_key("acme", D["stuck"], "a.pdf"), "v1", b"%PDF")
    assert key
    return world


def test_finds_every_kind_of_drift_and_changes_nothing_without_repair(damaged: World) -> None:
    before = (dict(damaged.index.chunks), {k: dict(v) for k, v in damaged.documents.items.items()})
    report = damaged.reconciler().reconcile()
    found = _kinds(report)
    assert set(found) == {
        (DriftKind.CHUNK_COUNT_MISMATCH, D["short"]),
        (DriftKind.CHUNK_COUNT_MISMATCH, D["short-no-checkpoints"]),
        (DriftKind.STALE_CHUNKS, D["superseded"]),
        (DriftKind.ORPHAN_CHUNKS, D["orphan"]),
        (DriftKind.STALE_CHUNKS, D["deleted"]),
        (DriftKind.RECORD_WITHOUT_OBJECT, D["object-gone"]),
        (DriftKind.RECORD_WITHOUT_OBJECT, D["in-flight-object-gone"]),
        (DriftKind.OBJECT_WITHOUT_RECORD, document_id_for_object(BUCKET, "raw/acme/loose.pdf")),
        (DriftKind.STUCK, D["stuck"]),
    }
    assert found[(DriftKind.CHUNK_COUNT_MISMATCH, D["short"])].reason == "READY with 4 chunks recorded, 2 in the index"
    assert found[(DriftKind.STALE_CHUNKS, D["superseded"])].version_hash == version_hash("v1")
    assert found[(DriftKind.STALE_CHUNKS, D["superseded"])].chunks == 5
    assert "superseded" in found[(DriftKind.STALE_CHUNKS, D["superseded"])].reason
    assert not found[(DriftKind.RECORD_WITHOUT_OBJECT, D["in-flight-object-gone"])].repairable
    assert not found[(DriftKind.STUCK, D["stuck"])].repairable
    assert "reaper" in found[(DriftKind.STUCK, D["stuck"])].reason
    assert all(f.repaired is None for f in report.findings)
    assert (dict(damaged.index.chunks), damaged.documents.items) == before
    assert report.counts()[DriftKind.CHUNK_COUNT_MISMATCH] == 2
    assert len(describe(report.findings)) == len(report.findings)


def test_repair_fixes_what_is_safe_and_a_second_run_changes_nothing(damaged: World) -> None:
    report = damaged.reconciler().reconcile(ReconcileRequest(repair=True))
    found = _kinds(report)
    assert found[(DriftKind.CHUNK_COUNT_MISMATCH, D["short"])].repaired == "re-indexed 4 chunks from the checkpoints"
    assert damaged.index.versions_of(D["short"]) == {version_hash("v1"): 4}
    assert (found[(DriftKind.CHUNK_COUNT_MISMATCH, D["short-no-checkpoints"])].repaired or "").startswith("replayed")
    assert damaged.documents.get(D["short-no-checkpoints"]).status == DocumentStatus.QUEUED  # type: ignore[union-attr]
    assert len(damaged.workflow.started) == 1
    assert damaged.index.versions_of(D["superseded"]) == {version_hash("v2"): 2}
    assert damaged.index.versions_of(D["orphan"]) == {} and damaged.index.versions_of(D["deleted"]) == {}
    gone = damaged.documents.get(D["object-gone"])
    assert gone is not None and gone.status == DocumentStatus.FAILED
    assert gone.error_code == ErrorCode.SOURCE_OBJECT_MISSING
    # Marked in the objects pass, so its chunks go in the same run's index pass.
    assert found[(DriftKind.STALE_CHUNKS, D["object-gone"])].repaired == "deleted 2 chunks"
    assert damaged.index.versions_of(D["object-gone"]) == {}
    assert report.unrepaired == 0

    snapshot = (dict(damaged.index.chunks), {k: dict(v) for k, v in damaged.documents.items.items()})
    again = damaged.reconciler().reconcile(ReconcileRequest(repair=True))
    assert {f.kind for f in again.findings} == {
        DriftKind.OBJECT_WITHOUT_RECORD, DriftKind.RECORD_WITHOUT_OBJECT, DriftKind.STUCK
    }  # fmt: skip
    assert all(not f.repairable for f in again.findings)
    assert (dict(damaged.index.chunks), damaged.documents.items) == snapshot
    assert len(damaged.workflow.started) == 1


def test_extra_chunks_beyond_the_record_are_removed_by_a_reindex() -> None:
    world = World()
    world.ready(D["doc"], 3)
    world.put_chunks(D["doc"], "v1", 6, first=3)
    report = world.reconciler().reconcile(ReconcileRequest(repair=True))
    assert report.findings[0].reason == "READY with 3 chunks recorded, 6 in the index"
    assert report.findings[0].repaired == "re-indexed 3 chunks from the checkpoints, deleted 3 beyond them"
    assert world.index.versions_of(D["doc"]) == {version_hash("v1"): 3}


def test_a_reindex_stamps_the_chunks_as_index_does_access_and_uploader_included() -> None:
    world = World()
    world.ready(D["private"], 3, indexed=1)
    world.documents.items[D["private"]] |= {
        "access": {"users": ["ann"], "groups": ["legal"]},
        "uploaded_by": "bob",
        "metadata": {"customer": "initech"},
    }
    report = world.reconciler().reconcile(ReconcileRequest(repair=True))
    assert report.findings[0].repaired == "re-indexed 3 chunks from the checkpoints"
    written = [source for source in world.index.chunks.values() if source["document_id"] == D["private"]]
    assert len(written) == 3
    for source in written:
        assert source["access"] == DocumentAccess(users=["ann"], groups=["legal"])  # not open to the tenant
        assert source["uploaded_by"] == "bob"
        assert source["metadata"] == {"customer": "initech"}


def test_a_tenant_run_sees_only_that_tenant() -> None:
    world = World()
    world.ready(D["mine"], 2)
    world.put_chunks(D["theirs"], "v1", 2, tenant="other")
    assert world.reconciler().reconcile(ReconcileRequest(tenant_id="acme")).findings == []
    assert [f.kind for f in world.reconciler().reconcile(ReconcileRequest(tenant_id="other")).findings] == [
        DriftKind.ORPHAN_CHUNKS
    ]


def test_young_objects_and_in_flight_documents_are_not_drift() -> None:
    world = World()
    world.objects.uploaded_at = "2099-01-01T00:00:00.000+00:00"  # just put: intake may not have run yet
    world.objects.upload(BUCKET, "raw/acme/new.pdf", "v1", b"%PDF")
    key = world.record(D["processing"], DocumentStatus.PROCESSING, version="v2")
    world.objects.upload(BUCKET, key, "v2", b"%PDF")
    # Index writes before READY, and an older version's chunks stay until Finalize: not drift.
    world.put_chunks(D["processing"], "v1", 2)
    world.put_chunks(D["processing"], "v2", 1)
    assert world.reconciler(grace=900).reconcile().findings == []


def test_a_document_that_moves_on_during_the_run_is_not_reported() -> None:
    world = World()
    world.ready(D["doc"], 2, version="v2")
    world.put_chunks(D["doc"], "v1", 2)
    reconciler = world.reconciler()
    original = world.documents.get

    def newer_version_meanwhile(document_id: str) -> Any:
        # Between the scan and the consistent re-read, v1 became current again (a re-upload).
        world.documents.items[D["doc"]]["version"] = "v1"
        return original(document_id)

    world.documents.get = newer_version_meanwhile  # type: ignore[method-assign]
    report = reconciler.reconcile(ReconcileRequest(repair=True))
    assert [f.kind for f in report.findings] == []
    assert world.index.versions_of(D["doc"])[version_hash("v1")] == 2


def test_a_request_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError):
        ReconcileRequest.model_validate({"repair": True, "everything": 1})


class SourceItems:
    """The sources' item links in memory: (tenant, source, key) -> document id."""

    def __init__(self, links: dict[tuple[str, str, str], str]) -> None:
        self.items = dict(links)
        self.asked: list[list[str]] = []

    def links(self, tenant_ids: Iterable[str]) -> Iterator[SourceItemLink]:
        tenants = sorted(tenant_ids)
        self.asked.append(tenants)
        for (tenant, source, key), document_id in sorted(self.items.items()):
            if tenant in tenants:
                yield SourceItemLink(tenant, source, key, document_id)

    def unlink(self, link: SourceItemLink) -> None:
        del self.items[(link.tenant_id, link.source_id, link.key)]


def test_a_source_item_whose_document_is_gone_is_forgotten_so_the_next_sync_adds_it() -> None:
    world = World()
    world.ready(D["doc-a"], 2)
    world.record(D["deleted"], DocumentStatus.DELETED)
    world.ready(D["theirs"], 1)
    world.documents.items[D["theirs"]]["tenant_id"] = "globex"
    items = SourceItems(
        {
            ("acme", "src_1", "handbook/a.md"): D["doc-a"],
            ("acme", "src_1", "handbook/deleted.md"): D["deleted"],
            ("acme", "src_1", "handbook/never.md"): D["orphan"],  # no record at all
            ("globex", "src_9", "theirs.md"): D["theirs"],
        }
    )
    reconciler = world.reconciler()
    reconciler._source_items = items
    found = reconciler.reconcile(ReconcileRequest(repair=False))
    drift = {f.key: f for f in found.findings if f.kind is DriftKind.SOURCE_ITEM_WITHOUT_DOCUMENT}
    assert set(drift) == {"handbook/deleted.md", "handbook/never.md"}
    assert all(f.repairable and f.repaired is None for f in drift.values())
    assert found.source_items == 4 and items.asked == [["acme", "globex"]]

    repaired = reconciler.reconcile(ReconcileRequest(repair=True))
    assert {f.key for f in repaired.findings if f.repaired} == {"handbook/deleted.md", "handbook/never.md"}
    assert sorted(items.items) == [("acme", "src_1", "handbook/a.md"), ("globex", "src_9", "theirs.md")]
    assert reconciler.reconcile(ReconcileRequest(repair=True)).findings == []
    reconciler.reconcile(ReconcileRequest(tenant_id="globex"))
    assert items.asked[-1] == ["globex"]
