"""The sync workflow's steps: each call takes the listing (or the deletions) as far as its time
budget allows and says which phase comes next, so no single invocation runs past its timeout and
a crash resumes at the last checkpoint; "applying" hands a file of listed items to the workflow's
Distributed Map, whose children call ``apply_batch``. The state machine loops on ``phase``.
May import core and this package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from rag_ingest.core.clock import utc_now
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.logs import logger
from rag_ingest.sources.buckets import ServerSideCopy
from rag_ingest.sources.connector import Connector, ItemUnavailableError
from rag_ingest.sources.errors import SourceNotFoundError, SyncNotFoundError
from rag_ingest.sources.fan_out import BatchResult, ItemBatch
from rag_ingest.sources.model import SYNC_ID_PREFIX, Source, StagedPage, SyncJob
from rag_ingest.sources.ports import SourceStore, SyncJobs, SyncStarter
from rag_ingest.sources.sync import SyncEngine

Phase = Literal["start", "listing", "applying", "finishing", "done", "failed"]
#: A sync whose execution was lost this many times ends FAILED (SYNC_LOST) instead.
MAX_RESTARTS = 5
ConnectorFactory = Callable[[Source], Connector]


class SyncStep(BaseModel):
    """The state the workflow carries between steps: small, ids only."""

    tenant_id: str
    source_id: str
    # None on a scheduled start: the first step opens the sync (phase "start").
    sync_id: str | None = None
    phase: Phase = "listing"
    # "applying": the file of listed items the workflow's Map reads, then the Map's output.
    staged: StagedPage | None = None
    applied: list[dict[str, Any]] | None = None


class SyncRunner:
    def __init__(
        self,
        *,
        sources: SourceStore,
        jobs: SyncJobs,
        engine: SyncEngine,
        connectors: ConnectorFactory,
        budget_seconds: float,
        new_id: Callable[[], str] = new_document_id,
        starter: SyncStarter | None = None,
        clock: Callable[[], float] = time.monotonic,
        fan_out: bool = False,
    ) -> None:
        self._sources = sources
        self._jobs = jobs
        self._engine = engine
        self._connectors = connectors
        self._budget_seconds = budget_seconds
        self._clock = clock
        self._new_id = new_id
        self._starter = starter
        # The workflow has the Distributed Map: connectors that copy server-side stage their items.
        self._fan_out = fan_out

    def step(self, step: SyncStep) -> SyncStep:
        if step.phase == "start":
            return self._start(step)
        source, job = self._load(step)
        if job.status != "IN_PROGRESS":
            return step.model_copy(update={"phase": "done" if job.status == "COMPLETE" else "failed"})
        deadline = self._clock() + self._budget_seconds

        def should_stop() -> bool:
            return self._clock() >= deadline

        if step.phase == "applying" and step.staged is not None and step.applied is not None:
            job = self._engine.staged_applied(job, step.staged, step.applied)
        if step.phase in ("listing", "applying") or job.staged is not None:
            if job.staged is not None:  # staged before a restart: the Map (again) first
                return self._next(step, "applying", job.staged)
            try:
                job = self._list(source, job, should_stop)
            except (ItemUnavailableError, ValueError) as exc:
                # The listing cannot go on (an unreadable bucket, a config the connector refuses).
                code = getattr(exc, "code", "SOURCE_CONFIG_INVALID")
                self._engine.fail(source, job, f"{code}: {exc}")
                return self._next(step, "failed")
            if job.staged is not None:
                return self._next(step, "applying", job.staged)
            return self._next(step, "finishing" if job.listing_complete else "listing")
        _, done = self._engine.finish(source, job, should_stop=should_stop)
        return self._next(step, "done" if done else "finishing")

    def apply_batch(self, batch: ItemBatch) -> BatchResult:
        """One child of the workflow's Map: a batch of the staged items."""
        source = self._sources.get(batch.tenant_id, batch.source_id)
        if source is None:
            raise SourceNotFoundError(batch.source_id)
        connector = self._connectors(source)
        return self._engine.apply_batch(source, batch.sync_id, batch.source_items(), connector)

    def _list(self, source: Source, job: SyncJob, should_stop: Callable[[], bool]) -> SyncJob:
        connector = self._connectors(source)
        if self._fan_out and isinstance(connector, ServerSideCopy):
            return self._engine.stage_listing(source, job, connector, should_stop=should_stop)
        return self._engine.run_listing(source, job, connector, should_stop=should_stop)

    @staticmethod
    def _next(step: SyncStep, phase: Phase, staged: StagedPage | None = None) -> SyncStep:
        return step.model_copy(update={"phase": phase, "staged": staged, "applied": None})

    def fail(self, step: SyncStep, error: str) -> SyncStep:
        """The workflow's catch: a step failed past its retries. Nothing is deleted."""
        try:
            source, job = self._load(step)
        except SourceNotFoundError:
            logger.warning("failed sync of a source that is gone", extra={"source_id": step.source_id})
            return step.model_copy(update={"phase": "failed"})
        if job.status == "IN_PROGRESS":
            self._engine.fail(source, job, error)
        return step.model_copy(update={"phase": "failed"})

    def resume_lost(self, stale_after_seconds: float) -> dict[str, str]:
        """Syncs whose execution is gone (not saved for ``stale_after_seconds``; 0 after a restart
        that lost every execution): started again from their checkpoint, under a new execution name,
        up to ``MAX_RESTARTS`` times, then FAILED; a claim whose sync ended is released.
        ``sync id -> what was done``."""
        if self._starter is None:
            raise RuntimeError("this runner cannot start executions")
        done: dict[str, str] = {}
        stale_before = (datetime.now(UTC) - timedelta(seconds=stale_after_seconds)).isoformat(timespec="milliseconds")
        for tenant_id, source_id, sync_id in self._sources.running_syncs():
            source = self._sources.get(tenant_id, source_id)
            job = self._jobs.get(source_id, sync_id)
            if source is None or job is None or job.status != "IN_PROGRESS":
                self._sources.release_sync(tenant_id, source_id, sync_id)
                done[sync_id] = "released"
            elif (job.updated_at or job.started_at) > stale_before:
                done[sync_id] = "alive"
            elif job.restarts >= MAX_RESTARTS:
                self._engine.fail(source, job, f"SYNC_LOST: its execution was lost {job.restarts + 1} times")
                done[sync_id] = "failed"
            else:
                restarts = job.restarts + 1
                self._jobs.put(job.model_copy(update={"restarts": restarts, "updated_at": utc_now()}))
                phase = "finishing" if job.listing_complete and job.staged is None else "listing"
                payload = {"tenant_id": tenant_id, "source_id": source_id, "sync_id": sync_id, "phase": phase}
                self._starter.start(f"{sync_id}-r{restarts}", payload)
                logger.warning("lost sync restarted", extra={"source_id": source_id, "sync_id": sync_id})
                done[sync_id] = "restarted"
        return done

    def job(self, step: SyncStep) -> SyncJob | None:
        """The sync a step belongs to, as saved (None before a scheduled start opened one)."""
        return self._jobs.get(step.source_id, step.sync_id) if step.sync_id else None

    def _start(self, step: SyncStep) -> SyncStep:
        """A scheduled sync: opened here, or skipped when the source is gone or already syncing."""
        source = self._sources.get(step.tenant_id, step.source_id)
        if source is None:
            logger.warning("scheduled sync of a source that is gone", extra={"source_id": step.source_id})
            return step.model_copy(update={"phase": "done"})
        job = self._engine.open_sync(source, SYNC_ID_PREFIX + self._new_id())
        if job is None:
            logger.info("scheduled sync skipped: one is running", extra={"source_id": step.source_id})
            return step.model_copy(update={"phase": "done"})
        return step.model_copy(update={"sync_id": job.id, "phase": "listing"})

    def _load(self, step: SyncStep) -> tuple[Source, SyncJob]:
        source = self._sources.get(step.tenant_id, step.source_id)
        if source is None:
            raise SourceNotFoundError(step.source_id)
        job = self._jobs.get(step.source_id, step.sync_id) if step.sync_id else None
        if job is None:
            raise SyncNotFoundError(step.sync_id or "")
        return source, job
