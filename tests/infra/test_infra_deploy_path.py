"""The synth ``cdk deploy`` runs is the synth these tests check, and what a fresh account or a second
region would refuse is caught here, offline (issue: the deploy a stranger runs succeeds).

``cdk deploy``, ``diff`` and ``destroy`` bind the stack to the credentials' account and region, so
tokens such as ``<AWS::Region>`` resolve; every check of the agnostic synth that matters for a deploy
runs on bound synths in three regions too (``bound_synth`` in conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from infra.paths import ROOT
from tests.infra.conftest import BOUND_ACCOUNT, BOUND_REGIONS
from tests.infra.template_tools import SynthResult, problem_annotations
from tests.infra.test_infra_compliance import CFN_LINT_IGNORED, _violations

pytestmark = pytest.mark.infra


def _resolve(value: Any, region: str, stack_id_suffix: str = "0a1b2c3d") -> str:
    """A template string value as CloudFormation would render it in ``region`` (the stack id's first
    UUID group is ``stack_id_suffix``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        refs = {"AWS::Region": region, "AWS::AccountId": BOUND_ACCOUNT, "AWS::Partition": "aws"}
        stack_id = f"arn:aws:cloudformation:{region}:{BOUND_ACCOUNT}:stack/RagIngest/{stack_id_suffix}-1-2-3-4"
        refs["AWS::StackId"] = stack_id
        return refs[value["Ref"]]
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_resolve(part, region, stack_id_suffix) for part in parts)
    if isinstance(value, dict) and "Fn::Select" in value:
        position, values = value["Fn::Select"]
        return _split(values, region, stack_id_suffix)[int(position)]
    raise AssertionError(f"unexpected intrinsic: {value!r}")


def _split(value: Any, region: str, suffix: str) -> list[str]:
    separator, source = value["Fn::Split"]
    return _resolve(source, region, suffix).split(separator)


# -- 1. the bound synth passes cdk-nag and cfn-lint, as the agnostic one does ------------------------


def test_bound_synth_passes_cdk_nag(bound_synth: SynthResult) -> None:
    assert bound_synth.validation_error is None, bound_synth.validation_error
    assert _violations(bound_synth.validation_report) == []


def test_bound_synth_resolves_the_environment(bound_synth: SynthResult) -> None:
    """Bound for real: the asset bucket and ARNs carry the account and region, not tokens."""
    text = bound_synth.template_file.read_text()
    assert f"cdk-hnb659fds-assets-{BOUND_ACCOUNT}-{bound_synth.region}" in text
    stack = bound_synth.manifest["artifacts"][bound_synth.stack_name]
    assert stack["environment"] == f"aws://{BOUND_ACCOUNT}/{bound_synth.region}"


def test_bound_synth_has_no_warning_or_error_annotations(bound_synth: SynthResult) -> None:
    assert problem_annotations(bound_synth.manifest) == []


def test_bound_synth_is_cfn_lint_clean_in_its_region(bound_synth: SynthResult, tmp_path: Path) -> None:
    assert bound_synth.region is not None
    template = tmp_path / "template.json"
    template.write_text(bound_synth.template_file.read_text())
    matches = lint_file(
        template, ManualArgs(regions=[bound_synth.region], ignore_checks=CFN_LINT_IGNORED, include_checks=["I"])
    )
    assert [str(match) for match in matches] == []


