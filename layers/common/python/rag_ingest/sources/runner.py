"""The sync workflow's steps: each call takes the listing (or the deletions) as far as its time
budget allows and says which phase comes next, so no single invocation runs past its timeout and
a crash resumes at the last checkpoint. The state machine loops on ``phase`` (infra/constructs/sources.py).
May import core and this package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from rag_ingest.core.ids import new_document_id
from rag_ingest.core.logs import logger
from rag_ingest.sources.connector import Connector, ItemUnavailableError
from rag_ingest.sources.errors import SourceNotFoundError, SyncNotFoundError
from rag_ingest.sources.model import SYNC_ID_PREFIX, Source, SyncJob
from rag_ingest.sources.ports import SourceStore, SyncJobs
from rag_ingest.sources.sync import SyncEngine

Phase = Literal["start", "listing", "finishing", "done", "failed"]
ConnectorFactory = Callable[[Source], Connector]


class SyncStep(BaseModel):
    """The state the workflow carries between steps: small, ids only."""

    tenant_id: str
    source_id: str
    # None on a scheduled start: the first step opens the sync (phase "start").
    sync_id: str | None = None
    phase: Phase = "listing"


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sources = sources
        self._jobs = jobs
        self._engine = engine
        self._connectors = connectors
        self._budget_seconds = budget_seconds
        self._clock = clock
        self._new_id = new_id

    def step(self, step: SyncStep) -> SyncStep:
        if step.phase == "start":
            return self._start(step)
        source, job = self._load(step)
        if job.status != "IN_PROGRESS":
            return step.model_copy(update={"phase": "done" if job.status == "COMPLETE" else "failed"})
        deadline = self._clock() + self._budget_seconds

        def should_stop() -> bool:
            return self._clock() >= deadline

        if step.phase == "listing":
            try:
                job = self._engine.run_listing(source, job, self._connectors(source), should_stop=should_stop)
            except (ItemUnavailableError, ValueError) as exc:
                # The listing cannot go on (an unreadable bucket, a config the connector refuses).
                code = getattr(exc, "code", "SOURCE_CONFIG_INVALID")
                self._engine.fail(source, job, f"{code}: {exc}")
                return step.model_copy(update={"phase": "failed"})
            return step.model_copy(update={"phase": "finishing" if job.listing_complete else "listing"})
        _, done = self._engine.finish(source, job, should_stop=should_stop)
        return step.model_copy(update={"phase": "done" if done else "finishing"})

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
