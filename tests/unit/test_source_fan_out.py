"""A sync whose items are copied server-side fans out to the workflow's Distributed Map: the steps
stage listed items in files of batches, the Map's children apply them, and the sync guarantees
stay what they are without it (docs/sources.md, docs/decisions/sync-at-scale.md)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from rag_ingest.core.access import DocumentAccess
from rag_ingest.sources.connector import SourceItem
from rag_ingest.sources.fan_out import ItemBatch, item_from_json, item_json
from rag_ingest.sources.runner import SyncStep

from tests.support.sources import TENANT, CopyingDictConnector, Crash, DictConnector, SyncHarness, corpus

pytestmark = pytest.mark.unit


class FannedOut(SyncHarness):
    connector: CopyingDictConnector


def fanned_out(
    count: int, page_size: int = 3, *, batch_items: int = 2, staged_items: int = 4, max_items: int = 1_000_000
) -> FannedOut:
    harness = FannedOut(
        DictConnector({}), max_items=max_items, fan_out=True, batch_items=batch_items, staged_items=staged_items
    )
    harness.connector = CopyingDictConnector(corpus(count), harness.documents, page_size=page_size)
    return harness


def test_items_are_staged_in_files_of_batches_and_applied_by_the_map() -> None:
    harness = fanned_out(11, page_size=3, batch_items=2, staged_items=4)
    job = harness.sync()
    assert job.status == "COMPLETE" and job.statistics.added == 11 and job.statistics.scanned == 11
    assert harness.documents.runs() == 11 and sorted(harness.connector.copies) == sorted(corpus(11))
    # Pages of 3 until 4 items are staged: files of 6, 5 items; batches of at most 2.
    sizes = [[len(batch["items"]) for batch in batches] for batches in harness.staged.files.values()]
    assert sizes == [[2, 2, 2], [2, 2, 1]]
    assert job.listed == 11
    assert all(batch["sync_id"] == job.id for batches in harness.staged.files.values() for batch in batches)


def test_a_resync_fanned_out_touches_only_what_changed() -> None:
    harness = fanned_out(20)
    harness.sync()
    copies = len(harness.connector.copies)
    unchanged = harness.sync()
    assert unchanged.statistics.unchanged == 20 and harness.documents.runs() == 20
    assert len(harness.connector.copies) == copies
    ids = {doc.origin["source_uri"]: doc_id for doc_id, doc in harness.documents.documents.items()}
    harness.connector.items["doc-004.pdf"] = b"changed"
    del harness.connector.items["doc-011.pdf"]
    job = harness.sync()
    counts = job.statistics
    assert (counts.modified, counts.deleted, counts.unchanged, counts.added) == (1, 1, 18, 0)
    assert harness.documents.deleted == [ids["test://doc-011.pdf"]]
    assert harness.documents.documents[ids["test://doc-004.pdf"]].versions[-1] == b"changed"


def test_a_restart_after_staging_runs_the_same_file_again_and_ingests_each_item_once() -> None:
    harness = fanned_out(7, batch_items=2, staged_items=100)
    job = harness.service.start_sync(TENANT, harness.source_id)
    staged = harness.runner.step(SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id))
    assert staged.phase == "applying" and staged.staged is not None
    # Progress while the Map runs: listed, not yet counted.
    progress = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert (progress.listed, progress.statistics.scanned) == (7, 0)
    first, *_ = harness.staged.files[staged.staged.key]
    harness.runner.apply_batch(ItemBatch.model_validate(first))  # the execution dies mid-Map
    resumed = SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id, phase="listing")
    again = harness.runner.step(resumed)
    assert again.phase == "applying" and again.staged == staged.staged  # the Map first, nothing relisted
    harness.run(again)
    done = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert done.status == "COMPLETE" and done.statistics.added == 7
    assert harness.documents.runs() == 7 and len(harness.connector.copies) == 7


def test_a_crash_between_the_staged_job_and_its_cursor_relists_without_a_second_version() -> None:
    harness = fanned_out(9, page_size=3, batch_items=3, staged_items=3)
    original = harness.cursors.save

    def crash(source_id: str, sync_id: str, cursor: str | None) -> None:
        raise Crash("killed after the job was saved with its file, before the cursor")

    job = harness.service.start_sync(TENANT, harness.source_id)
    harness.cursors.save = crash  # type: ignore[method-assign]
    step = SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id)
    with pytest.raises(Crash):
        harness.runner.step(step)
    harness.cursors.save = original  # type: ignore[method-assign]
    harness.run(step)
    done = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert done.status == "COMPLETE" and done.statistics.added == 9 and done.statistics.scanned == 9
    assert harness.documents.runs() == 9  # the first page was staged twice, copied once


def test_a_failed_item_in_a_batch_fails_only_itself_and_is_reported() -> None:
    harness = fanned_out(6, batch_items=2)
    harness.connector.fail_keys = {"doc-002.pdf"}
    job = harness.sync()
    assert job.status == "COMPLETE" and (job.statistics.added, job.statistics.failed) == (5, 1)
    assert [(f.item, f.code) for f in job.failures] == [("doc-002.pdf", "ITEM_UNREADABLE")]


def test_the_maps_output_counted_twice_counts_once() -> None:
    harness = fanned_out(4, batch_items=2, staged_items=100)
    job = harness.service.start_sync(TENANT, harness.source_id)
    staged = harness.runner.step(SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id))
    assert staged.staged is not None
    applied = staged.model_copy(update={"applied": harness.apply(staged.staged)})
    harness.runner.step(applied)
    harness.runner.step(applied)  # a retried step after its first attempt succeeded
    current = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert current.statistics.added == 4


def test_the_item_limit_counts_staged_items() -> None:
    harness = fanned_out(9, page_size=3, max_items=4)
    job = harness.sync()
    assert job.truncated and job.error is not None and "SYNC_ITEM_LIMIT_REACHED" in job.error
    assert job.statistics.added == 6 and job.statistics.deleted == 0


def test_an_item_survives_the_staged_file_whole_and_one_with_its_bytes_is_not_staged() -> None:
    item = SourceItem(
        key="a b/ü.pdf",
        change_token="v:3",
        uri="s3://bucket/a b/ü.pdf",
        filename="ü.pdf",
        size_bytes=12,
        validators={"version_id": "3", "etag": '"e"'},
        metadata={"team": "hr", "year": 2024},
        access=DocumentAccess(users=["ana"], groups=["hr"]),
    )
    assert item_from_json(json.loads(json.dumps(item_json(item)))) == item
    with pytest.raises(ValueError, match="applied where it was read"):
        item_json(replace(item, content=b"%PDF"))
