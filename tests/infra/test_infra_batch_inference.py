"""embedding.batchInference: the bulk lane's Embed by Bedrock batch inference (a job per document, a
wait loop) behind a validated switch; the service role Bedrock assumes and the function's grants are
least privilege, cdk-nag and cfn-lint clean, agnostic and bound to an account."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Environment
from cfnlint.api import ManualArgs, lint_file
from rag_ingest.core.config import BatchInferenceEnv, StagesEnv

from infra.cdk_app import cdk_json_context
from infra.config import CONTEXT_KEY, ConfigError, parse_config
from tests.infra.conftest import BOUND_ACCOUNT, synthesize
from tests.infra.template_tools import SynthResult, problem_annotations
from tests.infra.test_infra_compliance import CFN_LINT_IGNORED, CFN_LINT_REGIONS, _violations
from tests.infra.test_infra_functions import POWERTOOLS_ENV
from tools.build_layer import build_layer

pytestmark = pytest.mark.infra

BATCH_ON = {"enabled": True, "pollSeconds": 30, "maxPollSeconds": 600}


def batch_context() -> dict[str, Any]:
    base = json.loads(json.dumps(cdk_json_context()[CONTEXT_KEY]))
    base["embedding"]["batchInference"] = {**base["embedding"].get("batchInference", {}), **BATCH_ON}
    base["workflow"]["timeoutMinutes"] = 24 * 60 + 60
    return base


def synthesize_with_batch(outdir: Path, env: Environment | None = None) -> SynthResult:
    return synthesize(outdir, env, context={CONTEXT_KEY: batch_context()})


@pytest.fixture(scope="module")
def batch_synth(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    build_layer()
    return synthesize_with_batch(tmp_path_factory.mktemp("cdk.out-batch"))


def states(synth: SynthResult) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(machine: dict[str, Any]) -> None:
        for name, state in machine.get("States", {}).items():
            found[name] = state
            if "ItemProcessor" in state:
                walk(state["ItemProcessor"])
            if "Iterator" in state:
                walk(state["Iterator"])

    walk(synth.state_machine_definition())
    return found


def test_off_by_default_no_batch_function_role_or_state(synth: SynthResult) -> None:
    assert synth.config.embedding.batch_inference.enabled is False
    assert not any("EmbedBatch" in name for name in states(synth))
    assert not any("BatchInferenceRole" in path for path in json.dumps(synth.template_dict).split('"'))


@pytest.mark.slow
def test_synth_with_batch_inference_is_nag_and_lint_clean(batch_synth: SynthResult, tmp_path: Path) -> None:
    assert batch_synth.validation_error is None, batch_synth.validation_error
    assert _violations(batch_synth.validation_report) == []
    assert problem_annotations(batch_synth.manifest) == []
    template = tmp_path / "template.json"
    template.write_text(batch_synth.template_file.read_text())
    matches = lint_file(
        template, ManualArgs(regions=CFN_LINT_REGIONS, ignore_checks=CFN_LINT_IGNORED, include_checks=["I"])
    )
    assert [str(match) for match in matches] == []


def test_bound_synth_with_batch_inference_is_nag_clean(tmp_path: Path) -> None:
    bound = synthesize_with_batch(tmp_path, Environment(account=BOUND_ACCOUNT, region="eu-west-1"))
    assert bound.validation_error is None, bound.validation_error
    assert _violations(bound.validation_report) == []


def test_bulk_lane_waits_on_the_job_and_falls_back_to_the_embed_map(batch_synth: SynthResult) -> None:
    found = states(batch_synth)
    assert found["ChunkBulk"]["Next"] == "EmbedBatchBulk"
    assert found["EmbedBatchBulk"]["Next"] == "EmbedBatchPhaseBulk"
    assert any(
        c["ErrorEquals"] == ["States.ALL"] and c["Next"] == "MarkFailed" for c in found["EmbedBatchBulk"]["Catch"]
    )
    choices = {c["StringEquals"]: c["Next"] for c in found["EmbedBatchPhaseBulk"]["Choices"]}
    assert choices == {"WAITING": "EmbedBatchWaitBulk", "ON_DEMAND": "EmbedBulk"}
    assert found["EmbedBatchPhaseBulk"]["Default"] == "IndexBulk"
    assert found["EmbedBatchWaitBulk"] == {
        "Type": "Wait",
        "SecondsPath": "$.embed_batch.wait_seconds",
        "Next": "EmbedBatchBulk",
    }
    assert found["EmbedBulk"]["Next"] == "IndexBulk"
    # The standard lane is unchanged: Chunk -> the Embed Map -> Index.
    assert found["Chunk"]["Next"] == "Embed"


def test_the_batch_function_environment(batch_synth: SynthResult) -> None:
    variables = batch_synth.resource("Workflow/EmbedBatchBulkFunction")["Properties"]["Environment"]["Variables"]
    expected = POWERTOOLS_ENV | StagesEnv.variable_names() | BatchInferenceEnv.variable_names()
    assert set(variables) == expected
    assert variables["BATCH_POLL_SECONDS"] == "30" and variables["BATCH_MAX_POLL_SECONDS"] == "600"
    assert variables["BATCH_MIN_RECORDS"] == "100" and variables["BATCH_TIMEOUT_HOURS"] == "24"
    role_logical_id = batch_synth.logical_id("Workflow/BatchInferenceRole")
    assert variables["BATCH_INFERENCE_ROLE_ARN"] == {"Fn::GetAtt": [role_logical_id, "Arn"]}


def test_the_service_role_trusts_bedrock_for_this_accounts_jobs_only(batch_synth: SynthResult) -> None:
    role = batch_synth.resource("Workflow/BatchInferenceRole")["Properties"]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "bedrock.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "model-invocation-job/*" in json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
    policies = [
        resource["Properties"]["PolicyDocument"]["Statement"]
        for resource in batch_synth.of_type("AWS::IAM::Policy").values()
        if {"Ref": batch_synth.logical_id("Workflow/BatchInferenceRole")} in resource["Properties"]["Roles"]
    ]
    actions = sorted(
        action
        for statements in policies
        for s in statements
        for action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    )
    assert actions == ["s3:GetObject", "s3:ListBucket", "s3:PutObject"]
    rendered = json.dumps(policies)
    assert "artifacts/*/batch/*/output/*" in rendered and '"*"' not in rendered


def test_the_function_passes_only_that_role_to_bedrock(batch_synth: SynthResult) -> None:
    statements = batch_synth.role_statements("Workflow/EmbedBatchBulkFunction")
    pass_role = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert len(pass_role) == 1
    assert pass_role[0]["Resource"] == {"Fn::GetAtt": [batch_synth.logical_id("Workflow/BatchInferenceRole"), "Arn"]}
    assert pass_role[0]["Condition"] == {"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}}
    rendered = json.dumps(statements)
    for action in ("bedrock:CreateModelInvocationJob", "bedrock:GetModelInvocationJob"):
        assert action in rendered
    assert "bedrock:InvokeModel" not in rendered  # the job, not the function, runs the model


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"workflow": {"timeoutMinutes": 60}}, "workflow.timeoutMinutes of at least 1500"),
        (
            {"embedding": {"batchInference": {"enabled": True, "pollSeconds": 600, "maxPollSeconds": 60}}},
            "maxPollSeconds",
        ),
        ({"embedding": {"batchInference": {"enabled": True, "minRecords": 10}}}, "minRecords"),
        ({"embedding": {"batchInference": {"enabled": True, "timeoutHours": 200}}}, "timeoutHours"),
    ],
)
def test_config_rejects_what_bedrock_or_the_workflow_would(override: dict[str, Any], message: str) -> None:
    raw = {"embedding": {"batchInference": {"enabled": True}}, "workflow": {"timeoutMinutes": 1500}}
    for key, value in override.items():
        raw[key] = value
    with pytest.raises(ConfigError, match=message.split(" ")[0]):
        parse_config(raw)
