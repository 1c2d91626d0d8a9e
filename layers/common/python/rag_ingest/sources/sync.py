"""A sync: one pass of a connector's listing turned into added, modified, unchanged, failed and
deleted documents, resumable from its checkpoint at any point.

``run_listing`` takes pages until the listing ends or the caller's budget does, checkpointing the
cursor after each page. An item's state is written after its document, and an item this sync already
settled is skipped, so a page taken twice (a crash before its checkpoint) changes and counts nothing
twice. ``finish`` deletes what a complete, untruncated listing did not name, then counts the sync
from the item states. docs/sources.md, "What a sync guarantees". May import core and this package.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from rag_ingest.core.clock import utc_now
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.logs import logger
from rag_ingest.core.metadata import MetadataError, validate_metadata
from rag_ingest.core.s3_keys import upload_key
from rag_ingest.sources.buckets import ServerSideCopy
from rag_ingest.sources.connector import (
    Connector,
    ItemFailure,
    ItemUnavailableError,
    KnownItem,
    KnownLookup,
    ListingPage,
    SourceItem,
)
from rag_ingest.sources.fan_out import MAX_FAILURES_REPORTED, BatchResult, batches, gathered
from rag_ingest.sources.model import (
    MAX_FAILURES_KEPT,
    ItemOutcome,
    ItemState,
    Source,
    StagedPage,
    SyncFailure,
    SyncJob,
    SyncStatistics,
    merged_metadata,
)
from rag_ingest.sources.ports import (
    DocumentRemover,
    ItemStates,
    SourceDocuments,
    SourceStore,
    StagedPages,
    SyncCursors,
    SyncJobs,
)

#: Items one sync lists at most, unless the stack sets another bound (sources.maxItemsPerSync).
DEFAULT_MAX_ITEMS = 1_000_000
_LIMIT = "SYNC_ITEM_LIMIT_REACHED: the listing stopped at the source's item limit; nothing was deleted"
#: Items a child of the workflow's Map applies, and batches a staged file holds at most (the Map's
#: output under 256 KiB, few rounds of the loop: docs/decisions/sync-at-scale.md).
DEFAULT_BATCH_ITEMS = 100
MAX_BATCHES_PER_FILE = 100
#: A page (404/410) seen gone on this many syncs in a row is deleted.
MISSES_BEFORE_DELETE = 2
CHANGE_TOKEN_METADATA = "rag-ingest-change-token"
_UNSAFE_FILENAME = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]')
MAX_FILENAME_CHARS = 200


def safe_filename(name: str) -> str:
    """An item's filename as the last segment of an upload key: no separators or control characters."""
    cleaned = _UNSAFE_FILENAME.sub("_", name).strip(" .") or "item"
    return cleaned[-MAX_FILENAME_CHARS:]


def content_token(body: bytes, *extra: str) -> str:
    """A change token from content (custom items, crawled pages): equal bytes, equal token."""
    digest = hashlib.sha256(body)
    for part in extra:
        digest.update(b"\0" + part.encode())
    return "sha256:" + digest.hexdigest()


