"""``rag-ingest preflight``: what a fresh AWS account lacks for ``cdk deploy`` of this stack, checked
before anything is created.

Each check returns one :class:`CheckResult`: ``ok``, ``warn`` or ``missing``, a short finding and,
when not ok, the command (or console path) that fixes it. The run exits 0 when nothing is missing.
The checks are independent: one that cannot ask (access denied, no region, a network error) warns
"could not check" and the others still run.

The decisions are the pure ``decide_*`` functions below (unit-tested on their inputs); the AWS
calls are ``rag_ingest.adapters.account_preflight.AccountProbe``'s. The configuration is read from
cdk.json here, only the keys the checks need, with infra/config.py's defaults: this package ships
in the Lambda layer and does not import ``infra`` (tests/unit/test_preflight.py compares the two).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from rag_ingest.core.settings import DEFAULT_RERANK_MODEL_ID
from rag_ingest.embeddings.bedrock import DEFAULT_MAX_CONCURRENCY, TITAN_V2_MODEL_ID

from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.errors import CliError

Status = Literal["ok", "warn", "missing"]
CONTEXT_KEY = "rag-ingest"
# aws-cdk-lib's DefaultStackSynthesizer: the qualifier context key and its default.
BOOTSTRAP_QUALIFIER_CONTEXT = "@aws-cdk/core:bootstrapQualifier"
DEFAULT_QUALIFIER = "hnb659fds"
# aws-cdk-lib 2.275's DefaultStackSynthesizer requires bootstrap version 6 for deployment and asset
# publishing (MIN_BOOTSTRAP_STACK_VERSION in core/lib/stack-synthesizers/default-synthesizer.js; 8 is
# only for the lookup role, which this app does not use). A synthesized cdk.out states its own number.
DEFAULT_REQUIRED_BOOTSTRAP_VERSION = 6
# Cognito refuses these words in a domain prefix (infra/config.py RESERVED_IN_DOMAIN_PREFIX).
RESERVED_IN_DOMAIN_PREFIX = ("aws", "amazon", "cognito")
ACCOUNT_ROLE_MODES = ("create", "existing")

# The quota names' model part ("On-demand InvokeModel requests per minute for Amazon Titan Text
# Embeddings V2"); Service Quotas names them "... for ${model}":
# https://docs.aws.amazon.com/bedrock/latest/userguide/quotas-runtime.html
# https://docs.aws.amazon.com/bedrock/latest/userguide/quotas-increase.html
QUOTA_MODEL_NAMES = {TITAN_V2_MODEL_ID: "titan text embeddings v2"}

# The demand assumptions (docs/deploy.md#preflight). One InvokeModel embeds one text; an Embed task
# keeps DEFAULT_MAX_CONCURRENCY (4) calls in flight (rag_ingest.embeddings.bedrock) and a call is
# assumed to take 200 ms, the figure docs/cost.md assumes for Titan V2 (not measured: no AWS here).
ASSUMED_INVOKE_SECONDS = 0.2
# Textract DetectDocumentText answers in about a second per page (docs/ocr.md); a Parse task OCRs its
# pages one after another. AnalyzeDocument (parsing.textractTables) is assumed no faster: a slower
# answer only lowers the real peak below the one checked.
ASSUMED_OCR_SECONDS = 1.0


# ================================================================= configuration (cdk.json)
@dataclass(frozen=True)
class PreflightSettings:
    """The keys of cdk.json's ``rag-ingest`` context the checks use; defaults as infra/config.py's."""

    stack_name: str = "RagIngest"
    qualifier: str = DEFAULT_QUALIFIER
    model_id: str = TITAN_V2_MODEL_ID
    embed_max_concurrency: int = 4
    bulk_embed_max_concurrency: int = 2
    chunk_tokens: int = 300
    parse_max_concurrency: int = 10
    bulk_parse_max_concurrency: int = 5
    max_ocr_pages: int = 50
    # parsing.textractTables: scanned pages go to AnalyzeDocument (TABLES), whose TPS quota is its own.
    textract_tables: bool = False
    domain_prefix: str | None = None
    # "create": the stack sets the API Gateway account's CloudWatch role; "existing": the account must have one.
    api_gateway_account_role: str = "create"
    cdk_out: Path = Path("cdk.out")
    # POST /search's optional rerank stage (search.rerank): its model, and whether it is on by default.
    rerank_model_id: str = DEFAULT_RERANK_MODEL_ID
    rerank_default: bool = False
    # embedding.capacity: with "shared", the limiter books at most these per minute (None: not limited).
    capacity_mode: str = "shared"
    capacity_requests_per_minute: int | None = 2000
    capacity_tokens_per_minute: int | None = 300_000


def _section(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CliError(f"cdk.json: {CONTEXT_KEY}.{key} must be an object")
    return value


def _int(section: dict[str, Any], key: str, default: int, where: str) -> int:
    value = section.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise CliError(f"cdk.json: {CONTEXT_KEY}.{where}{key} must be an integer, got {value!r}")
    return value


def _optional_int(section: dict[str, Any], key: str, default: int | None, where: str) -> int | None:
    """An integer, or None when cdk.json says null (not limited); the default when absent."""
    if key in section and section[key] is None:
        return None
    return _int(section, key, default or 0, where) if key in section or default is not None else None


def _str(section: dict[str, Any], key: str, default: str, where: str = "") -> str:
    value = section.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise CliError(f"cdk.json: {CONTEXT_KEY}.{where}{key} must be a string, got {value!r}")
    return value


def _account_role_mode(raw: dict[str, Any]) -> str:
    mode = raw.get("apiGatewayAccountRole", "create")
    if mode not in ACCOUNT_ROLE_MODES:
        raise CliError(f"cdk.json: {CONTEXT_KEY}.apiGatewayAccountRole must be one of {', '.join(ACCOUNT_ROLE_MODES)}")
    return str(mode)


def settings_from_context(context: dict[str, Any], *, base: Path = Path(".")) -> PreflightSettings:
    """The settings from cdk.json's ``context`` object (a ``-c rag-ingest='{…}'`` JSON string too)."""
    raw = context.get(CONTEXT_KEY) or {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise CliError(f"cdk.json: context '{CONTEXT_KEY}' is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise CliError(f"cdk.json: context '{CONTEXT_KEY}' must be an object")
    embedding, lanes = _section(raw, "embedding"), _section(raw, "lanes")
    capacity = _section(embedding, "capacity")
    rerank = _section(_section(raw, "search"), "rerank")
    rerank_default = rerank.get("default", False)
    if not isinstance(rerank_default, bool):
        raise CliError(f"cdk.json: {CONTEXT_KEY}.search.rerank.default must be true or false")
    parsing, limits = _section(raw, "parsing"), _section(raw, "limits")
    textract_tables = parsing.get("textractTables", False)
    if not isinstance(textract_tables, bool):
        raise CliError(f"cdk.json: {CONTEXT_KEY}.parsing.textractTables must be true or false")
    chunking, auth = _section(raw, "chunking"), _section(raw, "auth")
    prefix = auth.get("domainPrefix")
    if prefix is not None and not isinstance(prefix, str):
        raise CliError(f"cdk.json: {CONTEXT_KEY}.auth.domainPrefix must be a string or null")
    defaults = PreflightSettings()
    return PreflightSettings(
        stack_name=_str(raw, "stackName", defaults.stack_name),
        qualifier=_str(context, BOOTSTRAP_QUALIFIER_CONTEXT, DEFAULT_QUALIFIER),
        model_id=_str(embedding, "modelId", defaults.model_id, "embedding."),
        embed_max_concurrency=_int(embedding, "maxConcurrency", defaults.embed_max_concurrency, "embedding."),
        bulk_embed_max_concurrency=_int(
            lanes, "bulkEmbedMaxConcurrency", defaults.bulk_embed_max_concurrency, "lanes."
        ),
        chunk_tokens=_int(chunking, "chunkTokens", defaults.chunk_tokens, "chunking."),
        parse_max_concurrency=_int(parsing, "maxConcurrency", defaults.parse_max_concurrency, "parsing."),
        bulk_parse_max_concurrency=_int(
            lanes, "bulkParseMaxConcurrency", defaults.bulk_parse_max_concurrency, "lanes."
        ),
        max_ocr_pages=_int(limits, "maxOcrPages", defaults.max_ocr_pages, "limits."),
        textract_tables=textract_tables,
        domain_prefix=prefix or None,
        api_gateway_account_role=_account_role_mode(raw),
        cdk_out=base / "cdk.out",
        rerank_model_id=_str(rerank, "modelId", defaults.rerank_model_id, "search.rerank."),
        rerank_default=rerank_default,
        capacity_mode=_str(capacity, "mode", defaults.capacity_mode, "embedding.capacity."),
        capacity_requests_per_minute=_optional_int(
            capacity, "requestsPerMinute", defaults.capacity_requests_per_minute, "embedding.capacity."
        ),
        capacity_tokens_per_minute=_optional_int(
            capacity, "tokensPerMinute", defaults.capacity_tokens_per_minute, "embedding.capacity."
        ),
    )


def read_settings(path: Path, *, stack_name: str | None = None) -> PreflightSettings:
    """cdk.json's settings; ``stack_name`` (``--stack``) overrides ``stackName``."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"{path} not found: run from the repository root or pass --cdk-json PATH") from None
    except ValueError as exc:
        raise CliError(f"{path} is not valid JSON: {exc}") from None
    context = document.get("context", {}) if isinstance(document, dict) else None
    if not isinstance(context, dict):
        raise CliError(f"{path}: 'context' must be an object")
    settings = settings_from_context(context, base=path.parent)
    if stack_name:
        settings = replace(settings, stack_name=stack_name)
    return settings


def user_pool_domain_prefix(settings: PreflightSettings, account: str) -> str:
    """The Cognito domain prefix the stack asks for: ``auth.domainPrefix``, or the stack name in lower
    case without Cognito's reserved words, then ``-<account id>`` (infra/constructs/api.py
    ``user_pool_domain_base``, reproduced; a unit test compares the two)."""
    if settings.domain_prefix:
        return settings.domain_prefix
    base = settings.stack_name.lower()
    for word in RESERVED_IN_DOMAIN_PREFIX:
        base = base.replace(word, "")
    base = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "", base)).strip("-")[:40].rstrip("-")
    return f"{base or 'rag-ingest'}-{account}"


def required_bootstrap_version(cdk_out: Path) -> tuple[int, str]:
    """The bootstrap version a deploy needs, and where the number comes from: the highest
    ``requiresBootstrapStackVersion`` of a synthesized ``cdk.out/manifest.json`` (stacks and asset
    manifests; the lookup role's is left out: this app does no lookups), else aws-cdk-lib's minimum."""
    manifest = cdk_out / "manifest.json"
    try:
        artifacts = json.loads(manifest.read_text()).get("artifacts", {})
    except (OSError, ValueError, AttributeError):
        artifacts = {}
    versions = [
        int(artifact["properties"]["requiresBootstrapStackVersion"])
        for artifact in artifacts.values()
        if isinstance(artifact, dict)
        and isinstance(artifact.get("properties"), dict)
        and isinstance(artifact["properties"].get("requiresBootstrapStackVersion"), int)
    ]
    if versions:
        return max(versions), str(manifest)
    return DEFAULT_REQUIRED_BOOTSTRAP_VERSION, "aws-cdk-lib's DefaultStackSynthesizer minimum"


# ================================================================= results
@dataclass(frozen=True)
class CheckResult:
    status: Status
    name: str
    finding: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "name": self.name, "finding": self.finding, "fix": self.fix}


def ok(name: str, finding: str) -> CheckResult:
    return CheckResult("ok", name, finding)


def warn(name: str, finding: str, fix: str | None = None) -> CheckResult:
    return CheckResult("warn", name, finding, fix)


def missing(name: str, finding: str, fix: str) -> CheckResult:
    return CheckResult("missing", name, finding, fix)


def render(result: CheckResult) -> str:
    line = f"{result.status:<8}{result.name:<20}{result.finding}"
    return f"{line}  → fix: {result.fix}" if result.fix else line


def exit_code(results: list[CheckResult]) -> int:
    return 1 if any(result.status == "missing" for result in results) else 0


# ================================================================= decisions (pure)
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


def decide_rerank_model(model_id: str, region: str, *, default_on: bool) -> CheckResult:
    """Whether ``region`` offers the reranker model (by the documented table). Not offered: a warning
    while reranking is off by default (only requests asking for it would fail), missing when it is on
    (every search would)."""
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


@dataclass(frozen=True)
class Demand:
    """The peak rate the configuration can ask for, and how it was computed (printed)."""

    rate: float
    unit: str
    how: str


def embedding_demand(settings: PreflightSettings) -> tuple[Demand, Demand]:
    """Peak InvokeModel requests and tokens per minute. With the shared limiter
    (embedding.capacity.mode "shared"), what it books: the configured per-minute budget, which the
    account's quota must cover. Without it: one document in each lane at once, each lane at its Embed
    Map concurrency, each task with DEFAULT_MAX_CONCURRENCY calls in flight, each call
    ASSUMED_INVOKE_SECONDS long; a call's tokens at most one chunk (chunking.chunkTokens)."""
    if settings.capacity_mode == "shared":
        unlimited = "not limited (null)"
        rpm, tpm = settings.capacity_requests_per_minute, settings.capacity_tokens_per_minute
        return (
            Demand(
                float(rpm or 0),
                "requests/min",
                "embedding.capacity.requestsPerMinute, which the limiter books" if rpm else unlimited,
            ),
            Demand(
                float(tpm or 0),
                "tokens/min",
                "embedding.capacity.tokensPerMinute, which the limiter books" if tpm else unlimited,
            ),
        )
    tasks = settings.embed_max_concurrency + settings.bulk_embed_max_concurrency
    per_slot = 60.0 / ASSUMED_INVOKE_SECONDS
    requests = tasks * DEFAULT_MAX_CONCURRENCY * per_slot
    how = (
        f"{tasks} Embed tasks (embedding.maxConcurrency {settings.embed_max_concurrency} + "
        f"lanes.bulkEmbedMaxConcurrency {settings.bulk_embed_max_concurrency}) x {DEFAULT_MAX_CONCURRENCY} calls "
        f"in flight x {per_slot:,.0f}/min at an assumed {ASSUMED_INVOKE_SECONDS * 1000:.0f} ms per call"
    )
    tokens = requests * settings.chunk_tokens
    return (
        Demand(requests, "requests/min", how),
        Demand(tokens, "tokens/min", f"{requests:,.0f} requests/min x ≤ {settings.chunk_tokens} tokens per chunk"),
    )


def textract_demand(settings: PreflightSettings) -> Demand:
    tasks = settings.parse_max_concurrency + settings.bulk_parse_max_concurrency
    return Demand(
        tasks / ASSUMED_OCR_SECONDS,
        "TPS",
        f"{tasks} Parse tasks (parsing.maxConcurrency {settings.parse_max_concurrency} + "
        f"lanes.bulkParseMaxConcurrency {settings.bulk_parse_max_concurrency}) x 1 {textract_operation(settings)} "
        f"call at a time, ~{ASSUMED_OCR_SECONDS:.0f} s per page",
    )


@dataclass(frozen=True)
class QuotaValue:
    code: str
    name: str
    value: float
    applied: bool


def find_quota(quotas: list[QuotaValue], matches: Callable[[str], bool]) -> QuotaValue | None:
    """The first quota whose name matches (names, not codes: codes are opaque and may change)."""
    return next((quota for quota in quotas if matches(quota.name.lower())), None)


def bedrock_quota_matcher(model_id: str, kind: Literal["requests", "tokens"]) -> Callable[[str], bool]:
    model = QUOTA_MODEL_NAMES.get(model_id, model_id.lower())
    phrase = f"on-demand invokemodel {kind} per minute for"

    def matches(name: str) -> bool:
        return name.startswith(phrase) and name.rstrip().endswith(model)

    return matches


def textract_operation(settings: PreflightSettings) -> str:
    """The synchronous Textract operation Parse calls per scanned page (rag_ingest.adapters.textract)."""
    return "AnalyzeDocument" if settings.textract_tables else "DetectDocumentText"


def textract_quota_matcher(operation: str) -> Callable[[str], bool]:
    """A quota named for ``operation``: "TPS quotas are unique to API, Synchronous or Asynchronous
    operations, and Region" (https://docs.aws.amazon.com/textract/latest/dg/limits-quotas-explained.html),
    so DetectDocumentText and AnalyzeDocument each have one; the asynchronous Start*/Get* ones are apart."""
    wanted = operation.lower()

    def matches(name: str) -> bool:
        return wanted in name and "async" not in name and "start" not in name

    return matches


def increase_fix(service_code: str, quota: QuotaValue, region: str, desired: float) -> str:
    return (
        f"aws service-quotas request-service-quota-increase --service-code {service_code} "
        f"--quota-code {quota.code} --desired-value {desired:.0f} --region {region} "
        f"(or Service Quotas console → {service_code} → {quota.name})"
    )


def decide_quota(
    name: str,
    *,
    service_code: str,
    described: str,
    quota: QuotaValue | None,
    demand: Demand,
    region: str,
    binding: bool = True,
    note: str = "",
    fix_in_config: str = "or lower the concurrency in cdk.json",
) -> CheckResult:
    """warn on 0, on a value below the assumed peak (when ``binding``), or when it cannot be found."""
    if quota is None:
        return warn(
            name,
            f"could not read quota: no Service Quotas entry named like {described!r} in {region}",
            f"Service Quotas console → {service_code}: look the quota up by hand",
        )
    source = "" if quota.applied else " (AWS default; the account's applied value was not listed)"
    value = f"{quota.value:,.0f} {demand.unit}{source}"
    if quota.value <= 0:
        fix = increase_fix(service_code, quota, region, demand.rate)
        return warn(name, f"{quota.name} is 0: every call will be throttled", fix)
    if quota.value < demand.rate:
        finding = f"{value} < the assumed peak {demand.rate:,.0f} ({demand.how})"
        if not binding:
            return ok(name, f"{finding}; {note}")
        return warn(
            name,
            f"{finding}: throttled calls are retried with backoff, so ingest slows rather than fails",
            increase_fix(service_code, quota, region, demand.rate) + "; " + fix_in_config,
        )
    return ok(name, f"{value} ≥ the assumed peak {demand.rate:,.0f} ({demand.how})")


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


# ================================================================= the checks (probe → decision)
class Probe(Protocol):
    """What the checks ask (rag_ingest.adapters.account_preflight.AccountProbe; fakes in tests)."""

    @property
    def region(self) -> str | None: ...

    def caller_identity(self) -> Any: ...

    def bootstrap_version(self, qualifier: str) -> str | None: ...

    def foundation_model(self, model_id: str) -> Any: ...

    def has_model_availability_api(self) -> bool: ...

    def model_availability(self, model_id: str) -> Any: ...

    def quotas(self, service_code: str) -> list[Any]: ...

    def api_gateway_cloudwatch_role(self) -> str | None: ...

    def user_pool_domain_owner(self, prefix: str) -> str | None: ...

    def user_pool_exists(self, user_pool_id: str) -> bool: ...

    def stack_status(self, stack_name: str) -> str | None: ...

    def offered_regions(self, service: str) -> list[str]: ...


@dataclass(frozen=True)
class Context:
    settings: PreflightSettings
    region: str
    account: str | None


class Skip(Exception):
    """A check cannot run (no account id, no region): it warns with this reason."""


def _could_not_check(name: str, exc: BaseException) -> CheckResult:
    action = getattr(exc, "action", None)
    if action:
        return warn(name, f"could not check: {action} denied", f"allow {action} to the credentials, or check by hand")
    if isinstance(exc, Skip):
        return warn(name, f"could not check: {exc}")
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return warn(name, f"could not check: {type(exc).__name__}: {detail}")


def _account(context: Context) -> str:
    if context.account is None:
        raise Skip("needs the account id (see credentials)")
    return context.account


def check_bootstrap(probe: Probe, context: Context) -> CheckResult:
    account = _account(context)
    required, source = required_bootstrap_version(context.settings.cdk_out)
    return decide_bootstrap(
        probe.bootstrap_version(context.settings.qualifier),
        required=required,
        source=source,
        account=account,
        region=context.region,
        qualifier=context.settings.qualifier,
    )


def check_bedrock_model(probe: Probe, context: Context) -> CheckResult:
    model_id = context.settings.model_id
    model = probe.foundation_model(model_id)
    if model is None:
        return decide_bedrock_model(model_id, context.region, model_name=None)
    availability = None
    agreement_error = ""
    if probe.has_model_availability_api():
        answer = probe.model_availability(model_id)
        availability = (answer.region, answer.entitlement, answer.authorization, answer.agreement)
        agreement_error = answer.agreement_error
    return decide_bedrock_model(
        model_id,
        context.region,
        model_name=model.name or model_id,
        lifecycle=model.lifecycle,
        availability=availability,
        agreement_error=agreement_error,
    )


def check_textract(probe: Probe, context: Context) -> CheckResult:
    return decide_textract(
        context.region, probe.offered_regions("textract"), max_ocr_pages=context.settings.max_ocr_pages
    )


def _quota_values(probe: Probe, service_code: str) -> list[QuotaValue]:
    return [QuotaValue(q.code, q.name, q.value, q.applied) for q in probe.quotas(service_code)]


# AWS: "Embedding models on Amazon Bedrock are throttled by Requests Per Minute (RPM), not Tokens Per
# Minute (TPM)": https://docs.aws.amazon.com/bedrock/latest/userguide/titan-embedding-models.html
TOKENS_NOT_BINDING = "AWS throttles embedding models by requests per minute, not tokens"


def check_embed_requests_quota(probe: Probe, context: Context) -> CheckResult:
    requests, _ = embedding_demand(context.settings)
    model = context.settings.model_id
    return decide_quota(
        "quota-embed-rpm",
        service_code="bedrock",
        described=f"On-demand InvokeModel requests per minute for {model}",
        quota=find_quota(_quota_values(probe, "bedrock"), bedrock_quota_matcher(model, "requests")),
        demand=requests,
        region=context.region,
        fix_in_config=_capacity_fix(context.settings, "requestsPerMinute"),
    )


def check_embed_tokens_quota(probe: Probe, context: Context) -> CheckResult:
    _, tokens = embedding_demand(context.settings)
    model = context.settings.model_id
    return decide_quota(
        "quota-embed-tpm",
        service_code="bedrock",
        described=f"On-demand InvokeModel tokens per minute for {model}",
        quota=find_quota(_quota_values(probe, "bedrock"), bedrock_quota_matcher(model, "tokens")),
        demand=tokens,
        region=context.region,
        # The limiter books tokens as well as requests: above the account's quota, it would be throttled.
        binding=context.settings.capacity_mode == "shared",
        note=TOKENS_NOT_BINDING,
        fix_in_config=_capacity_fix(context.settings, "tokensPerMinute"),
    )


def _capacity_fix(settings: PreflightSettings, key: str) -> str:
    if settings.capacity_mode != "shared":
        return "or lower the concurrency in cdk.json"
    return f"or set rag-ingest.embedding.capacity.{key} in cdk.json to the account's quota (the limiter books it)"


def check_textract_quota(probe: Probe, context: Context) -> CheckResult:
    name = "quota-textract-tps"
    if context.settings.max_ocr_pages == 0:
        return ok(name, "OCR is off (limits.maxOcrPages is 0)")
    if context.region not in probe.offered_regions("textract"):
        return ok(name, f"not applicable: Textract is not offered in {context.region} (see textract)")
    operation = textract_operation(context.settings)
    return decide_quota(
        name,
        service_code="textract",
        described=f"{operation} ... transactions per second",
        quota=find_quota(_quota_values(probe, "textract"), textract_quota_matcher(operation)),
        demand=textract_demand(context.settings),
        region=context.region,
    )


def check_rerank_model(probe: Probe, context: Context) -> CheckResult:
    settings = context.settings
    return decide_rerank_model(settings.rerank_model_id, context.region, default_on=settings.rerank_default)


def check_api_gateway_role(probe: Probe, context: Context) -> CheckResult:
    return decide_api_gateway_role(probe.api_gateway_cloudwatch_role(), context.settings.api_gateway_account_role)


def check_cognito_domain(probe: Probe, context: Context) -> CheckResult:
    prefix = user_pool_domain_prefix(context.settings, _account(context))
    owner = probe.user_pool_domain_owner(prefix)
    in_account = owner is not None and probe.user_pool_exists(owner)
    stack_exists = owner is not None and probe.stack_status(context.settings.stack_name) is not None
    return decide_domain(
        prefix, context.region, owner_pool=owner, owner_in_account=in_account, stack_exists=stack_exists
    )


def check_stack(probe: Probe, context: Context) -> CheckResult:
    name = context.settings.stack_name
    return decide_stack(probe.stack_status(name), name, context.region)


CHECKS: tuple[tuple[str, Callable[[Probe, Context], CheckResult]], ...] = (
    ("bootstrap", check_bootstrap),
    ("bedrock-model", check_bedrock_model),
    ("rerank-model", check_rerank_model),
    ("textract", check_textract),
    ("quota-embed-rpm", check_embed_requests_quota),
    ("quota-embed-tpm", check_embed_tokens_quota),
    ("quota-textract-tps", check_textract_quota),
    ("apigw-account-role", check_api_gateway_role),
    ("cognito-domain", check_cognito_domain),
    ("stack", check_stack),
)


def check_credentials(probe: Probe) -> tuple[CheckResult, str | None]:
    """The credentials result and the account id (None when the credentials do not work)."""
    try:
        region = probe.region
    except Exception:  # a broken profile: the region is unknown too
        region = None
    try:
        identity = probe.caller_identity()
    except Exception as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return decide_credentials(None, None, region, f"{type(exc).__name__}: {detail}"), None
    return decide_credentials(identity.account, identity.arn, region), identity.account


def run_checks(probe: Probe, settings: PreflightSettings) -> list[CheckResult]:
    """Every check, in order; none can stop another."""
    credentials, account = check_credentials(probe)
    results = [credentials]
    region = probe.region
    for name, check in CHECKS:
        if region is None:
            results.append(warn(name, "could not check: no region (see credentials)"))
            continue
        try:
            results.append(check(probe, Context(settings, region, account)))
        except Exception as exc:  # each check is independent: a failure is its warning, never the run's end
            results.append(_could_not_check(name, exc))
    return results


def report(console: Console, results: list[CheckResult]) -> int:
    """Print the results (a JSON list with ``--json``) and return the exit code."""
    if console.as_json:
        console.json([result.to_json() for result in results])
    else:
        for result in results:
            console.print(render(result))
    counts = {status: sum(r.status == status for r in results) for status in ("ok", "warn", "missing")}
    console.note(f"preflight: {counts['ok']} ok, {counts['warn']} warn, {counts['missing']} missing")
    return exit_code(results)
