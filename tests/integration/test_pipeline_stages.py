"""The stage functions in-process against moto's S3/DynamoDB and the real OpenSearch:
checkpoints, exactly-once indexing, re-upload replacing chunks, and error codes."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.object_store import ObjectStore
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.core.config import StagesEnv
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.filters import parse_filter
from rag_ingest.core.job import DocumentJob, EmbedTask, FailedJob, ObjectRef
from rag_ingest.core.record import DocumentStatus
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.ingest.pipeline import Pipeline, StageDependencies
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.wiring import vector_store_for

from tests.support.aws import moto_server
from tests.support.operations import create_documents_table

pytestmark = pytest.mark.integration
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
OPENSEARCH_URL = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")


class CountingEmbedder:
    """The real local model, counting calls: embeddings are paid per token in AWS."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id, self.dimension, self.max_input_tokens = inner.model_id, inner.dimension, inner.max_input_tokens
        self.texts_embedded = 0

    def embed(self, texts: Any) -> list[list[float]]:
        self.texts_embedded += len(texts)
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    with moto_server():
        suffix = uuid.uuid4().hex[:8]
        bucket, table = f"docs-{suffix}", f"documents-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)  # with its GSIs: Parse queries by_content for a copy of the upload
        env = StagesEnv.from_env(
            {
                "DOCUMENTS_TABLE": table,
                "BUCKET_NAME": bucket,
                "OPENSEARCH_ENDPOINT": OPENSEARCH_URL,
                "OPENSEARCH_INDEX": f"test-chunks-{suffix}",
                "EMBEDDING_PROVIDER": "local",
                "EMBEDDING_MODEL_ID": LOCAL_MODEL_ID,
                "EMBEDDING_DIMENSION": str(MINILM_DIMENSION),
                "MAX_FILE_BYTES": str(5 * 1024 * 1024),
                "MAX_PAGES": "50",
                "CHUNK_TOKENS": "120",
                "CHUNK_OVERLAP_TOKENS": "20",
                "EMBED_BATCH_SIZE": "2",
                "EMBED_TASK_CHUNKS": "4",
            }
        )
        store = vector_store_for(OPENSEARCH_URL, env.opensearch_index, MINILM_DIMENSION)
        embedder = CountingEmbedder(create_embedder("local", env.embedding_model_id, MINILM_DIMENSION))
        deps = StageDependencies(
            env=env,
            status=DocumentsTable(table),
            objects=ObjectStore(s3),
            vector_store=lambda: store,
            embedder=lambda: embedder,
            count_tokens=count_tokens,
        )
        yield {"env": env, "s3": s3, "store": store, "embedder": embedder, "pipeline": Pipeline(deps), "deps": deps}
        store._client.indices.delete(index=env.opensearch_index, ignore_unavailable=True)


def upload(world: dict[str, Any], sample: Path, document_id: str) -> DocumentJob:
    env = world["env"]
    key = f"raw/acme/{document_id}/{sample.name}"
    version = world["s3"].put_object(Bucket=env.bucket_name, Key=key, Body=sample.read_bytes())["VersionId"]
    ref = ObjectRef(bucket=env.bucket_name, key=key, version=version)
    status: DocumentsTable = world["deps"].status
    event_time = datetime.now(UTC).isoformat()
    status.mark_queued(document_id=document_id, tenant_id="acme", ref=ref, event_time=event_time, size_bytes=None)
    return DocumentJob(document_id=document_id, tenant_id="acme", bucket=ref.bucket, key=key, version=version)


def embed_all(pipeline: Pipeline, job: DocumentJob) -> DocumentJob:
    """What the Embed Map does: one task per planned item."""
    for task in job.embed_tasks:
        pipeline.embed(EmbedTask(job=job, task=task))
    return job


def run_all(pipeline: Pipeline, job: DocumentJob) -> DocumentJob:
    job = pipeline.chunk(pipeline.parse(pipeline.validate(job)))
    return pipeline.finalize(pipeline.index(embed_all(pipeline, job)))


def test_stages_index_once_and_retries_neither_duplicate_nor_re_embed(world: dict[str, Any]) -> None:
    pipeline: Pipeline = world["pipeline"]
    store: VectorStore = world["store"]
    embedder: CountingEmbedder = world["embedder"]
    document_id = f"doc-{uuid.uuid4().hex[:8]}"
    job = upload(world, SAMPLES / "sourdough.pdf", document_id)

    before = embedder.texts_embedded
    embedded = embed_all(pipeline, pipeline.chunk(pipeline.parse(pipeline.validate(job))))
    assert embedded.chunk_count and embedder.texts_embedded - before == embedded.chunk_count
    # CHUNK_TOKENS 120 and EMBED_TASK_CHUNKS 4 (two batches of 2): several Map tasks.
    assert len(embedded.embed_tasks) > 1
    record = world["deps"].status.get(document_id)
    assert record.progress.done == record.progress.total == embedded.chunk_count

    # Step Functions retries an Embed task (e.g. it timed out after its work): checkpoints answer.
    before = embedder.texts_embedded
    pipeline.embed(EmbedTask(job=embedded, task=0))
    assert embedder.texts_embedded == before
    # Index runs twice (a retry after a failure past the bulk write): same ids, no duplicates.
    pipeline.index(embedded)
    indexed = pipeline.index(embedded)
    assert indexed.indexed_count == embedded.chunk_count
    assert store.count(document_id=document_id) == embedded.chunk_count

    done = pipeline.finalize(indexed)
    record = world["deps"].status.get(document_id)
    assert record.status is DocumentStatus.READY and done.stale_chunks_deleted == 0
    assert record.progress.done == record.progress.total == embedded.chunk_count
    # EMBED counts task invocations: one per Map item, plus the retried one.
    tasks = len(embedded.embed_tasks)
    assert record.attempts == {"VALIDATE": 1, "PARSE": 1, "CHUNK": 1, "EMBED": tasks + 1, "INDEX": 2, "FINALIZE": 1}