class SyncEngine:
    def __init__(
        self,
        *,
        sources: SourceStore,
        jobs: SyncJobs,
        cursors: SyncCursors,
        items: ItemStates,
        documents: SourceDocuments,
        remover: DocumentRemover,
        raw_prefix: str,
        max_items: int = DEFAULT_MAX_ITEMS,
        new_id: Callable[[], str] = new_document_id,
        staged_pages: StagedPages | None = None,
        batch_items: int = DEFAULT_BATCH_ITEMS,
        staged_items: int | None = None,
    ) -> None:
        self._sources = sources
        self._jobs = jobs
        self._cursors = cursors
        self._items = items
        self._documents = documents
        self._remover = remover
        self._raw_prefix = raw_prefix
        self._new_id = new_id
        self._max_items = max_items
        self._staged_pages = staged_pages
        self._batch_items = batch_items
        self._staged_items = staged_items or batch_items * MAX_BATCHES_PER_FILE

    def open_sync(self, source: Source, sync_id: str) -> SyncJob | None:
        """Claim the source for a new sync and record its job; None when another sync runs."""
        if not self._sources.claim_sync(source.tenant_id, source.source_id, sync_id):
            return None
        job = SyncJob(id=sync_id, source_id=source.source_id, tenant_id=source.tenant_id, started_at=utc_now())
        self._jobs.put(job)
        return job

    # -- the listing ----------------------------------------------------------------------------
    def run_listing(
        self, source: Source, job: SyncJob, connector: Connector, *, should_stop: Callable[[], bool]
    ) -> SyncJob:
        """Pages from the checkpoint on, until the listing ends or ``should_stop()``; the job as saved."""
        if job.listing_complete:
            return job
        cursor = self._cursors.load(source.source_id, job.id)
        known = self._known_lookup(source)
        while True:
            page = connector.list_page(cursor, known)
            delta, failures, whole = self._apply_items(source, job.id, connector, page.items, should_stop)
            if not whole:
                # The budget ended inside the page: its cursor is not saved, so the next step lists
                # the page again and skips what this one settled.
                stats = job.statistics.plus(delta)
                job = job.model_copy(
                    update={"statistics": stats, "failures": (job.failures + failures)[:MAX_FAILURES_KEPT]}
                )
                self._save(job)
                return job
            failures = (job.failures + failures)[:MAX_FAILURES_KEPT]
            job = job.model_copy(update={"statistics": job.statistics.plus(delta), "failures": failures})
            job = self._page_listed(source, job, page)
            if job.listing_complete:
                self._save(job)
                return job
            assert page.cursor is not None
            self._cursors.save(source.source_id, job.id, page.cursor)
            self._save(job)
            if should_stop():
                return job
            cursor = page.cursor

    def _known_lookup(self, source: Source) -> KnownLookup:
        def known(key: str) -> KnownItem | None:
            state = self._items.get_many(source.source_id, [key]).get(key)
            if state is None or not state.has_document:
                return None
            return KnownItem(change_token=state.change_token, validators=state.validators)

        return known

    def _page_listed(self, source: Source, job: SyncJob, page: ListingPage, staged: int = 0) -> SyncJob:
        """A page's gone pages and failures applied and counted; the listing complete at its end,
        or at the item cap (``staged`` items listed but not applied yet count toward it)."""
        delta = self._apply_gone(source, job, page.gone)
        unknown = self._apply_failures(source, job, page.failures)
        job = job.model_copy(
            update={
                "listed": job.listed + len(page.items) + len(page.failures),
                "statistics": job.statistics.plus(delta.plus(SyncStatistics(failed=len(page.failures)))),
                "failed_unknown": job.failed_unknown + unknown,
                "failures": (job.failures + [_failure(failure) for failure in page.failures])[:MAX_FAILURES_KEPT],
                "listing_complete": page.cursor is None,
                "truncated": job.truncated or page.truncated,
            }
        )
        if page.cursor is not None and job.statistics.scanned + staged >= self._max_items:
            # The cap ends the listing: truncated, so what it did not reach is not deleted.
            job = job.model_copy(update={"listing_complete": True, "truncated": True, "error": _LIMIT})
        return job

    # -- the listing, fanned out to the workflow's Distributed Map --------------------------------
    def stage_listing(
        self, source: Source, job: SyncJob, connector: Connector, *, should_stop: Callable[[], bool]
    ) -> SyncJob:
        """Pages from the checkpoint on, up to ``staged_items`` items or the budget, their items
        written as one file of batches for the workflow's Map (``job.staged``); the job as saved.
        The job is saved with its file before the cursor moves past the file's pages: a crash
        between the two lists them again, and the Map skips what it already settled."""
        if job.listing_complete or job.staged is not None:
            return job
        if self._staged_pages is None:
            raise RuntimeError("this engine stages no pages")
        cursor = self._cursors.load(source.source_id, job.id)
        known = self._known_lookup(source)
        items: list[SourceItem] = []
        while True:
            page = connector.list_page(cursor, known)
            items += page.items
            job = self._page_listed(source, job, page, staged=len(items))
            cursor = page.cursor
            if job.listing_complete or len(items) >= self._staged_items or should_stop():
                break
        if items:
            number = job.staged_files + 1
            files = batches(source.tenant_id, source.source_id, job.id, items, self._batch_items)
            staged = self._staged_pages.write(source.source_id, job.id, number, files)
            job = job.model_copy(update={"staged": staged, "staged_files": number})
        self._save(job)
        if not job.listing_complete and cursor is not None:
            self._cursors.save(source.source_id, job.id, cursor)
        return job

    def apply_batch(self, source: Source, sync_id: str, items: list[SourceItem], connector: Connector) -> BatchResult:
        """One child of the Map: its batch of staged items, each settled once per sync."""
        statistics, failures, _ = self._apply_items(source, sync_id, connector, items, lambda: False)
        return BatchResult(statistics=statistics, failures=failures[:MAX_FAILURES_REPORTED])

    def staged_applied(self, job: SyncJob, staged: StagedPage, results: list[dict[str, Any]]) -> SyncJob:
        """The Map's output counted into the job, its file done (a repeated call counts nothing)."""
        if job.staged != staged:
            return job
        statistics, failures = gathered(results, MAX_FAILURES_KEPT)
        job = job.model_copy(
            update={
                "statistics": job.statistics.plus(statistics),
                "failures": (job.failures + failures)[:MAX_FAILURES_KEPT],
                "staged": None,
            }
        )
        self._save(job)
        return job

    def _save(self, job: SyncJob) -> None:
        self._jobs.put(job.model_copy(update={"updated_at": utc_now()}))

    def _apply_items(
        self,
        source: Source,
        sync_id: str,
        connector: Connector,
        items: Iterable[SourceItem],
        should_stop: Callable[[], bool],
    ) -> tuple[SyncStatistics, list[SyncFailure], bool]:
        """The page's items; False when the budget ended before the last one."""
        items = list(items)
        states = self._items.get_many(source.source_id, [item.key for item in items]) if items else {}
        counts: dict[str, int] = {}
        failures: list[SyncFailure] = []
        whole = True
        for item in items:
            if should_stop():
                whole = False
                break
            state = states.get(item.key)
            if state is not None and state.seen_in == sync_id and state.outcome != "failed":
                continue  # settled by this sync before a restart
            outcome, failure = self.apply_item(source, sync_id, item, state, connector)
            counts[outcome] = counts.get(outcome, 0) + 1
            if failure is not None:
                failures.append(failure)
        return SyncStatistics(scanned=sum(counts.values()), **counts), failures, whole

    def apply_item(
        self, source: Source, sync_id: str, item: SourceItem, state: ItemState | None, connector: Connector | None
    ) -> tuple[ItemOutcome, SyncFailure | None]:
        """One item: unchanged costs one state write; new or changed becomes a document version."""
        if state is not None and state.has_document and state.change_token == item.change_token:
            self._items.put(_settled(state, item, sync_id, "unchanged"))
            return "unchanged", None
        document_id = state.document_id if state is not None and state.has_document else None
        # Claimed before a crash but never settled: still the item's first version.
        first = state is None or not state.has_document or state.change_token == ""
        if document_id is None:
            # The id is claimed before anything refers to it, so a restart reuses it.
            document_id = self._new_id()
            claimed = ItemState(source_id=source.source_id, key=item.key, uri=item.uri, document_id=document_id)
            self._items.put(claimed)
            state = claimed
        outcome: ItemOutcome = "added" if first else "modified"
        try:
            self._write_document(source, document_id, item, connector)
        except (ItemUnavailableError, PermanentError, MetadataError) as exc:
            code = exc.code.value if isinstance(exc, PermanentError) else getattr(exc, "code", "INVALID_METADATA")
            assert state is not None
            failed = state.model_copy(update={"seen_in": sync_id, "outcome": "failed"})
            self._items.put(failed)
            logger.warning("source item failed", extra={"item": item.key, "error_code": str(code)})
            return "failed", SyncFailure(item=item.key, uri=item.uri, code=str(code), reason=str(exc))
        assert state is not None
        self._items.put(_settled(state.model_copy(update={"document_id": document_id}), item, sync_id, outcome))
        return outcome, None

    def _write_document(self, source: Source, document_id: str, item: SourceItem, connector: Connector | None) -> None:
        metadata = validate_metadata(merged_metadata(source.metadata, item.metadata))
        filename = safe_filename(item.filename)
        key = upload_key(source.tenant_id, document_id, filename, self._raw_prefix)
        self._documents.upsert_record(
            tenant_id=source.tenant_id,
            document_id=document_id,
            filename=filename,
            key=key,
            metadata=metadata,
            access=item.access or source.access,
            origin={"source_id": source.source_id, "source_uri": item.uri, "change_token": item.change_token},
        )
        if self._documents.stored_token(key) == item.change_token:
            return  # written before a restart: the same version again would be a second run
        if item.content is None and isinstance(connector, ServerSideCopy):
            metadata_out = {CHANGE_TOKEN_METADATA: item.change_token}
            connector.copy_into(item, self._documents.bucket(), key, metadata_out)
            return
        if item.content is not None:
            body = item.content
        elif connector is not None:
            body = connector.fetch(item)
        else:
            raise PermanentError(ErrorCode.INVALID_REQUEST, f"item {item.key} has no content")
        self._documents.put_bytes(key, body, item.change_token)

    def _apply_gone(self, source: Source, job: SyncJob, keys: Iterable[str]) -> SyncStatistics:
        keys = list(keys)
        if not keys:
            return SyncStatistics()
        deleted = scanned = 0
        for state in self._items.get_many(source.source_id, keys).values():
            if state.seen_in == job.id or not state.has_document:
                continue
            scanned += 1
            misses = state.misses + 1
            if misses >= MISSES_BEFORE_DELETE:
                self.remove(source, state, job.id)
                deleted += 1
            else:
                self._items.put(state.model_copy(update={"misses": misses, "seen_in": job.id, "outcome": None}))
        return SyncStatistics(scanned=scanned, deleted=deleted)

    def _apply_failures(self, source: Source, job: SyncJob, failures: Iterable[ItemFailure]) -> int:
        """Items the connector could not read: a known one keeps its document (it is not gone);
        returns how many had no state to record the failure on."""
        failures = list(failures)
        if not failures:
            return 0
        states = self._items.get_many(source.source_id, [failure.key for failure in failures])
        for failure in failures:
            state = states.get(failure.key)
            if state is not None and state.seen_in != job.id:
                self._items.put(state.model_copy(update={"seen_in": job.id, "outcome": "failed"}))
        return sum(1 for failure in failures if failure.key not in states)

    def remove(self, source: Source, state: ItemState, sync_id: str) -> None:
        """Delete an item's document; its state stays as a tombstone of this sync until the next one."""
        if state.document_id is not None:
            # Already gone is fine: DocumentNotFoundError is a LookupError.
            with contextlib.suppress(LookupError):
                self._remover.delete(source.tenant_id, state.document_id)
        tombstone = state.model_copy(update={"seen_in": sync_id, "outcome": "deleted", "misses": 0})
        self._items.put(tombstone)

    # -- the end ----------------------------------------------------------------------------------
    def finish(self, source: Source, job: SyncJob, *, should_stop: Callable[[], bool]) -> tuple[SyncJob, bool]:
        """Deletions (only after a complete, untruncated listing), then the exact statistics and
        COMPLETE. False: the budget ended first; call again, it goes on where it stopped."""
        may_delete = job.listing_complete and not job.truncated
        self._save(job)  # the deletions may take a while: the sync is alive
        counts: dict[str, int] = {}
        for state in self._items.scan(source.source_id):
            if state.seen_in != job.id:
                if state.outcome == "deleted":
                    self._items.delete(source.source_id, state.key)  # a tombstone of an earlier sync
                    continue
                if not may_delete:
                    continue
                self.remove(source, state, job.id)
                if should_stop():
                    return job, False
                state = state.model_copy(update={"outcome": "deleted"})
            counts[state.outcome or "scanned"] = counts.get(state.outcome or "scanned", 0) + 1
        statistics = SyncStatistics(
            scanned=sum(count for outcome, count in counts.items() if outcome != "deleted"),
            added=counts.get("added", 0),
            modified=counts.get("modified", 0),
            unchanged=counts.get("unchanged", 0),
            deleted=counts.get("deleted", 0),
            failed=counts.get("failed", 0) + job.failed_unknown,
        )
        done = job.model_copy(
            update={"status": "COMPLETE", "ended_at": utc_now(), "statistics": statistics, "listed": statistics.scanned}
        )
        self._jobs.put(done)
        self._sources.release_sync(source.tenant_id, source.source_id, job.id)
        logger.info("sync complete", extra={"source_id": source.source_id, **statistics.model_dump()})
        return done, True

    def fail(self, source: Source, job: SyncJob, error: str) -> SyncJob:
        """The listing could not go on: FAILED, nothing deleted, the source free for the next sync."""
        failed = job.model_copy(update={"status": "FAILED", "ended_at": utc_now(), "error": error[:1000]})
        self._jobs.put(failed)
        self._sources.release_sync(source.tenant_id, source.source_id, job.id)
        logger.warning("sync failed", extra={"source_id": source.source_id, "reason": error[:300]})
        return failed


def _settled(state: ItemState, item: SourceItem, sync_id: str, outcome: ItemOutcome) -> ItemState:
    return state.model_copy(
        update={
            "uri": item.uri,
            "change_token": item.change_token,
            "validators": dict(item.validators),
            "seen_in": sync_id,
            "outcome": outcome,
            "misses": 0,
        }
    )


def _failure(failure: ItemFailure) -> SyncFailure:
    return SyncFailure(item=failure.key, uri=failure.uri, code=failure.code, reason=failure.reason)
