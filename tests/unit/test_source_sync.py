"""The sync engine over in-memory ports: what a sync guarantees (docs/sources.md)."""

from __future__ import annotations

from typing import Any

import pytest
from rag_ingest.core.access import DocumentAccess
from rag_ingest.sources.connector import ItemFailure
from rag_ingest.sources.model import ItemRequest, SourcePatch, SourceRequest
from rag_ingest.sources.runner import SyncStep
from rag_ingest.sources.sync import safe_filename

from tests.support.sources import TENANT, Crash, DictConnector, corpus
from tests.support.sources import SyncHarness as Harness

pytestmark = pytest.mark.unit


def test_first_sync_adds_every_item_with_its_origin_and_the_source_defaults() -> None:
    harness = Harness(DictConnector(corpus(7)))
    job = harness.sync()
    assert job.status == "COMPLETE" and job.listing_complete
    assert job.statistics.model_dump() == {
        "scanned": 7,
        "added": 7,
        "modified": 0,
        "unchanged": 0,
        "deleted": 0,
        "failed": 0,
    }
    assert harness.documents.runs() == 7
    document = next(iter(harness.documents.documents.values()))
    assert document.metadata == {"team": "hr"}
    assert document.origin["source_id"] == harness.source_id
    assert document.origin["source_uri"].startswith("test://doc-")
    assert document.key.startswith(f"raw/{TENANT}/01J")
    assert harness.source.running_sync is None and harness.source.last_sync == job.id


def test_a_resync_with_nothing_changed_touches_no_document() -> None:
    harness = Harness(DictConnector(corpus(7)))
    harness.sync()
    fetches = len(harness.connector.fetches)
    job = harness.sync()
    assert job.statistics.unchanged == 7 and job.statistics.scanned == 7
    assert job.statistics.added == job.statistics.modified == job.statistics.deleted == 0
    assert harness.documents.runs() == 7  # no new version, no pipeline run
    assert len(harness.connector.fetches) == fetches  # not even read


def test_changed_and_removed_items_are_exactly_the_ones_reingested_or_deleted() -> None:
    harness = Harness(DictConnector(corpus(10)))
    harness.sync()
    ids = {doc.origin["source_uri"]: doc_id for doc_id, doc in harness.documents.documents.items()}
    harness.connector.items["doc-003.pdf"] = b"changed"
    del harness.connector.items["doc-007.pdf"]
    job = harness.sync()
    assert (job.statistics.modified, job.statistics.deleted, job.statistics.unchanged) == (1, 1, 8)
    assert harness.documents.deleted == [ids["test://doc-007.pdf"]]
    changed = harness.documents.documents[ids["test://doc-003.pdf"]]
    assert changed.versions == [b"content 3", b"changed"]  # the same document, a new version
    assert harness.documents.runs() == 10


def test_a_truncated_listing_deletes_nothing() -> None:
    harness = Harness(DictConnector(corpus(9)))
    harness.sync()
    harness.connector.truncate_at = 4
    job = harness.sync()
    assert job.truncated and job.statistics.deleted == 0
    assert len(harness.documents.documents) == 9


def test_a_listing_that_fails_midway_deletes_nothing_and_frees_the_source() -> None:
    harness = Harness(DictConnector(corpus(9)))
    harness.sync()
    job = harness.service.start_sync(TENANT, harness.source_id)
    step = SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id)
    harness.runner.fail(step, "States.Timeout")
    failed = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert failed.status == "FAILED" and failed.error == "States.Timeout"
    assert len(harness.documents.documents) == 9 and harness.documents.deleted == []
    assert harness.source.running_sync is None


def test_a_crash_between_a_page_and_its_checkpoint_ingests_each_item_once() -> None:
    connector = DictConnector(corpus(8), page_size=3)
    harness = Harness(connector)
    job = harness.service.start_sync(TENANT, harness.source_id)
    original_save = harness.cursors.save
    calls = {"n": 0}

    def crash_on_second_checkpoint(source_id: str, sync_id: str, cursor: str | None) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise Crash("killed after the second page's items, before its checkpoint")
        original_save(source_id, sync_id, cursor)

    harness.cursors.save = crash_on_second_checkpoint  # type: ignore[method-assign]
    step = SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id)
    with pytest.raises(Crash):
        harness.runner.step(step)
    harness.cursors.save = original_save  # type: ignore[method-assign]
    while step.phase not in ("done", "failed"):
        step = harness.runner.step(step)
    done = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert done.status == "COMPLETE"
    assert harness.documents.runs() == 8  # each once, though page two was listed twice
    assert done.statistics.added == 8 and done.statistics.scanned == 8


