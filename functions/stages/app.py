"""Step Functions task handlers: one per stage, all thin over rag_ingest.ingest.pipeline."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import BatchInferenceEnv, StagesEnv
from rag_ingest.core.job import DocumentJob, EmbedTask, FailedJob, ParseTask
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.wiring import build_pipeline

ENV = StagesEnv.from_env()  # fails the cold start, loudly, on a bad environment
# Set on the bulk lane's EmbedBatch function only (embedding.batchInference); empty elsewhere.
pipeline = build_pipeline(ENV, BatchInferenceEnv.from_env())


def _out(job: DocumentJob) -> dict[str, Any]:
    return job.model_dump(mode="json", exclude_none=True)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def validate(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _out(pipeline.validate(DocumentJob.model_validate(event)))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def parse(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # One function, two entry states: the Parse task gets the job (first range, plans the rest),
    # each Parse Map iteration gets {"job", "range"} (one page range; its answer is discarded).
    if "range" in event:
        return pipeline.parse_range(ParseTask.model_validate(event))
    return _out(pipeline.parse(DocumentJob.model_validate(event)))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def chunk(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _out(pipeline.chunk(DocumentJob.model_validate(event)))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def embed(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return pipeline.embed(EmbedTask.model_validate(event))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def embed_batch(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The bulk lane's Embed by Bedrock batch inference (embedding.batchInference): submit, look, collect.
    return _out(pipeline.embed_batch(DocumentJob.model_validate(event)))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def index(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _out(pipeline.index(DocumentJob.model_validate(event)))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def finalize(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _out(pipeline.finalize(DocumentJob.model_validate(event)))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def mark_failed(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return pipeline.mark_failed(FailedJob.model_validate(event))
