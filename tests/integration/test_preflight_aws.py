"""``rag-ingest preflight`` against moto's server: credentials, the CDK bootstrap parameter (absent,
too old, current, another qualifier), the stack in each state that matters, the Cognito domain free,
held by this account's pool with and without the stack, the API Gateway account's CloudWatch role,
and a whole run through ``main``. moto 5.2 implements neither Bedrock's foundation-model APIs nor
ListServiceQuotas (only ``vpc`` defaults): those are botocore Stubbers with the APIs' response shapes,
as is an access-denied answer (moto does not enforce IAM here)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from rag_ingest.adapters import account_preflight
from rag_ingest.adapters.account_preflight import AccountProbe, ProbeDenied
from rag_ingest_client.cli import main
from rag_ingest_client.operator.preflight.checks import (
    Context,
    check_api_gateway_role,
    check_bedrock_model,
    check_bootstrap,
    check_cognito_domain,
    check_embed_requests_quota,
    check_embed_tokens_quota,
    check_stack,
    check_textract_quota,
    run_checks,
)
from rag_ingest_client.operator.preflight.settings import (
    PreflightSettings,
    settings_from_context,
    user_pool_domain_prefix,
)

from tests.support.aws import REGION, moto_server

pytestmark = pytest.mark.integration

ACCOUNT = "123456789012"  # moto's
TITAN = "amazon.titan-embed-text-v2:0"
RPM_NAME = "On-demand InvokeModel requests per minute for Amazon Titan Text Embeddings V2"
TPM_NAME = "On-demand InvokeModel tokens per minute for Amazon Titan Text Embeddings V2"
TEXTRACT_NAME = "DetectDocumentText throttle limit in transactions per second"


@pytest.fixture
def aws() -> Iterator[str]:
    with moto_server() as endpoint:
        # moto's backends are process-wide and outlive a server: start from a fresh account.
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).close()
        yield endpoint


def offline_client(service: str) -> Any:
    return boto3.client(
        service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x", endpoint_url="http://127.0.0.1:9"
    )


def defaults(**changes: Any) -> PreflightSettings:
    """The settings of an empty cdk.json context (infra/config.py's defaults), with ``changes``."""
    return replace(settings_from_context({}), **changes)


def context(settings: PreflightSettings | None = None) -> Context:
    return Context(settings or defaults(stack_name=f"RagIngest{uuid.uuid4().hex[:6]}"), REGION, ACCOUNT)


def put_bootstrap(version: str, qualifier: str = "hnb659fds") -> None:
    boto3.client("ssm").put_parameter(
        Name=f"/cdk-bootstrap/{qualifier}/version", Value=version, Type="String", Overwrite=True
    )


def create_stack(name: str) -> None:
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    boto3.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


def force_stack_status(name: str, status: str) -> None:
    """moto never fails a stack: set the state in its backend (the server runs in this process)."""
    from moto.cloudformation.models import cloudformation_backends

    stacks = cloudformation_backends[ACCOUNT][REGION].stacks.values()
    next(stack for stack in stacks if stack.name == name).status = status


# ================================================================= credentials
def test_credentials_name_the_account_and_region(aws: str) -> None:
    results = run_checks(AccountProbe(), defaults())
    assert results[0].status == "ok"
    assert results[0].finding.startswith(f"account {ACCOUNT} (arn:aws:sts::{ACCOUNT}:") and REGION in results[0].finding


def test_an_explicit_region_wins(aws: str) -> None:
    assert AccountProbe("eu-west-1").region == "eu-west-1"
    assert AccountProbe().region == REGION


# ================================================================= CDK bootstrap
def test_bootstrap_absent_old_and_current(aws: str) -> None:
    probe = AccountProbe()
    absent = check_bootstrap(probe, context())
    assert absent.status == "missing" and absent.fix == f"npx cdk bootstrap aws://{ACCOUNT}/{REGION}"
    put_bootstrap("5")
    old = check_bootstrap(probe, context())
    assert old.status == "missing" and "bootstrap version 5, this app needs ≥ 6" in old.finding
    put_bootstrap("21")
    current = check_bootstrap(probe, context())
    assert current.status == "ok" and current.finding.startswith("version 21")


def test_bootstrap_under_another_qualifier(aws: str) -> None:
    put_bootstrap("21")  # the default qualifier's, which this app does not use
    settings = defaults(qualifier="team42")
    result = check_bootstrap(AccountProbe(), context(settings))
    assert result.status == "missing" and result.fix and result.fix.endswith("--qualifier team42")
    put_bootstrap("21", qualifier="team42")
    assert check_bootstrap(AccountProbe(), context(settings)).status == "ok"


# ================================================================= the stack
def test_stack_absent_complete_and_stuck(aws: str) -> None:
    probe = AccountProbe()
    ctx = context()
    name = ctx.settings.stack_name
    assert check_stack(probe, ctx).finding == f"{name} does not exist in {REGION}: it will be created"
    create_stack(name)
    complete = check_stack(probe, ctx)
    assert complete.status == "ok" and complete.finding == f"{name} is CREATE_COMPLETE: it will be updated"
    force_stack_status(name, "ROLLBACK_COMPLETE")
    rolled_back = check_stack(probe, ctx)
    assert rolled_back.status == "missing"
    assert (rolled_back.fix or "").startswith(f"aws cloudformation delete-stack --stack-name {name} --region {REGION}")
    force_stack_status(name, "UPDATE_IN_PROGRESS")
    busy = check_stack(probe, ctx)
    assert busy.status == "missing" and (busy.fix or "").startswith("wait:")


def test_a_deleted_stack_will_be_created_again(aws: str) -> None:
    ctx = context()
    create_stack(ctx.settings.stack_name)
    boto3.client("cloudformation").delete_stack(StackName=ctx.settings.stack_name)
    assert check_stack(AccountProbe(), ctx).finding.endswith("it will be created")


# ================================================================= Cognito domain
def test_cognito_domain_free_then_held_by_this_account(aws: str) -> None:
    probe = AccountProbe()
    ctx = context()
    prefix = user_pool_domain_prefix(ctx.settings, ACCOUNT)
    assert prefix == f"{ctx.settings.stack_name.lower()}-{ACCOUNT}"
    free = check_cognito_domain(probe, ctx)
    assert free.status == "ok" and free.finding == f"{prefix}.auth.{REGION}.amazoncognito.com is free"

    cognito = boto3.client("cognito-idp")
    pool = cognito.create_user_pool(PoolName="left-behind")["UserPool"]["Id"]
    cognito.create_user_pool_domain(Domain=prefix, UserPoolId=pool)
    leftover = check_cognito_domain(probe, ctx)
    assert leftover.status == "missing" and f"held by user pool {pool} of this account" in leftover.finding
    assert f"delete-user-pool-domain --domain {prefix} --user-pool-id {pool}" in (leftover.fix or "")

    create_stack(ctx.settings.stack_name)  # the stack that owns it: a redeploy keeps the domain
    assert check_cognito_domain(probe, ctx).status == "ok"


def test_cognito_domain_of_another_account(aws: str) -> None:
    cognito = offline_client("cognito-idp")
    with Stubber(cognito) as stub:
        stub.add_response(
            "describe_user_pool_domain",
            {"DomainDescription": {"UserPoolId": "us-east-1_Other", "AWSAccountId": "999999999999", "Domain": "docs"}},
            {"Domain": "docs"},
        )
        stub.add_client_error(
            "describe_user_pool", "ResourceNotFoundException", http_status_code=400, expected_params=None
        )
        probe = AccountProbe(clients={"cognito-idp": cognito})
        result = check_cognito_domain(probe, context(defaults(domain_prefix="docs")))
        stub.assert_no_pending_responses()
    assert result.status == "missing" and "taken by another account" in result.finding


# ================================================================= API Gateway account
def test_api_gateway_account_role(aws: str) -> None:
    probe = AccountProbe()
    assert check_api_gateway_role(probe, context()).status == "ok"  # none set, the stack sets it
    existing = context(defaults(api_gateway_account_role="existing"))
    assert check_api_gateway_role(probe, existing).status == "missing"

    role = f"arn:aws:iam::{ACCOUNT}:role/apigw-cloudwatch"
    boto3.client("apigateway").update_account(
        patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": role}]
    )
    overwritten = check_api_gateway_role(probe, context())
    assert overwritten.status == "warn" and role in overwritten.finding
    assert check_api_gateway_role(probe, existing).status == "ok"


# ================================================================= Bedrock (Stubber: moto lacks it)
MODEL_DETAILS = {
    "modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{TITAN}",
    "modelId": TITAN,
    "modelName": "Titan Text Embeddings V2",
    "providerName": "Amazon",
    "inputModalities": ["TEXT"],
    "outputModalities": ["EMBEDDING"],
    "inferenceTypesSupported": ["ON_DEMAND"],
    "modelLifecycle": {"status": "ACTIVE"},
}


def availability(entitlement: str = "AVAILABLE") -> dict[str, Any]:
    return {
        "modelId": TITAN,
        "agreementAvailability": {"status": "AVAILABLE"},
        "authorizationStatus": "AUTHORIZED",
        "entitlementAvailability": entitlement,
        "regionAvailability": "AVAILABLE",
    }


@pytest.mark.parametrize(("entitlement", "status"), [("AVAILABLE", "ok"), ("NOT_AVAILABLE", "missing")])
def test_bedrock_model_access(entitlement: str, status: str) -> None:
    bedrock = offline_client("bedrock")
    with Stubber(bedrock) as stub:
        stub.add_response("get_foundation_model", {"modelDetails": MODEL_DETAILS}, {"modelIdentifier": TITAN})
        stub.add_response("get_foundation_model_availability", availability(entitlement), {"modelId": TITAN})
        result = check_bedrock_model(AccountProbe(REGION, clients={"bedrock": bedrock}), context())
        stub.assert_no_pending_responses()
    assert result.status == status
    if status == "missing":
        assert "Model access" in (result.fix or "")


def test_bedrock_model_not_offered_and_denied() -> None:
    bedrock = offline_client("bedrock")
    with Stubber(bedrock) as stub:
        stub.add_client_error("get_foundation_model", "ResourceNotFoundException", http_status_code=404)
        stub.add_client_error("get_foundation_model", "AccessDeniedException", "no", http_status_code=403)
        probe = AccountProbe(REGION, clients={"bedrock": bedrock})
        not_offered = check_bedrock_model(probe, context())
        assert not_offered.status == "missing" and not_offered.finding == f"{TITAN} is not offered in {REGION}"
        with pytest.raises(ProbeDenied) as denied:
            probe.foundation_model(TITAN)
    assert denied.value.action == "bedrock:GetFoundationModel"


# ========================================================== Service Quotas (Stubber: moto lacks ListServiceQuotas)
def quota(code: str, name: str, value: float, service: str = "bedrock") -> dict[str, Any]:
    return {"ServiceCode": service, "QuotaCode": code, "QuotaName": name, "Value": value, "Adjustable": True}


def test_quotas_read_by_name_across_pages_and_defaults() -> None:
    quotas = offline_client("service-quotas")
    with Stubber(quotas) as stub:
        # Bedrock: the applied values, over two pages; no default needed after them.
        stub.add_response(
            "list_service_quotas",
            {"Quotas": [quota("L-AAAA1111", "Some other quota", 5)], "NextToken": "p2"},
            {"ServiceCode": "bedrock", "MaxResults": 100},
        )
        stub.add_response(
            "list_service_quotas",
            {"Quotas": [quota("L-RPM00001", RPM_NAME, 2000), quota("L-TPM00001", TPM_NAME, 300000)]},
            {"ServiceCode": "bedrock", "MaxResults": 100, "NextToken": "p2"},
        )
        # The defaults list the same quota again: the applied value wins, no quota is listed twice.
        stub.add_response(
            "list_aws_default_service_quotas",
            {"Quotas": [quota("L-RPM00001", RPM_NAME, 6000)]},
            {"ServiceCode": "bedrock", "MaxResults": 100},
        )
        # Textract: no applied value listed, only AWS's default.
        stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "textract", "MaxResults": 100})
        stub.add_response(
            "list_aws_default_service_quotas",
            {"Quotas": [quota("L-TXT00001", TEXTRACT_NAME, 10, "textract")]},
            {"ServiceCode": "textract", "MaxResults": 100},
        )
        probe = AccountProbe(REGION, clients={"service-quotas": quotas})
        # Without the shared limiter: the assumed peak of the Embed tasks in flight.
        ctx = context(defaults(stack_name=f"RagIngest{uuid.uuid4().hex[:6]}", capacity_mode="off"))
        rpm = check_embed_requests_quota(probe, ctx)
        tpm = check_embed_tokens_quota(probe, ctx)  # the bedrock list is read once
        tps = check_textract_quota(probe, ctx)
        stub.assert_no_pending_responses()
    assert [q.code for q in probe.quotas("bedrock")] == ["L-AAAA1111", "L-RPM00001", "L-TPM00001"]
    assert rpm.status == "warn" and "2,000 requests/min < the assumed peak 7,200" in rpm.finding
    assert "--quota-code L-RPM00001 --desired-value 7200" in (rpm.fix or "")
    assert tpm.status == "ok" and "requests per minute, not tokens" in tpm.finding
    assert tps.status == "warn" and "(AWS default" in tps.finding and "--quota-code L-TXT00001" in (tps.fix or "")
    # With it (the default): what it books, which these quotas cover; above them, the cdk.json fix.
    shared = check_embed_requests_quota(probe, context())
    assert shared.status == "ok" and "which the limiter books" in shared.finding
    greedy = defaults(stack_name="RagIngestX", capacity_tokens_per_minute=500_000)
    tokens = check_embed_tokens_quota(probe, context(greedy))
    assert tokens.status == "warn" and "300,000 tokens/min < the assumed peak 500,000" in tokens.finding
    assert "embedding.capacity.tokensPerMinute" in (tokens.fix or "")


