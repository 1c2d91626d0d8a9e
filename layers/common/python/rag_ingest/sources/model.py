"""A tenant's sources, their sync jobs and item states, and the API's shapes for them.

A source is stored once per tenant; a sync job once per run of it; an item state once per item a
sync has seen, keyed by (source, item key): the document it became, its change token, and the sync
that last saw it. The shapes follow Bedrock's data sources and ingestion jobs (docs/sources.md).
May import ``rag_ingest.core`` only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_ingest.core.access import OPEN_ACCESS, DocumentAccess

SourceKind = Literal["s3", "web", "custom"]
SyncStatus = Literal["IN_PROGRESS", "COMPLETE", "FAILED"]
ItemOutcome = Literal["added", "modified", "unchanged", "failed", "deleted"]
SOURCE_ID_PREFIX = "src_"
SYNC_ID_PREFIX = "sync_"
#: A sync keeps the first failed items with their reasons; the count keeps them all.
MAX_FAILURES_KEPT = 100
MAX_NAME_CHARS = 128
MAX_EXTERNAL_ID_CHARS = 512
# EventBridge Scheduler's expressions: rate(value unit) or cron(six fields).
_SCHEDULE = re.compile(r"rate\(\d{1,4} (minute|minutes|hour|hours|day|days)\)|cron\((\S+ ){5}\S+\)")


class SyncStatistics(BaseModel):
    """What a sync did, in Bedrock ingestion-job terms (scanned = every item the listing named)."""

    scanned: int = 0
    added: int = 0
    modified: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0

    def plus(self, other: SyncStatistics) -> SyncStatistics:
        return SyncStatistics(**{name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields})


class SyncFailure(BaseModel):
    item: str
    uri: str
    code: str
    reason: str


class StagedPage(BaseModel):
    """Listed items staged for the sync workflow's Distributed Map: a JSON file in the stack's bucket."""

    bucket: str
    key: str


class SyncJob(BaseModel):
    """One run of a source's sync, as stored and as the API shows it."""

    id: str
    source_id: str
    tenant_id: str = Field(exclude=True)
    status: SyncStatus = "IN_PROGRESS"
    started_at: str
    ended_at: str | None = None
    listing_complete: bool = False
    # A cap ended the listing early: what it did not reach is not gone.
    truncated: bool = False
    statistics: SyncStatistics = Field(default_factory=SyncStatistics)
    listed: int = Field(
        default=0,
        description="Items the listing named so far: the progress of a sync in progress, whose statistics "
        "count items as they are applied (an S3 source's in files of up to 10,000). Equal to scanned at the end.",
    )
    failures: list[SyncFailure] = Field(default_factory=list)
    error: str | None = None
    # Failed items that had no state to count them on (a new page that answered 500).
    failed_unknown: int = Field(default=0, exclude=True)
    # When a step last saved it (a sync not saved for long lost its execution), and how often a
    # lost execution was started again.
    updated_at: str | None = None
    restarts: int = 0
    # Items listed and staged for the workflow's Map, not yet applied; and how many files so far.
    staged: StagedPage | None = Field(default=None, exclude=True)
    staged_files: int = Field(default=0, exclude=True)


class Source(BaseModel):
    """A source as stored. ``running_sync`` is the one sync allowed at a time (set and cleared by a
    compare-and-set); ``config`` is the kind's configuration, validated by its connector."""

    tenant_id: str
    source_id: str
    kind: SourceKind
    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    schedule: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: DocumentAccess = OPEN_ACCESS
    running_sync: str | None = None
    last_sync: str | None = None
    created_at: str
    updated_at: str


class ItemState(BaseModel):
    """What the syncs know of one item: the document it became (None until one was made), the
    change token that document holds, and the sync that last saw it with what it came to."""

    source_id: str
    key: str
    uri: str
    document_id: str | None = None
    change_token: str = ""
    validators: dict[str, str] = Field(default_factory=dict)
    seen_in: str | None = None
    outcome: ItemOutcome | None = None
    # Syncs in a row that found the item gone (a 404 or 410); two delete it.
    misses: int = 0

    @property
    def has_document(self) -> bool:
        return self.document_id is not None and self.outcome != "deleted"


def _schedule(value: str | None) -> str | None:
    if value is not None and not _SCHEDULE.fullmatch(value):
        raise ValueError("schedule must be rate(N unit) or cron(minutes hours day month weekday year)")
    return value


class SourceRequest(BaseModel):
    """``POST /sources``."""

    model_config = ConfigDict(extra="forbid")

    kind: SourceKind
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    config: dict[str, Any] = Field(default_factory=dict)
    schedule: str | None = Field(default=None, description="rate(...) or cron(...), or null: on request only")
    metadata: dict[str, Any] | None = None
    access: DocumentAccess | None = None

    _check_schedule = field_validator("schedule")(_schedule)


class SourcePatch(BaseModel):
    """``PATCH /sources/{id}``: the fields given replace the stored ones; the kind is fixed."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    config: dict[str, Any] | None = None
    schedule: str | None = None
    metadata: dict[str, Any] | None = None
    access: DocumentAccess | None = None

    _check_schedule = field_validator("schedule")(_schedule)


class SourceView(BaseModel):
    id: str
    kind: SourceKind
    name: str
    config: dict[str, Any]
    schedule: str | None
    metadata: dict[str, Any]
    access: DocumentAccess
    created_at: str
    updated_at: str
    last_sync: SyncJob | None = None


class SourceList(BaseModel):
    sources: list[SourceView]


class SyncList(BaseModel):
    syncs: list[SyncJob]


class ItemRequest(BaseModel):
    """``PUT /sources/{id}/items/{external_id}`` (custom sources): the content as text or base64."""

    model_config = ConfigDict(extra="forbid")

    filename: str = Field(min_length=1, max_length=255)
    text: str | None = None
    content_base64: str | None = None
    metadata: dict[str, Any] | None = None
    access: DocumentAccess | None = None


class ItemView(BaseModel):
    external_id: str
    document_id: str
    outcome: ItemOutcome


def view_of(source: Source, last_sync: SyncJob | None = None) -> SourceView:
    return SourceView(
        id=source.source_id,
        kind=source.kind,
        name=source.name,
        config=source.config,
        schedule=source.schedule,
        metadata=source.metadata,
        access=source.access,
        created_at=source.created_at,
        updated_at=source.updated_at,
        last_sync=last_sync,
    )


def merged_metadata(defaults: Mapping[str, Any], own: Mapping[str, Any] | None) -> dict[str, Any]:
    """A source's default metadata with an item's own (a sidecar's) applied over it."""
    return {**defaults, **(own or {})}
