"""Bedrock batch inference (the ``bedrock`` control plane: CreateModelInvocationJob,
GetModelInvocationJob, ListModelInvocationJobs) and the job's JSONL files in S3: the
``BatchJobs`` port of rag_ingest.ingest.batch_embedding.

Bedrock writes a job's output to ``<outputDataConfig s3Uri><job id>/``: one ``<input file>.out``
per input file and a ``manifest.json.out``
(https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-results.html). Locally the
same calls reach the embedding server's job runner (``AWS_ENDPOINT_URL_BEDROCK``), which reads
and writes moto's S3 in that layout.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from rag_ingest.adapters.aws import Refusal, client, translated
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.tracing import traced
from rag_ingest.ingest.batch_embedding import BatchJob, BatchSlotsFull

_SLOTS_FULL = frozenset({"ServiceQuotaExceededException"})
_REFUSED = frozenset({"ValidationException", "AccessDeniedException", "ResourceNotFoundException"})


def _split_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an S3 URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


@contextmanager
def _control_plane(what: str, expect: Collection[str] = ()) -> Iterator[Refusal]:
    """``translated`` for the control plane; a refused call (role, model access, input) is a
    deployment fault no retry mends: ``PermanentError(EMBEDDING_BATCH_FAILED)``."""
    with translated(what, expect={*_REFUSED, *expect}) as refusal:
        yield refusal
    if refusal.code in _REFUSED:
        detail = f"{what}: {refusal.code}: {refusal.error}"
        raise PermanentError(ErrorCode.EMBEDDING_BATCH_FAILED, detail) from refusal.error


def job_id(job_arn: str) -> str:
    """The id at the end of a job ARN (``...:model-invocation-job/<id>``): the output folder's name."""
    return job_arn.rsplit("/", 1)[-1]


@traced
class BedrockBatchJobs:
    def __init__(self, bedrock_client: Any | None = None, s3_client: Any | None = None) -> None:
        self._bedrock = bedrock_client if bedrock_client is not None else client("bedrock")
        self._s3 = s3_client if s3_client is not None else client("s3")

    # -- the control plane -----------------------------------------------------------------
    def find(self, name: str) -> list[BatchJob]:
        jobs: list[BatchJob] = []
        token: str | None = None
        with _control_plane("list batch inference jobs"):
            while True:
                page = self._bedrock.list_model_invocation_jobs(
                    nameContains=name, sortBy="CreationTime", sortOrder="Descending", maxResults=100,
                    **({"nextToken": token} if token else {}),
                )  # fmt: skip
                for summary in page.get("invocationJobSummaries", []):
                    if str(summary["jobName"]).startswith(name):
                        jobs.append(self._job(summary))
                token = page.get("nextToken")
                if not token:
                    break
        return jobs

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
        with _control_plane(f"create batch inference job {name}", expect=_SLOTS_FULL) as refusal:
            response = self._bedrock.create_model_invocation_job(
                jobName=name,
                roleArn=role_arn,
                clientRequestToken=token,
                modelId=model_id,
                inputDataConfig={"s3InputDataConfig": {"s3Uri": input_uri, "s3InputFormat": "JSONL"}},
                outputDataConfig={"s3OutputDataConfig": {"s3Uri": output_uri}},
                timeoutDurationInHours=timeout_hours,
            )
        if refusal.refused:
            raise BatchSlotsFull(str(refusal.error)) from refusal.error
        return str(response["jobArn"])

    def get(self, job_arn: str) -> BatchJob:
        with _control_plane(f"get batch inference job {job_arn}"):
            described = self._bedrock.get_model_invocation_job(jobIdentifier=job_arn)
        return self._job(described)

    @staticmethod
    def _job(described: dict[str, Any]) -> BatchJob:
        arn = str(described["jobArn"])
        output = described.get("outputDataConfig", {}).get("s3OutputDataConfig", {}).get("s3Uri", "")
        folder = f"{output.rstrip('/')}/{job_id(arn)}/" if output else ""
        return BatchJob(
            arn=arn,
            name=str(described.get("jobName", "")),
            status=str(described.get("status", "")),
            message=str(described.get("message", "") or ""),
            output_uri=folder,
        )

    # -- the files -------------------------------------------------------------------------
    def write_input(self, bucket: str, key: str, lines: Iterable[str]) -> int:
        body = "".join(line + "\n" for line in lines).encode()
        with translated(f"put {key}"):
            self._s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/jsonl")
        return len(body)

    def read_output(self, output_uri: str) -> Iterator[str]:
        bucket, prefix = _split_uri(output_uri)
        with translated(f"read batch output {output_uri}"):
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    if not str(item["Key"]).endswith(".jsonl.out"):
                        continue
                    body = self._s3.get_object(Bucket=bucket, Key=item["Key"])["Body"]
                    for raw in body.iter_lines():
                        yield raw.decode()

    def delete_files(self, bucket: str, folder: str) -> int:
        deleted = 0
        with translated(f"delete batch files under {folder}"):
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder):
                keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                if keys:
                    self._s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
                    deleted += len(keys)
        return deleted
