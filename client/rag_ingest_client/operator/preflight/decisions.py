"""The checks' decisions, pure functions of what the account answered and the configuration: each
returns a :class:`~rag_ingest_client.operator.preflight.results.CheckResult` (docs/deploy.md, "Preflight")."""

from __future__ import annotations

from rag_ingest_client.operator.preflight.results import CheckResult, missing, ok, warn
from rag_ingest_client.operator.preflight.settings import DEFAULT_QUALIFIER

CREDENTIALS_FIX = "configure credentials: aws configure (or aws sso login), or export AWS_PROFILE=NAME"
REGION_FIX = "set a region: --region R, AWS_REGION=R, or aws configure set region R"


def decide_credentials(account: str | None, arn: str | None, region: str | None, error: str = "") -> CheckResult:
    if region is None and account is None:
        return missing("credentials", "no AWS region (so the credentials were not tried)", REGION_FIX)
    if account is None:
        return missing("credentials", f"no usable AWS credentials ({error or 'none found'})", CREDENTIALS_FIX)
    if region is None:
        return missing("credentials", f"account {account} ({arn}), but no region", REGION_FIX)
    return ok("credentials", f"account {account} ({arn}), region {region}")


def decide_bootstrap(
    value: str | None, *, required: int, source: str, account: str, region: str, qualifier: str
) -> CheckResult:
    fix = f"npx cdk bootstrap aws://{account}/{region}" + (
        f" --qualifier {qualifier}" if qualifier != DEFAULT_QUALIFIER else ""
    )
    parameter = f"/cdk-bootstrap/{qualifier}/version"
    if value is None:
        return missing("bootstrap", f"aws://{account}/{region} is not bootstrapped (no SSM {parameter})", fix)
    try:
        version = int(value)
    except ValueError:
        return missing("bootstrap", f"SSM {parameter} is {value!r}, not a version number", fix)
    if version < required:
        return missing("bootstrap", f"bootstrap version {version}, this app needs ≥ {required} ({source})", fix)
    return ok("bootstrap", f"version {version} (needs ≥ {required}: {source})")


def decide_bedrock_model(
    model_id: str,
    region: str,
    *,
    model_name: str | None,
    lifecycle: str = "",
    availability: tuple[str, str, str, str] | None = None,
    agreement_error: str = "",
) -> CheckResult:
    """``model_name`` None: GetFoundationModel does not know the model here. ``availability``:
    (region, entitlement, authorization, agreement) from GetFoundationModelAvailability, or None
    when botocore lacks that API (then only the offer is proven)."""
    name = "bedrock-model"
    if model_name is None:
        return missing(
            name,
            f"{model_id} is not offered in {region}",
            "deploy to a region whose Bedrock offers it (aws bedrock list-foundation-models --region R "
            "--by-output-modality EMBEDDING)",
        )
    legacy = " (lifecycle LEGACY: plan a model change)" if lifecycle == "LEGACY" else ""
    if availability is None:
        return warn(
            name,
            f"{model_id} ({model_name}) is offered in {region}{legacy}; access cannot be read without "
            "GetFoundationModelAvailability (upgrade boto3): only an InvokeModel proves it",
            f"Bedrock console → {region} → Model access",
        )
    region_status, entitlement, authorization, agreement = availability
    console = f"Bedrock console → {region} → Model access (model catalog): enable {model_name}"
    if region_status == "NOT_AVAILABLE":
        return missing(name, f"{model_id} is not available in {region}", "deploy to another region")
    if entitlement == "NOT_AVAILABLE":
        return missing(name, f"this account has no access to {model_id} in {region}", console)
    if authorization == "NOT_AUTHORIZED":
        return missing(
            name,
            f"{model_id}: not authorized for this account (an IAM/SCP policy or model access denies it)",
            console + "; check SCPs that deny bedrock:InvokeModel",
        )
    if agreement in {"PENDING", "ERROR"}:
        detail = f": {agreement_error}" if agreement_error else ""
        return warn(name, f"{model_id}: model agreement {agreement}{detail}", console)
    if legacy:
        return warn(name, f"{model_id} available{legacy}", "plan a move to the model's successor")
    return ok(name, f"{model_id} ({model_name}) available and authorized in {region}")


#: Where each reranker model is offered for Rerank, as AWS documents it (no API call: a static table
#: keeps the check free): https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-supported.html
RERANK_MODEL_REGIONS: dict[str, tuple[str, ...]] = {
    "amazon.rerank-v1:0": ("ap-northeast-1", "ca-central-1", "eu-central-1", "us-west-2"),
    "cohere.rerank-v3-5:0": ("ap-northeast-1", "ca-central-1", "eu-central-1", "us-east-1", "us-west-2"),
}


