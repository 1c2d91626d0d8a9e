"""Per-tenant limits' rules (rag_ingest.core.limits): the request-rate cell (burst, refill, Retry-After),
the next UTC midnight, overrides over the defaults, the TENANT_LIMITS environment variable and the
cdk.json ``tenants`` section (infra/config.py), and the API's answers to each refusal."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from rag_ingest.core.config import ApiEnv
from rag_ingest.core.errors import ConfigurationError
from rag_ingest.core.limits import (
    LimitsTable,
    PagesPerDayExceededError,
    QuotaExceededError,
    RateCell,
    RateLimitedError,
    day_expiry,
    pages_item,
    retry_after_seconds,
    seconds_to_utc_midnight,
    utc_day,
)
from rag_ingest.sources.errors import SourceLimitError
from rag_ingest.sources.model import SourceRequest
from rag_ingest.sources.service import SourceService

from infra.cdk_app import cdk_json_context
from infra.config import CONTEXT_KEY, MAX_TENANT_LIMITS_BYTES, RagIngestConfig, parse_config
from tests.support.sources import TENANT, DictConnector
from tests.support.sources import SyncHarness as Harness

pytestmark = pytest.mark.unit

DEFAULTS = {
    "documents": 100,
    "stored_bytes": 1000,
    "pages_per_day": 50,
    "requests_per_second": 10,
    "burst_requests": 5,
    "sources": 50,
    "webhooks": 10,
}


# -- the request-rate cell -------------------------------------------------------------------------
def _run(cell: RateCell, times_ms: list[int]) -> list[int]:
    """Each request's answer (0: admitted, else ms to wait), the cell kept between them."""
    tat: int | None = None
    answers = []
    for now in times_ms:
        new_tat, wait = cell.admit(tat, now)
        if new_tat is not None:
            tat = new_tat
        answers.append(wait)
    return answers


def test_a_burst_is_admitted_then_the_next_request_waits_one_interval() -> None:
    cell = RateCell.of(requests_per_second=10, burst_requests=5)
    assert (cell.interval_ms, cell.tolerance_ms) == (100, 400)
    answers = _run(cell, [1_000] * 6)
    assert answers[:5] == [0] * 5
    assert answers[5] == 100  # the bucket refills one token per 100 ms
    assert retry_after_seconds(answers[5]) == 1


def test_the_bucket_refills_at_the_rate() -> None:
    cell = RateCell.of(requests_per_second=10, burst_requests=5)
    # A spent burst, then 250 ms later two tokens are back (not three), and a second later all five.
    answers = _run(cell, [0] * 5 + [250, 250, 250, 1_250, 1_250, 1_250, 1_250, 1_250, 1_250])
    assert answers[5:8] == [0, 0, 50]
    assert answers[8:13] == [0] * 5
    assert answers[13] > 0


def test_a_steady_client_at_the_rate_is_never_refused() -> None:
    cell = RateCell.of(requests_per_second=2, burst_requests=1)
    assert _run(cell, [i * 500 for i in range(20)]) == [0] * 20
    assert _run(cell, [0, 400])[1] == 100  # 100 ms early


def test_retry_after_is_whole_seconds_rounded_up() -> None:
    assert [retry_after_seconds(ms) for ms in (1, 999, 1000, 1001, 4500)] == [1, 1, 1, 2, 5]
    cell = RateCell.of(requests_per_second=0.1, burst_requests=1)  # one request every 10 s
    assert retry_after_seconds(_run(cell, [0, 1_000])[1]) == 9


