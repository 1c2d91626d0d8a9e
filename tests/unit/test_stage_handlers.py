"""The stage handlers (functions/stages/app.py): each passes the event, parsed as its stage reads it,
to one Pipeline method and answers the job as JSON without unset fields; Parse tells its two entry
states apart. The pipeline is a recording fake put in place of ``get_pipeline``."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from rag_ingest.core.job import DocumentJob, EmbedTask, FailedJob, ParseTask

from tests.support.aws import FakeLambdaContext, import_handler

pytestmark = pytest.mark.unit
STAGES_ENV = {
    "DOCUMENTS_TABLE": "documents",
    "BUCKET_NAME": "documents-bucket",
    "OPENSEARCH_ENDPOINT": "https://search.invalid",
    "OPENSEARCH_INDEX": "rag-chunks",
    "EMBEDDING_DIMENSION": "4",
    "EMBEDDING_PROVIDER": "bedrock",
    "EMBEDDING_MODEL_ID": "amazon.titan-embed-text-v2:0",
    "MAX_FILE_BYTES": "1000000",
    "MAX_PAGES": "100",
    "CHUNK_TOKENS": "256",
    "CHUNK_OVERLAP_TOKENS": "32",
    "AWS_DEFAULT_REGION": "us-east-1",
}
JOB = {"document_id": "d1", "tenant_id": "acme", "bucket": "b", "key": "raw/acme/d1/a.pdf", "version": "v1"}


class RecordingPipeline:
    """Answers each stage with the job it got (Validate also sets a size), and records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def _job(self, name: str, job: DocumentJob) -> DocumentJob:
        self.calls.append((name, job))
        return job.model_copy(update={"size_bytes": 7}) if name == "validate" else job

    def validate(self, job: DocumentJob) -> DocumentJob:
        return self._job("validate", job)

    def parse(self, job: DocumentJob) -> DocumentJob:
        return self._job("parse", job)

    def parse_range(self, item: ParseTask) -> dict[str, Any]:
        self.calls.append(("parse_range", item))
        return {"pages": 2}

    def chunk(self, job: DocumentJob) -> DocumentJob:
        return self._job("chunk", job)

    def embed(self, item: EmbedTask) -> dict[str, int]:
        self.calls.append(("embed", item))
        return {"embedded": 3}

    def embed_batch(self, job: DocumentJob) -> DocumentJob:
        return self._job("embed_batch", job)

    def index(self, job: DocumentJob) -> DocumentJob:
        return self._job("index", job)

    def finalize(self, job: DocumentJob) -> DocumentJob:
        return self._job("finalize", job)

    def mark_failed(self, job: FailedJob) -> dict[str, Any]:
        self.calls.append(("mark_failed", job))
        return {"status": "FAILED"}


@pytest.fixture(scope="module")
def stages() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in STAGES_ENV.items():
            patch.setenv(name, value)
        yield import_handler("stages", {})


@pytest.fixture
def pipeline(stages: ModuleType, monkeypatch: pytest.MonkeyPatch) -> RecordingPipeline:
    fake = RecordingPipeline()
    monkeypatch.setattr(stages, "get_pipeline", lambda: fake)
    return fake


@pytest.mark.parametrize("stage", ["validate", "chunk", "embed_batch", "index", "finalize"])
def test_a_job_stage_runs_its_method_and_answers_the_job(
    stages: ModuleType, pipeline: RecordingPipeline, stage: str
) -> None:
    answer = getattr(stages, stage)(dict(JOB), FakeLambdaContext())
    [(called, job)] = pipeline.calls
    assert called == stage and job == DocumentJob.model_validate(JOB)
    expected = DocumentJob.model_validate(JOB).model_dump(mode="json", exclude_none=True)
    assert answer == ({**expected, "size_bytes": 7} if stage == "validate" else expected)
    assert "page_count" not in answer  # unset fields stay out of the state


def test_parse_tells_the_job_from_a_range(stages: ModuleType, pipeline: RecordingPipeline) -> None:
    stages.parse(dict(JOB), FakeLambdaContext())
    item = {"job": JOB, "range": {"first_page": 51, "last_page": 100}}
    assert stages.parse(item, FakeLambdaContext()) == {"pages": 2}
    assert [name for name, _ in pipeline.calls] == ["parse", "parse_range"]
    assert pipeline.calls[1][1] == ParseTask.model_validate(item)


def test_embed_and_mark_failed_read_their_own_shapes(stages: ModuleType, pipeline: RecordingPipeline) -> None:
    assert stages.embed({"job": JOB, "task": 2}, FakeLambdaContext()) == {"embedded": 3}
    failed = {**JOB, "error": {"Error": "TransientError", "Cause": "{}"}}
    assert stages.mark_failed(failed, FakeLambdaContext()) == {"status": "FAILED"}
    assert pipeline.calls == [
        ("embed", EmbedTask(job=DocumentJob.model_validate(JOB), task=2)),
        ("mark_failed", FailedJob.model_validate(failed)),
    ]


def test_the_handlers_keep_their_names(stages: ModuleType) -> None:
    # The trace's subsegment is the handler's name (## validate), as Lambda's Handler setting names it.
    for name in ("validate", "parse", "chunk", "embed", "embed_batch", "index", "finalize", "mark_failed"):
        assert getattr(stages, name).__name__ == name


def test_the_pipeline_is_built_on_first_use_and_kept(stages: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    assert stages.get_pipeline.cache_info().currsize == 0  # importing built nothing
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # building makes clients; none is called
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    try:
        assert stages.get_pipeline() is stages.get_pipeline()
        assert stages.get_pipeline.cache_info().currsize == 1
    finally:
        stages.get_pipeline.cache_clear()