def test_reupload_replaces_the_old_versions_chunks(world: dict[str, Any]) -> None:
    pipeline: Pipeline = world["pipeline"]
    store: VectorStore = world["store"]
    document_id = f"doc-{uuid.uuid4().hex[:8]}"
    first = run_all(pipeline, upload(world, SAMPLES / "sourdough.pdf", document_id))
    second_job = upload(world, SAMPLES / "urban-birds.pdf", document_id)  # same document, new version
    second = run_all(pipeline, second_job)
    assert second.stale_chunks_deleted == first.chunk_count
    assert store.count(document_id=document_id) == second.chunk_count
    assert store.count(document_id=document_id, version=first.version) == 0


@pytest.mark.parametrize(
    ("sample", "code"),
    [
        ("not-a-pdf.pdf", ErrorCode.UNSUPPORTED_TYPE),
        ("encrypted.pdf", ErrorCode.ENCRYPTED_PDF),
        ("truncated.pdf", ErrorCode.CORRUPT_PDF),
        ("image-only.pdf", ErrorCode.NO_TEXT_LAYER),
    ],
)
def test_bad_files_raise_their_code_and_mark_failed_records_it(
    world: dict[str, Any], sample: str, code: ErrorCode
) -> None:
    pipeline: Pipeline = world["pipeline"]
    document_id = f"doc-{uuid.uuid4().hex[:8]}"
    job = upload(world, SAMPLES / "invalid" / sample, document_id)
    with pytest.raises(PermanentError) as caught:
        pipeline.parse(pipeline.validate(job))
    assert caught.value.code is code
    cause = {"errorType": "PermanentError", "errorMessage": str(caught.value)}
    failed = FailedJob.model_validate(
        {**job.model_dump(), "error": {"Error": "PermanentError", "Cause": json.dumps(cause)}}
    )
    assert pipeline.mark_failed(failed)["applied"] is True
    record = world["deps"].status.get(document_id)
    assert (record.status, record.error_code) == (DocumentStatus.FAILED, code)


def test_an_index_write_that_lands_after_a_newer_version_took_over_is_withdrawn(world: dict[str, Any]) -> None:
    pipeline: Pipeline = world["pipeline"]
    store: VectorStore = world["store"]
    status: DocumentsTable = world["deps"].status
    document_id = f"doc-{uuid.uuid4().hex[:8]}"
    old = embed_all(
        pipeline,
        pipeline.chunk(pipeline.parse(pipeline.validate(upload(world, SAMPLES / "sourdough.pdf", document_id)))),
    )
    real_write = store.write_chunks

    def slow_write(*args: Any, **kwargs: Any) -> int:
        written = real_write(*args, **kwargs)
        upload(
            world, SAMPLES / "urban-birds.pdf", document_id
        )  # the re-upload is queued while this write was in flight
        return written

    store.write_chunks = slow_write  # type: ignore[method-assign]
    try:
        with pytest.raises(PermanentError) as caught:
            pipeline.index(old)
    finally:
        store.write_chunks = real_write  # type: ignore[method-assign]
    assert caught.value.code is ErrorCode.SUPERSEDED
    assert store.count(document_id=document_id, version=old.version) == 0
    current = status.get(document_id)
    assert current is not None and current.status is DocumentStatus.QUEUED


def test_index_writes_the_records_metadata_and_a_new_version_inherits_it(world: dict[str, Any]) -> None:
    """Metadata given at upload (the record in DynamoDB) is on every chunk in OpenSearch, for the
    first version and the next one, and a filtered search finds exactly this document's passages."""
    pipeline: Pipeline = world["pipeline"]
    store: VectorStore = world["store"]
    status: DocumentsTable = world["deps"].status
    document_id = f"doc-{uuid.uuid4().hex[:8]}"
    metadata = {"customer": f"c-{document_id}", "year": 2024, "signed": "2024-03-01", "tags": ["nda"]}
    status.create_awaiting_upload(
        document_id=document_id,
        tenant_id="acme",
        filename="sourdough.pdf",
        bucket=world["env"].bucket_name,
        key=f"raw/acme/{document_id}/sourdough.pdf",
        metadata=metadata,
    )
    where = parse_filter(
        {
            "andAll": [
                {"equals": {"key": "customer", "value": metadata["customer"]}},
                {"greaterThan": {"key": "signed", "value": "2024-01-01"}},
            ]
        }
    )
    for sample in ("sourdough.pdf", "urban-birds.pdf"):
        job = run_all(pipeline, upload(world, SAMPLES / sample, document_id))
        assert job.chunk_count
        hits = store.knn_search(SearchQuery(tenant_id="acme", text="", where=where), [1.0] * MINILM_DIMENSION, k=500)
        assert {hit.document_id for hit in hits} == {document_id}
        assert len(hits) == store.count(document_id=document_id) == job.chunk_count
        record = status.get(document_id)
        assert record is not None and record.metadata == metadata
