"""Reconciler: on a schedule, compare the documents table, the uploaded objects and the index, and
repair what is safe (rag_ingest.operations.reconciler).

The EventBridge schedule's event carries no settings (the environment's apply: ``REPAIR``); a
manual invocation (``rag-ingest reconcile``) may send a ReconcileRequest
(``{"repair": false, "tenant_id": "acme"}``).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import ReconcilerEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.operations.reconciler import ReconcileReport, ReconcileRequest
from rag_ingest.wiring import build_reconciler

ENV = ReconcilerEnv.from_env()
# service="": the alarm sums ReconcilerDrift over every Kind, so no default "service" dimension.
metrics = Metrics(namespace="RagIngest", service="")
reconciler = build_reconciler(ENV)


def _request(event: dict[str, Any] | None) -> ReconcileRequest:
    if not event or event.get("source") == "aws.events":  # the schedule
        return ReconcileRequest()
    return ReconcileRequest.model_validate(event)


def _emit(report: ReconcileReport) -> None:
    # One EMF document per kind, zeros too (a continuous graph, and the alarm's OK needs datapoints).
    for kind, count in report.counts().items():
        metrics.add_dimension(name="Kind", value=kind.value)
        metrics.add_metric(name="ReconcilerDrift", unit=MetricUnit.Count, value=count)
        metrics.flush_metrics()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = reconciler.reconcile(_request(event))
    _emit(report)
    return report.model_dump(mode="json")
