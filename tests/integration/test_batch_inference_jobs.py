"""Bedrock batch inference end to end offline: the bulk lane's batch Embed (rag_ingest.ingest.batch_embedding)
through the real boto3 ``bedrock`` and ``s3`` clients (rag_ingest.adapters.batch_inference), against
moto's server and the local embedding server's job runner (its own process, deterministic vectors),
then the pipeline's Index reading the checkpoints the job's output became."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.batch_inference import BedrockBatchJobs
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.object_store import ObjectStore
from rag_ingest.core.config import StagesEnv
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.job import BatchPhase, DocumentJob, ObjectRef
from rag_ingest.core.s3_keys import embedding_batch_key
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.ingest.batch_embedding import BatchEmbedding, BatchSettings
from rag_ingest.ingest.embedding_cache import NoEmbeddingCache
from rag_ingest.ingest.pipeline import Pipeline, StageDependencies, texts_to_embed
from rag_ingest.wiring import vector_store_for

from local.embedding_server.deterministic import deterministic_vector
from local.embedding_server.process import EmbeddingServerProcess
from tests.support.aws import moto_server
from tests.support.operations import create_documents_table

pytestmark = pytest.mark.integration

OPENSEARCH_URL = "http://127.0.0.1:9200"
SAMPLE = Path(__file__).resolve().parents[2] / "samples"
ROLE_ARN = "arn:aws:iam::123456789012:role/rag-ingest-batch"
# The local runner's minimum for this test (Bedrock's is 100): a 5-page sample has fewer chunks.
SERVER_MIN_RECORDS = 4


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    with moto_server() as endpoint:
        server = EmbeddingServerProcess(
            env={
                "LOCAL_BATCH_S3_ENDPOINT": endpoint,
                "LOCAL_EMBEDDING_VECTORS": "deterministic",
                "LOCAL_BATCH_MIN_RECORDS": str(SERVER_MIN_RECORDS),
                "LOCAL_BATCH_MAX_JOBS": "2",
            }
        )
        server.start()
        suffix = uuid.uuid4().hex[:8]
        bucket, table = f"docs-{suffix}", f"documents-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)
        bedrock = boto3.client("bedrock", endpoint_url=server.url)
        env = StagesEnv.from_env(
            {
                "DOCUMENTS_TABLE": table,
                "BUCKET_NAME": bucket,
                "OPENSEARCH_ENDPOINT": os.environ.get("OPENSEARCH_URL", OPENSEARCH_URL),
                "OPENSEARCH_INDEX": f"test-batch-{suffix}",
                "EMBEDDING_PROVIDER": "local",
                "EMBEDDING_MODEL_ID": LOCAL_MODEL_ID,
                "EMBEDDING_DIMENSION": str(MINILM_DIMENSION),
                "MAX_FILE_BYTES": str(5 * 1024 * 1024),
                "MAX_PAGES": "50",
                "CHUNK_TOKENS": "60",
                "CHUNK_OVERLAP_TOKENS": "10",
                "EMBED_BATCH_SIZE": "4",
                "EMBED_TASK_CHUNKS": "8",
            }
        )
        status = DocumentsTable(table)
        store = vector_store_for(env.opensearch_endpoint, env.opensearch_index, MINILM_DIMENSION)
        try:
            yield {
                "env": env,
                "s3": s3,
                "bedrock": bedrock,
                "jobs": BedrockBatchJobs(bedrock, s3),
                "status": status,
                "store": store,
                "server": server,
            }
        finally:
            store._client.indices.delete(index=env.opensearch_index, ignore_unavailable=True)
            server.stop()


def pipeline_for(world: dict[str, Any], *, min_records: int = SERVER_MIN_RECORDS) -> Pipeline:
    env: StagesEnv = world["env"]
    settings = BatchSettings(
        bucket=env.bucket_name,
        artifacts_prefix=env.artifacts_prefix,
        role_arn=ROLE_ARN,
        model_id=LOCAL_MODEL_ID,
        dimension=MINILM_DIMENSION,
        batch_size=env.embed_batch_size,
        min_records=min_records,
        poll_seconds=1,
        max_poll_seconds=1,
    )
    batch = BatchEmbedding(
        settings, jobs=world["jobs"], objects=ObjectStore(world["s3"]), status=world["status"], cache=NoEmbeddingCache()
    )

    def no_model() -> Any:
        raise AssertionError("the batch path must not call the on-demand embedder")

    return Pipeline(
        StageDependencies(
            env=env,
            status=world["status"],
            objects=ObjectStore(world["s3"]),
            vector_store=lambda: world["store"],
            embedder=no_model,
            count_tokens=count_tokens,
            batch_embedding=batch,
        )
    )


def chunked(
    world: dict[str, Any], pipeline: Pipeline, document_id: str, sample: str = "lighthouses.pdf", body: bytes = b""
) -> DocumentJob:
    env: StagesEnv = world["env"]
    key = f"raw/acme/{document_id}/{sample}"
    body = body or (SAMPLE / sample).read_bytes()
    version = world["s3"].put_object(Bucket=env.bucket_name, Key=key, Body=body)["VersionId"]
    ref = ObjectRef(bucket=env.bucket_name, key=key, version=version)
    now = datetime.now(UTC).isoformat()
    world["status"].mark_queued(document_id=document_id, tenant_id="acme", ref=ref, event_time=now, size_bytes=None)
    job = DocumentJob(document_id=document_id, tenant_id="acme", bucket=ref.bucket, key=key, version=version)
    return pipeline.chunk(pipeline.parse(pipeline.validate(job)))


def run_loop(pipeline: Pipeline, job: DocumentJob, limit: float = 60.0) -> DocumentJob:
    """What the workflow's wait loop does: advance, wait wait_seconds, until the phase is not WAITING."""
    deadline = time.monotonic() + limit
    job = pipeline.embed_batch(job)
    while job.embed_batch is not None and job.embed_batch.phase is BatchPhase.WAITING:
        assert time.monotonic() < deadline, job.embed_batch
        time.sleep(min(job.embed_batch.wait_seconds, 0.3))
        job = pipeline.embed_batch(job)
    return job


