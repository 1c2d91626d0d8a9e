"""An SQS event source mapping, as Lambda's pollers run it (moto's own trigger is never used).

moto's SQS trigger invokes the function and deletes the messages whatever the outcome, so
failed messages would never reach the DLQ. This poller has the real semantics: batch size and
batching window, ``ReportBatchItemFailures`` (delete only the successes), no delete at all when
the invocation fails (the messages come back after the queue's visibility timeout and move to
the DLQ after ``maxReceiveCount`` receives, which moto implements), and maximum concurrency.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from local.runtime.aws import moto_client
from local.runtime.provision import EventSourceMapping
from local.runtime.settings import RuntimeSettings

LOG = logging.getLogger("local.runtime.sqs")


def lambda_sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The event Lambda builds from a ReceiveMessage batch (records in receive order)."""
    records = []
    for message in messages:
        message_attributes = {}
        for name, attribute in (message.get("MessageAttributes") or {}).items():
            converted: dict[str, Any] = {
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": attribute["DataType"],
            }
            if "StringValue" in attribute:
                converted["stringValue"] = attribute["StringValue"]
            if "BinaryValue" in attribute:
                converted["binaryValue"] = base64.b64encode(attribute["BinaryValue"]).decode()
            message_attributes[name] = converted
        record: dict[str, Any] = {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": dict(message.get("Attributes") or {}),
            "messageAttributes": message_attributes,
            "md5OfBody": message["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn,
            "awsRegion": region,
        }
        if "MD5OfMessageAttributes" in message:
            record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
        records.append(record)
    return {"Records": records}


def failed_message_ids(
    payload: str, errored: bool, message_ids: list[str], *, report_batch_item_failures: bool
) -> tuple[set[str], str]:
    """Which messages of a batch failed, and why (as Lambda decides it)."""
    everything = set(message_ids)
    if errored:
        return everything, "invocation failed"
    if not report_batch_item_failures:
        return set(), "ok"
    try:
        response = json.loads(payload) if payload.strip() else None
    except ValueError:
        return everything, "invalid JSON response"
    if response is None:
        return set(), "ok"
    if not isinstance(response, dict):
        return everything, "response is not an object"
    failures = response.get("batchItemFailures")
    if failures is None:
        return set(), "ok"
    if not isinstance(failures, list):
        return everything, "batchItemFailures is not a list"
    failed: set[str] = set()
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not identifier or identifier not in everything:
            # Lambda treats an empty, null or unknown itemIdentifier as a failure of the whole batch.
            return everything, f"invalid itemIdentifier {identifier!r}"
        failed.add(str(identifier))
    return failed, "partial batch response"


@dataclass
class PollerStats:
    batches: int = 0
    received: int = 0
    deleted: int = 0
    failed: int = 0
    invocation_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class SqsPoller:
    """Runs one event source mapping: ``concurrency`` threads, each polling and invoking."""

    def __init__(self, mapping: EventSourceMapping, settings: RuntimeSettings, function_timeout_seconds: int) -> None:
        self.mapping = mapping
        self.settings = settings
        self.concurrency = mapping.maximum_concurrency or settings.poller_default_concurrency
        self.function_timeout_seconds = function_timeout_seconds
        self.stats = PollerStats()
        self._stats_lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        LOG.info(
            "poller %s: %s -> %s (batch %d, window %ds, %s, concurrency %d)",
            self.mapping.logical_id,
            self.mapping.queue_url,
            self.mapping.function_name,
            self.mapping.batch_size,
            self.mapping.batching_window_seconds,
            "ReportBatchItemFailures" if self.mapping.report_batch_item_failures else "whole-batch",
            self.concurrency,
        )
        for index in range(self.concurrency):
            thread = threading.Thread(target=self._run, name=f"poller-{self.mapping.logical_id}-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))

    def _run(self) -> None:
        sqs = moto_client(self.settings, "sqs", read_timeout=self.settings.poller_wait_seconds + 30)
        lambda_client = moto_client(self.settings, "lambda", read_timeout=self.function_timeout_seconds + 60)
        while not self._stopping.is_set():
            try:
                messages = self._collect_batch(sqs)
                if messages:
                    self._process(messages, sqs, lambda_client)
            except Exception:
                if self._stopping.is_set():
                    return
                LOG.exception("poller %s: polling failed, retrying in 1 s", self.mapping.logical_id)
                self._stopping.wait(1.0)

    def _collect_batch(self, sqs: Any) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        window_ends: float | None = None
        while not self._stopping.is_set() and len(batch) < self.mapping.batch_size:
            if window_ends is None:
                wait = self.settings.poller_wait_seconds
            else:
                remaining = window_ends - time.monotonic()
                if remaining <= 0:
                    break
                wait = min(self.settings.poller_wait_seconds, math.ceil(remaining))
            response = sqs.receive_message(
                QueueUrl=self.mapping.queue_url,
                MaxNumberOfMessages=min(10, self.mapping.batch_size - len(batch)),
                WaitTimeSeconds=wait,
                AttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            batch.extend(received)
            if batch and window_ends is None:
                window_ends = time.monotonic() + self.mapping.batching_window_seconds
            if batch and self.mapping.batching_window_seconds == 0:
                break
        return batch

    def _process(self, messages: list[dict[str, Any]], sqs: Any, lambda_client: Any) -> None:
        mapping = self.mapping
        event = lambda_sqs_event(messages, mapping.queue_arn, self.settings.region)
        message_ids = [message["MessageId"] for message in messages]
        try:
            response = lambda_client.invoke(
                FunctionName=mapping.function_name,
                InvocationType="RequestResponse",
                Payload=json.dumps(event).encode(),
            )
            payload = response["Payload"].read().decode("utf-8", errors="replace")
            errored = bool(response.get("FunctionError"))
        except Exception as exc:
            LOG.warning("poller %s: invoke %s failed: %s", mapping.logical_id, mapping.function_name, exc)
            payload, errored = "", True
        failed, reason = failed_message_ids(
            payload, errored, message_ids, report_batch_item_failures=mapping.report_batch_item_failures
        )
        to_delete = [message for message in messages if message["MessageId"] not in failed]
        deleted = self._delete(sqs, to_delete)
        receive_counts = [message.get("Attributes", {}).get("ApproximateReceiveCount", "?") for message in messages]
        log = LOG.warning if failed else LOG.info
        log(
            "poller %s: batch of %d (receive counts %s) -> %s: %d failed (%s), %d deleted",
            mapping.logical_id,
            len(messages),
            ",".join(receive_counts),
            mapping.function_name,
            len(failed),
            reason if failed or errored else "ok",
            deleted,
        )
        if errored:
            LOG.warning("poller %s: function error: %s", mapping.logical_id, payload[:500])
        with self._stats_lock:
            self.stats.batches += 1
            self.stats.received += len(messages)
            self.stats.failed += len(failed)
            self.stats.deleted += deleted
            self.stats.invocation_errors += int(errored)

    def _delete(self, sqs: Any, messages: list[dict[str, Any]]) -> int:
        deleted = 0
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            response = sqs.delete_message_batch(
                QueueUrl=self.mapping.queue_url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]} for index, message in enumerate(chunk)
                ],
            )
            deleted += len(response.get("Successful", []))
            for failure in response.get("Failed", []):
                LOG.warning("poller %s: delete failed: %s", self.mapping.logical_id, failure)
        return deleted
