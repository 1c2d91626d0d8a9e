"""SQS consumer (the fan-out queue, fed by an EventBridge rule on the pipeline's document events):
each event becomes one delivery message per endpoint of its tenant subscribed to its type.

Partial batch failures: a record that fails (the table or the queue unavailable) is retried alone,
then dead-lettered; a record that is no document event is a poison message and goes the same way.
A retried record enqueues its deliveries again under the same webhook ids (receivers dedupe).
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from rag_ingest.core.config import WebhookFanOutEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.wiring import build_webhook_fan_out

ENV = WebhookFanOutEnv.from_env()
fan_out = build_webhook_fan_out(ENV)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    failures = []
    for record in event.get("Records", []):
        try:
            enqueued = fan_out.fan_out(json.loads(record["body"]))
            logger.info("webhook fan-out", extra={"message_id": record["messageId"], "deliveries": enqueued})
        except Exception:
            logger.exception("webhook fan-out failed", extra={"message_id": record.get("messageId")})
            failures.append({"itemIdentifier": record.get("messageId", "")})
    return {"batchItemFailures": failures}
