"""Ingest queue, dead-letter queue and the intake event source mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.cdk_app import create_app
from infra.config import CONTEXT_KEY
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


def _at(template: dict[str, Any], construct_path: str) -> dict[str, Any]:
    (props,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r.get("Metadata", {}).get("aws:cdk:path", "").endswith(f"/{construct_path}/Resource")
    ]
    return dict(props)


def _visibility_covers_six_timeouts_and_the_window(template: dict[str, Any]) -> None:
    queue = _at(template, "Intake/IngestQueue")
    function = _at(template, "Intake/IntakeFunction")
    # The ingest queue's mapping (the live-status pusher has a stream mapping too).
    (mapping,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and r["Properties"]["EventSourceArn"].get("Fn::GetAtt", [""])[0].startswith("IntakeIngestQueue")
    ]
    # AWS's guidance for a Lambda event source: 6 x the function timeout + the batching window.
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"] + mapping["MaximumBatchingWindowInSeconds"]


def test_visibility_timeout_covers_six_intake_timeouts_and_the_batching_window(synth: SynthResult) -> None:
    _visibility_covers_six_timeouts_and_the_window(synth.template_dict)
    # Lambda's default for SQS (no window): an upload's workflow starts as soon as it is read.
    assert synth.config.intake.max_batching_window_seconds == 0


def test_visibility_timeout_is_computed_from_the_config(synth: SynthResult, tmp_path: Path) -> None:
    # `synth` first: it builds the Lambda layer a synthesis needs.
    context = {
        CONTEXT_KEY: {"functions": {"intake": {"timeoutSeconds": 120}}, "intake": {"maxBatchingWindowSeconds": 300}}
    }
    _app, stack, _config = create_app(context=context, outdir=str(tmp_path))
    template = Template.from_stack(stack).to_json()
    _visibility_covers_six_timeouts_and_the_window(template)
    (queue,) = [
        r
        for r in template["Resources"].values()
        if r["Metadata"]["aws:cdk:path"].endswith("/Intake/IngestQueue/Resource")
    ]
    assert queue["Properties"]["VisibilityTimeout"] == 6 * 120 + 300


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
