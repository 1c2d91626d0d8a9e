"""Reaper: on a schedule, find documents stuck in QUEUED/PROCESSING and re-drive or fail them.

The EventBridge schedule's event carries no settings (the environment's apply); a manual
invocation may send a ReapRequest (``{"dry_run": true}``, overrides).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import ReaperEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.operations.reaper import ReapReport, ReapRequest
from rag_ingest.wiring import build_reaper

ENV = ReaperEnv.from_env()
# service="": the alarm watches DocumentsReaped by Action alone, so no default "service" dimension.
metrics = Metrics(namespace="RagIngest", service="")
reaper = build_reaper(ENV)


def _request(event: dict[str, Any] | None) -> ReapRequest:
    if not event or event.get("source") == "aws.events":  # the schedule
        return ReapRequest()
    return ReapRequest.model_validate(event)


def _emit(report: ReapReport) -> None:
    if report.dry_run:  # an operator's look changes nothing, so it counts nothing
        return
    # One EMF document per action (dimensions are per document); zeros too, so the graph is continuous.
    # (DocumentsFailed for the documents it failed is the telemetry's, as for MarkFailed.)
    for action, count in report.counts().items():
        metrics.add_dimension(name="Action", value=action.value)
        metrics.add_metric(name="DocumentsReaped", unit=MetricUnit.Count, value=count)
        metrics.flush_metrics()
    # Uploads that never came are the clients' doing: a metric of their own, outside DocumentsReaped's alarm.
    metrics.add_metric(name="UploadsExpired", unit=MetricUnit.Count, value=len(report.expired))
    metrics.flush_metrics()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = reaper.reap(_request(event))
    _emit(report)
    return report.model_dump(mode="json")
