"""The bulk lane's batch inference Embed (rag_ingest.ingest.batch_embedding) with in-memory fakes:
JSONL records, output parsing, job naming, record limits, the wait loop's steps and failures."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.job import BatchPhase, CacheKey, DocumentJob, EmbedBatchState
from rag_ingest.core.s3_keys import embedding_batch_key
from rag_ingest.ingest.batch_embedding import (
    BATCH_MAX_RECORDS,
    BATCH_MIN_RECORDS,
    JOB_NAME_MAX,
    JOB_NAME_PATTERN,
    BatchEmbedding,
    BatchJob,
    BatchSettings,
    BatchSlotsFull,
    client_request_token,
    job_base_name,
    job_name,
    next_wait,
    parse_output_line,
    record_id,
    record_line,
)
from rag_ingest.ingest.embedding_cache import NoEmbeddingCache

pytestmark = pytest.mark.unit

DIMENSION = 4


def vector_of(text: str) -> list[float]:
    return [float(len(text)), 1.0, 0.0, 0.5]


class FakeJobs:
    """Bedrock's control plane and S3 in memory: jobs complete when told to."""

    def __init__(self) -> None:
        self.jobs: dict[str, BatchJob] = {}
        self.files: dict[str, list[str]] = {}
        self.created = 0
        self.slots_full = False
        self.deleted: list[str] = []

    def find(self, name: str) -> list[BatchJob]:
        return [job for job in reversed(self.jobs.values()) if job.name.startswith(name)]

    def create(self, *, name: str, input_uri: str, output_uri: str, token: str, **_: Any) -> str:
        if self.slots_full:
            raise BatchSlotsFull("quota")
        self.created += 1
        arn = f"arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/job{self.created}"
        self.jobs[arn] = BatchJob(arn=arn, name=name, status="Submitted", output_uri=f"{output_uri}job{self.created}/")
        self._inputs = input_uri
        return arn

    def get(self, job_arn: str) -> BatchJob:
        return self.jobs[job_arn]

    def finish(self, arn: str, status: str = "Completed", *, error_for: str | None = None) -> None:
        job = self.jobs[arn]
        lines = []
        for line in self.files[self._inputs.removeprefix("s3://bucket/")]:
            record = json.loads(line)
            if record["recordId"] == error_for:
                lines.append(json.dumps({**record, "error": {"errorCode": 400, "errorMessage": "bad"}}))
            else:
                text = record["modelInput"]["inputText"]
                lines.append(json.dumps({**record, "modelOutput": {"embedding": vector_of(text)}}))
        lines.reverse()  # Bedrock does not promise the input's order
        self.output = lines
        self.jobs[arn] = BatchJob(arn=arn, name=job.name, status=status, message="boom", output_uri=job.output_uri)

    def write_input(self, bucket: str, key: str, lines: Iterable[str]) -> int:
        self.files[key] = list(lines)
        return sum(len(line) + 1 for line in self.files[key])

    def read_output(self, output_uri: str) -> Iterator[str]:
        yield from self.output

    def delete_files(self, bucket: str, folder: str) -> int:
        self.deleted.append(folder)
        return 1


class FakeObjects:
    def __init__(self) -> None:
        self.stored: dict[str, Any] = {}

    def put_json(self, bucket: str, key: str, payload: Any) -> None:
        self.stored[key] = payload

    def get_json(self, bucket: str, key: str) -> Any:
        return self.stored[key]

    def exists(self, bucket: str, key: str) -> bool:
        return key in self.stored


class FakeStatus:
    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.parts: list[tuple[int, int]] = []

    def record_stage(self, document_id: str, version: str, stage: Any, elapsed: int, **fields: Any) -> None:
        self.fields.update({k: v for k, v in fields.items() if k != "accumulate"})

    def record_embedded_part(self, document_id: str, version: str, task: int, chunks: int, **_: Any) -> None:
        self.parts.append((task, chunks))


class FakeCache(NoEmbeddingCache):
    def __init__(self, hits: dict[str, list[float]]) -> None:
        self.hits = hits
        self.stored: dict[CacheKey, Any] = {}

    def lookup(self, keys: Any) -> dict[CacheKey, list[float]]:
        by_hash = {hashlib.sha256(text.encode()).hexdigest(): vector for text, vector in self.hits.items()}
        return {key: by_hash[key.text_sha256] for key in keys if key.text_sha256 in by_hash}

    def store(self, entries: Any) -> None:
        self.stored.update(entries)


def make(
    texts_cached: dict[str, list[float]] | None = None, **overrides: Any
) -> tuple[BatchEmbedding, FakeJobs, FakeObjects, FakeStatus]:
    jobs, objects, status = FakeJobs(), FakeObjects(), FakeStatus()
    options: dict[str, Any] = {"min_records": 3, "poll_seconds": 10, "max_poll_seconds": 40, **overrides}
    settings = BatchSettings(
        bucket="bucket",
        artifacts_prefix="artifacts/",
        role_arn="arn:aws:iam::123456789012:role/batch",
        model_id="amazon.titan-embed-text-v2:0",
        dimension=DIMENSION,
        batch_size=2,
        **options,
    )
    cache = FakeCache(texts_cached or {}) if texts_cached is not None else NoEmbeddingCache()
    return BatchEmbedding(settings, jobs=jobs, objects=objects, status=status, cache=cache), jobs, objects, status  # type: ignore[arg-type]