def decide_rerank_model(model_id: str, region: str, *, default_on: bool, answers_on: bool = False) -> CheckResult:
    """Whether ``region`` offers the reranker model (by the documented table). Not offered: missing when
    searches rerank by default (every one would fail), else a warning naming what would fail: every
    answer when answers rerank by default, only requests asking for reranking otherwise."""
    name = "rerank-model"
    offered = RERANK_MODEL_REGIONS.get(model_id, ())
    if region in offered:
        return ok(name, f"{model_id} is offered for Rerank in {region}")
    others = [m for m, regions in RERANK_MODEL_REGIONS.items() if m != model_id and region in regions]
    fix = (
        f"set search.rerank.modelId to {others[0]}"
        if others
        else f"deploy to a region that offers it ({', '.join(offered) or 'none documented'})"
    )
    finding = f"{model_id} is not offered for Rerank in {region}"
    if default_on:
        return missing(name, finding + ": every search reranks by default (search.rerank.default)", fix)
    if answers_on:
        return warn(name, finding + ": every POST /answer would fail (answers rerank: search.answer.rerank)", fix)
    return warn(name, finding + ': searches with "rerank": true would fail (reranking is off by default)', fix)


def nearest_regions(region: str, offered: list[str], limit: int = 3) -> list[str]:
    """Offered regions in the same geography first (the region name's prefix: eu, us, ap, ...)."""
    area = region.split("-")[0]
    same = [r for r in offered if r.split("-")[0] == area and r != region]
    return (same or offered)[:limit]


def decide_textract(region: str, offered: list[str], *, max_ocr_pages: int) -> CheckResult:
    name = "textract"
    if max_ocr_pages == 0:
        return ok(name, "OCR is off (limits.maxOcrPages is 0)")
    if region in offered:
        return ok(name, f"offered in {region} (botocore's endpoint data)")
    near = ", ".join(nearest_regions(region, offered)) or "none known"
    return warn(
        name,
        f"Textract is not offered in {region}: pages without a text layer will be failed pages (no OCR)",
        f"deploy to a region with Textract ({near}), or set limits.maxOcrPages 0 to say so",
    )


def decide_api_gateway_role(role_arn: str | None, mode: str) -> CheckResult:
    name = "apigw-account-role"
    if mode == "existing":
        if role_arn:
            return ok(name, f"the account's CloudWatch role is {role_arn}")
        return missing(
            name,
            "API Gateway has no CloudWatch role in this account/region, and apiGatewayAccountRole is 'existing'",
            "API Gateway console → Settings → CloudWatch log role ARN (a role trusting apigateway.amazonaws.com "
            "with AmazonAPIGatewayPushToCloudWatchLogs), or set rag-ingest.apiGatewayAccountRole 'create'",
        )
    if role_arn:
        return warn(
            name,
            f"the account already has a CloudWatch role ({role_arn}); the stack would replace it for every API "
            "in this region",
            "keep it: set rag-ingest.apiGatewayAccountRole 'existing' in cdk.json",
        )
    return ok(name, "none set yet; the stack sets it (apiGatewayAccountRole 'create')")


def decide_domain(
    prefix: str, region: str, *, owner_pool: str | None, owner_in_account: bool, stack_exists: bool
) -> CheckResult:
    name = "cognito-domain"
    host = f"{prefix}.auth.{region}.amazoncognito.com"
    if owner_pool is None:
        return ok(name, f"{host} is free")
    if owner_in_account and stack_exists:
        return ok(name, f"{host} is held by user pool {owner_pool} of this account (the existing stack's, on update)")
    if owner_in_account:
        return missing(
            name,
            f"{host} is held by user pool {owner_pool} of this account, and the stack does not exist yet",
            f"aws cognito-idp delete-user-pool-domain --domain {prefix} --user-pool-id {owner_pool} --region {region}"
            " (a retained pool of an earlier deploy?), or set rag-ingest.auth.domainPrefix",
        )
    return missing(
        name, f"{host} is taken by another account", "set rag-ingest.auth.domainPrefix in cdk.json to a free prefix"
    )


def decide_stack(status: str | None, stack_name: str, region: str) -> CheckResult:
    name = "stack"
    if status is None:
        return ok(name, f"{stack_name} does not exist in {region}: it will be created")
    if status == "ROLLBACK_COMPLETE":
        return missing(
            name,
            f"{stack_name} is ROLLBACK_COMPLETE (its creation failed): it cannot be updated",
            f"aws cloudformation delete-stack --stack-name {stack_name} --region {region} (retained resources "
            "stay: see docs/deploy.md, Teardown)",
        )
    if status.endswith("_IN_PROGRESS"):
        return missing(
            name,
            f"{stack_name} is {status}",
            f"wait: aws cloudformation describe-stacks --stack-name {stack_name} --region {region} "
            "(until it is no longer *_IN_PROGRESS)",
        )
    if status.endswith("_FAILED"):
        fix = (
            f"aws cloudformation continue-update-rollback --stack-name {stack_name} --region {region}"
            if status == "UPDATE_ROLLBACK_FAILED"
            else f"see the events (aws cloudformation describe-stack-events --stack-name {stack_name} "
            f"--region {region}), then aws cloudformation delete-stack --stack-name {stack_name}"
        )
        return missing(name, f"{stack_name} is {status}", fix)
    if status.endswith("_COMPLETE"):
        return ok(name, f"{stack_name} is {status}: it will be updated")
    return warn(name, f"{stack_name} is {status}", None)