def test_a_batch_job_embeds_the_document_and_index_reads_its_checkpoints(world: dict[str, Any]) -> None:
    pipeline = pipeline_for(world)
    document_id = f"doc-{uuid.uuid4().hex[:10]}"
    job = chunked(world, pipeline, document_id)
    assert job.chunk_count and job.chunk_count >= SERVER_MIN_RECORDS

    job = run_loop(pipeline, job)
    assert job.embed_batch is not None and job.embed_batch.phase is BatchPhase.DONE
    assert job.embed_batch.status == "Completed" and job.embed_batch.job_arn

    # The checkpoints hold the job's vectors, in chunk order (the runner's deterministic vectors).
    env: StagesEnv = world["env"]
    chunks = pipeline._load_chunks(job)
    texts = texts_to_embed(chunks)
    assert job.embeddings_prefix
    first = world["s3"].get_object(Bucket=env.bucket_name, Key=embedding_batch_key(job.embeddings_prefix, 0))
    vectors = json.loads(first["Body"].read())
    for text, vector in zip(texts[: env.embed_batch_size], vectors, strict=True):
        assert vector == pytest.approx(deterministic_vector(text, MINILM_DIMENSION))

    # The record names the job; the job's files are gone once collected; exactly one job was made.
    record = world["status"].get(document_id)
    assert record is not None and record.progress is not None and record.progress.done == job.chunk_count
    item = boto3.client("dynamodb").get_item(TableName=env.documents_table, Key={"document_id": {"S": document_id}})[
        "Item"
    ]
    assert item["embed_batch_job_arn"]["S"] == job.embed_batch.job_arn
    assert item["embed_batch_status"]["S"] == "Completed"
    listed = world["bedrock"].list_model_invocation_jobs(nameContains=job.embed_batch.job_name)
    assert len(listed["invocationJobSummaries"]) == 1
    folder = f"{env.artifacts_prefix}{document_id}/"
    keys = [o["Key"] for o in world["s3"].list_objects_v2(Bucket=env.bucket_name, Prefix=folder).get("Contents", [])]
    assert not [key for key in keys if "/batch/" in key]

    indexed = pipeline.index(job)
    assert indexed.indexed_count == job.chunk_count


