"""The webhooks construct: table, queues (encrypted, TLS-only, retention past the retry window, DLQs),
the rule on the pipeline's document events, the two functions' event sources and least-privilege
grants, the DLQ alarms and the outputs."""

from __future__ import annotations

from typing import Any

import pytest

from infra.constructs.webhooks import (
    DOCUMENT_EVENTS,
    delivery_attempts,
    delivery_max_receive_count,
    queue_retention_days,
)
from tests.infra.template_tools import SynthResult, as_list, render_token

pytestmark = pytest.mark.infra
QUEUES = ("FanOutQueue", "FanOutDeadLetterQueue", "DeliveryQueue", "DeliveryDeadLetterQueue")


def _arn(synth: SynthResult, path: str) -> str:
    return f"${{{synth.logical_id(path)}.Arn}}"


def _grants(synth: SynthResult, function: str) -> dict[str, set[str]]:
    """action -> rendered resources, for the function's role."""
    found: dict[str, set[str]] = {}
    for statement in synth.role_statements(f"Webhooks/{function}"):
        for action in as_list(statement["Action"]):
            found.setdefault(action, set()).update(render_token(r) for r in as_list(statement["Resource"]))
    return found


def test_the_table_is_keyed_by_tenant_and_endpoint_encrypted_and_recoverable(synth: SynthResult) -> None:
    props = synth.resource("Webhooks/WebhooksTable")["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "tenant_id", "KeyType": "HASH"},
        {"AttributeName": "endpoint_id", "KeyType": "RANGE"},
    ]
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["BillingMode"] == "PAY_PER_REQUEST"


def test_queues_are_encrypted_tls_only_and_outlive_the_retry_window(synth: SynthResult) -> None:
    config = synth.config
    for name in QUEUES:
        props = synth.resource(f"Webhooks/{name}")["Properties"]
        assert props["SqsManagedSseEnabled"] is True, name
        retention = props["MessageRetentionPeriod"]
        assert retention >= config.webhooks.retry_hours * 3600 + 86400, name
    policies = [r["Properties"] for r in synth.of_type("AWS::SQS::QueuePolicy").values()]
    for name in QUEUES:
        ref = {"Ref": synth.logical_id(f"Webhooks/{name}")}
        statements = [s for p in policies if ref in p["Queues"] for s in p["PolicyDocument"]["Statement"]]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        ), name
    delivery = synth.resource("Webhooks/DeliveryQueue")["Properties"]
    assert delivery["RedrivePolicy"]["maxReceiveCount"] == delivery_max_receive_count(config)
    assert delivery["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": [synth.logical_id("Webhooks/DeliveryDeadLetterQueue"), "Arn"]
    }
    assert delivery["VisibilityTimeout"] == 6 * config.functions.webhook_delivery.timeout_seconds
    assert queue_retention_days(config) >= 2


def test_the_redrive_is_only_a_safety_net_past_the_retry_window(synth: SynthResult) -> None:
    # About 30 attempts in a day with the defaults; the queue's redrive lets twice that through.
    assert 25 <= delivery_attempts(synth.config) <= 70
    assert delivery_max_receive_count(synth.config) == 2 * delivery_attempts(synth.config)


def test_the_rule_sends_the_pipelines_document_events_to_the_fan_out_queue(synth: SynthResult) -> None:
    rules = [r["Properties"] for r in synth.of_type("AWS::Events::Rule").values() if "EventPattern" in r["Properties"]]
    assert len(rules) == 1
    (rule,) = rules
    assert rule["EventPattern"] == {"source": ["rag-ingest"], "detail-type": list(DOCUMENT_EVENTS)}
    assert rule.get("EventBusName", "default") == "default"
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [synth.logical_id("Webhooks/FanOutQueue"), "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {
        "Fn::GetAtt": [synth.logical_id("Webhooks/FanOutDeadLetterQueue"), "Arn"]
    }


def _mapping(synth: SynthResult, function: str) -> dict[str, Any]:
    ref = {"Ref": synth.logical_id(f"Webhooks/{function}")}
    (mapping,) = [
        m["Properties"] for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == ref
    ]  # fmt: skip
    return mapping


