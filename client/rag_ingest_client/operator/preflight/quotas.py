"""The demand the configuration can put on the account's quotas, and the quota checks: Bedrock's
requests and tokens per minute, Textract's transactions per second (docs/deploy.md, "The demand")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rag_ingest.embeddings.bedrock import DEFAULT_MAX_CONCURRENCY, TITAN_V2_MODEL_ID

from rag_ingest_client.operator.preflight.results import CheckResult, ok, warn
from rag_ingest_client.operator.preflight.settings import PreflightSettings

# The model part of its quotas' names, which Service Quotas spells "... for ${model}" (docs/deploy.md).
QUOTA_MODEL_NAMES = {TITAN_V2_MODEL_ID: "titan text embeddings v2"}

# How long one InvokeModel call and one OCR'd page are assumed to take: docs/deploy.md, "The demand".
ASSUMED_INVOKE_SECONDS = 0.2
ASSUMED_OCR_SECONDS = 1.0


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