def test_a_crash_between_the_object_write_and_the_item_state_writes_no_second_version() -> None:
    harness = Harness(DictConnector(corpus(2)))
    original_put = harness.items.put

    def crash_on_settle(state: Any) -> None:
        if state.outcome == "added" and state.key == "doc-001.pdf":
            raise Crash("killed after the object was written")
        original_put(state)

    harness.items.put = crash_on_settle  # type: ignore[method-assign]
    job = harness.service.start_sync(TENANT, harness.source_id)
    step = SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id)
    with pytest.raises(Crash):
        harness.runner.step(step)
    harness.items.put = original_put  # type: ignore[method-assign]
    while step.phase not in ("done", "failed"):
        step = harness.runner.step(step)
    assert harness.documents.runs() == 2
    assert len(harness.documents.documents) == 2


def test_a_failed_item_fails_only_itself_and_keeps_its_document() -> None:
    harness = Harness(DictConnector(corpus(5)))
    harness.sync()
    harness.connector.items["doc-002.pdf"] = b"new bytes"
    harness.connector.fail_keys = {"doc-002.pdf"}
    job = harness.sync()
    assert job.statistics.failed == 1 and job.statistics.unchanged == 4 and job.statistics.deleted == 0
    assert job.failures[0].item == "doc-002.pdf" and job.failures[0].code == "ITEM_UNREADABLE"
    assert len(harness.documents.documents) == 5
    harness.connector.fail_keys = set()
    retried = harness.sync()
    assert retried.statistics.modified == 1  # the next sync tries it again


def test_a_listing_failure_on_a_known_item_keeps_it() -> None:
    harness = Harness(DictConnector(corpus(3)))
    harness.sync()
    harness.connector.items.pop("doc-001.pdf")
    harness.connector.failures = (ItemFailure("doc-001.pdf", "test://doc-001.pdf", "HTTP_500", "server error"),)
    job = harness.sync()
    assert job.statistics.deleted == 0 and job.statistics.failed == 1
    assert len(harness.documents.documents) == 3


def test_a_gone_page_is_deleted_on_the_second_sync_in_a_row() -> None:
    harness = Harness(DictConnector(corpus(3)))
    harness.sync()
    harness.connector.items.pop("doc-002.pdf")
    harness.connector.gone = ("doc-002.pdf",)
    harness.connector.truncate_at = 2  # a crawl capped: unseen pages are not deleted, gone ones count
    first = harness.sync()
    assert first.statistics.deleted == 0 and len(harness.documents.documents) == 3
    second = harness.sync()
    assert second.statistics.deleted == 1 and len(harness.documents.documents) == 2


def test_one_sync_per_source_at_a_time() -> None:
    harness = Harness(DictConnector(corpus(1)))
    harness.service.start_sync(TENANT, harness.source_id)
    with pytest.raises(Exception, match="running") as refused:
        harness.service.start_sync(TENANT, harness.source_id)
    assert getattr(refused.value, "code", None) == "SYNC_IN_PROGRESS"


def test_another_tenants_source_is_not_found() -> None:
    harness = Harness(DictConnector(corpus(1)))
    with pytest.raises(LookupError):
        harness.service.get("other-tenant", harness.source_id)
    with pytest.raises(LookupError):
        harness.service.start_sync("other-tenant", harness.source_id)


def test_deleting_a_source_asks_about_its_documents() -> None:
    harness = Harness(DictConnector(corpus(4)))
    harness.sync()
    with pytest.raises(Exception, match="documents=delete") as refused:
        harness.service.delete(TENANT, harness.source_id, None)
    assert getattr(refused.value, "code", None) == "SOURCE_DELETE_MODE_REQUIRED"
    harness.service.delete(TENANT, harness.source_id, "delete")
    assert harness.documents.documents == {} and harness.items.states == {}


def test_custom_items_upsert_by_external_id_idempotently() -> None:
    harness = Harness(DictConnector({}), kind="custom")
    request = ItemRequest(filename="faq.md", text="# FAQ\nAnswers.", metadata={"lang": "en"})
    first = harness.service.put_item(TENANT, harness.source_id, "kb/42", request)
    again = harness.service.put_item(TENANT, harness.source_id, "kb/42", request)
    changed = harness.service.put_item(
        TENANT, harness.source_id, "kb/42", request.model_copy(update={"text": "# FAQ\nNew answers."})
    )
    assert (first.outcome, again.outcome, changed.outcome) == ("added", "unchanged", "modified")
    assert first.document_id == again.document_id == changed.document_id
    assert harness.documents.runs() == 2
    restricted = request.model_copy(update={"access": DocumentAccess(users=["ann"])})
    assert harness.service.put_item(TENANT, harness.source_id, "kb/42", restricted).outcome == "modified"
    harness.service.delete_item(TENANT, harness.source_id, "kb/42")
    assert harness.documents.deleted == [first.document_id]
    with pytest.raises(LookupError):
        harness.service.delete_item(TENANT, harness.source_id, "kb/42")
    readded = harness.service.put_item(TENANT, harness.source_id, "kb/42", request)
    assert readded.outcome == "added" and readded.document_id != first.document_id


