"""Source sync: the steps of the sync workflow. A step takes a sync's listing, then its deletions, as
far as one invocation's budget allows and returns the phase that comes next; an event with the
workflow catch's ``error`` ends the sync FAILED without deleting anything (docs/sources.md)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import SourceSyncEnv
from rag_ingest.core.errors import parse_failure
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.sources.runner import SyncStep
from rag_ingest.wiring import build_sync_runner

ENV = SourceSyncEnv.from_env()
metrics = Metrics(namespace="RagIngest", service="")
runner = build_sync_runner(ENV)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _fail(event) if "error" in event else _step(event)


def _step(event: dict[str, Any]) -> dict[str, Any]:
    result = runner.step(SyncStep.model_validate(event))
    if result.phase in ("done", "failed"):
        metrics.add_dimension(name="Outcome", value=result.phase)
        metrics.add_metric(name="SourceSyncs", unit=MetricUnit.Count, value=1)
        metrics.flush_metrics()
    return result.model_dump()


def _fail(event: dict[str, Any]) -> dict[str, Any]:
    error = event.get("error") or {}
    code, detail = parse_failure(str(error.get("Error", "")), str(error.get("Cause", "")))
    result = runner.fail(SyncStep.model_validate(event), f"{code.value}: {detail}")
    metrics.add_dimension(name="Outcome", value="failed")
    metrics.add_metric(name="SourceSyncs", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()
    return result.model_dump()
