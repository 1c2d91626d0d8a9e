"""Step Functions task handlers: one per stage, each the same thin wrapper over one method of
rag_ingest.ingest.pipeline.Pipeline (``stage_handler``). The environment is validated at import (the
cold start fails loudly); the pipeline is built on the first invocation and kept (``get_pipeline``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import BatchInferenceEnv, StagesEnv
from rag_ingest.core.job import DocumentJob, EmbedTask, FailedJob, ParseTask
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.ingest.pipeline import Pipeline
from rag_ingest.wiring import build_pipeline

ENV = StagesEnv.from_env()
# Set on the bulk lane's EmbedBatch function only (embedding.batchInference); empty elsewhere.
BATCH_ENV = BatchInferenceEnv.from_env()

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


@cache
def get_pipeline() -> Pipeline:
    """The stages' pipeline, built once per container; tests replace this function to run a fake."""
    return build_pipeline(ENV, BATCH_ENV)


def stage_handler(method: str, reads: Callable[[dict[str, Any]], Any] = DocumentJob.model_validate) -> LambdaHandler:
    """The handler of the stage ``Pipeline.<method>`` runs, on the event as ``reads`` parses it."""
    return _lambda_handler(method, lambda event: getattr(get_pipeline(), method)(reads(event)))


def _lambda_handler(name: str, run: Callable[[dict[str, Any]], DocumentJob | dict[str, Any]]) -> LambdaHandler:
    """``run`` as a traced, logged Lambda handler named ``name`` (its trace subsegment is ``## name``);
    a job it returns is answered as JSON without its unset fields (the state stays small)."""

    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        answer = run(event)
        return answer.model_dump(mode="json", exclude_none=True) if isinstance(answer, DocumentJob) else answer

    handler.__name__ = handler.__qualname__ = name
    traced = tracer.capture_lambda_handler(capture_response=False)(handler)
    return logger.inject_lambda_context(clear_state=True)(traced)


def _parse(event: dict[str, Any]) -> DocumentJob | dict[str, Any]:
    # One function, two entry states: the Parse task gets the job (first range, plans the rest),
    # each Parse Map iteration gets {"job", "range"} (one page range; its answer is discarded).
    if "range" in event:
        return get_pipeline().parse_range(ParseTask.model_validate(event))
    return get_pipeline().parse(DocumentJob.model_validate(event))


validate = stage_handler("validate")
parse = _lambda_handler("parse", _parse)
chunk = stage_handler("chunk")
embed = stage_handler("embed", EmbedTask.model_validate)
# The bulk lane's Embed by Bedrock batch inference (embedding.batchInference): submit, look, collect.
embed_batch = stage_handler("embed_batch")
index = stage_handler("index")
finalize = stage_handler("finalize")
mark_failed = stage_handler("mark_failed", FailedJob.model_validate)
