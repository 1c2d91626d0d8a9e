"""Per-tenant limits: the model (defaults and overrides, the ``TENANT_LIMITS`` environment variable),
the API's refusals, the rules (the request-rate cell, the next UTC midnight), and their use:
``TenantLimiter`` (the API: the rate on every request; documents, stored bytes and pages today at
POST /documents; counts given back at deletion) and ``UsageCounter`` (intake's bytes, Parse's pages:
counting only, never refusing, so nothing already accepted is dropped), over the ``UsageStore``
port (adapters.tenant_usage_table). docs/api.md, "Limits per tenant", says what each counts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag_ingest.core.errors import ApiRefusal, ConfigurationError
from rag_ingest.core.record import DocumentRecord

#: The usage table's sort keys: the tenant's counters, its request-rate cell, a day's pages.
USAGE_ITEM = "usage"
RATE_ITEM = "rate"
PAGES_ITEM_PREFIX = "pages#"
#: A day's page counter outlives its day by this long, then DynamoDB's TTL removes it.
PAGES_ITEM_KEEP_DAYS = 2


class TenantLimits(BaseModel):
    """Every limit of one tenant (the stack's defaults with its override applied)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    documents: int = Field(ge=1)
    stored_bytes: int = Field(ge=1)
    pages_per_day: int = Field(ge=1)
    requests_per_second: float = Field(gt=0, le=10_000)
    burst_requests: int = Field(ge=1, le=100_000)
    sources: int = Field(ge=1, le=1000)
    webhooks: int = Field(ge=1, le=100)


class TenantLimitsOverride(BaseModel):
    """A tenant's override: any of the limits, the others are the defaults'."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    documents: int | None = Field(default=None, ge=1)
    stored_bytes: int | None = Field(default=None, ge=1)
    pages_per_day: int | None = Field(default=None, ge=1)
    requests_per_second: float | None = Field(default=None, gt=0, le=10_000)
    burst_requests: int | None = Field(default=None, ge=1, le=100_000)
    sources: int | None = Field(default=None, ge=1, le=1000)
    webhooks: int | None = Field(default=None, ge=1, le=100)


class LimitsTable(BaseModel):
    """The ``TENANT_LIMITS`` JSON the stack sets (infra/config.py builds it from cdk.json ``tenants``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    defaults: TenantLimits
    overrides: dict[str, TenantLimitsOverride] = Field(default_factory=dict)

    def for_tenant(self, tenant_id: str) -> TenantLimits:
        override = self.overrides.get(tenant_id)
        if override is None:
            return self.defaults
        return self.defaults.model_copy(update=override.model_dump(exclude_none=True))

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Parse ``TENANT_LIMITS`` at cold start; anything wrong is a ``ConfigurationError``."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigurationError(f"TENANT_LIMITS is invalid: {problems}") from exc


# -- refusals ------------------------------------------------------------------------------------
class LimitRefusal(ApiRefusal):
    """A refusal that tells the client when to come back (``Retry-After``, in whole seconds)."""

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


class RateLimitedError(LimitRefusal):
    """Over the tenant's requests per second (its burst spent)."""

    status = 429
    code = "RATE_LIMITED"


class PagesPerDayExceededError(LimitRefusal):
    """The tenant's pages today reached its daily limit: new uploads wait for the next UTC day."""

    status = 429
    code = "PAGES_PER_DAY_EXCEEDED"


class QuotaExceededError(LimitRefusal):
    """A storage limit (documents, stored bytes): no waiting helps, deleting documents does."""

    status = 403
    code = "QUOTA_EXCEEDED"


# -- rules ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RateCell:
    """A token bucket of ``rate`` tokens a second holding at most ``burst``, kept as one number:
    the theoretical arrival time (GCRA). Admitting a request moves it ``interval_ms`` later; the
    bucket is empty when it is more than ``(burst - 1) * interval_ms`` ahead of now."""

    interval_ms: int
    tolerance_ms: int

    @classmethod
    def of(cls, requests_per_second: float, burst_requests: int) -> RateCell:
        interval = max(1, round(1000 / requests_per_second))
        return cls(interval_ms=interval, tolerance_ms=(burst_requests - 1) * interval)

    def admit(self, tat_ms: int | None, now_ms: int) -> tuple[int | None, int]:
        """(the new arrival time, 0) when a request at ``now_ms`` is admitted, else (None, the
        milliseconds until one would be)."""
        start = now_ms if tat_ms is None else max(tat_ms, now_ms)
        if start - now_ms > self.tolerance_ms:
            return None, start - now_ms - self.tolerance_ms
        return start + self.interval_ms, 0


def retry_after_seconds(wait_ms: int) -> int:
    """``Retry-After`` is whole seconds: round up, at least 1."""
    return max(1, math.ceil(wait_ms / 1000))


def utc_day(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def pages_item(day: str) -> str:
    return f"{PAGES_ITEM_PREFIX}{day}"


def seconds_to_utc_midnight(now: datetime) -> int:
    """Whole seconds from ``now`` to the next UTC midnight (at least 1): a daily limit's ``Retry-After``."""
    now = now.astimezone(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return max(1, math.ceil((midnight - now).total_seconds()))


def day_expiry(now: datetime) -> int:
    """The epoch seconds after which a day's page counter may go (TTL)."""
    return int(now.timestamp()) + PAGES_ITEM_KEEP_DAYS * 86_400 + seconds_to_utc_midnight(now)


# -- applying them ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """A tenant's counters: documents held (those made by POST /documents) and their bytes."""

    documents: int = 0
    stored_bytes: int = 0


class UsageStore(Protocol):
    def take_request(self, tenant_id: str, cell: RateCell, now_ms: int) -> int:
        """Admit one request in the tenant's rate cell: 0, or the milliseconds until one would be."""
        ...

    def reserve_document(self, tenant_id: str, *, max_documents: int, max_stored_bytes: int) -> Usage | None:
        """+1 document if the tenant is under both limits (None); else its usage, nothing changed."""
        ...

    def release_document(self, tenant_id: str, stored_bytes: int) -> None: ...

    def add_stored_bytes(self, tenant_id: str, stored_bytes: int) -> None: ...

    def add_pages(self, tenant_id: str, day: str, pages: int, expires_at: int) -> None: ...

    def pages_on(self, tenant_id: str, day: str) -> int: ...


def counts_toward_limits(record: DocumentRecord) -> bool:
    """A document POST /documents made (it has an uploader and no source): the documents and stored
    bytes limits count these only (docs/api.md, "Limits per tenant")."""
    return record.uploaded_by is not None and record.source_id is None


def _gib(value: int) -> str:
    return f"{value / 2**30:.2f} GiB"


class TenantLimiter:
    """The API's side: refuse what goes over a limit; give counters back when a document goes."""

    def __init__(
        self,
        limits: LimitsTable,
        store: UsageStore,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._limits = limits
        self._store = store
        self._clock = clock

    def limits_for(self, tenant_id: str) -> TenantLimits:
        return self._limits.for_tenant(tenant_id)

    def admit_request(self, tenant_id: str) -> None:
        """One request of the tenant: ``RateLimitedError`` (429, Retry-After) past its rate and burst."""
        limits = self.limits_for(tenant_id)
        cell = RateCell.of(limits.requests_per_second, limits.burst_requests)
        wait_ms = self._store.take_request(tenant_id, cell, int(self._clock() * 1000))
        if wait_ms > 0:
            raise RateLimitedError(
                f"this tenant is over its {limits.requests_per_second:g} requests per second "
                f"(burst {limits.burst_requests}); retry after the Retry-After seconds",
                retry_after=retry_after_seconds(wait_ms),
            )

    def reserve_upload(self, tenant_id: str) -> None:
        """Before a new document: 429 when today's pages reached the daily limit (Retry-After: the
        next UTC midnight), 403 ``QUOTA_EXCEEDED`` at the documents or stored-bytes limit; else the
        document is counted (``release_upload`` gives it back if its record is not made)."""
        limits = self.limits_for(tenant_id)
        now = datetime.fromtimestamp(self._clock(), UTC)
        pages = self._store.pages_on(tenant_id, utc_day(now))
        if pages >= limits.pages_per_day:
            raise PagesPerDayExceededError(
                f"this tenant ingested {pages} pages today (UTC), its limit is {limits.pages_per_day}; "
                "new uploads are accepted again after midnight UTC",
                retry_after=seconds_to_utc_midnight(now),
            )
        usage = self._store.reserve_document(
            tenant_id, max_documents=limits.documents, max_stored_bytes=limits.stored_bytes
        )
        if usage is None:
            return
        if usage.documents >= limits.documents:
            raise QuotaExceededError(
                f"this tenant holds {usage.documents} documents, its limit is {limits.documents}; delete some first"
            )
        raise QuotaExceededError(
            f"this tenant stores {_gib(usage.stored_bytes)}, its limit is {_gib(limits.stored_bytes)}; "
            "delete some documents first"
        )

    def release_upload(self, tenant_id: str) -> None:
        """The document counted by ``reserve_upload`` was never made."""
        self._store.release_document(tenant_id, 0)

    def document_deleted(self, record: DocumentRecord) -> None:
        """A document became DELETED: its count and its current version's bytes are given back."""
        if counts_toward_limits(record):
            self._store.release_document(record.tenant_id, record.size_bytes or 0)


class UsageCounter:
    """Intake's and Parse's side: count what arrived, never refuse it (it was already accepted)."""

    def __init__(self, store: UsageStore, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    def upload_arrived(self, record: DocumentRecord) -> None:
        """A version was QUEUED: its bytes count toward the tenant's stored bytes."""
        if counts_toward_limits(record) and record.size_bytes:
            self._store.add_stored_bytes(record.tenant_id, record.size_bytes)

    def pages_parsed(self, tenant_id: str, pages: int) -> None:
        """Parse counted a version's pages: they count toward today's (UTC) pages."""
        if pages > 0:
            now = datetime.fromtimestamp(self._clock(), UTC)
            self._store.add_pages(tenant_id, utc_day(now), pages, day_expiry(now))
