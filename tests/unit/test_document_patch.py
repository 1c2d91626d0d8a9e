"""PATCH /documents/{id}: the record's compare-and-set on its revision, the chunks rewritten in place
from the Index stage's artifacts (never parsed or embedded again), and the races with the workflow.

In-memory fakes (tests/support/fakes.py) run the real pipeline and the real refresher; the same
against moto and OpenSearch through the whole local stack: tests/e2e/test_document_patch_on_stack.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.core.config import ApiEnv, StagesEnv
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.ids import new_document_id, version_hash
from rag_ingest.core.job import DocumentJob, EmbedTask
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.s3_keys import CHUNKS_ARTIFACT, artifact_key
from rag_ingest.core.tokens import count_tokens
from rag_ingest.documents.errors import (
    ConcurrentUpdateError,
    DocumentNotFoundError,
    ReindexUnavailableError,
    RevisionMismatchError,
)
from rag_ingest.documents.paging import etag, if_match_revisions
from rag_ingest.documents.schemas import DocumentPatch
from rag_ingest.documents.service import DocumentService
from rag_ingest.ingest.chunk_rewrite import ChunkRewriter
from rag_ingest.ingest.pipeline import Pipeline, StageDependencies

from tests.support.fakes import CountingEmbedder, InMemoryChunkIndex, InMemoryDocuments, InMemoryObjects

pytestmark = pytest.mark.unit
PDF = (Path(__file__).resolve().parents[2] / "samples" / "lighthouses.pdf").read_bytes()
BUCKET = "docs"
_COMMON = {
    "DOCUMENTS_TABLE": "documents",
    "BUCKET_NAME": BUCKET,
    "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9200",
    "OPENSEARCH_INDEX": "chunks",
    "EMBEDDING_DIMENSION": "4",
}
STAGES_ENV = StagesEnv.from_env(
    {
        **_COMMON,
        "EMBEDDING_PROVIDER": "local",
        "EMBEDDING_MODEL_ID": "fake-embedder",
        "MAX_FILE_BYTES": str(5 * 1024 * 1024),
        "MAX_PAGES": "50",
        "CHUNK_TOKENS": "120",
        "CHUNK_OVERLAP_TOKENS": "20",
        "EMBED_BATCH_SIZE": "2",
        "EMBED_TASK_CHUNKS": "4",
    }
)
API_ENV = ApiEnv.from_env(
    {
        **_COMMON,
        "MAX_UPLOAD_BYTES": "1048576",
        "UPLOAD_URL_EXPIRY_SECONDS": "300",
        "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:ingest",
    }
)


@dataclass
class World:
    pipeline: Pipeline
    service: DocumentService
    documents: InMemoryDocuments
    objects: InMemoryObjects
    index: InMemoryChunkIndex
    embedder: CountingEmbedder

    def upload(self, document_id: str | None = None, version: str = "v1") -> DocumentJob:
        document_id = document_id or new_document_id()
        ref = self.objects.upload(BUCKET, f"raw/acme/{document_id}/a.pdf", version, PDF)
        queued = self.documents.mark_queued(
            document_id=document_id,
            tenant_id="acme",
            ref=ref,
            event_time=datetime.now(UTC).isoformat(),
            size_bytes=len(PDF),
        )
        assert queued.record is not None
        return DocumentJob(document_id=document_id, tenant_id="acme", bucket=BUCKET, key=ref.key, version=version)

    def through_embed(self, job: DocumentJob) -> DocumentJob:
        job = self.pipeline.chunk(self.pipeline.parse(self.pipeline.validate(job)))
        for task in job.embed_tasks:
            self.pipeline.embed(EmbedTask(job=job, task=task))
        return job

    def ready(self) -> DocumentJob:
        job = self.through_embed(self.upload())
        return self.pipeline.finalize(self.pipeline.index(job))

    def chunks_of(self, document_id: str) -> list[dict[str, Any]]:
        return [source for source in self.index.chunks.values() if source["document_id"] == document_id]

    def patch(self, document_id: str, metadata: dict[str, Any], **kwargs: Any) -> Any:
        return self.service.update("acme", document_id, DocumentPatch(metadata=metadata), **kwargs)


@pytest.fixture
def world() -> World:
    documents, objects, index = InMemoryDocuments(), InMemoryObjects(), InMemoryChunkIndex()
    embedder = CountingEmbedder()
    deps = StageDependencies(
        env=STAGES_ENV,
        status=documents,
        objects=objects,
        vector_store=lambda: index,
        embedder=lambda: embedder,
        count_tokens=count_tokens,
    )
    refresher = ChunkRewriter(
        documents=documents,
        objects=objects,
        vector_store=lambda: index,
        bucket=BUCKET,
        artifacts_prefix=API_ENV.artifacts_prefix,
    )
    service = DocumentService(API_ENV, documents, presigner=None, refresher=refresher)  # type: ignore[arg-type]
    return World(Pipeline(deps), service, documents, objects, index, embedder)


def test_a_ready_documents_chunks_take_the_new_metadata_with_their_vectors_and_nothing_is_embedded(
    world: World,
) -> None:
    job = world.ready()
    before = {id_: source["embedding"] for id_, source in world.index.chunks.items()}
    embedded, reads = world.embedder.texts_embedded, len(world.objects.reads)

    view = world.patch(job.document_id, {"customer": "globex", "year": 2025})

    assert view.revision == 2 and view.metadata == {"customer": "globex", "year": 2025}
    chunks = world.chunks_of(job.document_id)
    assert len(chunks) == job.chunk_count and job.chunk_count and job.chunk_count > 2  # several checkpoints
    assert all(chunk["metadata"] == {"customer": "globex", "year": 2025} for chunk in chunks)
    assert {id_: source["embedding"] for id_, source in world.index.chunks.items()} == before
    assert world.embedder.texts_embedded == embedded and len(world.objects.reads) == reads  # no embed, no parse
    record = world.documents.get(job.document_id)
    assert record is not None and record.revision == 2 and record.status is DocumentStatus.READY


def test_an_empty_object_clears_the_metadata(world: World) -> None:
    job = world.ready()
    world.patch(job.document_id, {"customer": "acme"})
    view = world.patch(job.document_id, {})
    assert view.metadata == {} and view.revision == 3
    assert all(chunk["metadata"] == {} for chunk in world.chunks_of(job.document_id))


def test_if_match_is_compared_with_the_revision(world: World) -> None:
    job = world.ready()
    assert world.patch(job.document_id, {"a": "1"}, if_match=etag(1)).revision == 2
    with pytest.raises(RevisionMismatchError):
        world.patch(job.document_id, {"a": "2"}, if_match='"1"')
    with pytest.raises(RevisionMismatchError):
        world.patch(job.document_id, {"a": "2"}, if_match='W/"2"')  # weak tags never match
    with pytest.raises(RevisionMismatchError):
        world.patch(job.document_id, {"a": "2"}, if_match="garbage")
    assert world.patch(job.document_id, {"a": "3"}, if_match='"7", "2"').revision == 3
    assert world.patch(job.document_id, {"a": "4"}, if_match="*").revision == 4
    record = world.documents.get(job.document_id)
    assert record is not None and record.metadata == {"a": "4"}


def test_if_match_parsing() -> None:
    assert if_match_revisions("*") is None
    assert if_match_revisions('"3"') == {3}
    assert if_match_revisions('"3", W/"4", "x", "5"') == {3, 5}
    assert if_match_revisions('"' + "9" * 40 + '"') == set()


def test_bad_metadata_or_an_empty_patch_is_invalid_and_changes_nothing(world: World) -> None:
    job = world.ready()
    for metadata in ({"Bad Key": 1}, {"filename": "x"}, {"a": None}, {"a": [1]}):
        with pytest.raises(PermanentError) as caught:
            world.patch(job.document_id, metadata)
        assert caught.value.code is ErrorCode.INVALID_REQUEST and "metadata" in caught.value.detail
    with pytest.raises(PermanentError):
        world.service.update("acme", job.document_id, DocumentPatch())
    record = world.documents.get(job.document_id)
    assert record is not None and record.revision == 1


def test_another_tenants_a_deleted_or_an_odd_document_is_not_found(world: World) -> None:
    job = world.ready()
    with pytest.raises(DocumentNotFoundError):
        world.service.update("other", job.document_id, DocumentPatch(metadata={"a": "b"}))
    with pytest.raises(DocumentNotFoundError):
        world.patch("not-an-id", {"a": "b"})
    world.documents.mark_deleting(job.document_id, "acme")
    with pytest.raises(DocumentNotFoundError):
        world.patch(job.document_id, {"a": "b"})
    world.documents.mark_deleted(job.document_id)
    with pytest.raises(DocumentNotFoundError):
        world.patch(job.document_id, {"a": "b"})


def test_a_document_in_flight_changes_on_its_record_and_index_writes_it(world: World) -> None:
    job = world.through_embed(world.upload())
    view = world.patch(job.document_id, {"stage": "draft"})
    assert view.status == "PROCESSING" and not world.chunks_of(job.document_id)  # the record only
    world.pipeline.finalize(world.pipeline.index(job))
    assert all(chunk["metadata"] == {"stage": "draft"} for chunk in world.chunks_of(job.document_id))


def test_a_patch_while_index_writes_is_written_again_by_index(world: World) -> None:
    job = world.through_embed(world.upload())
    patched: list[int] = []

    def patch_once() -> None:
        if not patched:
            patched.append(world.patch(job.document_id, {"late": True}).revision)

    world.index.after_write = patch_once
    job = world.pipeline.index(job)
    world.index.after_write = None
    assert patched == [2] and job.indexed_revision == 2
    assert all(chunk["metadata"] == {"late": True} for chunk in world.chunks_of(job.document_id))


def test_a_patch_between_index_and_finalize_is_written_by_finalize(world: World) -> None:
    job = world.pipeline.index(world.through_embed(world.upload()))
    world.patch(job.document_id, {"late": "yes"})
    assert all(chunk["metadata"] == {} for chunk in world.chunks_of(job.document_id))
    world.pipeline.finalize(job)
    assert all(chunk["metadata"] == {"late": "yes"} for chunk in world.chunks_of(job.document_id))


def test_a_failed_document_changes_on_its_record_only(world: World) -> None:
    job = world.upload()
    world.documents.mark_failed(job.document_id, job.version, ErrorCode.CORRUPT_PDF, "broken")
    view = world.patch(job.document_id, {"a": "b"})
    assert view.status == "FAILED" and view.metadata == {"a": "b"} and not world.index.chunks


class RacingDocuments(InMemoryDocuments):
    """Another PATCH (or a status change) lands between this one's read and its write."""

    def __init__(self, inner: InMemoryDocuments, change: dict[str, Any]) -> None:
        super().__init__()
        self.items = inner.items
        self.change = change
        self.races = 0

    def update_fields(self, record: DocumentRecord, fields: Any) -> DocumentRecord:
        if self.races < 1:
            self.races += 1
            self.items[record.document_id].update(self.change)
        return super().update_fields(record, fields)


