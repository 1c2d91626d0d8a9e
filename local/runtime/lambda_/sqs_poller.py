"""An SQS event source mapping, as Lambda's pollers run it (moto's own trigger is never used).

moto's SQS trigger deletes the messages a function reports in ``batchItemFailures`` and makes a
failed one visible at once (docs/local-stack.md, What is ours). This poller has Lambda's semantics:
batch size and batching window, ``ReportBatchItemFailures`` (delete only the successes), no delete
at all when the invocation fails (the messages come back after the queue's visibility timeout and
move to the DLQ after ``maxReceiveCount`` receives, which moto implements), maximum concurrency.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from local.runtime.aws import moto_client
from local.runtime.cloudformation.provisioned import EventSourceMapping
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


def visible_messages_waiting(account_id: str, region: str, queue_url: str) -> bool:
    """Whether moto's queue (in this process) holds a message a receive would return now: visible,
    not delayed. A cheap look at the backend, not a receive: nothing is marked received, and an
    unknown queue answers True so that the receive reports it."""
    from moto.sqs.models import sqs_backends

    queue = sqs_backends[account_id][region].queues.get(queue_url.rstrip("/").rsplit("/", 1)[-1])
    return queue is None or bool(queue.messages)


@dataclass
class PollerStats:
    receive_calls: int = 0
    batches: int = 0
    received: int = 0
    deleted: int = 0
    failed: int = 0
    invocation_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class SqsPoller:
    """Runs one event source mapping: a receiver collects batches, up to ``concurrency`` invoke.

    The receiver does not long-poll: moto evaluates a queue's VisibilityTimeout when a long
    poll starts, so a message arriving during the wait would get a stale timeout (e.g. one set
    by a test a moment earlier). Short receives every ``LOCAL_POLLER_INTERVAL`` seconds see the
    queue as it is. While the queue has no visible message, the receiver only looks at moto's
    backend in this process (``visible_messages_waiting``) and sends no ReceiveMessage: an empty
    receive through botocore and moto's HTTP server costs a few ms of this process's GIL, which
    the API adapter's requests share (an idle ``serve`` process went from 6.5 to 3.2 % of a core
    with the look). A batch is only collected when an invoker is free, so
    received messages never wait for a slot while their visibility timeout runs.
    """

    def __init__(self, mapping: EventSourceMapping, settings: RuntimeSettings, function_timeout_seconds: int) -> None:
        self.mapping = mapping
        self.settings = settings
        self.concurrency = mapping.maximum_concurrency or settings.poller_default_concurrency
        self.function_timeout_seconds = function_timeout_seconds
        self.stats = PollerStats()
        self._stats_lock = threading.Lock()
        self._stopping = threading.Event()
        self._peek_failed = False
        self._slots = threading.Semaphore(self.concurrency)
        self._receiver: threading.Thread | None = None
        self._invokers = ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix=f"invoker-{mapping.logical_id[:40]}"
        )
        self._sqs = moto_client(settings, "sqs")
        self._lambda = moto_client(settings, "lambda", read_timeout=function_timeout_seconds + 60)

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
        self._receiver = threading.Thread(
            target=self._receive_loop, name=f"poller-{self.mapping.logical_id[:40]}", daemon=True
        )
        self._receiver.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        if self._receiver is not None:
            self._receiver.join(timeout)
        # Batches in flight finish (their invocations are already running in the runner).
        self._invokers.shutdown(wait=True, cancel_futures=True)

    def _receive_loop(self) -> None:
        while not self._stopping.is_set():
            if not self._slots.acquire(timeout=0.5):
                continue  # every invoker is busy
            try:
                messages = self._collect_batch()
            except Exception:
                self._slots.release()
                if self._stopping.is_set():
                    return
                LOG.exception("poller %s: receiving failed, retrying in 1 s", self.mapping.logical_id)
                self._stopping.wait(1.0)
                continue
            if not messages:
                self._slots.release()
                continue
            try:
                self._invokers.submit(self._process_and_release, messages)
            except RuntimeError:  # shutting down: the messages come back after their visibility timeout
                self._slots.release()
                return

    def _process_and_release(self, messages: list[dict[str, Any]]) -> None:
        try:
            self._process(messages)
        except Exception:
            LOG.exception("poller %s: processing a batch failed", self.mapping.logical_id)
        finally:
            self._slots.release()

    def _collect_batch(self) -> list[dict[str, Any]]:
        """Messages until the batch is full or the batching window (from the first one) ends."""
        batch: list[dict[str, Any]] = []
        window_ends: float | None = None
        while not self._stopping.is_set() and len(batch) < self.mapping.batch_size:
            received = self._receive(self.mapping.batch_size - len(batch)) if self._worth_receiving() else []
            batch.extend(received)
            if not batch:
                self._stopping.wait(self.settings.poller_interval_seconds)
                return []
            if window_ends is None:
                window_ends = time.monotonic() + self.mapping.batching_window_seconds
            remaining = window_ends - time.monotonic()
            if remaining <= 0:
                break
            if not received:
                self._stopping.wait(min(self.settings.poller_interval_seconds, remaining))
        return batch

    def _worth_receiving(self) -> bool:
        if self._peek_failed:
            return True
        try:
            return visible_messages_waiting(self.settings.account_id, self.settings.region, self.mapping.queue_url)
        except Exception:
            # moto's internals moved: receive every time without looking first (slower, never wrong).
            LOG.warning("poller %s: cannot look into moto's queue; receiving every time", self.mapping.logical_id)
            self._peek_failed = True
            return True

    def _receive(self, count: int) -> list[dict[str, Any]]:
        with self._stats_lock:
            self.stats.receive_calls += 1
        response = self._sqs.receive_message(
            QueueUrl=self.mapping.queue_url,
            MaxNumberOfMessages=min(10, count),
            WaitTimeSeconds=0,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _process(self, messages: list[dict[str, Any]]) -> None:
        mapping = self.mapping
        event = lambda_sqs_event(messages, mapping.queue_arn, self.settings.region)
        message_ids = [message["MessageId"] for message in messages]
        try:
            response = self._lambda.invoke(
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
        deleted = self._delete(to_delete)
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

    def _delete(self, messages: list[dict[str, Any]]) -> int:
        deleted = 0
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            response = self._sqs.delete_message_batch(
                QueueUrl=self.mapping.queue_url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]} for index, message in enumerate(chunk)
                ],
            )
            deleted += len(response.get("Successful", []))
            for failure in response.get("Failed", []):
                LOG.warning("poller %s: delete failed: %s", self.mapping.logical_id, failure)
        return deleted
