"""A bulk-lane document embedded by one Bedrock batch inference job (``CreateModelInvocationJob``)
instead of one ``InvokeModel`` per chunk, when ``embedding.batchInference`` is on.

:meth:`BatchEmbedding.advance` runs at every turn of the workflow's wait loop and moves the job one
step on, idempotently: no job yet, the chunks neither checkpointed nor cached become JSONL records
and a job named after the document and version is created (or found again after a crash); in
flight, its status is read and written on the record; ``Completed``, the output is read back by
``recordId`` into the Embed checkpoints, so Index is unchanged. Too few or too many records take
the on-demand Embed Map; a failed, stopped, expired or partial job is EMBEDDING_BATCH_FAILED.
The steps, Bedrock's limits and their sources: docs/architecture.md, "Batch inference".
"""

from __future__ import annotations

import hashlib
import json
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.job import BatchPhase, CacheKey, DocumentJob, EmbedBatchState, Stage
from rag_ingest.core.logs import logger
from rag_ingest.core.ports import EmbeddingCache, PipelineDocuments, StageObjects
from rag_ingest.core.s3_keys import batch_inference_folder, embedding_batch_key

#: Bedrock's batch inference quotas' default values (module doc): records per job, bytes per input file.
BATCH_MIN_RECORDS = 100
BATCH_MAX_RECORDS = 50_000
BATCH_MAX_INPUT_FILE_BYTES = 1_000_000_000
#: ``timeoutDurationInHours``: Bedrock accepts 24 to 168 (the CreateModelInvocationJob API reference).
BATCH_MIN_TIMEOUT_HOURS = 24
BATCH_MAX_TIMEOUT_HOURS = 168
#: Job names: 1-63 characters of ``[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}`` (ModelInvocationJobSummary).
JOB_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9+\-.]){0,63}$")
JOB_NAME_MAX = 63
#: The input file's name: Bedrock writes ``<output>/<job id>/<name>.out`` beside ``manifest.json.out``.
INPUT_FILE = "records.jsonl"

#: GetModelInvocationJob's statuses.
IN_FLIGHT_STATUSES = frozenset({"Submitted", "Validating", "Scheduled", "InProgress", "Stopping"})
FAILED_STATUSES = frozenset({"Failed", "Stopped", "Expired", "PartiallyCompleted"})
COMPLETED = "Completed"


@dataclass(frozen=True)
class BatchJob:
    """One batch inference job as GetModelInvocationJob / ListModelInvocationJobs describe it."""

    arn: str
    name: str
    status: str
    message: str = ""
    output_uri: str = ""


class BatchSlotsFull(Exception):
    """CreateModelInvocationJob refused for the account's job quota: try again later."""


class BatchJobs(Protocol):
    """Bedrock's batch inference control plane and the job's files in S3 (rag_ingest.adapters.batch_inference)."""

    def find(self, name: str) -> list[BatchJob]:
        """The jobs whose name starts with ``name`` (ListModelInvocationJobs nameContains), newest first."""
        ...

    def create(
        self,
        *,
        name: str,
        model_id: str,
        role_arn: str,
        input_uri: str,
        output_uri: str,
        timeout_hours: int,
        token: str,
    ) -> str:
        """The new job's ARN; ``BatchSlotsFull`` when the account has no free job slot."""
        ...

    def get(self, job_arn: str) -> BatchJob: ...

    def write_input(self, bucket: str, key: str, lines: Iterable[str]) -> int:
        """Write the JSONL input file; returns its size in bytes."""
        ...

    def read_output(self, output_uri: str) -> Iterator[str]:
        """The lines of every ``.jsonl.out`` file of a finished job (``output_uri`` is its own folder)."""
        ...

    def delete_files(self, bucket: str, folder: str) -> int:
        """Delete the job's input and output under ``folder`` once its vectors are checkpointed."""
        ...


@dataclass(frozen=True)
class BatchSettings:
    bucket: str
    artifacts_prefix: str
    role_arn: str
    model_id: str
    dimension: int
    batch_size: int  # chunks per embedding checkpoint (StagesEnv.embed_batch_size)
    min_records: int = BATCH_MIN_RECORDS
    max_records: int = BATCH_MAX_RECORDS
    max_input_bytes: int = BATCH_MAX_INPUT_FILE_BYTES
    timeout_hours: int = BATCH_MIN_TIMEOUT_HOURS
    poll_seconds: int = 60
    max_poll_seconds: int = 1800
    # Vectors the job returned go into the embedding cache too (DynamoDB writes; off by default:
    # a backfill is embedded once, docs/cost.md).
    write_cache: bool = False


