"""What the alarm evaluator reads from moto's backends in this process: queue counts, queue ages,
ended executions. Read in process, not through moto's HTTP server (docs/local-stack.md, Alarms).

These touch moto's internals (``Queue._messages``, ``Message.sent_timestamp``, the Step Functions
backend's ``list_executions``); :func:`verify_sqs_age_seam` fails loudly if the SQS ones move.
"""

from __future__ import annotations

import datetime
from typing import Any


def verify_sqs_age_seam() -> None:
    """Fail loudly if moto's SQS backend no longer keeps messages with a ``sent_timestamp``."""
    from moto.sqs.models import Message, Queue, sqs_backends  # noqa: F401

    if (
        "_messages" not in Queue.__init__.__code__.co_names
        or "sent_timestamp" not in Message.__init__.__code__.co_names
    ):
        raise RuntimeError("moto.sqs.models.Queue._messages / Message.sent_timestamp moved: queue age unobservable")


def _moto_queue(account_id: str, region: str, queue_name: str) -> Any:
    """moto's SQS queue of that name in this process's backend, or None."""
    from moto.sqs.models import sqs_backends

    return sqs_backends[account_id][region].queues.get(queue_name)


def queue_message_counts(account_id: str, region: str, queue_name: str) -> dict[str, int] | None:
    """GetQueueAttributes' three message counts of moto's queue in this process (by their
    attribute names); None for an unknown queue."""
    queue = _moto_queue(account_id, region, queue_name)
    if queue is None:
        return None
    with queue._messages_lock:
        return {
            "ApproximateNumberOfMessages": queue.approximate_number_of_messages,
            "ApproximateNumberOfMessagesNotVisible": queue.approximate_number_of_messages_not_visible,
            "ApproximateNumberOfMessagesDelayed": queue.approximate_number_of_messages_delayed,
        }


def oldest_message_age_seconds(account_id: str, region: str, queue_name: str, now: float) -> float | None:
    """ApproximateAgeOfOldestMessage without receiving: moto's in-process queue, every message not
    deleted (in flight too, as in SQS); 0 for an empty queue, None for an unknown one."""
    queue = _moto_queue(account_id, region, queue_name)
    if queue is None:
        return None
    with queue._messages_lock:
        # moto types sent_timestamp as None until the message is sent (then epoch milliseconds).
        stamps = [float(getattr(message, "sent_timestamp", None) or 0) for message in queue._messages]
    stamps = [stamp for stamp in stamps if stamp > 0]
    return max(0.0, now - min(stamps) / 1000) if stamps else 0.0


def ended_executions(
    account_id: str, region: str, state_machine_arn: str, status: str
) -> list[tuple[str, float | None]]:
    """(execution ARN, stop time in epoch seconds or None) of the state machine's executions in
    ``status``, from the Step Functions backend moto's ListExecutions reads in this process."""
    from moto.stepfunctions.responses import get_backend

    backend = get_backend(account_id, region)
    found: list[tuple[str, float | None]] = []
    next_token: str | None = None
    while True:
        executions, next_token = backend.list_executions(
            state_machine_arn, status_filter=status, max_results=1000, next_token=next_token
        )
        for execution in executions:
            stopped = getattr(execution, "stop_date", None)
            if isinstance(stopped, datetime.datetime) and stopped.tzinfo is None:
                stopped = stopped.replace(tzinfo=datetime.UTC)  # moto's utcnow() is naive UTC
            found.append(
                (str(execution.execution_arn), stopped.timestamp() if isinstance(stopped, datetime.datetime) else None)
            )
        if not next_token:
            return found
