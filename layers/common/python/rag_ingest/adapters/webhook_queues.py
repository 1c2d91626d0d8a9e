"""The webhook delivery queue: the fan-out enqueues one message per endpoint; the delivery function
defers a failed one (ChangeMessageVisibility: the backoff) or dead-letters an expired one."""

from __future__ import annotations

from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.errors import TransientError
from rag_ingest.core.tracing import traced
from rag_ingest.webhooks.model import DeliveryMessage

#: SQS's largest visibility timeout (12 h).
MAX_VISIBILITY_SECONDS = 43_200


@traced
class WebhookQueues:
    def __init__(self, delivery_queue_url: str, dead_letter_queue_url: str = "", sqs_client: Any | None = None) -> None:
        self._delivery = delivery_queue_url
        self._dead_letters = dead_letter_queue_url
        self._sqs = sqs_client if sqs_client is not None else client("sqs")

    def send(self, messages: list[DeliveryMessage]) -> None:
        for start in range(0, len(messages), 10):
            batch = messages[start : start + 10]
            entries = [{"Id": str(index), "MessageBody": m.model_dump_json()} for index, m in enumerate(batch)]
            with translated("enqueue webhook deliveries"):
                response = self._sqs.send_message_batch(QueueUrl=self._delivery, Entries=entries)
            if response.get("Failed"):
                # The whole event is fanned out again: the receivers dedupe on webhook-id.
                raise TransientError(
                    f"SQS refused {len(response['Failed'])} webhook deliveries: {response['Failed'][0]}"
                )

    def defer(self, receipt_handle: str, seconds: int) -> None:
        with translated("defer webhook delivery"):
            self._sqs.change_message_visibility(
                QueueUrl=self._delivery,
                ReceiptHandle=receipt_handle,
                VisibilityTimeout=max(0, min(MAX_VISIBILITY_SECONDS, seconds)),
            )

    def dead_letter(self, body: str, reason: str) -> None:
        with translated("dead-letter webhook delivery"):
            self._sqs.send_message(
                QueueUrl=self._dead_letters,
                MessageBody=body,
                MessageAttributes={"reason": {"DataType": "String", "StringValue": reason[:1000] or "-"}},
            )
