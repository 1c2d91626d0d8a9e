"""Operations: every alarm (metric, threshold, comparison, actions), the dashboard's metrics, the
reaper's schedule, and least privilege for the Redrive, Reaper and API-DELETE roles."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rag_ingest.core.errors import ErrorCode, failure_cause

from tests.infra.template_tools import SynthResult, as_list, render_token

pytestmark = pytest.mark.infra

# The stage functions of both lanes (the bulk lane's copies: infra/constructs/workflow.py).
STAGES = [
    *("Validate", "Parse", "Chunk", "Embed", "Index", "Finalize"),
    *("ParseBulk", "ChunkBulk", "EmbedBulk", "IndexBulk"),
]
FUNCTIONS = {
    "Api": "Api/ApiFunction",
    "Mcp": "Mcp/McpFunction",
    "LiveAnswers": "LiveAnswers/AnswersFunction",
    "Intake": "Intake/IntakeFunction",
    "Redrive": "Operations/RedriveFunction",
    "Reaper": "Operations/ReaperFunction",
    "Reconciler": "Reconciler/ReconcilerFunction",
    **{name: f"Workflow/{name}Function" for name in [*STAGES, "MarkFailed"]},
    "WebhookFanOut": "Webhooks/WebhookFanOutFunction",
    "WebhookDelivery": "Webhooks/WebhookDeliveryFunction",
    "SourceSync": "Sources/SourceSyncFunction",
}
# Errors of these are real incidents at once; a stage's errors include bad files (Catch → MarkFailed).
ERRORS_ALARMED = [
    "Api",
    "Mcp",
    "LiveAnswers",
    "Intake",
    "Redrive",
    "Reaper",
    "Reconciler",
    "MarkFailed",
    "WebhookFanOut",
    "WebhookDelivery",
    "SourceSync",
]
SYSTEM_CODES = {
    "INTERNAL_ERROR",
    "TRANSIENT_RETRIES_EXHAUSTED",
    "EMBEDDING_CAPACITY",
    "TIMEOUT",
    "STUCK",
    "EMBEDDING_BATCH_FAILED",
}
XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def alarm(synth: SynthResult, name: str) -> dict[str, Any]:
    return dict(synth.resource(f"Monitoring/{name}")["Properties"])


def assert_pages_the_topic(synth: SynthResult, props: dict[str, Any], threshold: float) -> None:
    topic = {"Ref": synth.logical_id("Monitoring/AlarmTopic")}
    assert props["AlarmActions"] == [topic]
    assert props["OKActions"] == [topic]
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["Threshold"] == threshold
    assert props["TreatMissingData"] == "notBreaching"


def assert_metric(
    synth: SynthResult, props: dict[str, Any], namespace: str, metric: str, target: str, statistic: str
) -> None:
    assert (props["Namespace"], props["MetricName"], props["Statistic"]) == (namespace, metric, statistic)
    values = [render_token(d["Value"]) for d in props["Dimensions"]]
    assert any(synth.logical_id(target) in value for value in values), values


def test_the_alarm_set_is_exactly_the_documented_one(synth: SynthResult) -> None:
    expected = {
        "DeadLetterQueueAlarm",
        "DeadLetterQueueAgeAlarm",
        "QueueAgeAlarm",
        "SystemFailuresAlarm",
        "ExecutionsTimedOutAlarm",
        "DocumentsReapedAlarm",
        # The reconciler's (infra/constructs/reconciler.py, test_infra_reconciler.py).
        "ReconcilerDriftAlarm",
        *(f"{name}ErrorsAlarm" for name in ERRORS_ALARMED),
        *(f"{name}ErrorRateAlarm" for name in STAGES),
        *(f"{name}ThrottlesAlarm" for name in FUNCTIONS),
        # The OpenSearch domain's (test_infra_search.py).
        "ClusterRedAlarm",
        "ClusterYellowAlarm",
        "FreeStorageAlarm",
        "JvmMemoryPressureAlarm",
        "AutomatedSnapshotFailureAlarm",
        # Live status (infra/constructs/live_status.py).
        "PusherErrorsAlarm",
        "PusherIteratorAgeAlarm",
        "PusherDeadLetterAlarm",
        # Webhooks (infra/constructs/webhooks.py).
        "WebhookDeadLetterAlarm",
        "WebhookFanOutDeadLetterAlarm",
    }
    paths = {
        resource["Metadata"]["aws:cdk:path"].split("/")[-2]
        for resource in synth.of_type("AWS::CloudWatch::Alarm").values()
    }
    assert paths == expected
    # Every failed execution is not an incident: an encrypted upload ends in the Fail state too.
    assert not any(
        props.get("MetricName") == "ExecutionsFailed"
        for props in (r["Properties"] for r in synth.of_type("AWS::CloudWatch::Alarm").values())
    )


def test_queue_alarms(synth: SynthResult) -> None:
    monitoring = synth.config.monitoring
    dlq = alarm(synth, "DeadLetterQueueAlarm")
    assert_metric(synth, dlq, "AWS/SQS", "ApproximateNumberOfMessagesVisible", "Intake/DeadLetterQueue", "Maximum")
    assert_pages_the_topic(synth, dlq, 0)
    dlq_age = alarm(synth, "DeadLetterQueueAgeAlarm")
    assert_metric(synth, dlq_age, "AWS/SQS", "ApproximateAgeOfOldestMessage", "Intake/DeadLetterQueue", "Maximum")
    assert_pages_the_topic(synth, dlq_age, monitoring.dead_letter_age_threshold_seconds)
    # Well inside the DLQ's retention, so a message is looked at before SQS drops it.
    retention = synth.resource("Intake/DeadLetterQueue")["Properties"]["MessageRetentionPeriod"]
    assert monitoring.dead_letter_age_threshold_seconds < retention
    age = alarm(synth, "QueueAgeAlarm")
    assert_metric(synth, age, "AWS/SQS", "ApproximateAgeOfOldestMessage", "Intake/IngestQueue", "Maximum")
    assert_pages_the_topic(synth, age, monitoring.queue_age_threshold_seconds)


def test_system_failures_alarm_sums_documents_failed_over_system_codes_only(synth: SynthResult) -> None:
    props = alarm(synth, "SystemFailuresAlarm")
    assert_pages_the_topic(synth, props, 0)
    [query] = props["Metrics"]
    expression = query["Expression"]
    assert expression == "SELECT SUM(DocumentsFailed) FROM RagIngest WHERE Cause = 'system'"
    # Exactly the system codes carry that label (the functions' side of the contract).
    assert {code.value for code in ErrorCode if failure_cause(code) == "system"} == SYSTEM_CODES
    assert query["ReturnData"] is True and query["Period"] == 300


def test_executions_timed_out_and_reaped_documents_alarms(synth: SynthResult) -> None:
    timed_out = alarm(synth, "ExecutionsTimedOutAlarm")
    assert_metric(synth, timed_out, "AWS/States", "ExecutionsTimedOut", "Workflow/StateMachine", "Sum")
    assert_pages_the_topic(synth, timed_out, 0)
    reaped = alarm(synth, "DocumentsReapedAlarm")
    assert_pages_the_topic(synth, reaped, 0)
    [query] = reaped["Metrics"]
    # Both actions (Redriven, MarkedFailed), one data point per reaper run.
    assert query["Expression"] == "SELECT SUM(DocumentsReaped) FROM RagIngest"
    assert query["Period"] == synth.config.reaper.schedule_minutes * 60


@pytest.mark.parametrize("name", ERRORS_ALARMED)
def test_errors_alarm(synth: SynthResult, name: str) -> None:
    props = alarm(synth, f"{name}ErrorsAlarm")
    assert_metric(synth, props, "AWS/Lambda", "Errors", FUNCTIONS[name], "Sum")
    assert_pages_the_topic(synth, props, 0)


@pytest.mark.parametrize("name", STAGES)
def test_stage_error_rate_alarm(synth: SynthResult, name: str) -> None:
    monitoring = synth.config.monitoring
    props = alarm(synth, f"{name}ErrorRateAlarm")
    assert_pages_the_topic(synth, props, monitoring.stage_error_rate_percent)
    assert props["EvaluationPeriods"] == 3
    queries = {q["Id"]: q for q in props["Metrics"]}
    expression = next(q for q in queries.values() if "Expression" in q)
    assert expression["Expression"] == (
        f"IF(invocations >= {monitoring.stage_error_min_invocations}, 100 * errors / invocations, 0)"
    )
    for query_id, metric_name in (("errors", "Errors"), ("invocations", "Invocations")):
        stat = queries[query_id]["MetricStat"]
        assert (stat["Metric"]["Namespace"], stat["Metric"]["MetricName"], stat["Stat"]) == (
            "AWS/Lambda",
            metric_name,
            "Sum",
        )
        assert stat["Metric"]["Dimensions"] == [
            {"Name": "FunctionName", "Value": {"Ref": synth.logical_id(FUNCTIONS[name])}}
        ]
        assert queries[query_id]["ReturnData"] is False


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_throttles_alarm(synth: SynthResult, name: str) -> None:
    props = alarm(synth, f"{name}ThrottlesAlarm")
    assert_metric(synth, props, "AWS/Lambda", "Throttles", FUNCTIONS[name], "Sum")
    assert_pages_the_topic(synth, props, 0)


def test_dashboard_shows_queues_stages_failures_and_ready(synth: SynthResult) -> None:
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    assert synth.template_dict["Outputs"]["DashboardName"]["Value"] == {"Ref": synth.logical_id("Monitoring/Dashboard")}
    assert {"RedriveFunctionName", "ReaperFunctionName", "AlarmTopicArn"} <= set(synth.template_dict["Outputs"])
    body = json.loads(render_token(dashboard["Properties"]["DashboardBody"]))
    titles = {w["properties"].get("title") for w in body["widgets"]}
    assert {
        "Ingest queue",
        "Dead-letter queue",
        "Documents by stage (stages started)",
        "Stage duration p50 / p95 (ms)",
        "Failures by error code",
        "Documents ready / reaped",
    } <= titles
    expressions = [
        entry[0]["expression"]
        for widget in body["widgets"]
        for entry in widget["properties"].get("metrics", [])
        if isinstance(entry[0], dict) and "expression" in entry[0]
    ]
    for metric, statistic in (
        ("StageStarted", "Sum"),
        ("StageDuration", "p50"),
        ("StageDuration", "p95"),
        ("DocumentsFailed", "Sum"),
        ("DocumentsReady", "Sum"),
        ("DocumentsReaped", "Sum"),
    ):
        search = f"SEARCH('Namespace=\"RagIngest\" MetricName=\"{metric}\"', '{statistic}', 300)"
        assert search in expressions, metric


def test_reaper_runs_on_its_schedule_with_the_configured_deadline(synth: SynthResult) -> None:
    reaper = synth.config.reaper
    reaper_arn = {"Fn::GetAtt": [synth.logical_id("Operations/ReaperFunction"), "Arn"]}
    (rule,) = [
        r
        for r in synth.of_type("AWS::Events::Rule").values()
        if "ScheduleExpression" in r["Properties"] and r["Properties"]["Targets"][0]["Arn"] == reaper_arn
    ]
    props = rule["Properties"]
    assert props["ScheduleExpression"] == f"rate({reaper.schedule_minutes} minutes)"
    assert len(props["Targets"]) == 1
    env = synth.resource("Operations/ReaperFunction")["Properties"]["Environment"]["Variables"]
    assert env["STUCK_AFTER_SECONDS"] == str(reaper.stuck_after_minutes * 60)
    assert env["MAX_REDRIVES"] == str(reaper.max_redrives)
    assert env["STATE_MACHINE_ARN"] == {"Ref": synth.logical_id("Workflow/StateMachine")}
    (permission,) = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [synth.logical_id("Operations/ReaperFunction"), "Arn"]}
    ]
    assert permission["Principal"] == "events.amazonaws.com"


# -- least privilege ---------------------------------------------------------------------
def grants(synth: SynthResult, path: str) -> dict[str, set[str]]:
    """Action → rendered resources, without the log group and X-Ray statements every function has (and
    the API's bedrock:Rerank, which IAM takes on '*' only and the stack merges with X-Ray's statement:
    tests/infra/test_infra_permissions.py checks it)."""
    log_group = synth.resource(path)["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    found: dict[str, set[str]] = {}
    for statement in synth.role_statements(path):
        assert statement["Effect"] == "Allow"
        resources = {render_token(r) for r in as_list(statement["Resource"])}
        actions = set(as_list(statement["Action"]))
        if actions <= XRAY | {"bedrock:Rerank"}:
            assert resources == {"*"}
            continue
        if resources == {f"${{{log_group}.Arn}}"}:
            continue
        assert "*" not in resources, statement
        for action in actions:
            found.setdefault(action, set()).update(resources)
    return found


def test_redrive_role_is_least_privilege(synth: SynthResult) -> None:
    table = f"${{{synth.logical_id('Storage/DocumentsTable')}.Arn}}"
    dlq = f"${{{synth.logical_id('Intake/DeadLetterQueue')}.Arn}}"
    queue = f"${{{synth.logical_id('Intake/IngestQueue')}.Arn}}"
    machine = f"${{{synth.logical_id('Workflow/StateMachine')}}}"
    assert grants(synth, "Operations/RedriveFunction") == {
        "sqs:ReceiveMessage": {dlq},
        "sqs:DeleteMessage": {dlq},
        "sqs:ChangeMessageVisibility": {dlq},
        "sqs:GetQueueAttributes": {dlq, queue},
        "sqs:GetQueueUrl": {dlq, queue},
        "sqs:SendMessage": {queue},
        "dynamodb:GetItem": {table},
        "dynamodb:UpdateItem": {table},
        "dynamodb:Query": {f"{table}/index/by_status"},
        "states:StartExecution": {machine},
    }


def test_reaper_role_is_least_privilege(synth: SynthResult) -> None:
    table = f"${{{synth.logical_id('Storage/DocumentsTable')}.Arn}}"
    machine_id = synth.logical_id("Workflow/StateMachine")
    executions = (
        f"arn:${{AWS::Partition}}:states:${{AWS::Region}}:${{AWS::AccountId}}:execution:${{{machine_id}.Name}}:*"
    )
    assert grants(synth, "Operations/ReaperFunction") == {
        "dynamodb:GetItem": {table},
        "dynamodb:UpdateItem": {table},
        "dynamodb:Query": {f"{table}/index/by_status"},
        "states:StartExecution": {f"${{{machine_id}}}"},
        "states:DescribeExecution": {executions},
        "events:PutEvents": {"arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"},
    }


def _delete_statements(synth: SynthResult) -> list[dict[str, Any]]:
    return [
        s
        for s in synth.role_statements("Api/ApiFunction")
        if any(a.startswith(("s3:Delete", "s3:List", "es:")) for a in as_list(s["Action"]))
    ]


def test_api_delete_may_remove_only_raw_and_artifact_versions(synth: SynthResult) -> None:
    bucket = f"${{{synth.logical_id('Storage/DocumentsBucket')}.Arn}}"
    api = grants(synth, "Api/ApiFunction")
    assert api["s3:DeleteObject"] == api["s3:DeleteObjectVersion"] == {f"{bucket}/raw/*", f"{bucket}/artifacts/*"}
    assert api["s3:ListBucketVersions"] == {bucket}
    [listing] = [s for s in _delete_statements(synth) if "s3:ListBucketVersions" in as_list(s["Action"])]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["raw/*", "artifacts/*"]}}
    assert not {"s3:DeleteBucket", "s3:PutBucketPolicy", "s3:ListBucket"} & set(api)


def test_api_delete_may_only_find_and_bulk_delete_in_the_chunk_index(synth: SynthResult) -> None:
    index = f"{synth.domain_arn_prefix}/{synth.config.opensearch.index}"
    api = grants(synth, "Api/ApiFunction")
    es = {action: resources for action, resources in api.items() if action.startswith("es:")}
    assert es == {
        "es:ESHttpHead": {index},
        "es:ESHttpPost": {f"{index}/_bulk", f"{index}/_refresh", f"{index}/_search"},
    }