def test_a_lost_race_is_409_without_if_match_and_412_with_it(world: World) -> None:
    job = world.ready()
    racing = RacingDocuments(world.documents, {"revision": 2, "metadata": {"winner": True}})
    service = DocumentService(API_ENV, racing, presigner=None, refresher=world.service._refresher)  # type: ignore[arg-type]
    with pytest.raises(ConcurrentUpdateError):
        service.update("acme", job.document_id, DocumentPatch(metadata={"loser": True}))
    racing.races = 0
    racing.change = {"revision": 3}
    with pytest.raises(RevisionMismatchError):
        service.update("acme", job.document_id, DocumentPatch(metadata={"loser": True}), if_match='"2"')
    record = world.documents.get(job.document_id)
    assert record is not None and record.metadata == {"winner": True}


def test_a_status_change_between_read_and_write_is_read_again(world: World) -> None:
    job = world.through_embed(world.upload())
    world.pipeline.index(job)
    # Finalize marks it READY between the PATCH's read and its write: the PATCH reads again, sees
    # READY and rewrites the chunks itself.
    racing = RacingDocuments(world.documents, {"status": DocumentStatus.READY.value})
    service = DocumentService(API_ENV, racing, presigner=None, refresher=world.service._refresher)  # type: ignore[arg-type]
    view = service.update("acme", job.document_id, DocumentPatch(metadata={"now": "ready"}))
    assert view.revision == 2 and view.status == "READY"
    assert all(chunk["metadata"] == {"now": "ready"} for chunk in world.chunks_of(job.document_id))