# -- days -------------------------------------------------------------------------------------------
def test_the_daily_limit_waits_for_the_next_utc_midnight() -> None:
    assert seconds_to_utc_midnight(datetime(2026, 12, 7, 23, 59, 30, tzinfo=UTC)) == 30
    assert seconds_to_utc_midnight(datetime(2026, 12, 7, 0, 0, 0, tzinfo=UTC)) == 86_400
    # Another zone's clock: still UTC's midnight (01:00 at +02:00 is 23:00 UTC the day before).
    from datetime import timedelta, timezone

    east = datetime(2026, 12, 8, 1, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert seconds_to_utc_midnight(east) == 3_600
    assert utc_day(east) == "2026-12-07" and pages_item(utc_day(east)) == "pages#2026-12-07"
    now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    assert day_expiry(now) - int(now.timestamp()) == 12 * 3600 + 2 * 86_400  # kept two days past its day


# -- the limits table -------------------------------------------------------------------------------
def test_an_override_replaces_only_what_it_names() -> None:
    table = LimitsTable.model_validate({"defaults": DEFAULTS, "overrides": {"small": {"documents": 1, "webhooks": 2}}})
    small = table.for_tenant("small")
    assert (small.documents, small.webhooks) == (1, 2)
    assert small.stored_bytes == DEFAULTS["stored_bytes"] and small.burst_requests == DEFAULTS["burst_requests"]
    assert table.for_tenant("anyone").model_dump() == DEFAULTS


def test_tenant_limits_is_validated_at_cold_start() -> None:
    base = {
        "DOCUMENTS_TABLE": "d",
        "STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:123456789012:stateMachine:s",
        "BUCKET_NAME": "bucket",
        "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9200",
        "OPENSEARCH_INDEX": "chunks",
        "EMBEDDING_DIMENSION": "384",
        "MAX_UPLOAD_BYTES": "1000",
        "UPLOAD_URL_EXPIRY_SECONDS": "900",
    }
    env = ApiEnv.from_env({**base, "TENANT_LIMITS": json.dumps({"defaults": DEFAULTS}), "TENANT_USAGE_TABLE": "u"})
    assert env.tenant_limits is not None and env.tenant_limits.for_tenant("t").documents == 100
    assert ApiEnv.from_env(base).tenant_limits is None  # unset: no limits (a test's environment)
    for bad in ('{"defaults": {}}', "not json", json.dumps({"defaults": {**DEFAULTS, "extra": 1}})):
        with pytest.raises(ConfigurationError, match="TENANT_LIMITS"):
            ApiEnv.from_env({**base, "TENANT_LIMITS": bad})
    with pytest.raises(ConfigurationError):
        LimitsTable.from_json(json.dumps({"defaults": DEFAULTS, "overrides": {"t": {"documents": 0}}}))


# -- cdk.json ---------------------------------------------------------------------------------------
def test_cdk_json_defaults_are_generous_and_keep_the_existing_caps() -> None:
    config = parse_config(cdk_json_context()[CONTEXT_KEY])
    limits = config.tenant_limits()
    assert limits.defaults.documents >= 100_000 and limits.defaults.stored_bytes >= 100 * 2**30
    # A tenant alone may use the whole API stage (its throttle is for all tenants together).
    assert limits.defaults.requests_per_second == config.api.throttling_rate_limit
    assert limits.defaults.burst_requests == config.api.throttling_burst_limit
    assert limits.defaults.sources == config.sources.max_per_tenant
    assert limits.defaults.webhooks == config.webhooks.max_endpoints_per_tenant
    assert LimitsTable.from_json(config.tenant_limits_json()) == limits


def test_cdk_json_tenants_refuses_unknown_keys_bad_ids_and_bad_values() -> None:
    ok = RagIngestConfig.model_validate({"tenants": {"overrides": {"acme": {"documents": 5, "requestsPerSecond": 1}}}})
    assert ok.tenant_limits().for_tenant("acme").documents == 5
    for tenants in (
        {"defaults": {"documentz": 5}},
        {"overrides": {"acme": {"sourcez": 1}}},
        {"overrides": {"not a tenant!": {"documents": 1}}},
        {"overrides": {"acme": {"documents": 0}}},
        {"defaults": {"requestsPerSecond": 0}},
        # The defaults section takes no sources/webhooks: those are sources.maxPerTenant and webhooks'.
        {"defaults": {"sources": 5}},
    ):
        with pytest.raises(ValidationError):
            RagIngestConfig.model_validate({"tenants": tenants})


def test_too_many_overrides_for_the_environment_is_a_clear_error() -> None:
    overrides = {f"tenant-{i:04d}": {"documents": 10, "storedBytes": 10**9} for i in range(40)}
    with pytest.raises(ValidationError, match=f"TENANT_LIMITS, over {MAX_TENANT_LIMITS_BYTES}"):
        RagIngestConfig.model_validate({"tenants": {"overrides": overrides}})


# -- the refusals' answers ----------------------------------------------------------------------------
def test_each_refusal_has_its_status_code_and_retry_after() -> None:
    rate = RateLimitedError("over", retry_after=2)
    assert (rate.status, rate.code, rate.headers) == (429, "RATE_LIMITED", {"Retry-After": "2"})
    pages = PagesPerDayExceededError("today", retry_after=3600)
    assert (pages.status, pages.code, pages.headers) == (429, "PAGES_PER_DAY_EXCEEDED", {"Retry-After": "3600"})
    quota = QuotaExceededError("full")
    assert (quota.status, quota.code, quota.headers) == (403, "QUOTA_EXCEEDED", {})


def test_a_tenants_override_sets_its_own_source_cap() -> None:
    # The API passes the tenant's limits (cdk.json tenants.overrides.<tenant>.sources): the harness's
    # tenant already has one source, so a cap of 2 admits one more, and the code stays the same.
    harness = Harness(DictConnector({}), kind="custom")
    limits = LimitsTable.model_validate({"defaults": DEFAULTS, "overrides": {TENANT: {"sources": 2}}})
    service = SourceService(
        sources=harness.sources,
        jobs=harness.jobs,
        items=harness.items,
        engine=harness.engine,
        starter=harness,
        validate_config=lambda kind, config: config,
        new_id=lambda: f"{len(harness.sources.list(TENANT)) + 10:026d}",
        max_sources=lambda tenant: limits.for_tenant(tenant).sources,
    )
    service.create(TENANT, SourceRequest(kind="custom", name="second"))
    with pytest.raises(SourceLimitError, match="this tenant has at most 2 sources") as refused:
        service.create(TENANT, SourceRequest(kind="custom", name="third"))
    assert refused.value.code == "SOURCE_LIMIT_REACHED"
    for name in ("a", "b", "c"):  # another tenant has the default (50)
        service.create("globex", SourceRequest(kind="custom", name=name))
