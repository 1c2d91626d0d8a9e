"""Every stage of the pipeline over in-memory fakes (tests/support/fakes.py): the happy path,
checkpoint reuse, stale-write rejection and error mapping, in milliseconds.

The same stages against moto and the real OpenSearch: tests/integration/test_pipeline_stages.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.core.config import StagesEnv
from rag_ingest.core.errors import EmbeddingCapacityWait, ErrorCode, PermanentError, StaleWriteError
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import DocumentJob, EmbedTask, FailedJob, ObjectRef, Stage
from rag_ingest.core.parsed import DocumentFormat
from rag_ingest.core.record import DocumentStatus
from rag_ingest.core.s3_keys import embedding_batch_key
from rag_ingest.core.tokens import count_tokens
from rag_ingest.documents.schemas import DocumentView
from rag_ingest.ingest.pipeline import Pipeline, StageDependencies

from samples import documents, spreadsheets
from tests.support.fakes import (
    CountingEmbedder,
    InMemoryChunkIndex,
    InMemoryDocuments,
    InMemoryObjects,
    RecordingTelemetry,
)

pytestmark = pytest.mark.unit
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
BUCKET = "docs"
ENV = StagesEnv.from_env(
    {
        "DOCUMENTS_TABLE": "documents",
        "BUCKET_NAME": BUCKET,
        "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9200",
        "OPENSEARCH_INDEX": "chunks",
        "EMBEDDING_PROVIDER": "local",
        "EMBEDDING_MODEL_ID": "fake-embedder",
        "EMBEDDING_DIMENSION": "4",
        "MAX_FILE_BYTES": str(5 * 1024 * 1024),
        "MAX_PAGES": "50",
        "CHUNK_TOKENS": "120",
        "CHUNK_OVERLAP_TOKENS": "20",
        "EMBED_BATCH_SIZE": "2",
        "EMBED_TASK_CHUNKS": "4",
    }
)


@dataclass
class World:
    pipeline: Pipeline
    documents: InMemoryDocuments
    objects: InMemoryObjects
    index: InMemoryChunkIndex
    embedder: CountingEmbedder
    telemetry: RecordingTelemetry

    def upload(
        self, data: bytes, *, document_id: str | None = None, version: str = "v1", filename: str = "a.pdf"
    ) -> DocumentJob:
        """Put an upload and queue it, as intake would."""
        document_id = document_id or new_document_id()
        ref = self.objects.upload(BUCKET, f"raw/acme/{document_id}/{filename}", version, data)
        queued = self.documents.mark_queued(
            document_id=document_id,
            tenant_id="acme",
            ref=ref,
            event_time=datetime.now(UTC).isoformat(),
            size_bytes=len(data),
        )
        assert queued.record is not None
        return DocumentJob(document_id=document_id, tenant_id="acme", bucket=BUCKET, key=ref.key, version=version)

    def through_chunk(self, job: DocumentJob) -> DocumentJob:
        return self.pipeline.chunk(self.pipeline.parse(self.pipeline.validate(job)))

    def embed_all(self, job: DocumentJob) -> None:
        for task in job.embed_tasks:
            self.pipeline.embed(EmbedTask(job=job, task=task))

    def run(self, job: DocumentJob) -> DocumentJob:
        job = self.through_chunk(job)
        self.embed_all(job)
        return self.pipeline.finalize(self.pipeline.index(job))


def build_world(**extra_dependencies: Any) -> World:
    """A pipeline over fresh fakes; ``extra_dependencies`` are further StageDependencies fields
    (``env`` replaces this module's ENV)."""
    documents, objects, index = InMemoryDocuments(), InMemoryObjects(), InMemoryChunkIndex()
    embedder, telemetry = CountingEmbedder(), RecordingTelemetry()
    env = extra_dependencies.pop("env", ENV)
    deps = StageDependencies(
        env=env,
        status=documents,
        objects=objects,
        vector_store=lambda: index,
        embedder=lambda: embedder,
        count_tokens=count_tokens,
        telemetry=telemetry,
        **extra_dependencies,
    )
    return World(Pipeline(deps), documents, objects, index, embedder, telemetry)


@pytest.fixture
def world() -> World:
    return build_world()


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def status_of(world: World, job: DocumentJob) -> DocumentStatus:
    record = world.documents.get(job.document_id)
    assert record is not None
    return record.status


# -- the happy path ------------------------------------------------------------------------------
def test_every_stage_in_turn_makes_the_document_ready(world: World) -> None:
    job = world.upload(sample("sourdough.pdf"))

    job = world.pipeline.validate(job)
    assert job.size_bytes == len(sample("sourdough.pdf"))
    job = world.pipeline.parse(job)
    assert job.page_count and job.page_count >= 1 and job.pages_key
    job = world.pipeline.chunk(job)
    assert job.chunk_count and job.chunk_count > 1 and job.embed_tasks == list(range(-(-job.chunk_count // 4)))
    world.embed_all(job)
    assert world.embedder.texts_embedded == job.chunk_count
    job = world.pipeline.index(job)
    assert job.indexed_count == job.chunk_count and world.index.created
    job = world.pipeline.finalize(job)

    record = world.documents.get(job.document_id)
    assert record is not None and record.status is DocumentStatus.READY and record.stage is None
    assert record.page_count == job.page_count and record.chunk_count == job.chunk_count
    assert record.progress is not None and (record.progress.done, record.progress.total) == (job.chunk_count,) * 2
    assert set(record.timings_ms) == {stage.value for stage in Stage}
    assert record.attempts == {stage.value: 1 for stage in Stage} | {Stage.EMBED.value: len(job.embed_tasks)}
    assert world.index.versions_of(job.document_id) == {job.chunks_key.split("/")[2]: job.chunk_count}  # type: ignore[union-attr]
    assert [detail["document_id"] for detail in world.telemetry.ready] == [job.document_id]
    assert world.telemetry.started.count(Stage.EMBED) == len(job.embed_tasks)


def test_a_new_version_replaces_the_chunks_of_the_old_one(world: World) -> None:
    first = world.run(world.upload(sample("sourdough.pdf")))
    second = world.run(world.upload(sample("lighthouses.pdf"), document_id=first.document_id, version="v2"))
    assert second.stale_chunks_deleted == first.chunk_count
    versions = world.index.versions_of(first.document_id)
    assert list(versions.values()) == [second.chunk_count]


# -- checkpoints -----------------------------------------------------------------------------------
def test_a_retried_parse_reuses_its_artifact_instead_of_reading_the_pdf_again(world: World) -> None:
    job = world.pipeline.validate(world.upload(sample("sourdough.pdf")))
    parsed = world.pipeline.parse(job)
    again = world.pipeline.parse(job)
    assert len(world.objects.reads) == 1
    assert (again.page_count, again.pages_key) == (parsed.page_count, parsed.pages_key)


def test_a_retried_embed_task_pays_only_for_batches_not_yet_checkpointed(world: World) -> None:
    job = world.through_chunk(world.upload(sample("sourdough.pdf")))
    task = EmbedTask(job=job, task=0)
    first = world.pipeline.embed(task)
    paid = world.embedder.texts_embedded
    assert paid == first["chunks"] > 0
    second = world.pipeline.embed(task)  # Step Functions retried the task after it finished
    assert second == first and world.embedder.texts_embedded == paid
    record = world.documents.get(job.document_id)
    assert record is not None and record.progress is not None and record.progress.done == first["chunks"]


def test_an_embed_task_that_gives_way_to_the_shared_quota_shows_its_document_waiting(world: World) -> None:
    job = world.through_chunk(world.upload(sample("sourdough.pdf")))
    task = EmbedTask(job=job, task=0)
    inner_embed = world.embedder.embed
    calls = 0

    def second_batch_waits(texts: Sequence[str]) -> list[list[float]]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise EmbeddingCapacityWait("booked 90 s ahead", booked_ahead_seconds=90.0)
        return inner_embed(texts)

    world.embedder.embed = second_batch_waits  # type: ignore[method-assign]
    with pytest.raises(EmbeddingCapacityWait):
        world.pipeline.embed(task)
    record = world.documents.get(job.document_id)
    assert record is not None and record.capacity_wait_until is not None
    until = datetime.fromisoformat(record.capacity_wait_until)
    assert 60 < (until - datetime.now(UTC)).total_seconds() <= 90
    view = DocumentView.of(record)
    assert (view.status, view.stage, view.waiting_for) == ("PROCESSING", "EMBED", "EMBEDDING_CAPACITY")
    assert view.waiting_until == record.capacity_wait_until
    paid = world.embedder.texts_embedded
    assert paid == ENV.embed_batch_size  # the first batch, checkpointed before the task gave way

    world.pipeline.embed(task)  # Step Functions calls it again: the first batch is not paid twice
    record = world.documents.get(job.document_id)
    assert record is not None and record.capacity_wait_until is None
    assert DocumentView.of(record).waiting_for is None
    assert record.progress is not None and record.progress.done == world.embedder.texts_embedded


def test_an_index_retry_never_embeds_again(world: World) -> None:
    job = world.through_chunk(world.upload(sample("sourdough.pdf")))
    world.embed_all(job)
    paid = world.embedder.texts_embedded

    def outage() -> None:
        world.index.after_write = None
        raise ConnectionError("OpenSearch went away")

    world.index.after_write = outage
    with pytest.raises(ConnectionError):
        world.pipeline.index(job)
    indexed = world.pipeline.index(job)  # the retry
    assert indexed.indexed_count == job.chunk_count and world.embedder.texts_embedded == paid


def test_index_reads_the_checkpoints_batch_by_batch_and_refuses_a_short_one(world: World) -> None:
    world = build_world(env=ENV.model_copy(update={"embed_batch_size": 2}))
    job = world.through_chunk(world.upload(sample("lighthouses.pdf")))
    world.embed_all(job)
    assert job.chunk_count is not None and job.chunk_count > 2  # several checkpoints of 2 vectors
    indexed = world.pipeline.index(job)
    assert indexed.indexed_count == job.chunk_count
    # A checkpoint that lost a vector (a bug, never a partial write: each is one PUT) fails Index
    # with the checkpoint named, instead of shifting every later vector onto the wrong chunk.
    last = embedding_batch_key(job.embeddings_prefix or "", (job.chunk_count - 1) // 2)
    vectors = world.objects.get_json(BUCKET, last)
    world.objects.put_json(BUCKET, last, vectors[:-1])
    with pytest.raises(ValueError, match="expected"):
        world.pipeline.index(job)


def test_a_finalize_retry_after_ready_changes_nothing(world: World) -> None:
    job = world.run(world.upload(sample("sourdough.pdf")))
    world.pipeline.finalize(job)
    assert status_of(world, job) is DocumentStatus.READY and len(world.telemetry.ready) == 1


# -- stale writes: a newer version (or a delete) owns the document -----------------------------
def test_a_stage_of_a_superseded_version_stops_for_good(world: World) -> None:
    job = world.through_chunk(world.upload(sample("sourdough.pdf")))
    world.upload(sample("lighthouses.pdf"), document_id=job.document_id, version="v2")
    with pytest.raises(PermanentError) as caught:
        world.pipeline.embed(EmbedTask(job=job, task=0))
    assert caught.value.code is ErrorCode.SUPERSEDED
    assert world.embedder.texts_embedded == 0


def test_an_index_run_overtaken_during_its_write_withdraws_its_chunks(world: World) -> None:
    job = world.through_chunk(world.upload(sample("sourdough.pdf")))
    world.embed_all(job)

    def newer_version_arrives() -> None:
        world.upload(b"%PDF-", document_id=job.document_id, version="v2")

    world.index.after_write = newer_version_arrives
    with pytest.raises(PermanentError) as caught:
        world.pipeline.index(job)
    assert caught.value.code is ErrorCode.SUPERSEDED
    assert world.index.versions_of(job.document_id) == {}


def test_ready_cannot_be_written_for_a_deleted_document(world: World) -> None:
    job = world.through_chunk(world.upload(sample("sourdough.pdf")))
    world.embed_all(job)
    job = world.pipeline.index(job)
    world.documents.mark_deleting(job.document_id, "acme")
    with pytest.raises(PermanentError) as caught:
        world.pipeline.finalize(job)
    assert caught.value.code is ErrorCode.SUPERSEDED
    assert status_of(world, job) is DocumentStatus.DELETING


# -- other formats -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "document_format", "pages", "anchor"),
    [
        (documents.docx_bytes, DocumentFormat.DOCX, 1, "mooring-rules"),
        (documents.pptx_bytes, DocumentFormat.PPTX, 3, "slide-1"),
        (lambda: documents.HTML_PAGE.encode(), DocumentFormat.HTML, 1, "lighthouse-keeping"),
        (lambda: documents.MARKDOWN_TEXT.encode(), DocumentFormat.MARKDOWN, 1, "feeding"),
        (lambda: documents.PLAIN_TEXT.encode(), DocumentFormat.TEXT, 1, "canal-locks"),
        (spreadsheets.budget_xlsx, DocumentFormat.XLSX, 2, "budget"),  # its hidden sheet not read
        (lambda: spreadsheets.TIDE_TABLE_CSV.encode(), DocumentFormat.CSV, 1, None),
    ],
)
def test_every_format_is_read_as_its_bytes_say_and_its_chunks_say_where_they_stand(
    world: World, make: Callable[[], bytes], document_format: DocumentFormat, pages: int, anchor: str | None
) -> None:
    job = world.run(world.upload(make()))  # the key ends in a.pdf: the name decides nothing
    record = world.documents.get(job.document_id)
    assert record is not None and record.status is DocumentStatus.READY
    assert record.document_format is document_format and record.page_count == pages
    chunks = [entry["chunk"] for entry in world.index.chunks.values() if entry["document_id"] == job.document_id]
    assert chunks and all(chunk.document_format is document_format for chunk in chunks)
    assert {entry["content_type"] for entry in world.index.chunks.values()} == {document_format.content_type}
    assert anchor in {chunk.anchor for chunk in chunks}
    assert all(chunk.paragraph_index is None or chunk.paragraph_index >= 1 for chunk in chunks)


@pytest.mark.parametrize(
    ("read_hidden", "sheets"), [(False, ["Budget", "Crew roster"]), (True, ["Budget", "Crew roster", "Old rates"])]
)
def test_a_workbook_is_cited_by_its_cells_and_read_hidden_sheets_only_when_told(
    read_hidden: bool, sheets: list[str]
) -> None:
    world = build_world(env=ENV.model_copy(update={"index_hidden_sheets": read_hidden}))
    job = world.run(world.upload(spreadsheets.budget_xlsx(), filename="budget.xlsx"))
    record = world.documents.get(job.document_id)
    assert record is not None and record.status is DocumentStatus.READY and record.page_count == len(sheets)
    chunks = sorted(
        (entry["chunk"] for entry in world.index.chunks.values() if entry["document_id"] == job.document_id),
        key=lambda chunk: chunk.chunk_index,
    )
    ranges = [chunk.cell_range for chunk in chunks]
    assert all(ranges) and ranges[0].startswith("Budget!A1:")  # type: ignore[union-attr]
    assert [any(sheet in (cited or "") for cited in ranges) for sheet in ["Old rates"]] == [read_hidden]


def test_the_hidden_sheet_switch_is_validated_at_cold_start() -> None:
    from rag_ingest.core.errors import ConfigurationError

    variables = {name.upper(): str(value) for name, value in ENV.model_dump(exclude_none=True).items()}
    assert StagesEnv.from_env({**variables, "INDEX_HIDDEN_SHEETS": "true"}).index_hidden_sheets is True
    with pytest.raises(ConfigurationError, match="INDEX_HIDDEN_SHEETS"):
        StagesEnv.from_env({**variables, "INDEX_HIDDEN_SHEETS": "sometimes"})


def test_a_deck_of_pictures_only_is_an_empty_document(world: World) -> None:
    job = world.pipeline.validate(world.upload(documents.image_only_pptx(sample("invalid/not-a-pdf.pdf"))))
    assert job.document_format is DocumentFormat.PPTX
    with pytest.raises(PermanentError) as caught:
        world.pipeline.parse(job)  # one range: Parse judges it, as for a short PDF
    assert caught.value.code is ErrorCode.EMPTY_DOCUMENT and "2 pages" in caught.value.detail


def test_a_pdf_named_docx_is_read_as_a_pdf(world: World) -> None:
    job = world.run(world.upload(sample("sourdough.pdf"), filename="report.docx"))
    record = world.documents.get(job.document_id)
    assert record is not None and record.status is DocumentStatus.READY
    assert job.document_format is DocumentFormat.PDF and record.document_format is DocumentFormat.PDF


# -- errors ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "stage", "code"),
    [
        ("invalid/not-a-pdf.pdf", Stage.VALIDATE, ErrorCode.UNSUPPORTED_TYPE),
        ("invalid/encrypted.pdf", Stage.PARSE, ErrorCode.ENCRYPTED_PDF),
        ("invalid/truncated.pdf", Stage.PARSE, ErrorCode.CORRUPT_PDF),
    ],
)
def test_a_bad_file_fails_its_stage_with_a_permanent_code(
    world: World, name: str, stage: Stage, code: ErrorCode
) -> None:
    job = world.upload(sample(name))
    with pytest.raises(PermanentError) as caught:
        if stage is Stage.VALIDATE:
            world.pipeline.validate(job)
        else:
            world.pipeline.parse(world.pipeline.validate(job))
    assert caught.value.code is code
    record = world.documents.get(job.document_id)
    assert record is not None and record.stage is stage and record.status is DocumentStatus.PROCESSING


def test_a_vanished_upload_is_object_not_found(world: World) -> None:
    job = world.upload(sample("sourdough.pdf"))
    gone = job.model_copy(update={"version": "v-gone"})
    world.documents.mark_queued(
        document_id=job.document_id,
        tenant_id="acme",
        ref=ObjectRef(bucket=BUCKET, key=job.key, version="v-gone"),
        event_time=datetime.now(UTC).isoformat(),
        size_bytes=None,
    )
    with pytest.raises(PermanentError) as caught:
        world.pipeline.validate(gone)
    assert caught.value.code is ErrorCode.OBJECT_NOT_FOUND


def test_mark_failed_records_the_code_and_announces_it(world: World) -> None:
    job = world.pipeline.validate(world.upload(sample("sourdough.pdf")))
    failure = FailedJob(
        **job.model_dump(), error={"Error": "PermanentError", "Cause": '{"errorMessage": "CORRUPT_PDF: bad xref"}'}
    )
    outcome = world.pipeline.mark_failed(failure)
    assert outcome == {"document_id": job.document_id, "error_code": "CORRUPT_PDF", "applied": True}
    record = world.documents.get(job.document_id)
    assert record is not None and record.status is DocumentStatus.FAILED and record.error_code is ErrorCode.CORRUPT_PDF
    ((code, detail),) = world.telemetry.failed
    assert code is ErrorCode.CORRUPT_PDF and detail["stage"] == Stage.VALIDATE.value


def test_a_late_failure_of_a_superseded_version_is_not_applied(world: World) -> None:
    job = world.pipeline.validate(world.upload(sample("sourdough.pdf")))
    world.upload(sample("lighthouses.pdf"), document_id=job.document_id, version="v2")
    outcome = world.pipeline.mark_failed(FailedJob(**job.model_dump(), error={"Error": "States.Timeout"}))
    assert outcome["applied"] is False and world.telemetry.failed == []
    assert status_of(world, job) is DocumentStatus.QUEUED


def test_the_fake_refuses_what_the_table_refuses(world: World) -> None:
    # The compare-and-set the stages rely on: the fake rejects a write for a version not in flight.
    job = world.upload(sample("sourdough.pdf"))
    with pytest.raises(StaleWriteError):
        world.documents.start_stage(job.document_id, "another-version", Stage.VALIDATE)
    with pytest.raises(StaleWriteError):
        world.documents.mark_ready(job.document_id, job.version)  # QUEUED, never PROCESSING