def test_missing_artifacts_refuse_the_patch_and_change_nothing(world: World) -> None:
    job = world.ready()
    del world.objects.artifacts[(BUCKET, artifact_key(job.document_id, job.version, CHUNKS_ARTIFACT))]
    with pytest.raises(ReindexUnavailableError):
        world.patch(job.document_id, {"a": "b"})
    record = world.documents.get(job.document_id)
    assert record is not None and record.revision == 1 and record.metadata == {}


def test_a_new_version_inherits_the_patched_metadata(world: World) -> None:
    job = world.ready()
    world.patch(job.document_id, {"customer": "initech"})
    second = world.through_embed(world.upload(job.document_id, version="v2"))
    world.pipeline.finalize(world.pipeline.index(second))
    chunks = world.chunks_of(job.document_id)
    assert chunks and all(chunk["metadata"] == {"customer": "initech"} for chunk in chunks)
    assert set(world.index.versions_of(job.document_id)) == {version_hash("v2")}


def test_a_rewrite_overtaken_by_a_new_version_withdraws_its_chunks(world: World) -> None:
    job = world.ready()

    def new_version_arrives() -> None:
        world.index.after_write = None
        world.upload(job.document_id, version="v2")

    world.index.after_write = new_version_arrives
    world.patch(job.document_id, {"a": "b"})
    assert world.chunks_of(job.document_id) == []  # v2's own Index writes its chunks
