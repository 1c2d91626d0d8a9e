"""The figures of make bench-searchable and make bench-quota: a history split by stage, the AWS model's
arithmetic, the per-minute share of the quota and the varied copies of a page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.aws.quota_bound import per_minute, sustained, vary
from bench.cost.prices import SFN_STANDARD_TRANSITION
from bench.searchable_model import CHOICES, AwsOverheads, aws_model, breakdown

pytestmark = pytest.mark.unit

EPOCH = datetime(2026, 12, 8, tzinfo=UTC)


def event(event_id: int, kind: str, at: float, **details: Any) -> dict[str, Any]:
    return {"id": event_id, "type": kind, "timestamp": EPOCH + timedelta(seconds=at), **details}


def task(first_id: int, name: str, begin: float, end: float) -> list[dict[str, Any]]:
    """A Lambda task state as Step Functions' history records it: entered, started, succeeded, exited."""
    return [
        event(first_id, "TaskStateEntered", begin, stateEnteredEventDetails={"name": name}),
        event(first_id + 1, "LambdaFunctionStarted", begin + 0.05),
        event(first_id + 2, "LambdaFunctionSucceeded", end - 0.05, previousEventId=first_id + 1),
        event(first_id + 3, "TaskStateExited", end, stateExitedEventDetails={"name": name}),
    ]


def history() -> list[dict[str, Any]]:
    return [
        event(1, "ExecutionStarted", 2.0),
        *task(2, "Validate", 2.0, 2.5),
        *task(6, "Parse", 2.5, 4.0),
        *task(10, "Index", 4.0, 5.0),
        *task(14, "Finalize", 5.0, 5.5),
        event(18, "ExecutionSucceeded", 5.5),
    ]


def test_a_history_is_split_into_upload_queue_workflow_and_search() -> None:
    epoch = EPOCH.timestamp()
    split = breakdown(history(), started=epoch + 0.0, uploaded=epoch + 0.5, found=epoch + 5.3)

    assert (split.upload, split.to_workflow, split.workflow_to_index, split.index_to_found) == (0.5, 1.5, 3.0, 0.3)
    assert split.lambda_by_state == {"Validate": 0.4, "Parse": 1.4, "Index": 0.9, "Finalize": 0.4}
    assert split.lambda_to_index == pytest.approx(2.7)
    assert (split.transitions, split.transitions_to_index) == (4, 3)
    assert (split.invocations, split.invocations_to_index) == (4, 3)
    assert split.execution_seconds == 3.5


def test_a_history_without_an_index_state_is_refused() -> None:
    with pytest.raises(ValueError, match="Index"):
        breakdown(history()[:9], started=0.0, uploaded=0.0, found=0.0)


def test_the_model_adds_each_overhead_once_per_hop_and_bills_each_transition() -> None:
    size = {
        "timings_ms": {"VALIDATE": 100, "PARSE": 1000, "INDEX": 500, "FINALIZE": 200},
        "invocations_to_index": 3,
        "transitions_to_index": 3,
        "invocations": 4,
        "transitions": 8,
    }
    overheads = AwsOverheads(
        upload=0.5, s3_event_delivery=1.0, sqs_poll=0.2, intake_compute=0.1, warm_invoke=0.05,
        standard_transition=0.1, search_request=0.2, cold_init=1.0,
    )  # fmt: skip
    memory = {"Validate": 512, "Parse": 2048, "Index": 1024, "Finalize": 512}
    standard = aws_model(size, CHOICES[0], overheads, memory)

    # 1.8 s before the workflow, 4 invocations x 0.05, 1.6 s of handlers, 3 transitions x 0.1, the search 0.2
    assert standard["warm_seconds"] == pytest.approx(1.8 + 0.2 + 1.6 + 0.3 + 0.2)
    assert standard["cold_seconds"] == pytest.approx(standard["warm_seconds"] + 6 * 1.0)
    assert standard["workflow_usd_per_1000"] == pytest.approx(round(1000 * 8 * SFN_STANDARD_TRANSITION.usd, 4))
    express = aws_model(size, CHOICES[1], overheads, memory)
    assert express["workflow_usd_per_1000"] < standard["workflow_usd_per_1000"]
    assert express["lambda_usd_per_1000"] == standard["lambda_usd_per_1000"]


def test_the_share_per_minute_is_the_binding_quota_and_the_goal_skips_minute_one() -> None:
    quota = {"requests_per_minute": 2000, "tokens_per_minute": 300_000}
    # 3 minutes: 150,000 tokens in the first, then 285,000 a minute (95 %); 500 requests a minute throughout.
    samples = [(0.0, 0, 0, 0), (60.0, 500, 150_000, 0), (120.0, 1000, 435_000, 0), (180.0, 1500, 720_000, 0)]
    minutes = per_minute(samples, 0.0, 180.0, quota)

    assert [m["share_of_quota"] for m in minutes] == [0.5, 0.95, 0.95]
    assert [m["tokens_per_minute"] for m in minutes] == [150_000, 285_000, 285_000]
    assert sustained(minutes) == 0.95
    half = per_minute(samples, 0.0, 150.0, quota)
    assert half[-1]["seconds"] == 30.0 and sustained(half) == 0.95  # a partial last minute is not held to the goal


def test_each_copy_of_a_page_has_its_own_text_with_the_same_sentences() -> None:
    page = "One sentence here. Another one follows! A third asks why? The fourth ends it."
    first, second = vary(page, "0/doc/1"), vary(page, "1/doc/1")

    assert first != second
    assert first == vary(page, "0/doc/1")
    for copy in (first, second):
        for sentence in ("One sentence here.", "Another one follows!", "A third asks why?", "The fourth ends it."):
            assert sentence in copy
