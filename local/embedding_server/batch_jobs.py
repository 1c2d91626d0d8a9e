"""Bedrock batch inference, locally: ``CreateModelInvocationJob``, ``GetModelInvocationJob``,
``ListModelInvocationJobs`` and ``StopModelInvocationJob`` as boto3's ``bedrock`` client calls them
(rest-json), and a job runner that reads the JSONL input from moto's S3 and writes Bedrock's output
layout (``<job id>/<input>.out``, ``manifest.json.out``). Statuses, quotas that fail a job,
``clientRequestToken`` and the knobs (``LOCAL_BATCH_*``): docs/local-stack.md, "Batch inference
jobs". Jobs live in memory; records are embedded by the server's own model (or its deterministic
vectors) outside the on-demand quotas. Imports boto3 and the standard library only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote

LOG = logging.getLogger("local.embedding_server.batch")

#: Bedrock's quota defaults (rag_ingest.ingest.batch_embedding cites them).
DEFAULT_MIN_RECORDS = 100
MAX_RECORDS = 50_000
MAX_INPUT_FILE_BYTES = 1_000_000_000
DEFAULT_MAX_JOBS = 20
_ACTIVE = frozenset({"Submitted", "Validating", "Scheduled", "InProgress", "Stopping"})
_JOB_NAME = re.compile(r"^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9+\-.]){0,63}$")
_ROLE_ARN = re.compile(r"^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$")
JOB_PATH = re.compile(r"^/model-invocation-job/(?P<job>[^/]+)(?P<stop>/stop)?$")

#: (model id, texts, dimensions or 0 for the model's default) -> (vector, input tokens) per text.
EmbedTexts = Callable[[str, list[str], int], list[tuple[list[float], int]]]


class BatchApiError(Exception):
    def __init__(self, status: HTTPStatus, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class LocalJob:
    arn: str
    name: str
    model_id: str
    role_arn: str
    token: str | None
    input_uri: str
    output_uri: str
    timeout_hours: int
    submitted: datetime
    status: str = "Submitted"
    message: str = ""
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))
    ended: datetime | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "jobArn": self.arn,
            "jobName": self.name,
            "modelId": self.model_id,
            "roleArn": self.role_arn,
            "status": self.status,
            "submitTime": self.submitted.isoformat(),
            "lastModifiedTime": self.modified.isoformat(),
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": self.input_uri, "s3InputFormat": "JSONL"}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": self.output_uri}},
            "timeoutDurationInHours": self.timeout_hours,
            "jobExpirationTime": (self.submitted + timedelta(hours=self.timeout_hours)).isoformat(),
            **self.counts,
        }
        if self.token:
            described["clientRequestToken"] = self.token
        if self.message:
            described["message"] = self.message
        if self.ended:
            described["endTime"] = self.ended.isoformat()
        return described


def _split_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise BatchApiError(HTTPStatus.BAD_REQUEST, "ValidationException", f"not an S3 URI: {uri}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def moto_s3_client(environ: Mapping[str, str] | None = None) -> Any:
    """An S3 client of the local stack's moto server (``LOCAL_BATCH_S3_ENDPOINT``)."""
    import boto3

    env = os.environ if environ is None else environ
    endpoint = env.get("LOCAL_BATCH_S3_ENDPOINT") or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or "us-east-1",
        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID") or "testing",
        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or "testing",
    )