def test_a_rerun_after_a_crash_finds_the_job_instead_of_starting_another(world: dict[str, Any]) -> None:
    pipeline = pipeline_for(world)
    job = chunked(world, pipeline, f"doc-{uuid.uuid4().hex[:10]}")
    submitted = pipeline.embed_batch(job)
    assert submitted.embed_batch is not None and submitted.embed_batch.job_arn
    # The Lambda "crashed" before its answer reached Step Functions: the retry has the old state.
    again = run_loop(pipeline, job)
    assert again.embed_batch is not None and again.embed_batch.job_arn == submitted.embed_batch.job_arn
    assert again.embed_batch.phase is BatchPhase.DONE
    listed = world["bedrock"].list_model_invocation_jobs(nameContains=submitted.embed_batch.job_name.rsplit("-", 1)[0])
    assert len(listed["invocationJobSummaries"]) == 1


def test_too_few_texts_for_a_job_take_the_on_demand_embed_map(world: dict[str, Any]) -> None:
    pipeline = pipeline_for(world, min_records=10_000)
    job = pipeline.embed_batch(chunked(world, pipeline, f"doc-{uuid.uuid4().hex[:10]}"))
    assert job.embed_batch is not None and job.embed_batch.phase is BatchPhase.ON_DEMAND
    assert job.embed_batch.job_arn is None and "records" in (job.embed_batch.reason or "")


def test_a_failed_job_fails_the_document_with_its_code(world: dict[str, Any]) -> None:
    # The client thinks 1 record is enough; the runner (like Bedrock) fails a job under its minimum.
    pipeline = pipeline_for(world, min_records=1)
    note = b"Two short sentences about a harbour lamp. Nothing more to say here."
    job = chunked(world, pipeline, f"doc-{uuid.uuid4().hex[:10]}", "note.txt", note)
    assert job.chunk_count is not None and job.chunk_count < SERVER_MIN_RECORDS
    with pytest.raises(PermanentError) as failed:
        run_loop(pipeline, job)
    assert failed.value.code is ErrorCode.EMBEDDING_BATCH_FAILED
    assert "Failed" in failed.value.detail and "minimum" in failed.value.detail


def test_a_record_the_job_answered_with_an_error_fails_the_document(world: dict[str, Any]) -> None:
    pipeline = pipeline_for(world)
    job = chunked(world, pipeline, f"doc-{uuid.uuid4().hex[:10]}")
    # A vector size the model cannot produce: the runner answers every record with an error line.
    pipeline._deps.batch_embedding._settings = dataclasses.replace(  # type: ignore[union-attr]
        pipeline._deps.batch_embedding._settings,  # type: ignore[union-attr]
        dimension=MINILM_DIMENSION + 1,
    )
    with pytest.raises(PermanentError) as failed:
        run_loop(pipeline, job)
    assert failed.value.code is ErrorCode.EMBEDDING_BATCH_FAILED
    assert "failed in the batch job (400)" in failed.value.detail


def test_the_bedrock_client_round_trip(world: dict[str, Any]) -> None:
    bedrock = world["bedrock"]
    with pytest.raises(bedrock.exceptions.ResourceNotFoundException):
        bedrock.get_model_invocation_job(
            jobIdentifier="arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc"
        )
    with pytest.raises(bedrock.exceptions.ValidationException):
        bedrock.create_model_invocation_job(
            jobName="bad name!",
            roleArn=ROLE_ARN,
            modelId=LOCAL_MODEL_ID,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": "s3://b/k.jsonl"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://b/out/"}},
        )
