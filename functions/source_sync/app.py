"""Source sync: the steps of the sync workflow. A step takes a sync's listing, then its deletions, as
far as one invocation's budget allows and returns the phase that comes next; a batch of staged
items (a child of the workflow's Distributed Map) is applied; an event with the
workflow catch's ``error`` ends the sync FAILED without deleting anything; an S3 object event from
EventBridge updates the S3 sources over its bucket at once; ``resume_lost_syncs`` starts again the
syncs whose execution is gone (docs/sources.md)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import SourceSyncEnv
from rag_ingest.core.errors import parse_failure
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.sources.fan_out import ItemBatch
from rag_ingest.sources.object_events import parse_object_event
from rag_ingest.sources.runner import SyncStep
from rag_ingest.wiring import build_object_events, build_sync_runner

ENV = SourceSyncEnv.from_env()
metrics = Metrics(namespace="RagIngest", service="")
runner = build_sync_runner(ENV)
object_events = build_object_events(ENV)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    object_event = parse_object_event(event)
    if object_event is not None:
        return {"outcomes": object_events.apply(object_event)}
    if "resume_lost_syncs" in event:  # the schedule, or the local stack after a restart
        return {"syncs": runner.resume_lost(float(event["resume_lost_syncs"]["stale_after_seconds"]))}
    if "items" in event:  # a child of the workflow's Distributed Map
        return runner.apply_batch(ItemBatch.model_validate(event)).model_dump(mode="json")
    return _fail(event) if "error" in event else _step(event)


def _step(event: dict[str, Any]) -> dict[str, Any]:
    result = runner.step(SyncStep.model_validate(event))
    if result.phase in ("done", "failed"):
        _emit(result)
    return result.model_dump()


def _emit(result: SyncStep) -> None:
    """One SourceSyncs count per ended sync, and its items by outcome (zeros too: the graph stays whole)."""
    metrics.add_dimension(name="Outcome", value=result.phase)
    metrics.add_metric(name="SourceSyncs", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()
    job = runner.job(result)
    if job is None:
        return
    for outcome, count in job.statistics.model_dump().items():
        metrics.add_dimension(name="Outcome", value=outcome)
        metrics.add_metric(name="SourceItems", unit=MetricUnit.Count, value=count)
        metrics.flush_metrics()


def _fail(event: dict[str, Any]) -> dict[str, Any]:
    error = event.get("error") or {}
    code, detail = parse_failure(str(error.get("Error", "")), str(error.get("Cause", "")))
    result = runner.fail(SyncStep.model_validate(event), f"{code.value}: {detail}")
    _emit(result)
    return result.model_dump()