@pytest.mark.slow
def test_the_cdk_cli_synthesizes_as_cdk_deploy_does(synth: SynthResult, tmp_path: Path) -> None:
    """The pinned CDK CLI runs cdk.json's app with the account and region it resolved, as ``cdk deploy``
    does before it deploys (offline there are no credentials to resolve them from, so they are given as
    the CLI passes them on, in ``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION``). On 3f03406 this
    exited 1 with two AwsSolutions-IAM5 errors."""
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    assert cdk.exists(), "the pinned CDK CLI is missing: make node-modules (make test and make infra run it)"
    env = {
        **os.environ,
        "CDK_DEFAULT_ACCOUNT": BOUND_ACCOUNT,
        "CDK_DEFAULT_REGION": "eu-central-1",
        "AWS_REGION": "eu-central-1",
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance metadata to ask for credentials here
        "CI": "true",  # no notices or version check over the network
    }
    env.pop("CDK_OUTDIR", None)
    result = subprocess.run(
        [str(cdk), "synth", "--quiet", "--no-notices", "--no-version-reporting", "--output", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["artifacts"][synth.stack_name]["environment"] == f"aws://{BOUND_ACCOUNT}/eu-central-1"
    template = (tmp_path / f"{synth.stack_name}.template.json").read_text()
    assert f"cdk-hnb659fds-assets-{BOUND_ACCOUNT}-eu-central-1" in template


def test_cdk_json_runs_the_app_with_the_venv() -> None:
    """`npx cdk deploy|diff|destroy` work without activating the venv: cdk.json names its Python."""
    app_command = json.loads((ROOT / "cdk.json").read_text())["app"]
    assert app_command.split()[0] == ".venv/bin/python", app_command


# -- 2. a fresh account: the WebSocket stage's access logging needs API Gateway's account role -------


def test_the_stack_sets_api_gateway_s_cloudwatch_role_before_the_logging_stage(synth: SynthResult) -> None:
    [(account_id, account)] = synth.of_type("AWS::ApiGateway::Account").items()
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = synth.resources[role_id]
    principals = [s["Principal"] for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]]
    assert principals == [{"Service": "apigateway.amazonaws.com"}]
    assert "AmazonAPIGatewayPushToCloudWatchLogs" in json.dumps(role["Properties"]["ManagedPolicyArns"])
    # One setting per account and Region, which other APIs may log through: kept on destroy.
    assert account["DeletionPolicy"] == role["DeletionPolicy"] == "Retain"
    logging_stages = [
        (logical_id, stage)
        for logical_id, stage in synth.of_type("AWS::ApiGatewayV2::Stage").items()
        if "AccessLogSettings" in stage["Properties"]
    ]
    websocket_apis = set(synth.of_type("AWS::ApiGatewayV2::Api"))
    needing = [
        (logical_id, stage)
        for logical_id, stage in logging_stages
        if synth.resources[stage["Properties"]["ApiId"]["Ref"]]["Properties"].get("ProtocolType") == "WEBSOCKET"
    ]
    assert needing and websocket_apis
    for logical_id, stage in needing:
        assert account_id in stage.get("DependsOn", []), f"{logical_id} may be created before the account role"


def test_an_existing_account_role_can_be_relied_on_instead(tmp_path: Path, synth: SynthResult) -> None:
    from infra.cdk_app import create_app

    app, stack, _config = create_app(
        context={"rag-ingest": {"apiGatewayAccountRole": "existing"}}, outdir=str(tmp_path)
    )
    app.synth()
    template = json.loads((tmp_path / stack.template_file).read_text())
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGateway::Account"]


# -- 3. alarms use only the Metrics Insights grammar CloudWatch documents ----------------------------

# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-querylanguage.html:
# SELECT FUNCTION(metricName) FROM namespace | SCHEMA(...) [WHERE labelKey OPERATOR labelValue [AND ...]]
# [GROUP BY labelKey [, ...]] [ORDER BY FUNCTION() [DESC | ASC]] [LIMIT number], OPERATOR = or !=.
_CONDITION = r"\w+\s*(?:=|!=)\s*'[^']*'"
_DOCUMENTED_QUERY = re.compile(
    r"SELECT (?:AVG|COUNT|MAX|MIN|SUM)\(\w+\) FROM (?:\w+|\"[^\"]+\"|SCHEMA\([^)]*\))"
    rf"(?: WHERE {_CONDITION}(?: AND {_CONDITION})*)?"
    r"(?: GROUP BY \w+(?:, \w+)*)?(?: ORDER BY (?:AVG|COUNT|MAX|MIN|SUM)\(\) (?:ASC|DESC))?(?: LIMIT \d+)?",
    re.IGNORECASE,
)


def _insights_queries(synth: SynthResult) -> dict[str, str]:
    return {
        f"{logical_id}/{query['Id']}": query["Expression"]
        for logical_id, alarm in synth.of_type("AWS::CloudWatch::Alarm").items()
        for query in alarm["Properties"].get("Metrics", [])
        if str(query.get("Expression", "")).lstrip().upper().startswith("SELECT")
    }


def test_every_metrics_insights_alarm_query_is_in_the_documented_grammar(synth: SynthResult) -> None:
    queries = _insights_queries(synth)
    assert any("SystemFailuresAlarm" in key for key in queries), queries
    refused = {key: query for key, query in queries.items() if not _DOCUMENTED_QUERY.fullmatch(query.strip())}
    assert refused == {}


@pytest.mark.parametrize(
    "query",
    [
        "SELECT SUM(DocumentsFailed) FROM RagIngest WHERE ErrorCode = 'A' OR ErrorCode = 'B'",
        "SELECT SUM(DocumentsFailed) FROM RagIngest WHERE ErrorCode IN ('A', 'B')",
        "SELECT SUM(DocumentsFailed) FROM RagIngest WHERE (Cause = 'system')",
    ],
)
def test_the_grammar_check_refuses_undocumented_forms(query: str) -> None:
    assert not _DOCUMENTED_QUERY.fullmatch(query)


# -- 4. a second region in the same account: no account-global name repeats ---------------------------

# CloudFront's names are unique per account, whatever the region the stack is deployed from.
_ACCOUNT_GLOBAL_NAMES = {
    "AWS::CloudFront::ResponseHeadersPolicy": ("ResponseHeadersPolicyConfig", "Name"),
    "AWS::CloudFront::OriginAccessControl": ("OriginAccessControlConfig", "Name"),
    "AWS::CloudFront::CachePolicy": ("CachePolicyConfig", "Name"),
    "AWS::CloudFront::OriginRequestPolicy": ("OriginRequestPolicyConfig", "Name"),
    "AWS::CloudFront::Function": ("Name",),
    "AWS::IAM::ManagedPolicy": ("ManagedPolicyName",),
    "AWS::IAM::Role": ("RoleName",),
}
_LIMITS = {"AWS::CloudFront::OriginAccessControl": 64, "AWS::CloudFront::ResponseHeadersPolicy": 128}


def _account_global_names(synth: SynthResult, region: str, suffix: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for logical_id, resource in synth.resources.items():
        path = _ACCOUNT_GLOBAL_NAMES.get(resource["Type"])
        if path is None:
            continue
        value: Any = resource["Properties"]
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            names[logical_id] = _resolve(value, region, suffix)
    return names


def test_account_global_names_differ_between_two_regions(synth: SynthResult) -> None:
    """The same stack deployed from us-east-1 and from eu-west-1 into one account: every name that
    must be unique in the account differs (on 3f03406 the response headers policy's and the origin
    access control's were the construct path's, the same in both)."""
    first = _account_global_names(synth, "us-east-1", "0a1b2c3d")
    second = _account_global_names(synth, "eu-west-1", "9f8e7d6c")
    assert {"AWS::CloudFront::ResponseHeadersPolicy", "AWS::CloudFront::OriginAccessControl"} <= {
        synth.resources[logical_id]["Type"] for logical_id in first
    }
    assert set(first.values()).isdisjoint(second.values()), (first, second)
    for logical_id, name in {**first, **second}.items():
        limit = _LIMITS.get(synth.resources[logical_id]["Type"])
        if limit:
            assert len(name) <= limit and re.fullmatch(r"[A-Za-z0-9_-]+", name), name


def test_bound_regions_cover_one_outside_the_us() -> None:
    assert len(BOUND_REGIONS) >= 3 and any(not region.startswith("us-") for region in BOUND_REGIONS)


# -- 6. no localhost reaches production by default; the access log uses documented variables ---------


def test_no_localhost_cors_origin_by_default(synth: SynthResult) -> None:
    origins: list[str] = []
    for bucket in synth.of_type("AWS::S3::Bucket").values():
        for rule in bucket["Properties"].get("CorsConfiguration", {}).get("CorsRules", []):
            origins.extend(json.dumps(origin) for origin in rule["AllowedOrigins"])
    for api in synth.of_type("AWS::ApiGatewayV2::Api").values():
        origins.extend(json.dumps(o) for o in api["Properties"].get("CorsConfiguration", {}).get("AllowOrigins", []))
    assert origins, "expected the page's own origin at least"
    assert not [origin for origin in origins if "localhost" in origin or "127.0.0.1" in origin], origins


def test_access_log_formats_use_documented_context_variables(synth: SynthResult) -> None:
    """API Gateway documents ``$context.authorizer.claims.<property>``; a claim name with a colon
    (``custom:tenant_id``) has no documented spelling there."""
    for logical_id, stage in synth.of_type("AWS::ApiGatewayV2::Stage").items():
        log_format = stage["Properties"].get("AccessLogSettings", {}).get("Format")
        if log_format is None:
            continue
        variables = re.findall(r"\$context\.[\w.:]+", json.dumps(json.loads(log_format)))
        assert variables, logical_id
        assert not [v for v in variables if ":" in v], (logical_id, variables)


# -- 6. the layer carries nothing no function imports --------------------------------------------------


def test_the_built_layer_holds_no_dropped_distribution(synth: SynthResult) -> None:
    """``synth`` built the layer; tests/unit/test_layer_contents.py proves nothing imports these."""
    from tools.build_layer import SITE_DIR, UNIMPORTED_DISTRIBUTIONS, layer_size_bytes

    installed = {info.name.split("-")[0].lower() for info in SITE_DIR.glob("*.dist-info")}
    assert "tokenizers" in installed and "opensearch_py" in installed
    assert installed.isdisjoint(name.lower() for name in UNIMPORTED_DISTRIBUTIONS)
    for folder in ("huggingface_hub", "hf_xet", "grpc", "google", "opensearch", "yaml"):
        assert not (SITE_DIR / folder).exists(), folder
    # Lambda's limit is 250 MB unzipped for the function and its layers together; the layer stays far
    # under (117.6 MB since the other formats' readers: lxml, and Pillow, which python-pptx imports).
    assert layer_size_bytes() < 150_000_000


def test_the_layer_holds_the_domain_package_but_no_cli_and_no_retrievers(synth: SynthResult) -> None:
    """The CLI and the LangChain/LlamaIndex retrievers run outside Lambda: a distribution of their own
    (client/), never in the layer."""
    from tools.build_layer import PACKAGE_SRC, ROOT, SITE_DIR

    client = ROOT / "client" / "rag_ingest_client"
    assert {"cli/main.py", "retrievers/langchain.py", "retrievers/llamaindex.py"} <= {
        path.relative_to(client).as_posix() for path in client.rglob("*.py")
    }
    assert not (SITE_DIR / "rag_ingest_client").exists()
    layered = {path.relative_to(SITE_DIR / "rag_ingest").as_posix() for path in (SITE_DIR / "rag_ingest").rglob("*.py")}
    source = {path.relative_to(PACKAGE_SRC).as_posix() for path in PACKAGE_SRC.rglob("*.py")}
    assert not {name for name in layered | source if name.startswith(("cli/", "integrations/"))}
    assert layered == source
