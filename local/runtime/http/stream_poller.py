"""The template's DynamoDB-stream event source mapping: the documents table's stream -> the pusher.

Reads the stream from moto (DescribeStream, GetShardIterator ``LATEST``, GetRecords), keeps the
records the mapping's ``FilterCriteria`` accepts, and invokes the function with Lambda's stream
event, ``BatchSize`` records at a time and in order. A failed batch (a function error, or
``batchItemFailures`` with ``ReportBatchItemFailures``) is retried from its first failed record up
to ``MaximumRetryAttempts``, then described on the ``OnFailure`` queue. It reads only while
``listening()`` (someone is connected): moto keeps every shard iterator it hands out.
Imports boto3's clients (given) only. Rationale: docs/local-stack.md, "Live status".
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from local.runtime.http.websocket_api import StreamMapping

LOG = logging.getLogger("local.runtime.live")

Invoke = Callable[[str, bytes], tuple[int, str, bool]]
POLL_INTERVAL_SECONDS = 0.25
RETRY_PAUSE_SECONDS = 0.5


class LiveStatusUnavailable(RuntimeError):
    """The mapping's table has no stream: no live channel."""


class StreamPoller:
    def __init__(
        self,
        mapping: StreamMapping,
        *,
        streams: Any,
        sqs: Any,
        invoke: Invoke,
        listening: Callable[[], bool],
        poll_interval_seconds: float = POLL_INTERVAL_SECONDS,
        retry_pause_seconds: float = RETRY_PAUSE_SECONDS,
    ) -> None:
        self.mapping = mapping
        self._streams = streams
        self._sqs = sqs
        self._invoke = invoke
        self._listening = listening
        self.poll_interval_seconds = poll_interval_seconds
        self.retry_pause_seconds = retry_pause_seconds
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._iterator: str | None = None
        self._shard_id: str | None = None
        self._thread: threading.Thread | None = None
        self.counters = {"records": 0, "invocations": 0, "failed_invocations": 0, "sent_on_failure": 0}

    def start(self) -> None:
        try:
            self._streams.describe_stream(StreamArn=self.mapping.stream_arn)
        except Exception as exc:
            raise LiveStatusUnavailable(f"no stream {self.mapping.stream_arn}: {exc}") from exc
        self._thread = threading.Thread(target=self._run, name="live-stream-poller", daemon=True)
        self._thread.start()
        LOG.info("live status: %s reads %s", self.mapping.function_name, self.mapping.stream_arn)

    def close(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)

    def wake(self) -> None:
        """Take the stream's ``LATEST`` position now, if not reading yet: a connection is coming."""
        with self._lock:
            if self._iterator is None:
                self._iterator = self._latest_iterator()
        self._wake.set()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"mapping": self.mapping.logical_id, "function": self.mapping.function_name, **self.counters}

    # -- the reader ---------------------------------------------------------------------------

    def _latest_iterator(self) -> str:
        if self._shard_id is None:
            shards = self._streams.describe_stream(StreamArn=self.mapping.stream_arn)["StreamDescription"]["Shards"]
            self._shard_id = str(shards[-1]["ShardId"])  # moto has one shard; in AWS the open one is last
        answer = self._streams.get_shard_iterator(
            StreamArn=self.mapping.stream_arn, ShardId=self._shard_id, ShardIteratorType="LATEST"
        )
        return str(answer["ShardIterator"])

    def _run(self) -> None:
        while not self._stopping.is_set():
            if not self._listening():
                with self._lock:
                    self._iterator = None  # resume at LATEST for the next connection
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            try:
                with self._lock:
                    if self._iterator is None:
                        self._iterator = self._latest_iterator()
                    iterator = self._iterator
                page = self._streams.get_records(ShardIterator=iterator, Limit=self.mapping.batch_size)
            except Exception:
                LOG.exception("live status: reading the stream failed; resuming at its latest position")
                with self._lock:
                    self._shard_id = self._iterator = None
                self._stopping.wait(1.0)
                continue
            with self._lock:
                if self._iterator == iterator:
                    self._iterator = page.get("NextShardIterator")
            records = [_lambda_record(r, self.mapping.stream_arn) for r in page.get("Records") or []]
            accepted = [record for record in records if self.mapping.accepts(record)]
            if accepted:
                self._deliver(accepted)
            if not records:
                self._stopping.wait(self.poll_interval_seconds)

    def _deliver(self, records: Sequence[dict[str, Any]]) -> None:
        """Invoke the function with the batch until it succeeds or its retries are spent."""
        pending, attempt = list(records), 0
        while pending and not self._stopping.is_set():
            attempt += 1
            failed_from = self._invoke_batch(pending)
            if failed_from is None:
                return
            retries = self.mapping.maximum_retry_attempts
            if 0 <= retries < attempt:
                self._send_on_failure(pending[failed_from:], attempt)
                return
            pending = pending[failed_from:]
            self._stopping.wait(self.retry_pause_seconds)

    def _invoke_batch(self, records: Sequence[dict[str, Any]]) -> int | None:
        """The index of the first record to retry, or None when the batch succeeded."""
        payload = json.dumps({"Records": list(records)}, default=_json_default).encode()
        status, answer, errored = self._invoke(self.mapping.function_name, payload)
        with self._lock:
            self.counters["records"] += len(records)
            self.counters["invocations"] += 1
        if errored or status != 200:
            LOG.warning("live status: %s failed: %s", self.mapping.function_name, answer[:500])
            return self._failed(0)
        if not self.mapping.report_batch_item_failures:
            return None
        failures = _batch_item_failures(answer)
        if failures is None:  # an answer Lambda cannot read fails the whole batch
            return self._failed(0)
        sequence = [str(record["dynamodb"]["SequenceNumber"]) for record in records]
        if any(failure not in sequence for failure in failures):
            return self._failed(0)
        return self._failed(min(sequence.index(failure) for failure in failures)) if failures else None

    def _failed(self, index: int) -> int:
        with self._lock:
            self.counters["failed_invocations"] += 1
        return index

    def _send_on_failure(self, records: Sequence[dict[str, Any]], attempts: int) -> None:
        """Lambda's on-failure record of a stream batch: where it was, not the records."""
        LOG.error("live status: %d records given up after %d attempts", len(records), attempts)
        if not self.mapping.on_failure_arn or not records:
            return
        first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
        description = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self.mapping.function_name,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": attempts,
            },
            "version": "1.0",
            "timestamp": datetime.datetime.now(datetime.UTC).isoformat(),
            "DDBStreamBatchInfo": {
                "shardId": self._shard_id,
                "startSequenceNumber": first["SequenceNumber"],
                "endSequenceNumber": last["SequenceNumber"],
                "approximateArrivalOfFirstRecord": first.get("ApproximateCreationDateTime"),
                "approximateArrivalOfLastRecord": last.get("ApproximateCreationDateTime"),
                "batchSize": len(records),
                "streamArn": self.mapping.stream_arn,
            },
        }
        queue_url = self._sqs.get_queue_url(QueueName=self.mapping.on_failure_arn.rsplit(":", 1)[-1])["QueueUrl"]
        self._sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(description, default=_json_default))
        with self._lock:
            self.counters["sent_on_failure"] += 1


def _lambda_record(record: Mapping[str, Any], stream_arn: str) -> dict[str, Any]:
    """A GetRecords record as Lambda's stream event carries it (with the stream's ARN)."""
    return {**record, "eventSourceARN": stream_arn}


def _batch_item_failures(answer: str) -> list[str] | None:
    """The ``itemIdentifier``s of a partial batch response, or None when it is not one."""
    try:
        response = json.loads(answer) if answer.strip() else None
    except ValueError:
        return None
    if response is None:
        return []
    if not isinstance(response, dict):
        return None
    failures = response.get("batchItemFailures") or []
    if not isinstance(failures, list) or not all(isinstance(f, dict) and f.get("itemIdentifier") for f in failures):
        return None
    return [str(failure["itemIdentifier"]) for failure in failures]


def _json_default(value: Any) -> Any:
    """JSON for what boto3 parsed: a time as epoch seconds, binary as base64 (as Lambda sends them)."""
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON")