def test_a_custom_source_is_not_listed_and_a_listed_one_takes_no_items() -> None:
    custom = Harness(DictConnector({}), kind="custom")
    with pytest.raises(Exception, match="not listed"):
        custom.service.start_sync(TENANT, custom.source_id)
    listed = Harness(DictConnector(corpus(1)))
    with pytest.raises(Exception, match="only a custom source"):
        listed.service.put_item(TENANT, listed.source_id, "x", ItemRequest(filename="a.txt", text="a"))


@pytest.mark.parametrize(
    ("name", "expected"),
    [("report.pdf", "report.pdf"), ("a/b\\c.pdf", "a_b_c.pdf"), ("..", "item"), ("x\x00y.txt", "x_y.txt")],
)
def test_item_filenames_are_safe_key_segments(name: str, expected: str) -> None:
    assert safe_filename(name) == expected


def test_a_schedule_follows_the_source_and_a_scheduled_start_opens_a_sync() -> None:
    harness = Harness(DictConnector(corpus(2)))
    view = harness.service.create(
        TENANT,
        SourceRequest(kind="s3", name="nightly", schedule="cron(0 3 * * ? *)"),  # type: ignore[arg-type]
    )
    assert harness.schedules.schedules == {(TENANT, view.id): "cron(0 3 * * ? *)"}
    harness.service.patch(TENANT, view.id, SourcePatch(schedule="rate(6 hours)"))
    assert harness.schedules.schedules == {(TENANT, view.id): "rate(6 hours)"}
    harness.service.patch(TENANT, view.id, SourcePatch(schedule=None))
    assert harness.schedules.schedules == {}
    # What the scheduler sends: the first step opens the sync, the next ones run it.
    step = harness.runner.step(SyncStep(tenant_id=TENANT, source_id=harness.source_id, phase="start"))
    assert step.phase == "listing" and step.sync_id is not None
    # A second scheduled start while that one runs is skipped, not queued behind it.
    skipped = harness.runner.step(SyncStep(tenant_id=TENANT, source_id=harness.source_id, phase="start"))
    assert skipped.phase == "done" and skipped.sync_id is None
    while step.phase not in ("done", "failed"):
        step = harness.runner.step(step)
    assert harness.service.get_sync(TENANT, harness.source_id, step.sync_id or "").statistics.added == 2
    gone = harness.runner.step(SyncStep(tenant_id=TENANT, source_id="src_missing", phase="start"))
    assert gone.phase == "done"
    harness.service.delete(TENANT, view.id, "keep")
    assert harness.schedules.schedules == {}


def test_a_bad_schedule_or_one_on_a_custom_source_is_refused() -> None:
    with pytest.raises(ValueError, match="rate"):
        SourceRequest(kind="s3", name="x", schedule="every day")  # type: ignore[arg-type]
    harness = Harness(DictConnector({}), kind="custom")
    with pytest.raises(Exception, match="no schedule"):
        harness.service.create(
            TENANT,
            SourceRequest(kind="custom", name="wiki", schedule="rate(1 day)"),  # type: ignore[arg-type]
        )
    assert [source.name for source in harness.sources.list(TENANT)] == ["docs"]


def test_a_listing_past_the_item_limit_stops_truncated_and_deletes_nothing() -> None:
    harness = Harness(DictConnector(corpus(9), page_size=3), max_items=4)
    job = harness.sync()
    assert job.status == "COMPLETE" and job.truncated
    assert job.error is not None and "SYNC_ITEM_LIMIT_REACHED" in job.error
    assert job.statistics.added == 6  # whole pages, then the limit
    del harness.connector.items["doc-000.pdf"]
    again = harness.sync()
    # The listing now reaches one item further; the removed one is kept, as the listing was cut short.
    assert again.truncated and again.statistics.deleted == 0 and again.statistics.added == 1
    assert len(harness.documents.documents) == 7