def job() -> DocumentJob:
    return DocumentJob(
        document_id="01JDOCUMENT",
        tenant_id="acme",
        bucket="bucket",
        key="raw/acme/01JDOCUMENT/a.pdf",
        version="v1",
        embeddings_prefix="artifacts/01JDOCUMENT/abc/embeddings/",
        chunk_count=5,
    )


TEXTS = ["alpha", "beta", "gamma", "beta", "epsilon"]  # "beta" twice: one record


def test_record_lines_are_titan_invoke_bodies_with_11_character_ids() -> None:
    line = json.loads(record_line(7, "hello", 1024))
    assert line == {
        "recordId": "R0000000007",
        "modelInput": {"inputText": "hello", "dimensions": 1024, "normalize": True},
    }
    assert len(record_id(0)) == 11 and record_id(0).isalnum()
    with pytest.raises(ValueError):
        record_id(10**10)


def test_output_lines_parse_to_vectors_and_errors_to_a_clear_code() -> None:
    ok = {"recordId": "R0000000001", "modelInput": {}, "modelOutput": {"embedding": [1, 2], "inputTextTokenCount": 3}}
    assert parse_output_line(json.dumps(ok)) == ("R0000000001", [1.0, 2.0])
    failed = {"recordId": "R0000000002", "modelInput": {}, "error": {"errorCode": 400, "errorMessage": "too long"}}
    with pytest.raises(PermanentError) as caught:
        parse_output_line(json.dumps(failed))
    assert caught.value.code is ErrorCode.EMBEDDING_BATCH_FAILED and "too long" in caught.value.detail
    with pytest.raises(PermanentError):
        parse_output_line("not json")


def test_job_names_are_deterministic_valid_and_distinct_per_version_and_attempt() -> None:
    name = job_name("01JABCDEFGHJKMNPQRSTVWXYZ0", "3HL4kqtJlcpXroDTDmJ.f7iXyn0aQ5qT")
    assert name == job_name("01JABCDEFGHJKMNPQRSTVWXYZ0", "3HL4kqtJlcpXroDTDmJ.f7iXyn0aQ5qT")
    assert len(name) <= JOB_NAME_MAX and JOB_NAME_PATTERN.match(name)
    assert name != job_name("01JABCDEFGHJKMNPQRSTVWXYZ0", "other-version")
    assert job_name("d", "v", attempt=2).startswith(job_base_name("d", "v"))
    assert client_request_token(name) == client_request_token(name) != client_request_token(name + "x")
    assert 1 <= len(client_request_token(name)) <= 256


def test_the_wait_doubles_up_to_its_cap() -> None:
    assert [next_wait(polls, 10, 40) for polls in range(5)] == [10, 20, 40, 40, 40]
    assert next_wait(10_000, 60, 900) == 900


def test_documented_record_limits() -> None:
    assert (BATCH_MIN_RECORDS, BATCH_MAX_RECORDS) == (100, 50_000)


def test_submit_poll_collect_writes_the_checkpoints_in_chunk_order() -> None:
    batch, jobs, objects, status = make()
    state = batch.advance(job(), TEXTS)
    assert state.phase is BatchPhase.WAITING and state.status == "Submitted" and state.records == 4
    assert state.wait_seconds == 10 and status.fields["embed_batch_job_arn"] == state.job_arn
    (written,) = jobs.files.values()
    assert [json.loads(line)["modelInput"]["inputText"] for line in written] == ["alpha", "beta", "gamma", "epsilon"]

    assert state.job_arn is not None
    jobs.jobs[state.job_arn] = BatchJob(state.job_arn, state.job_name or "", "InProgress")
    current = job()
    current.embed_batch = state
    state = batch.advance(current, TEXTS)
    assert state.phase is BatchPhase.WAITING and state.status == "InProgress" and state.wait_seconds == 10
    current.embed_batch = state
    state = batch.advance(current, TEXTS)
    assert state.wait_seconds == 20

    jobs.finish(state.job_arn)
    current.embed_batch = state
    state = batch.advance(current, TEXTS)
    assert state.phase is BatchPhase.DONE and status.parts == [(0, 5)]
    prefix = current.embeddings_prefix or ""
    assert objects.stored[embedding_batch_key(prefix, 0)] == [vector_of("alpha"), vector_of("beta")]
    assert objects.stored[embedding_batch_key(prefix, 2)] == [vector_of("epsilon")]
    assert jobs.deleted and jobs.created == 1


def test_a_rerun_with_the_state_lost_finds_the_live_job() -> None:
    batch, jobs, _, _ = make()
    first = batch.advance(job(), TEXTS)
    again = batch.advance(job(), TEXTS)  # a crash after CreateModelInvocationJob
    assert again.job_arn == first.job_arn and jobs.created == 1