class BatchJobRunner:
    """Holds the jobs and runs them one at a time on a worker thread (module doc)."""

    def __init__(
        self,
        embed: EmbedTexts,
        *,
        s3: Callable[[], Any] = moto_s3_client,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        min_records: int | None = None,
        max_jobs: int | None = None,
        start_delay_seconds: float | None = None,
        group: int = 32,
    ) -> None:
        env = os.environ
        self._embed = embed
        self._s3_factory = s3
        self._s3: Any = None
        self.region = region
        self.account_id = account_id
        self.min_records = (
            min_records if min_records is not None else int(env.get("LOCAL_BATCH_MIN_RECORDS") or DEFAULT_MIN_RECORDS)
        )
        self.max_jobs = max_jobs if max_jobs is not None else int(env.get("LOCAL_BATCH_MAX_JOBS") or DEFAULT_MAX_JOBS)
        self.start_delay = (
            start_delay_seconds if start_delay_seconds is not None else float(env.get("LOCAL_BATCH_START_DELAY") or 0)
        )
        self._group = group
        self._jobs: dict[str, LocalJob] = {}
        self._lock = threading.Lock()
        self._queue: list[str] = []
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._worker = threading.Thread(target=self._work, name="batch-jobs", daemon=True)
        self._worker.start()

    # -- the API ------------------------------------------------------------------------------
    def create(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            name = str(request["jobName"])
            role_arn = str(request["roleArn"])
            model_id = str(request["modelId"])
            input_uri = str(request["inputDataConfig"]["s3InputDataConfig"]["s3Uri"])
            output_uri = str(request["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"])
        except (KeyError, TypeError) as exc:
            raise BatchApiError(HTTPStatus.BAD_REQUEST, "ValidationException", f"missing member: {exc}") from None
        if not _JOB_NAME.match(name) or len(name) > 63:
            raise BatchApiError(HTTPStatus.BAD_REQUEST, "ValidationException", f"invalid jobName {name!r}")
        if not _ROLE_ARN.match(role_arn):
            raise BatchApiError(HTTPStatus.BAD_REQUEST, "ValidationException", f"invalid roleArn {role_arn!r}")
        timeout = int(request.get("timeoutDurationInHours", 24))
        if not 24 <= timeout <= 168:
            raise BatchApiError(
                HTTPStatus.BAD_REQUEST, "ValidationException", "timeoutDurationInHours must be between 24 and 168"
            )
        _split_uri(input_uri), _split_uri(output_uri)
        token = request.get("clientRequestToken")
        with self._lock:
            for job in self._jobs.values():
                if token and job.token == token:
                    return {"jobArn": job.arn}  # the request was made before: its job, not a second one
            if any(job.name == name for job in self._jobs.values()):
                raise BatchApiError(HTTPStatus.CONFLICT, "ConflictException", f"a job named {name} already exists")
            active = sum(job.status in _ACTIVE for job in self._jobs.values())
            if active >= self.max_jobs:
                raise BatchApiError(
                    HTTPStatus.BAD_REQUEST,
                    "ServiceQuotaExceededException",
                    f"You have reached the quota of {self.max_jobs} submitted and in-progress batch inference jobs",
                )
            arn = f"arn:aws:bedrock:{self.region}:{self.account_id}:model-invocation-job/{secrets.token_hex(6)}"
            self._jobs[arn] = LocalJob(
                arn=arn,
                name=name,
                model_id=model_id,
                role_arn=role_arn,
                token=str(token) if token else None,
                input_uri=input_uri,
                output_uri=output_uri,
                timeout_hours=timeout,
                submitted=datetime.now(UTC),
            )
            self._queue.append(arn)
            self._wake.notify()
        LOG.info("batch job %s (%s) submitted", name, arn)
        return {"jobArn": arn}

    def get(self, identifier: str) -> dict[str, Any]:
        with self._lock:
            return self._find(identifier).describe()

    def stop(self, identifier: str) -> dict[str, Any]:
        with self._lock:
            job = self._find(identifier)
            if job.status not in _ACTIVE:
                raise BatchApiError(HTTPStatus.BAD_REQUEST, "ValidationException", f"job is {job.status}")
            job.status, job.modified = "Stopping", datetime.now(UTC)
        return {}

    def list_jobs(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        name = (query.get("nameContains") or [""])[0]
        status = (query.get("statusEquals") or [""])[0]
        descending = (query.get("sortOrder") or ["Descending"])[0] == "Descending"
        with self._lock:
            jobs = [job for job in self._jobs.values() if name in job.name and (not status or job.status == status)]
            jobs.sort(key=lambda job: job.submitted, reverse=descending)
            return {"invocationJobSummaries": [job.describe() for job in jobs]}

    def _find(self, identifier: str) -> LocalJob:
        identifier = unquote(identifier)
        for job in self._jobs.values():
            if identifier in (job.arn, job.arn.rsplit("/", 1)[-1]):
                return job
        raise BatchApiError(HTTPStatus.NOT_FOUND, "ResourceNotFoundException", f"job {identifier} not found")

    def route(self, method: str, path: str, body: bytes) -> dict[str, Any] | None:
        """The answer to a control-plane request, or None when ``path`` is not one of these routes."""
        route, _, query = path.partition("?")
        if method == "POST" and route == "/model-invocation-job":
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                raise BatchApiError(HTTPStatus.BAD_REQUEST, "ValidationException", "body is not JSON") from None
            return self.create(request)
        if method == "GET" and route == "/model-invocation-jobs":
            return self.list_jobs(parse_qs(query))
        match = JOB_PATH.match(route)
        if match is None:
            return None
        if method == "POST" and match["stop"]:
            return self.stop(match["job"])
        if method == "GET" and not match["stop"]:
            return self.get(match["job"])
        return None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake.notify_all()

    # -- the runner -----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                arn = self._queue.pop(0)
                job = self._jobs[arn]
            if self.start_delay:
                time.sleep(self.start_delay)
            try:
                self._run(job)
            except Exception as exc:  # a job that cannot run fails with the reason, as Bedrock's do
                LOG.exception("batch job %s failed", job.name)
                self._set(job, "Failed", f"{type(exc).__name__}: {exc}")

    def _set(self, job: LocalJob, status: str, message: str = "") -> bool:
        """Move ``job`` on; False when a stop request overtook it."""
        with self._lock:
            if job.status == "Stopping":
                job.status, job.ended = "Stopped", datetime.now(UTC)
                return False
            job.status, job.message, job.modified = status, message, datetime.now(UTC)
            if status in ("Completed", "Failed"):
                job.ended = job.modified
            return True

    def _client(self) -> Any:
        if self._s3 is None:
            self._s3 = self._s3_factory()
        return self._s3

    def _run(self, job: LocalJob) -> None:
        if not self._set(job, "Validating"):
            return
        s3 = self._client()
        bucket, key = _split_uri(job.input_uri)
        if key.endswith(".jsonl"):
            keys = [key]
        else:
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
            found = (item["Key"] for page in pages for item in page.get("Contents", []))
            keys = [name for name in found if name.endswith(".jsonl")]
        files: list[tuple[str, list[dict[str, Any]]]] = []
        for name in keys:
            body = s3.get_object(Bucket=bucket, Key=name)["Body"].read()
            if len(body) > MAX_INPUT_FILE_BYTES:
                self._set(job, "Failed", f"input file {name} is over the {MAX_INPUT_FILE_BYTES}-byte limit")
                return
            records = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
            if len(records) > MAX_RECORDS:
                self._set(job, "Failed", f"input file {name} has {len(records)} records: at most {MAX_RECORDS}")
                return
            files.append((name.rsplit("/", 1)[-1], records))
        total = sum(len(records) for _, records in files)
        if total < self.min_records:
            self._set(job, "Failed", f"the job has {total} records: the minimum is {self.min_records}")
            return
        if total > MAX_RECORDS:
            self._set(job, "Failed", f"the job has {total} records: at most {MAX_RECORDS}")
            return
        if not self._set(job, "InProgress"):
            return
        out_bucket, out_prefix = _split_uri(job.output_uri)
        folder = f"{out_prefix.rstrip('/')}/{job.arn.rsplit('/', 1)[-1]}/".lstrip("/")
        counts = {"totalRecordCount": total, "processedRecordCount": 0, "successRecordCount": 0, "errorRecordCount": 0}
        tokens = 0
        for name, records in files:
            lines = []
            for start in range(0, len(records), self._group):
                for record, line, used in self._answer(job, records[start : start + self._group]):
                    lines.append(line)
                    counts["processedRecordCount"] += 1
                    counts["successRecordCount" if "modelOutput" in record else "errorRecordCount"] += 1
                    tokens += used
                with self._lock:
                    job.counts = dict(counts)
                    if job.status == "Stopping":
                        job.status, job.ended = "Stopped", datetime.now(UTC)
                        return
            s3.put_object(Bucket=out_bucket, Key=f"{folder}{name}.out", Body="".join(lines).encode())
        manifest = {**counts, "inputTokenCount": tokens, "outputTokenCount": 0}
        s3.put_object(Bucket=out_bucket, Key=f"{folder}manifest.json.out", Body=json.dumps(manifest).encode())
        self._set(job, "Completed")
        LOG.info("batch job %s completed: %s", job.name, json.dumps(manifest))

    def _answer(self, job: LocalJob, records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, int]]:
        """Each record with its output line and input tokens; a bad record gets an ``error`` line."""
        answered: list[tuple[dict[str, Any], str, int]] = []
        good: list[tuple[dict[str, Any], str, int]] = []
        for record in records:
            record.setdefault("recordId", secrets.token_hex(6)[:11].upper())
            model_input = record.get("modelInput")
            text = model_input.get("inputText") if isinstance(model_input, dict) else None
            if not isinstance(model_input, dict) or not isinstance(text, str) or not text:
                failed = {**record, "error": {"errorCode": 400, "errorMessage": "Malformed input request"}}
                answered.append((failed, json.dumps(failed) + "\n", 0))
                continue
            good.append((record, text, int(model_input.get("dimensions", 0) or 0)))
        by_dimension: dict[int, list[tuple[dict[str, Any], str]]] = {}
        for record, text, dimension in good:
            by_dimension.setdefault(dimension, []).append((record, text))
        for dimension, group in by_dimension.items():
            try:
                vectors = self._embed(job.model_id, [text for _, text in group], dimension)
            except Exception as exc:
                for record, _ in group:
                    failed = {**record, "error": {"errorCode": 400, "errorMessage": str(exc)}}
                    answered.append((failed, json.dumps(failed) + "\n", 0))
                continue
            for (record, _), (vector, used) in zip(group, vectors, strict=True):
                done = {**record, "modelOutput": {"embedding": vector, "inputTextTokenCount": used}}
                answered.append((done, json.dumps(done) + "\n", used))
        return answered


_MODEL_ARN = re.compile(r"^arn:aws[a-z-]*:bedrock:[a-z0-9-]*::foundation-model/(?P<id>.+)$")


def server_embedder(models: Mapping[str, Any], submit: Callable[[str], Any]) -> EmbedTexts:
    """The records' vectors from the embedding server's models (``server.ServedModel``): the
    deterministic vector in place, or the model through the server's batcher (``submit``)."""

    def embed(model_id: str, texts: list[str], dimension: int) -> list[tuple[list[float], int]]:
        match = _MODEL_ARN.match(model_id)
        model = models.get(match["id"] if match else model_id)
        if model is None:
            raise ValueError(f"model {model_id} is not served here: {', '.join(sorted(models))}")
        size = dimension or model.dimension
        if size not in model.dimensions:
            raise ValueError(f"dimensions {size} is not valid for {model.model_id}")
        tokens = [model.count_tokens(text) for text in texts]
        too_long = [count for count in tokens if count > model.max_input_tokens]
        if too_long:
            raise ValueError(f"Too many input tokens. Max input tokens: {model.max_input_tokens}")
        if model.vector is not None:
            vectors = [model.vector(text, size, True) for text in texts]
        else:
            futures = [submit(text) for text in texts]
            vectors = [future.result() for future in futures]
        return list(zip(vectors, tokens, strict=True))

    return embed
