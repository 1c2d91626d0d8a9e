"""Ingest queue, dead-letter queue and the intake event source mapping."""

from __future__ import annotations

import pytest

from tests.infra.template_tools import SynthResult

pytestmark = pytest.mark.infra


def test_ingest_queue_redrives_to_the_dlq(synth: SynthResult) -> None:
    props = synth.resource("Intake/IngestQueue")["Properties"]
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [synth.logical_id("Intake/DeadLetterQueue"), "Arn"]},
        "maxReceiveCount": synth.config.intake.max_receive_count,
    }
    assert synth.config.intake.max_receive_count == 3


def test_dlq_keeps_messages_for_14_days(synth: SynthResult) -> None:
    assert synth.resource("Intake/DeadLetterQueue")["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_visibility_timeout_covers_six_intake_timeouts(synth: SynthResult) -> None:
    queue = synth.resource("Intake/IngestQueue")["Properties"]
    function = synth.resource("Intake/IntakeFunction")["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"]


@pytest.mark.parametrize("path", ["Intake/IngestQueue", "Intake/DeadLetterQueue"])
def test_queues_are_encrypted_and_ssl_only(synth: SynthResult, path: str) -> None:
    queue_id = synth.logical_id(path)
    assert synth.resources[queue_id]["Properties"]["SqsManagedSseEnabled"] is True
    policies = [
        p for p in synth.of_type("AWS::SQS::QueuePolicy").values() if {"Ref": queue_id} in p["Properties"]["Queues"]
    ]
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert any(
        s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
        for s in statements
    )


def test_event_source_mapping_reports_partial_batch_failures(synth: SynthResult) -> None:
    intake_function = {"Ref": synth.logical_id("Intake/IntakeFunction")}
    (mapping,) = [
        m
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == intake_function
    ]
    props = mapping["Properties"]
    intake = synth.config.intake
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["EventSourceArn"] == {"Fn::GetAtt": [synth.logical_id("Intake/IngestQueue"), "Arn"]}
    assert props["FunctionName"] == {"Ref": synth.logical_id("Intake/IntakeFunction")}
    assert props["BatchSize"] == intake.batch_size
    assert props["MaximumBatchingWindowInSeconds"] == intake.max_batching_window_seconds
    assert props["ScalingConfig"] == {"MaximumConcurrency": intake.max_concurrency}


def test_intake_may_start_executions_of_the_workflow_only(synth: SynthResult) -> None:
    machine_id = synth.logical_id("Workflow/StateMachine")
    statements = synth.role_statements("Intake/IntakeFunction")
    (start,) = [s for s in statements if "states:StartExecution" in s["Action"]]
    assert start["Resource"] == {"Ref": machine_id}
    env = synth.resource("Intake/IntakeFunction")["Properties"]["Environment"]["Variables"]
    assert env["STATE_MACHINE_ARN"] == {"Ref": machine_id}
