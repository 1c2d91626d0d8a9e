"""The sources construct: the table, the sync workflow (a step that loops on its phase, retries
transient errors, catches into MarkSyncFailed), the sync function's least-privilege reads of the
buckets in sources.readableBuckets only, the schedules' group and role, and the API's grants; a
bound synth with readable buckets stays cdk-nag clean."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Environment

from infra.cdk_app import cdk_json_context
from infra.config import CONTEXT_KEY, SourcesConfig
from tests.infra.conftest import BOUND_ACCOUNT, synthesize
from tests.infra.template_tools import SynthResult, as_list, render_token

pytestmark = pytest.mark.infra


def _actions(synth: SynthResult, path: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for statement in synth.role_statements(path):
        for action in as_list(statement["Action"]):
            found.setdefault(action, set()).update(render_token(r) for r in as_list(statement["Resource"]))
    return found


def test_the_table_is_keyed_encrypted_and_recoverable(synth: SynthResult) -> None:
    props = synth.resource("Sources/SourcesTable")["Properties"]
    assert [key["AttributeName"] for key in props["KeySchema"]] == ["pk", "sk"]
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_the_sync_workflow_loops_on_the_phase_and_catches_into_mark_failed(synth: SynthResult) -> None:
    definition = synth.state_machine_definition("Sources/SyncStateMachine")
    assert definition["StartAt"] == "Step"
    step = definition["States"]["Step"]
    assert step["Next"] == "NextPhase"
    assert step["Retry"][0]["ErrorEquals"] == ["PermanentError"]
    assert any("TransientError" in retry["ErrorEquals"] for retry in step["Retry"])
    assert step["Catch"][0]["Next"] == "MarkSyncFailed"
    choices = {choice["StringEquals"]: choice["Next"] for choice in definition["States"]["NextPhase"]["Choices"]}
    assert choices == {"listing": "Step", "applying": "FanOut", "finishing": "Step"}
    assert definition["States"]["NextPhase"]["Default"] == "SyncEnded"
    assert definition["States"]["MarkSyncFailed"]["Next"] == "SyncFailed"


def test_staged_items_fan_out_to_a_distributed_map_that_reads_only_staged_files(synth: SynthResult) -> None:
    fan_out = synth.state_machine_definition("Sources/SyncStateMachine")["States"]["FanOut"]
    assert fan_out["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert fan_out["ItemReader"]["ReaderConfig"] == {"InputType": "JSON"}
    assert fan_out["ItemReader"]["Parameters"] == {"Bucket.$": "$.staged.bucket", "Key.$": "$.staged.key"}
    assert fan_out["MaxConcurrency"] == 20 and fan_out["ResultPath"] == "$.applied"
    assert (fan_out["Next"], fan_out["Catch"][0]["Next"]) == ("Step", "MarkSyncFailed")
    apply = fan_out["ItemProcessor"]["States"]["ApplyBatch"]
    assert apply["End"] is True and any("TransientError" in retry["ErrorEquals"] for retry in apply["Retry"])
    reads = _actions(synth, "Sources/SyncStateMachine").get("s3:GetObject", set())
    assert reads and all(resource.endswith("/sources/*") for resource in reads), reads
    environment = synth.resource("Sources/SourceSyncFunction")["Properties"]["Environment"]["Variables"]
    assert environment["SOURCE_FAN_OUT_BATCH_ITEMS"] == "100"


def test_no_bucket_is_readable_by_default(synth: SynthResult) -> None:
    assert not any("ObjectEventsRule" in logical_id for logical_id in synth.resources)
    actions = _actions(synth, "Sources/SourceSyncFunction")
    assert "s3:ListBucketVersions" in actions  # its own bucket's uploads, for deletions
    readable = actions.get("s3:GetObjectVersion", set())
    assert readable == set(), readable
    assert all(resource.endswith(("/raw/*", "/sources/*")) for resource in actions["s3:GetObject"])


def test_the_api_manages_only_its_groups_schedules_and_passes_only_the_scheduler_role(synth: SynthResult) -> None:
    actions = _actions(synth, "Api/ApiFunction")
    assert actions["scheduler:CreateSchedule"] == {
        "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/RagIngest-source-syncs/*"
    }
    role = f"${{{synth.logical_id('Sources/SchedulerRole')}.Arn}}"
    assert actions["iam:PassRole"] == {role}
    trust = synth.resource("Sources/SchedulerRole")["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    role_id = synth.logical_id("Sources/SchedulerRole")
    statements = [
        statement
        for policy in synth.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    granted = {
        (action, render_token(statement["Resource"]))
        for statement in statements
        for action in as_list(statement["Action"])
    }
    assert granted == {("states:StartExecution", f"${{{synth.logical_id('Sources/SyncStateMachine')}}}")}


TEAM_KEY = "arn:aws:kms:eu-west-1:210987654321:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.fixture(scope="module")
def readable_synth(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    context: dict[str, Any] = json.loads(json.dumps(cdk_json_context()[CONTEXT_KEY]))
    context["sources"]["readableBuckets"] = ["team-docs", "archive.example.org"]
    context["sources"]["readableKeys"] = [TEAM_KEY]
    return synthesize(
        tmp_path_factory.mktemp("cdk.out-sources"),
        Environment(account=BOUND_ACCOUNT, region="eu-west-1"),
        context={CONTEXT_KEY: context},
    )


@pytest.mark.slow
def test_readable_buckets_are_read_only_and_nag_clean(readable_synth: SynthResult) -> None:
    assert readable_synth.validation_error is None, readable_synth.validation_error
    actions = _actions(readable_synth, "Sources/SourceSyncFunction")
    buckets = {"arn:aws:s3:::team-docs", "arn:aws:s3:::archive.example.org"}
    assert actions["s3:ListBucketVersions"] >= buckets
    assert actions["s3:GetObjectVersion"] == {f"{arn}/*" for arn in buckets}
    rule = readable_synth.resource("Sources/ObjectEventsRule")["Properties"]
    assert rule["EventPattern"]["source"] == ["aws.s3"]
    assert rule["EventPattern"]["detail"] == {"bucket": {"name": ["team-docs", "archive.example.org"]}}
    assert not any(
        action.startswith("s3:") and "Put" in action and resources & buckets for action, resources in actions.items()
    )
    [decrypt] = [
        s
        for s in readable_synth.role_statements("Sources/SourceSyncFunction")
        if s.get("Sid") == "DecryptSourceObjects"
    ]
    assert (decrypt["Action"], decrypt["Resource"]) == ("kms:Decrypt", TEAM_KEY)
    assert decrypt["Condition"] == {"StringLike": {"kms:ViaService": "s3.eu-west-1.amazonaws.com"}}


def test_a_readable_key_must_be_a_kms_key_arn() -> None:
    with pytest.raises(ValueError, match="not a KMS key ARN"):
        SourcesConfig(readable_keys=("alias/team-docs",))
