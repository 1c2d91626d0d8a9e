"""The sources API's domain: create, read, change and delete a tenant's sources, start their syncs,
read the syncs, and take a custom source's items (upsert by external id).

Every operation takes the caller's tenant, already validated; another tenant's source answers like
a missing one. A kind's configuration is checked by its connector's model (``validate_config``), so
a bad one is a 400 at creation, not a failed sync later. May import core and this package.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from rag_ingest.core.access import Principal
from rag_ingest.core.clock import utc_now
from rag_ingest.core.metadata import MetadataError, validate_metadata
from rag_ingest.sources.connector import SourceItem
from rag_ingest.sources.errors import (
    DeleteModeError,
    ItemNotFoundError,
    ItemTooLargeError,
    SourceConfigError,
    SourceKindError,
    SourceLimitError,
    SourceNotFoundError,
    SyncInProgressError,
    SyncNotFoundError,
    SyncRateLimitedError,
)
from rag_ingest.sources.model import (
    MAX_EXTERNAL_ID_CHARS,
    SOURCE_ID_PREFIX,
    SYNC_ID_PREFIX,
    ItemRequest,
    ItemView,
    Source,
    SourceKind,
    SourceList,
    SourcePatch,
    SourceRequest,
    SourceView,
    SyncJob,
    SyncList,
    view_of,
)
from rag_ingest.sources.ports import ItemStates, SourceStore, SyncJobs, SyncSchedules, SyncStarter
from rag_ingest.sources.sync import SyncEngine, content_token

#: ``kind, config -> the config as stored`` (defaults filled); raises ValueError with the reason.
ConfigValidator = Callable[[SourceKind, dict[str, Any]], dict[str, Any]]
DeleteMode = Literal["delete", "keep"]
SYNCS_SHOWN = 20
DEFAULT_MAX_SOURCES = 50
DEFAULT_MAX_SYNCS_PER_HOUR = 12
#: A pushed item's bytes travel in the request: under the HTTP API's payload limit (docs/sources.md).
MAX_ITEM_BYTES = 4 * 1024 * 1024
PUSHED_SYNC = "push"


class SourceService:
    def __init__(
        self,
        *,
        sources: SourceStore,
        jobs: SyncJobs,
        items: ItemStates,
        engine: SyncEngine,
        starter: SyncStarter,
        validate_config: ConfigValidator,
        new_id: Callable[[], str],
        schedules: SyncSchedules | None = None,
        max_sources: int | Callable[[str], int] = DEFAULT_MAX_SOURCES,
        max_syncs_per_hour: int = DEFAULT_MAX_SYNCS_PER_HOUR,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sources = sources
        self._jobs = jobs
        self._items = items
        self._engine = engine
        self._starter = starter
        self._validate_config = validate_config
        self._new_id = new_id
        # A number for every tenant, or the tenant's own (its limits override: rag_ingest.core.limits).
        self._max_sources = max_sources if callable(max_sources) else lambda _tenant: max_sources
        self._schedules = schedules
        self._max_syncs_per_hour = max_syncs_per_hour
        self._clock = clock

    # -- sources ---------------------------------------------------------------------------------
    def create(self, tenant_id: str, request: SourceRequest, principal: Principal | None = None) -> SourceView:
        limit = self._max_sources(tenant_id)
        if len(self._sources.list(tenant_id)) >= limit:
            raise SourceLimitError(f"this tenant has at most {limit} sources")
        now = utc_now()
        source = Source(
            tenant_id=tenant_id,
            source_id=SOURCE_ID_PREFIX + self._new_id(),
            kind=request.kind,
            name=request.name,
            config=self._config(request.kind, request.config),
            schedule=request.schedule,
            metadata=_metadata(request.metadata),
            access=request.access or Source.model_fields["access"].default,
            created_at=now,
            updated_at=now,
        )
        self._sources.create(source)
        self._watch(source)
        if source.schedule is not None:
            try:
                self._schedule(source)
            except Exception:
                self._unwatch(source)
                self._sources.delete(tenant_id, source.source_id)  # no source without its schedule
                raise
        return view_of(source)

    def list(self, tenant_id: str) -> SourceList:
        return SourceList(sources=[self._view(source) for source in self._sources.list(tenant_id)])

    def get(self, tenant_id: str, source_id: str) -> SourceView:
        return self._view(self._source(tenant_id, source_id))

    def patch(self, tenant_id: str, source_id: str, patch: SourcePatch) -> SourceView:
        source = self._source(tenant_id, source_id)
        fields = patch.model_dump(exclude_unset=True)
        if "config" in fields:
            fields["config"] = self._config(source.kind, patch.config or {})
        if "metadata" in fields:
            fields["metadata"] = _metadata(patch.metadata)
        # null leaves a field as it is: model_copy does not validate, and a name of None stored once
        # made every later read of the tenant's sources a 500 (a make fuzz finding).
        for name in ("name", "access"):
            if name in fields and fields[name] is None:
                fields.pop(name)
        updated = source.model_copy(update={**fields, "updated_at": utc_now()})
        self._sources.replace(updated, expected_updated_at=source.updated_at)
        if _bucket(updated) != _bucket(source):
            self._unwatch(source)
            self._watch(updated)
        if "schedule" in fields and updated.schedule != source.schedule:
            self._schedule(updated)
        return self._view(updated)

    def delete(self, tenant_id: str, source_id: str, documents: str | None) -> None:
        """The source, its syncs' item states, and its documents too when ``documents`` is delete."""
        if documents not in ("delete", "keep"):
            raise DeleteModeError("say what happens to the source's documents: ?documents=delete or ?documents=keep")
        source = self._source(tenant_id, source_id)
        if source.running_sync is not None:
            raise SyncInProgressError(f"sync {source.running_sync} is running; delete the source after it ends")
        for state in list(self._items.scan(source_id)):
            if documents == "delete" and state.has_document:
                self._engine.remove(source, state, "delete")
            self._items.delete(source_id, state.key)
        if source.schedule is not None and self._schedules is not None:
            self._schedules.clear(tenant_id, source_id)
        self._unwatch(source)
        self._sources.delete(tenant_id, source_id)

    # -- syncs -----------------------------------------------------------------------------------
    def start_sync(self, tenant_id: str, source_id: str) -> SyncJob:
        source = self._source(tenant_id, source_id)
        if source.kind == "custom":
            raise SourceKindError("a custom source is not listed: PUT its items instead")
        self._check_rate(source_id)
        job = self._engine.open_sync(source, SYNC_ID_PREFIX + self._new_id())
        if job is None:
            raise SyncInProgressError("a sync of this source is running; wait for it to end")
        sync_id = job.id
        try:
            self._starter.start(sync_id, {"tenant_id": tenant_id, "source_id": source_id, "sync_id": sync_id})
        except Exception as exc:
            self._engine.fail(source, job, f"the sync could not start: {exc}")
            raise
        return job

    def _check_rate(self, source_id: str) -> None:
        """At most ``max_syncs_per_hour`` syncs started in the last hour (scheduled ones count too)."""
        hour_ago = (self._clock() - timedelta(hours=1)).isoformat(timespec="milliseconds")
        recent = [job for job in self._jobs.list(source_id, self._max_syncs_per_hour) if job.started_at > hour_ago]
        if len(recent) >= self._max_syncs_per_hour:
            oldest = min(job.started_at for job in recent)
            raise SyncRateLimitedError(
                f"{self._max_syncs_per_hour} syncs of this source started in the last hour; "
                f"the next may start after {(datetime.fromisoformat(oldest) + timedelta(hours=1)).isoformat()}"
            )

    def list_syncs(self, tenant_id: str, source_id: str) -> SyncList:
        self._source(tenant_id, source_id)
        return SyncList(syncs=self._jobs.list(source_id, SYNCS_SHOWN))

    def get_sync(self, tenant_id: str, source_id: str, sync_id: str) -> SyncJob:
        self._source(tenant_id, source_id)
        job = self._jobs.get(source_id, sync_id)
        if job is None:
            raise SyncNotFoundError(sync_id)
        return job

    # -- a custom source's items -----------------------------------------------------------------
    def put_item(self, tenant_id: str, source_id: str, external_id: str, request: ItemRequest) -> ItemView:
        """Upsert by external id: the same content, name, metadata and access again changes nothing."""
        source = self._custom(tenant_id, source_id)
        _check_external_id(external_id)
        body = _content(request)
        own_metadata = _metadata(request.metadata)
        access = request.access or source.access
        token = content_token(
            body, request.filename, json.dumps(own_metadata, sort_keys=True, default=str), access.model_dump_json()
        )
        item = SourceItem(
            key=external_id,
            change_token=token,
            uri=f"custom://{source_id}/{external_id}",
            filename=request.filename,
            size_bytes=len(body),
            content=body,
            metadata=own_metadata,
            access=access,
        )
        state = self._items.get_many(source_id, [external_id]).get(external_id)
        outcome, failure = self._engine.apply_item(source, PUSHED_SYNC, item, state, None)
        if failure is not None:
            raise SourceConfigError(f"{failure.code}: {failure.reason}")
        stored = self._items.get_many(source_id, [external_id])[external_id]
        assert stored.document_id is not None
        return ItemView(external_id=external_id, document_id=stored.document_id, outcome=outcome)

    def delete_item(self, tenant_id: str, source_id: str, external_id: str) -> None:
        source = self._custom(tenant_id, source_id)
        state = self._items.get_many(source_id, [external_id]).get(external_id)
        if state is None or not state.has_document:
            raise ItemNotFoundError(external_id)
        self._engine.remove(source, state, PUSHED_SYNC)

    # -- helpers ---------------------------------------------------------------------------------
    def _source(self, tenant_id: str, source_id: str) -> Source:
        source = self._sources.get(tenant_id, source_id) if source_id.startswith(SOURCE_ID_PREFIX) else None
        if source is None:
            raise SourceNotFoundError(source_id)
        return source

    def _custom(self, tenant_id: str, source_id: str) -> Source:
        source = self._source(tenant_id, source_id)
        if source.kind != "custom":
            raise SourceKindError(f"only a custom source takes items; this one is {source.kind}: sync it")
        return source

    def _watch(self, source: Source) -> None:
        bucket = _bucket(source)
        if bucket is not None:
            self._sources.watch(bucket, source.tenant_id, source.source_id)

    def _unwatch(self, source: Source) -> None:
        bucket = _bucket(source)
        if bucket is not None:
            self._sources.unwatch(bucket, source.tenant_id, source.source_id)

    def _schedule(self, source: Source) -> None:
        """The managed schedule follows the source's: set, changed, or cleared."""
        if self._schedules is None:
            if source.schedule is not None:
                raise SourceConfigError("schedules are not available on this stack")
            return
        if source.kind == "custom" and source.schedule is not None:
            raise SourceKindError("a custom source is not listed, so it has no schedule")
        if source.schedule is None:
            self._schedules.clear(source.tenant_id, source.source_id)
        else:
            self._schedules.set(source.tenant_id, source.source_id, source.schedule)

    def _view(self, source: Source) -> SourceView:
        last = self._jobs.get(source.source_id, source.running_sync or source.last_sync or "")
        return view_of(source, last)

    def _config(self, kind: SourceKind, config: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._validate_config(kind, config)
        except ValueError as exc:
            raise SourceConfigError(f"config: {exc}") from None


def _bucket(source: Source) -> str | None:
    """The bucket an S3 source reads (its object events concern it); None for other kinds."""
    return str(source.config["bucket"]) if source.kind == "s3" and "bucket" in source.config else None


def _metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    try:
        return validate_metadata(metadata) if metadata else {}
    except MetadataError as exc:
        raise SourceConfigError(str(exc)) from None


def _check_external_id(external_id: str) -> None:
    if not external_id or len(external_id) > MAX_EXTERNAL_ID_CHARS or any(ord(c) < 32 for c in external_id):
        raise SourceConfigError(f"an external id is 1-{MAX_EXTERNAL_ID_CHARS} printable characters")


def _content(request: ItemRequest) -> bytes:
    if (request.text is None) == (request.content_base64 is None):
        raise SourceConfigError("give the content as exactly one of text or content_base64")
    if request.text is not None:
        body = request.text.encode()
    else:
        try:
            body = base64.b64decode(request.content_base64 or "", validate=True)
        except (binascii.Error, ValueError):
            raise SourceConfigError("content_base64 is not valid base64") from None
    if not body:
        raise SourceConfigError("the content is empty")
    if len(body) > MAX_ITEM_BYTES:
        raise ItemTooLargeError(f"an item pushed in a request is at most {MAX_ITEM_BYTES} bytes")
    return body