def test_a_new_run_after_a_failed_job_submits_a_second_attempt() -> None:
    batch, jobs, _, _ = make()
    first = batch.advance(job(), TEXTS)
    assert first.job_arn is not None
    jobs.jobs[first.job_arn] = BatchJob(first.job_arn, first.job_name or "", "Failed")
    second = batch.advance(job(), TEXTS)
    assert second.job_arn != first.job_arn and (second.job_name or "").endswith("-2") and jobs.created == 2


@pytest.mark.parametrize("status", ["Failed", "Stopped", "Expired", "PartiallyCompleted"])
def test_a_job_that_ends_badly_fails_the_document(status: str) -> None:
    batch, jobs, _, fields = make()
    current = job()
    current.embed_batch = batch.advance(current, TEXTS)
    jobs.finish(current.embed_batch.job_arn or "", status)
    with pytest.raises(PermanentError) as caught:
        batch.advance(current, TEXTS)
    assert caught.value.code is ErrorCode.EMBEDDING_BATCH_FAILED and status in caught.value.detail
    assert fields.fields["embed_batch_status"] == status


def test_a_record_answered_with_an_error_fails_the_document() -> None:
    batch, jobs, objects, _ = make()
    current = job()
    current.embed_batch = batch.advance(current, TEXTS)
    jobs.finish(current.embed_batch.job_arn or "", error_for="R0000000001")
    with pytest.raises(PermanentError, match="R0000000001"):
        batch.advance(current, TEXTS)
    assert not objects.stored


def test_a_job_past_its_timeout_fails_instead_of_waiting_for_ever() -> None:
    clock = [datetime(2026, 12, 4, tzinfo=UTC)]
    batch, _jobs, _, _ = make()
    batch._now = lambda: clock[0]
    current = job()
    current.embed_batch = batch.advance(current, TEXTS)
    clock[0] += timedelta(hours=26)
    with pytest.raises(PermanentError, match="still Submitted"):
        batch.advance(current, TEXTS)


def test_too_few_or_too_many_texts_take_the_on_demand_path() -> None:
    batch, jobs, _, _ = make()
    state = batch.advance(job(), ["one", "two"])
    assert state.phase is BatchPhase.ON_DEMAND and jobs.created == 0
    batch, jobs, _, _ = make(max_records=3)
    assert batch.advance(job(), TEXTS).phase is BatchPhase.ON_DEMAND


def test_an_input_file_over_the_size_limit_takes_the_on_demand_path() -> None:
    batch, jobs, _, _ = make(max_input_bytes=50)
    state = batch.advance(job(), TEXTS)
    assert state.phase is BatchPhase.ON_DEMAND and jobs.created == 0 and "bytes" in (state.reason or "")


def test_no_free_job_slot_waits_and_tries_again() -> None:
    batch, jobs, _, status = make()
    jobs.slots_full = True
    state = batch.advance(job(), TEXTS)
    assert state.phase is BatchPhase.WAITING and state.job_arn is None and state.status == "WAITING_FOR_JOB_SLOT"
    assert status.fields["embed_batch_status"] == "WAITING_FOR_JOB_SLOT"
    jobs.slots_full = False
    current = job()
    current.embed_batch = state
    assert batch.advance(current, TEXTS).job_arn is not None


def test_done_and_on_demand_states_are_left_alone() -> None:
    batch, jobs, _, _ = make()
    for phase in (BatchPhase.DONE, BatchPhase.ON_DEMAND):
        current = job()
        current.embed_batch = EmbedBatchState(phase=phase)
        assert batch.advance(current, TEXTS).phase is phase
    assert jobs.created == 0


def test_cached_texts_are_not_sent_and_the_job_vectors_are_not_cached_by_default() -> None:
    cached = {"alpha": [9.0, 9.0, 9.0, 9.0]}
    batch, jobs, objects, _ = make(cached)
    current = job()
    current.embed_batch = batch.advance(current, TEXTS)
    (written,) = jobs.files.values()
    assert [json.loads(line)["modelInput"]["inputText"] for line in written] == ["beta", "gamma", "epsilon"]
    jobs.finish(current.embed_batch.job_arn or "")
    batch.advance(current, TEXTS)
    assert objects.stored[embedding_batch_key(current.embeddings_prefix or "", 0)][0] == [9.0, 9.0, 9.0, 9.0]
    assert batch._cache.stored == {}  # type: ignore[attr-defined]


def test_write_cache_stores_the_jobs_vectors() -> None:
    batch, jobs, _, _ = make({}, write_cache=True, min_records=1)
    current = job()
    current.embed_batch = batch.advance(current, TEXTS)
    jobs.finish(current.embed_batch.job_arn or "")
    batch.advance(current, TEXTS)
    assert len(batch._cache.stored) == 4  # type: ignore[attr-defined]


def test_everything_cached_needs_no_job() -> None:
    batch, jobs, objects, _ = make({text: vector_of(text) for text in TEXTS})
    state = batch.advance(job(), TEXTS)
    assert state.phase is BatchPhase.DONE and jobs.created == 0 and len(objects.stored) == 3
