"""SQS consumer (the delivery queue): one signed POST per message, the messages of a batch in
parallel so a slow endpoint does not hold up the others.

- 2xx: delivered (the message is deleted). The endpoint deleted or unsubscribed: dropped.
- Anything else (another status, no answer within the timeout, an address the URL policy now
  refuses): before the message's deadline, its visibility is set to the backoff
  (ChangeMessageVisibility) and it is reported as a batch item failure, so SQS hands it back
  then; past the deadline (24 h after the event) it is sent to the dead-letter queue with the
  reason and deleted.
- A body that is no delivery message goes straight to the dead-letter queue.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from rag_ingest.core.config import WebhookDeliveryEnv
from rag_ingest.core.logs import logger
from rag_ingest.core.tracing import tracer
from rag_ingest.webhooks.model import DeliveryMessage
from rag_ingest.webhooks.service import Outcome
from rag_ingest.wiring import build_webhook_delivery

ENV = WebhookDeliveryEnv.from_env()
services = build_webhook_delivery(ENV)
MAX_PARALLEL = 10


def deliver_record(record: dict[str, Any]) -> bool:
    """True when the record is done with (delete it), False to have SQS hand it back later."""
    body = record["body"]
    try:
        message = DeliveryMessage.model_validate_json(body)
    except ValidationError as exc:
        services.queues.dead_letter(body, f"not a delivery message: {exc.error_count()} errors")
        logger.error("malformed webhook delivery message dead-lettered", extra={"message_id": record["messageId"]})
        return True
    attempt = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
    result = services.delivery.deliver(message, attempt)
    log = {
        "webhook_id": message.webhook_id,
        "endpoint_id": message.endpoint_id,
        "tenant_id": message.tenant_id,
        "event_type": message.type,
        "attempt": attempt,
        "outcome": result.outcome.value,
        "detail": result.detail,
    }
    if result.outcome in (Outcome.DELIVERED, Outcome.DROPPED):
        logger.info("webhook delivery", extra=log)
        return True
    if result.outcome == Outcome.EXPIRED:
        services.queues.dead_letter(body, f"attempt {attempt}: {result.detail}")
        logger.error("webhook delivery gave up", extra=log)
        return True
    services.queues.defer(record["receiptHandle"], result.retry_after_seconds or 1)
    logger.warning("webhook delivery failed, retrying", extra={**log, "retry_after": result.retry_after_seconds})
    return False


def _safe(record: dict[str, Any]) -> bool:
    try:
        return deliver_record(record)
    except Exception:
        logger.exception("webhook delivery error", extra={"message_id": record.get("messageId")})
        return False


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records", [])
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(records)))) as pool:
        done = list(pool.map(_safe, records))
    return {
        "batchItemFailures": [
            {"itemIdentifier": record["messageId"]} for record, ok in zip(records, done, strict=True) if not ok
        ]
    }