# -- records ---------------------------------------------------------------------------------------
def record_id(number: int) -> str:
    """The ``recordId`` of the ``number``-th record: 11 alphanumeric characters, as Bedrock's own."""
    if not 0 <= number < 10**10:
        raise ValueError(f"record number {number} out of range")
    return f"R{number:010d}"


def record_line(number: int, text: str, dimension: int) -> str:
    """One JSONL input line: Titan V2's InvokeModel body as ``modelInput``."""
    model_input = {"inputText": text, "dimensions": dimension, "normalize": True}
    return json.dumps({"recordId": record_id(number), "modelInput": model_input}, separators=(",", ":"))


def parse_output_line(line: str) -> tuple[str, list[float]]:
    """``(recordId, embedding)`` of one output line; a record Bedrock answered with ``error`` is a
    PermanentError (EMBEDDING_BATCH_FAILED) naming its code and message."""
    try:
        payload = json.loads(line)
        identifier = str(payload["recordId"])
    except (ValueError, KeyError, TypeError) as exc:
        raise PermanentError(ErrorCode.EMBEDDING_BATCH_FAILED, f"unreadable batch output line: {exc!r}") from exc
    error = payload.get("error")
    if error is not None:
        code = error.get("errorCode") if isinstance(error, dict) else None
        message = error.get("errorMessage") if isinstance(error, dict) else error
        raise PermanentError(
            ErrorCode.EMBEDDING_BATCH_FAILED, f"record {identifier} failed in the batch job ({code}): {message}"
        )
    try:
        vector = [float(value) for value in payload["modelOutput"]["embedding"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise PermanentError(
            ErrorCode.EMBEDDING_BATCH_FAILED, f"record {identifier} has no embedding in the batch output"
        ) from exc
    return identifier, vector


def job_name(document_id: str, version: str, attempt: int = 1) -> str:
    """A job name derived from the document and its version (and the attempt: a new run after a
    failed job submits afresh): the same inputs give the same name, so a re-run finds its job."""
    digest = hashlib.sha256(f"{document_id}\0{version}".encode()).hexdigest()[:16]
    base = f"rag-{re.sub(r'[^A-Za-z0-9]', '', document_id)[:26].lower()}-{digest}"
    name = f"{base}-{attempt}"
    assert len(name) <= JOB_NAME_MAX and JOB_NAME_PATTERN.match(name), name
    return name


def job_base_name(document_id: str, version: str) -> str:
    return job_name(document_id, version).rsplit("-", 1)[0]


def client_request_token(name: str) -> str:
    """CreateModelInvocationJob's idempotency token for ``name`` (1-256 characters)."""
    return hashlib.sha256(f"rag-ingest-batch:{name}".encode()).hexdigest()[:64]


def next_wait(polls: int, first: int, most: int) -> int:
    """Seconds before look ``polls + 1``: ``first`` doubled each look, at most ``most``."""
    return int(min(most, first * 2 ** min(polls, 20)))


# -- the step ---------------------------------------------------------------------------------------
class BatchEmbedding:
    """The bulk lane's batch Embed step (module doc)."""

    def __init__(
        self,
        settings: BatchSettings,
        *,
        jobs: BatchJobs,
        objects: StageObjects,
        status: PipelineDocuments,
        cache: EmbeddingCache,
        now: Any = None,
    ) -> None:
        self._settings = settings
        self._jobs = jobs
        self._objects = objects
        self._status = status
        self._cache = cache
        self._now = now or (lambda: datetime.now(UTC))

    def advance(self, job: DocumentJob, texts: Sequence[str]) -> EmbedBatchState:
        """One turn of the wait loop (module doc). ``texts`` are what the model embeds, one per chunk
        in chunk order (rag_ingest.ingest.pipeline.texts_to_embed)."""
        state = job.embed_batch or EmbedBatchState()
        if state.phase in (BatchPhase.DONE, BatchPhase.ON_DEMAND):
            return state
        if state.job_arn is None:
            return self._submit(job, state, texts)
        return self._poll(job, state, texts)

    # -- submit ------------------------------------------------------------------------------
    def _pending(self, job: DocumentJob, texts: Sequence[str]) -> tuple[list[int], dict[str, list[float]]]:
        """The batches not checkpointed yet, and the cached vectors of their texts."""
        prefix = self._prefix(job)
        size = self._settings.batch_size
        batches = [
            number
            for number in range(-(-len(texts) // size))
            if not self._objects.exists(self._settings.bucket, embedding_batch_key(prefix, number))
        ]
        keys = {text: self._key(job, text) for text in self._missing(batches, texts, {})}
        try:
            found = self._cache.lookup(list(keys.values())) if keys else {}
        except Exception as exc:  # the cache saves money, it is never needed
            logger.warning("embedding cache lookup failed: embedding every text", extra={"error": str(exc)})
            found = {}
        return batches, {text: found[key] for text, key in keys.items() if key in found}

    def _submit(self, job: DocumentJob, state: EmbedBatchState, texts: Sequence[str]) -> EmbedBatchState:
        settings = self._settings
        batches, cached = self._pending(job, texts)
        missing = self._missing(batches, texts, cached)
        if not missing:
            self._write_checkpoints(job, batches, texts, cached)
            return self._finish(job, state.model_copy(update={"phase": BatchPhase.DONE, "records": 0}), len(texts))
        if len(missing) < settings.min_records or len(missing) > settings.max_records:
            reason = (
                f"{len(missing)} texts to embed: a batch job takes {settings.min_records} to "
                f"{settings.max_records} records"
            )
            logger.info("embedding on demand", extra={"reason": reason})
            return state.model_copy(update={"phase": BatchPhase.ON_DEMAND, "records": len(missing), "reason": reason})
        base = job_base_name(job.document_id, job.version)
        existing = self._jobs.find(base)
        live = [found for found in existing if found.status not in FAILED_STATUSES]
        if live:  # a crash after CreateModelInvocationJob, or a new execution of the same version
            found = live[0]
            logger.info("batch job found", extra={"job_arn": found.arn, "status": found.status})
            state = state.model_copy(
                update={
                    "job_arn": found.arn,
                    "job_name": found.name,
                    "status": found.status,
                    "records": len(missing),
                    "submitted_at": state.submitted_at or self._now().isoformat(),
                }
            )
            return self._poll(job, state, texts)
        name = job_name(job.document_id, job.version, attempt=len(existing) + 1)
        folder = batch_inference_folder(job.document_id, job.version, name, settings.artifacts_prefix)
        lines = (record_line(number, text, settings.dimension) for number, text in enumerate(missing))
        size = self._jobs.write_input(settings.bucket, folder + INPUT_FILE, lines)
        if size > settings.max_input_bytes:
            reason = f"the batch input is {size} bytes: a job's input file takes at most {settings.max_input_bytes}"
            return state.model_copy(update={"phase": BatchPhase.ON_DEMAND, "records": len(missing), "reason": reason})
        try:
            arn = self._jobs.create(
                name=name,
                model_id=settings.model_id,
                role_arn=settings.role_arn,
                input_uri=f"s3://{settings.bucket}/{folder}{INPUT_FILE}",
                output_uri=f"s3://{settings.bucket}/{folder}output/",
                timeout_hours=settings.timeout_hours,
                token=client_request_token(name),
            )
        except BatchSlotsFull as exc:
            wait = next_wait(state.polls, settings.poll_seconds, settings.max_poll_seconds)
            self._record(job, status="WAITING_FOR_JOB_SLOT", job_arn=None)
            logger.info("no batch job slot free: waiting", extra={"wait_seconds": wait, "error": str(exc)})
            return state.model_copy(
                update={"status": "WAITING_FOR_JOB_SLOT", "polls": state.polls + 1, "wait_seconds": wait}
            )
        logger.info("batch job created", extra={"job_arn": arn, "records": len(missing)})
        state = state.model_copy(
            update={
                "job_arn": arn,
                "job_name": name,
                "status": "Submitted",
                "records": len(missing),
                "polls": 0,
                "wait_seconds": settings.poll_seconds,
                "submitted_at": self._now().isoformat(),
            }
        )
        self._record(job, status="Submitted", job_arn=arn)
        return state

    def _missing(self, batches: list[int], texts: Sequence[str], cached: dict[str, list[float]]) -> list[str]:
        """The texts of ``batches`` neither checkpointed nor cached, each once, in order: the job's records."""
        size = self._settings.batch_size
        pending = (text for number in batches for text in texts[number * size : (number + 1) * size])
        return list(dict.fromkeys(text for text in pending if text not in cached))

    # -- poll and collect ----------------------------------------------------------------------
    def _poll(self, job: DocumentJob, state: EmbedBatchState, texts: Sequence[str]) -> EmbedBatchState:
        settings = self._settings
        assert state.job_arn is not None
        found = self._jobs.get(state.job_arn)
        if found.status == COMPLETED:
            self._collect(job, found, texts)
            done = state.model_copy(update={"phase": BatchPhase.DONE, "status": COMPLETED, "wait_seconds": 0})
            return self._finish(job, done, len(texts))
        if found.status in FAILED_STATUSES:
            detail = f"batch job {found.arn} ended {found.status}" + (f": {found.message}" if found.message else "")
            self._record(job, status=found.status, job_arn=found.arn)
            raise PermanentError(ErrorCode.EMBEDDING_BATCH_FAILED, detail)
        if found.status not in IN_FLIGHT_STATUSES:
            detail = f"batch job {found.arn}: unknown status {found.status}"
            raise PermanentError(ErrorCode.EMBEDDING_BATCH_FAILED, detail)
        if state.submitted_at is not None:
            deadline = datetime.fromisoformat(state.submitted_at) + timedelta(hours=settings.timeout_hours + 1)
            if self._now() > deadline:
                raise PermanentError(
                    ErrorCode.EMBEDDING_BATCH_FAILED,
                    f"batch job {found.arn} still {found.status} {settings.timeout_hours} h after it was submitted",
                )
        wait = next_wait(state.polls, settings.poll_seconds, settings.max_poll_seconds)
        self._record(job, status=found.status, job_arn=found.arn)
        return state.model_copy(update={"status": found.status, "polls": state.polls + 1, "wait_seconds": wait})

    def _collect(self, job: DocumentJob, found: BatchJob, texts: Sequence[str]) -> None:
        """The job's vectors, by recordId, into the embedding checkpoints (with the cached ones)."""
        settings = self._settings
        batches, cached = self._pending(job, texts)
        missing = self._missing(batches, texts, cached)
        wanted = {record_id(number): text for number, text in enumerate(missing)}
        vectors: dict[str, array[float]] = {}  # doubles: a 5,000-page document's vectors stay ~200 MB
        for line in self._jobs.read_output(found.output_uri):
            if not line.strip():
                continue
            identifier, vector = parse_output_line(line)
            text = wanted.get(identifier)
            if text is None:
                continue
            if len(vector) != settings.dimension:
                raise PermanentError(
                    ErrorCode.EMBEDDING_BATCH_FAILED,
                    f"record {identifier}: {len(vector)} floats, expected {settings.dimension}",
                )
            vectors[text] = array("d", vector)
        absent = [identifier for identifier, text in wanted.items() if text not in vectors]
        if absent:
            raise PermanentError(
                ErrorCode.EMBEDDING_BATCH_FAILED,
                f"batch job {found.arn} returned no vector for {len(absent)} of {len(wanted)} records "
                f"(first: {absent[0]})",
            )
        self._write_checkpoints(job, batches, texts, {**cached, **vectors})
        # The output (about 20 KB of JSON a record at 1,024 floats) is in the checkpoints now.
        folder = batch_inference_folder(job.document_id, job.version, found.name, settings.artifacts_prefix)
        self._jobs.delete_files(settings.bucket, folder)
        if settings.write_cache and vectors:
            try:
                self._cache.store({self._key(job, text): list(vector) for text, vector in vectors.items()})
            except Exception as exc:
                logger.warning("embedding cache write failed", extra={"error": str(exc), "entries": len(vectors)})

    def _write_checkpoints(
        self, job: DocumentJob, batches: list[int], texts: Sequence[str], vectors: Mapping[str, Sequence[float]]
    ) -> None:
        """One checkpoint per batch, as the Embed Map writes them (lists made a batch at a time)."""
        prefix = self._prefix(job)
        size = self._settings.batch_size
        for number in batches:
            batch = texts[number * size : (number + 1) * size]
            self._objects.put_json(
                self._settings.bucket, embedding_batch_key(prefix, number), [list(vectors[text]) for text in batch]
            )

    def _finish(self, job: DocumentJob, state: EmbedBatchState, chunk_count: int) -> EmbedBatchState:
        # The document's progress, as the Embed Map records it: one part of all its chunks.
        self._status.record_embedded_part(job.document_id, job.version, 0, chunk_count, cache_misses=state.records)
        self._record(job, status=state.status or COMPLETED, job_arn=state.job_arn)
        return state

    # -- helpers -------------------------------------------------------------------------------
    def _record(self, job: DocumentJob, *, status: str, job_arn: str | None) -> None:
        fields: dict[str, Any] = {"embed_batch_status": status}
        if job_arn:
            fields["embed_batch_job_arn"] = job_arn
        self._status.record_stage(job.document_id, job.version, Stage.EMBED, 0, accumulate=True, **fields)

    def _prefix(self, job: DocumentJob) -> str:
        if not job.embeddings_prefix:
            raise ValueError("job has no embeddings_prefix: the previous stage did not run")
        return job.embeddings_prefix

    def _key(self, job: DocumentJob, text: str) -> CacheKey:
        return CacheKey.of(job.tenant_id, self._settings.model_id, self._settings.dimension, text)