def test_syncs_per_hour_are_bounded() -> None:
    harness = Harness(DictConnector(corpus(1)))
    for _ in range(3):
        harness.sync()
    with pytest.raises(Exception, match="in the last hour") as refused:
        harness.service.start_sync(TENANT, harness.source_id)
    assert getattr(refused.value, "code", None) == "SYNC_RATE_LIMITED"
    assert getattr(refused.value, "status", None) == 429


class Starts:
    def __init__(self) -> None:
        self.started: list[tuple[str, dict[str, Any]]] = []

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]:
        self.started.append((name, payload))
        return f"arn:{name}", True


def test_a_sync_whose_execution_was_lost_is_started_again_from_its_checkpoint_then_failed() -> None:
    harness = Harness(DictConnector(corpus(7), page_size=3))
    starts = Starts()
    harness.runner._starter = starts
    job = harness.service.start_sync(TENANT, harness.source_id)
    step = harness.runner.step(SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id))
    # Its execution dies here. A recent save means alive; after a restart (0 s) it starts again.
    assert harness.runner.resume_lost(stale_after_seconds=3600) == {job.id: "alive"}
    assert harness.runner.resume_lost(stale_after_seconds=0) == {job.id: "restarted"}
    name, payload = starts.started[0]
    assert name == f"{job.id}-r1" and payload == {
        "tenant_id": TENANT,
        "source_id": harness.source_id,
        "sync_id": job.id,
        "phase": step.phase,
    }
    resumed = SyncStep.model_validate(payload)
    while resumed.phase not in ("done", "failed"):
        resumed = harness.runner.step(resumed)
    done = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert done.status == "COMPLETE" and done.statistics.added == 7 and harness.documents.runs() == 7
    assert harness.runner.resume_lost(stale_after_seconds=0) == {}  # released: nothing left to resume

    lost = harness.service.start_sync(TENANT, harness.source_id)
    for _ in range(5):
        assert harness.runner.resume_lost(stale_after_seconds=0) == {lost.id: "restarted"}
    assert harness.runner.resume_lost(stale_after_seconds=0) == {lost.id: "failed"}
    failed = harness.service.get_sync(TENANT, harness.source_id, lost.id)
    assert failed.status == "FAILED" and failed.error is not None and "SYNC_LOST" in failed.error
    assert harness.source.running_sync is None


def test_a_step_whose_budget_ends_inside_a_page_resumes_it_without_redoing_anything() -> None:
    harness = Harness(DictConnector(corpus(5), page_size=5))
    calls = {"n": 0}

    def stop_after_two_items() -> bool:
        calls["n"] += 1
        return calls["n"] > 2

    job = harness.service.start_sync(TENANT, harness.source_id)
    source = harness.source
    first = harness.engine.run_listing(source, job, harness.connector, should_stop=stop_after_two_items)
    assert not first.listing_complete and first.statistics.added == 2
    assert harness.cursors.load(harness.source_id, job.id) is None  # the page is not checkpointed
    second = harness.engine.run_listing(source, first, harness.connector, should_stop=lambda: False)
    assert second.listing_complete and second.statistics.added == 5
    assert harness.documents.runs() == 5


def test_an_item_claimed_before_a_crash_counts_as_added_when_settled() -> None:
    harness = Harness(DictConnector(corpus(1)))
    original_put = harness.documents.put_bytes

    def crash(key: str, body: bytes, change_token: str) -> None:
        raise Crash("killed after the claim, before the write")

    harness.documents.put_bytes = crash  # type: ignore[method-assign]
    job = harness.service.start_sync(TENANT, harness.source_id)
    with pytest.raises(Crash):
        harness.runner.step(SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id))
    harness.documents.put_bytes = original_put  # type: ignore[method-assign]
    step = SyncStep(tenant_id=TENANT, source_id=harness.source_id, sync_id=job.id)
    while step.phase not in ("done", "failed"):
        step = harness.runner.step(step)
    done = harness.service.get_sync(TENANT, harness.source_id, job.id)
    assert (done.statistics.added, done.statistics.modified) == (1, 0)


def test_a_null_name_in_a_patch_leaves_the_name() -> None:
    # A make fuzz finding (docs/fuzzing.md): {"name": null} was stored, and every later read was a 500.
    harness = Harness(DictConnector(corpus(1)))
    before = harness.service.get(TENANT, harness.source_id)
    patched = harness.service.patch(TENANT, harness.source_id, SourcePatch.model_validate({"name": None}))
    assert patched.name == before.name
    assert [source.name for source in harness.service.list(TENANT).sources] == [before.name]