def test_a_quota_that_is_not_listed_or_denied_warns() -> None:
    quotas = offline_client("service-quotas")
    with Stubber(quotas) as stub:
        stub.add_response("list_service_quotas", {"Quotas": [quota("L-1", "Something else", 1)]})
        stub.add_client_error("list_aws_default_service_quotas", "NoSuchResourceException", http_status_code=400)
        probe = AccountProbe(REGION, clients={"service-quotas": quotas})
        unlisted = check_embed_requests_quota(probe, context())
    assert unlisted.status == "warn" and unlisted.finding.startswith("could not read quota")

    quotas = offline_client("service-quotas")
    with Stubber(quotas) as stub:
        stub.add_client_error("list_service_quotas", "AccessDeniedException", "no", http_status_code=400)
        with pytest.raises(ProbeDenied) as denied:  # run_checks turns it into "could not check: ... denied"
            check_embed_requests_quota(AccountProbe(REGION, clients={"service-quotas": quotas}), context())
    assert denied.value.action == "servicequotas:ListServiceQuotas"


# ================================================================= the whole command
def test_preflight_command_on_a_fresh_account(
    aws: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh (moto) account: not bootstrapped → exit 1; bootstrapped → exit 0 with the warnings left."""
    bedrock, quotas = offline_client("bedrock"), offline_client("service-quotas")
    bedrock_stub, quotas_stub = Stubber(bedrock), Stubber(quotas)
    for _ in range(2):
        bedrock_stub.add_response("get_foundation_model", {"modelDetails": MODEL_DETAILS})
        bedrock_stub.add_response("get_foundation_model_availability", availability())
        quotas_stub.add_response(
            "list_service_quotas", {"Quotas": [quota("L-R", RPM_NAME, 10000), quota("L-T", TPM_NAME, 1e7)]}
        )
        quotas_stub.add_response("list_aws_default_service_quotas", {"Quotas": []})
        quotas_stub.add_response("list_service_quotas", {"Quotas": [quota("L-D", TEXTRACT_NAME, 25, "textract")]})
        quotas_stub.add_response("list_aws_default_service_quotas", {"Quotas": []})
    bedrock_stub.activate()
    quotas_stub.activate()

    class StubbedProbe(AccountProbe):
        def __init__(self, region: str | None = None) -> None:
            super().__init__(region, clients={"bedrock": bedrock, "service-quotas": quotas})

    monkeypatch.setattr(account_preflight, "AccountProbe", StubbedProbe)
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"rag-ingest": {"stackName": "Fresh"}}}))

    assert main(["preflight", "--cdk-json", str(cdk_json)]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 11
    assert lines[1].startswith("missing bootstrap") and f"npx cdk bootstrap aws://{ACCOUNT}/{REGION}" in lines[1]
    # us-east-1 does not offer the default reranker (amazon.rerank-v1:0): a warning, reranking is off by default.
    assert err.strip() == "preflight: 9 ok, 1 warn, 1 missing"

    put_bootstrap("28")
    assert main(["--json", "preflight", "--cdk-json", str(cdk_json)]) == 0
    results = json.loads(capsys.readouterr().out)
    assert {r["name"]: r["status"] for r in results} == {
        "credentials": "ok",
        "bootstrap": "ok",
        "bedrock-model": "ok",
        "rerank-model": "warn",
        "textract": "ok",
        "quota-embed-rpm": "ok",
        "quota-embed-tpm": "ok",
        "quota-textract-tps": "ok",
        "apigw-account-role": "ok",
        "cognito-domain": "ok",
        "stack": "ok",
    }
    assert results[-1]["finding"] == f"Fresh does not exist in {REGION}: it will be created"
    bedrock_stub.assert_no_pending_responses()
    quotas_stub.assert_no_pending_responses()