def test_the_functions_consume_their_queues_with_partial_batch_failures(synth: SynthResult) -> None:
    fan_out = _mapping(synth, "WebhookFanOutFunction")
    assert fan_out["EventSourceArn"] == {"Fn::GetAtt": [synth.logical_id("Webhooks/FanOutQueue"), "Arn"]}
    assert fan_out["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    delivery = _mapping(synth, "WebhookDeliveryFunction")
    assert delivery["EventSourceArn"] == {"Fn::GetAtt": [synth.logical_id("Webhooks/DeliveryQueue"), "Arn"]}
    assert delivery["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert delivery["BatchSize"] == synth.config.webhooks.delivery_batch_size
    assert delivery["ScalingConfig"] == {"MaximumConcurrency": synth.config.webhooks.delivery_max_concurrency}


def test_the_delivery_never_allows_loopback_in_aws_and_knows_its_queues(synth: SynthResult) -> None:
    env = synth.resource("Webhooks/WebhookDeliveryFunction")["Properties"]["Environment"]["Variables"]
    assert env["WEBHOOK_ALLOW_LOOPBACK_HTTP"] == "false"
    assert env["WEBHOOK_TIMEOUT_SECONDS"] == str(synth.config.webhooks.timeout_seconds)
    assert env["WEBHOOK_DEAD_LETTER_QUEUE_URL"] == {"Ref": synth.logical_id("Webhooks/DeliveryDeadLetterQueue")}
    api = synth.resource("Api/ApiFunction")["Properties"]["Environment"]["Variables"]
    assert api["WEBHOOK_ALLOW_LOOPBACK_HTTP"] == "false"
    assert api["WEBHOOKS_TABLE"] == {"Ref": synth.logical_id("Webhooks/WebhooksTable")}
    fan_out = synth.resource("Webhooks/WebhookFanOutFunction")["Properties"]["Environment"]["Variables"]
    assert fan_out["WEBHOOK_RETRY_HOURS"] == str(synth.config.webhooks.retry_hours)


def test_the_table_expires_delivery_records_by_ttl(synth: SynthResult) -> None:
    resources = synth.template_dict["Resources"]
    [table] = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::DynamoDB::Table"
        and {k["AttributeName"] for k in r["Properties"]["KeySchema"]} == {"tenant_id", "endpoint_id"}
    ]
    assert table["Properties"]["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}


def test_least_privilege_grants(synth: SynthResult) -> None:
    table = _arn(synth, "Webhooks/WebhooksTable")
    delivery_queue, dlq = _arn(synth, "Webhooks/DeliveryQueue"), _arn(synth, "Webhooks/DeliveryDeadLetterQueue")
    fan_out_queue = _arn(synth, "Webhooks/FanOutQueue")

    fan_out = _grants(synth, "WebhookFanOutFunction")
    assert fan_out["dynamodb:Query"] == {table}
    assert fan_out["sqs:SendMessage"] == {delivery_queue}
    assert fan_out["sqs:ReceiveMessage"] == {fan_out_queue}
    assert {a for a in fan_out if a.startswith("dynamodb:")} == {"dynamodb:Query"}

    delivery = _grants(synth, "WebhookDeliveryFunction")
    # Reads its endpoint; records each attempt (a new item, no update or delete: TTL removes them).
    assert {a for a in delivery if a.startswith("dynamodb:")} == {"dynamodb:GetItem", "dynamodb:PutItem"}
    assert delivery["dynamodb:GetItem"] == delivery["dynamodb:PutItem"] == {table}
    assert delivery["sqs:ChangeMessageVisibility"] == {delivery_queue}  # the backoff
    assert delivery["sqs:SendMessage"] == {dlq}  # dead-lettering, nowhere else
    # Neither may publish events, read the documents table or touch S3.
    for grants in (fan_out, delivery):
        assert not any(a.startswith(("events:", "s3:", "states:", "es:")) for a in grants)
        assert _arn(synth, "Storage/DocumentsTable") not in {r for rs in grants.values() for r in rs}


def test_the_dead_letter_queues_alarm(synth: SynthResult) -> None:
    alarms = {
        resource["Metadata"]["aws:cdk:path"].split("/")[-2]: resource["Properties"]
        for resource in synth.of_type("AWS::CloudWatch::Alarm").values()
    }
    for alarm, queue in (
        ("WebhookDeadLetterAlarm", "DeliveryDeadLetterQueue"),
        ("WebhookFanOutDeadLetterAlarm", "FanOutDeadLetterQueue"),
    ):
        props = alarms[alarm]
        assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert props["Dimensions"] == [
            {"Name": "QueueName", "Value": {"Fn::GetAtt": [synth.logical_id(f"Webhooks/{queue}"), "QueueName"]}}
        ]
        assert props["Threshold"] == 0 and props["ComparisonOperator"] == "GreaterThanThreshold"
        assert props["AlarmActions"] == [{"Ref": synth.logical_id("Monitoring/AlarmTopic")}]


def test_outputs(synth: SynthResult) -> None:
    outputs = synth.template_dict["Outputs"]
    assert outputs["WebhooksTableName"]["Value"] == {"Ref": synth.logical_id("Webhooks/WebhooksTable")}
    assert outputs["WebhookDeliveryQueueUrl"]["Value"] == {"Ref": synth.logical_id("Webhooks/DeliveryQueue")}
    assert outputs["WebhookDeadLetterQueueUrl"]["Value"] == {
        "Ref": synth.logical_id("Webhooks/DeliveryDeadLetterQueue")
    }
