"""SQS operations the redrive needs: receive from the DLQ, send to the ingest queue, delete."""

from __future__ import annotations

from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.operations import QueueMessage
from rag_ingest.core.tracing import traced


@traced
class Queues:
    def __init__(self, sqs_client: Any | None = None) -> None:
        self._sqs = sqs_client if sqs_client is not None else client("sqs")

    def receive(self, queue_url: str, max_messages: int, visibility_timeout: int = 60) -> list[QueueMessage]:
        with translated("receive"):
            response = self._sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=max(1, min(10, max_messages)),
                VisibilityTimeout=visibility_timeout,
                WaitTimeSeconds=1,
                MessageSystemAttributeNames=["All"],
            )
        return [
            QueueMessage(
                message_id=m["MessageId"],
                receipt_handle=m["ReceiptHandle"],
                body=m["Body"],
                receive_count=int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0)),
                sent_timestamp_ms=int(m.get("Attributes", {}).get("SentTimestamp", 0)),
            )
            for m in response.get("Messages", [])
        ]

    def send(self, queue_url: str, body: str) -> str:
        return str(self._sqs.send_message(QueueUrl=queue_url, MessageBody=body)["MessageId"])

    def delete(self, queue_url: str, receipt_handle: str) -> None:
        self._sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt_handle)

    def release(self, queue_url: str, receipt_handle: str) -> None:
        """Make a message we looked at but keep visible again at once."""
        self._sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=0)
