"""Each check: what it asks the account (a :class:`Probe`), then its decision; :func:`run_checks` runs
them all, and none can stop another (one that cannot ask warns "could not check")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rag_ingest_client.operator.preflight.decisions import (
    decide_api_gateway_role,
    decide_bedrock_model,
    decide_bootstrap,
    decide_credentials,
    decide_domain,
    decide_rerank_model,
    decide_stack,
    decide_textract,
)
from rag_ingest_client.operator.preflight.quotas import (
    QuotaValue,
    bedrock_quota_matcher,
    decide_quota,
    embedding_demand,
    find_quota,
    textract_demand,
    textract_operation,
    textract_quota_matcher,
)
from rag_ingest_client.operator.preflight.results import CheckResult, ok, warn
from rag_ingest_client.operator.preflight.settings import (
    PreflightSettings,
    required_bootstrap_version,
    user_pool_domain_prefix,
)


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


# Why the tokens line does not warn without the limiter: docs/deploy.md, "The demand".
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
    return decide_rerank_model(
        settings.rerank_model_id,
        context.region,
        default_on=settings.rerank_default,
        answers_on=settings.answer_rerank_default,
    )


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
