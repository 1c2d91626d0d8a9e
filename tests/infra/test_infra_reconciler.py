"""The reconciler's construct: its function and environment, its schedule (validated rate), its
least-privilege role, its drift alarm (also evaluated by the local stack) and its output."""

from __future__ import annotations

from typing import Any

import pytest
from rag_ingest.core.config import ReconcilerEnv
from rag_ingest.operations.reconciler import DriftKind

from infra.config import ConfigError, parse_config
from local.runtime.alarms.template_alarms import read_alarm
from tests.infra.template_tools import SynthResult
from tests.infra.test_infra_operations import grants

pytestmark = pytest.mark.infra
FUNCTION = "Reconciler/ReconcilerFunction"


def _function_arn(synth: SynthResult) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id(FUNCTION), "Arn"]}


def test_runs_on_its_schedule_with_its_whole_environment(synth: SynthResult) -> None:
    settings = synth.config.reconciler
    (rule,) = [
        r["Properties"]
        for r in synth.of_type("AWS::Events::Rule").values()
        if "ScheduleExpression" in r["Properties"] and r["Properties"]["Targets"][0]["Arn"] == _function_arn(synth)
    ]
    assert rule["ScheduleExpression"] == f"rate({settings.schedule_hours} hours)"
    assert rule["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    function = synth.resource(FUNCTION)["Properties"]
    assert function["Timeout"] == 900 and function["MemorySize"] == 512
    env = function["Environment"]["Variables"]
    assert env["REPAIR"] == "true"
    assert env["OBJECT_GRACE_SECONDS"] == str(settings.object_grace_minutes * 60)
    assert env["STUCK_AFTER_SECONDS"] == str(synth.config.reaper.stuck_after_minutes * 60)
    # Every variable its environment model reads (a cold start fails on a missing one) is set.
    required = {name.upper() for name, field in ReconcilerEnv.model_fields.items() if field.is_required()}
    assert required <= set(env), required - set(env)
    (permission,) = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == _function_arn(synth)
    ]
    assert permission["Principal"] == "events.amazonaws.com"


def test_its_role_is_least_privilege(synth: SynthResult) -> None:
    table = f"${{{synth.logical_id('Storage/DocumentsTable')}.Arn}}"
    sources = f"${{{synth.logical_id('Sources/SourcesTable')}.Arn}}"
    bucket = f"${{{synth.logical_id('Storage/DocumentsBucket')}.Arn}}"
    index = f"{synth.domain_arn_prefix}/{synth.config.opensearch.index}"
    assert grants(synth, FUNCTION) == {
        "dynamodb:GetItem": {table},
        "dynamodb:UpdateItem": {table},
        "dynamodb:Query": {f"{table}/index/by_status", f"{table}/index/by_tenant", sources},
        "dynamodb:DeleteItem": {sources},  # a source item whose document is gone is forgotten
        "s3:ListBucketVersions": {bucket},
        "s3:GetObject": {f"{bucket}/artifacts/*"},
        "es:ESHttpHead": {index},
        "es:ESHttpPost": {f"{index}/_bulk", f"{index}/_refresh", f"{index}/_search"},
        "states:StartExecution": {f"${{{synth.logical_id('Workflow/StateMachine')}}}"},
    }
    [listing] = [s for s in synth.role_statements(FUNCTION) if s["Action"] == "s3:ListBucketVersions"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["raw/*"]}}


def test_drift_alarm_sums_every_kind_once_per_run_pages_the_topic_and_is_evaluated_locally(
    synth: SynthResult,
) -> None:
    resource = synth.resource("Reconciler/ReconcilerDriftAlarm")
    props = resource["Properties"]
    [query] = props["Metrics"]
    assert query["Expression"] == "SELECT SUM(ReconcilerDrift) FROM RagIngest"
    assert query["Period"] == synth.config.reconciler.schedule_hours * 3600
    topic = {"Ref": synth.logical_id("Monitoring/AlarmTopic")}
    assert props["AlarmActions"] == [topic] and props["OKActions"] == [topic]
    assert (props["ComparisonOperator"], props["Threshold"], props["TreatMissingData"]) == (
        "GreaterThanThreshold",
        0,
        "notBreaching",
    )
    _rule, _metric, why_not = read_alarm(props)
    assert why_not is None
    assert {kind.value for kind in DriftKind} == {
        "OrphanChunks", "StaleChunks", "ChunkCountMismatch", "ObjectWithoutRecord", "RecordWithoutObject", "Stuck",
        "SourceItemWithoutDocument",
    }  # fmt: skip


def test_its_function_name_is_an_output(synth: SynthResult) -> None:
    output = synth.template_dict["Outputs"]["ReconcilerFunctionName"]
    assert output["Value"] == {"Ref": synth.logical_id(FUNCTION)}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"reconciler": {"scheduleHours": 0}}, "reconciler.scheduleHours"),
        ({"reconciler": {"scheduleHours": 169}}, "reconciler.scheduleHours"),
        ({"reconciler": {"objectGraceMinutes": -1}}, "reconciler.objectGraceMinutes"),
        ({"reconciler": {"repair": "sometimes"}}, "reconciler.repair"),
        ({"reconciler": {"everything": True}}, "reconciler.everything"),
    ],
)
def test_bad_reconciler_config_is_a_clear_error(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert message in str(error.value)
