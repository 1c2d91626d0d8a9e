"""What the pipeline reports besides the status record: EMF metrics and document events.

Metric names and dimensions are a contract with the dashboard and alarms (infra/constructs/monitoring.py).
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from rag_ingest.core.errors import ErrorCode, failure_cause
from rag_ingest.core.job import Stage
from rag_ingest.core.ports import EventSink

NAMESPACE = "RagIngest"


class Telemetry(Protocol):
    def stage_started(self, stage: Stage) -> None: ...
    def stage_finished(self, stage: Stage, elapsed_ms: int) -> None: ...
    def document_ready(self, detail: dict[str, Any]) -> None: ...
    def document_failed(self, code: ErrorCode, detail: dict[str, Any]) -> None: ...
    def embedding_cache_used(self, document_id: str, hits: int, misses: int) -> None: ...


class NoTelemetry:
    """For in-process use (tests, benchmarks) where nothing watches."""

    def stage_started(self, stage: Stage) -> None:
        return None

    def stage_finished(self, stage: Stage, elapsed_ms: int) -> None:
        return None

    def document_ready(self, detail: dict[str, Any]) -> None:
        return None

    def document_failed(self, code: ErrorCode, detail: dict[str, Any]) -> None:
        return None

    def embedding_cache_used(self, document_id: str, hits: int, misses: int) -> None:
        return None


class CloudTelemetry:
    """EMF metrics on stdout (CloudWatch Logs turns them into metrics) and EventBridge events."""

    def __init__(self, events: EventSink, namespace: str | None = None) -> None:
        self._events = events
        self._namespace = namespace or os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE)

    def _metric(
        self, name: str, unit: MetricUnit, value: float, metadata: dict[str, str] | None = None, **dimensions: str
    ) -> None:
        with single_metric(name=name, unit=unit, value=value, namespace=self._namespace) as metric:
            for key, dimension_value in dimensions.items():
                metric.add_dimension(name=key, value=dimension_value)
            for key, metadata_value in (metadata or {}).items():
                metric.add_metadata(key=key, value=metadata_value)

    def stage_started(self, stage: Stage) -> None:
        self._metric("StageStarted", MetricUnit.Count, 1, Stage=stage.value)

    def stage_finished(self, stage: Stage, elapsed_ms: int) -> None:
        self._metric("StageDuration", MetricUnit.Milliseconds, elapsed_ms, Stage=stage.value)

    def document_ready(self, detail: dict[str, Any]) -> None:
        self._events.publish("DocumentReady", detail)
        self._metric("DocumentsReady", MetricUnit.Count, 1)

    def document_failed(self, code: ErrorCode, detail: dict[str, Any]) -> None:
        self._events.publish("DocumentFailed", detail)
        self._metric("DocumentsFailed", MetricUnit.Count, 1, ErrorCode=code.value, Cause=failure_cause(code))

    def embedding_cache_used(self, document_id: str, hits: int, misses: int) -> None:
        # The document id rides as EMF metadata (searchable in the log line), not as a dimension:
        # one metric stream per document would be unbounded cardinality.
        metadata = {"document_id": document_id}
        self._metric("EmbeddingCacheHits", MetricUnit.Count, hits, metadata)
        self._metric("EmbeddingCacheMisses", MetricUnit.Count, misses, metadata)
