"""The sources' adapters against moto's server: the sources table (sources, the one-sync claim,
sync jobs newest first with their staged file, item states by batch across BatchGetItem's 100-key
pages, the reconciler's links of idle sources) and the schedules
in EventBridge Scheduler (set, changed, cleared; the target starts the sync workflow)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import boto3
import pytest
from rag_ingest.adapters.source_item_links import SourceItemLinksTable
from rag_ingest.adapters.sources_table import ItemStatesView, SourcesTable, SyncJobsView
from rag_ingest.adapters.sync_schedules import SyncScheduler
from rag_ingest.core.errors import StaleWriteError
from rag_ingest.sources.model import ItemState, Source, StagedPage, SyncJob

from tests.support.aws import moto_server
from tests.support.operations import create_sources_table

pytestmark = pytest.mark.integration
NOW = "2026-12-07T08:00:00.000+00:00"


@pytest.fixture
def aws() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def table(aws: str) -> Iterator[SourcesTable]:
    # moto's backends live in this process: each test its own table.
    name = f"sources-{uuid.uuid4().hex[:8]}"
    create_sources_table(name)
    yield SourcesTable(name)


def source(source_id: str = "src_1", tenant: str = "acme") -> Source:
    return Source(
        tenant_id=tenant,
        source_id=source_id,
        kind="s3",
        name="docs",
        config={"bucket": "team-docs", "include": ["**/*.pdf"], "ratio": 0.5},
        created_at=NOW,
        updated_at=NOW,
    )


def test_sources_round_trip_and_one_sync_holds_the_claim(table: SourcesTable) -> None:
    table.create(source())
    table.create(source("src_2"))
    table.create(source("src_3", tenant="globex"))
    assert [s.source_id for s in table.list("acme")] == ["src_1", "src_2"]
    assert table.get("globex", "src_1") is None
    assert table.get("acme", "src_1") == source()  # a float in the config survives
    assert table.claim_sync("acme", "src_1", "sync_a")
    assert not table.claim_sync("acme", "src_1", "sync_b")
    renamed = source().model_copy(update={"name": "handbook", "updated_at": "2026-12-07T09:00:00.000+00:00"})
    table.replace(renamed, expected_updated_at=NOW)  # a PATCH keeps the running sync's claim
    stored = table.get("acme", "src_1")
    assert stored is not None and stored.name == "handbook" and stored.running_sync == "sync_a"
    with pytest.raises(StaleWriteError):
        table.replace(renamed, expected_updated_at=NOW)
    table.release_sync("acme", "src_1", "sync_b")  # not the running one: nothing changes
    assert table.get("acme", "src_1").running_sync == "sync_a"  # type: ignore[union-attr]
    table.release_sync("acme", "src_1", "sync_a")
    released = table.get("acme", "src_1")
    assert released is not None and released.running_sync is None and released.last_sync == "sync_a"
    assert table.claim_sync("acme", "src_1", "sync_c")
    assert not table.claim_sync("acme", "src_missing", "sync_d")


def test_sync_jobs_newest_first_and_item_states_in_batches(table: SourcesTable) -> None:
    jobs, items = SyncJobsView(table), ItemStatesView(table)
    for sync_id in ("sync_01A", "sync_01B", "sync_01C"):
        jobs.put(SyncJob(id=sync_id, source_id="src_1", tenant_id="acme", started_at=NOW, failed_unknown=2))
    assert [job.id for job in jobs.list("src_1", 2)] == ["sync_01C", "sync_01B"]
    assert jobs.get("src_1", "sync_01A").failed_unknown == 2  # type: ignore[union-attr]
    keys = [f"docs/{n:04d} ü ../x.pdf" for n in range(250)] + ["https://d.example/" + "p" * 1900]
    for key in keys:
        items.put(ItemState(source_id="src_1", key=key, uri=key, document_id="01J", change_token="t", seen_in="s"))
    found = items.get_many("src_1", [*keys, "not-there"])
    assert set(found) == set(keys)
    assert len(list(items.scan("src_1"))) == len(keys)
    items.delete("src_1", keys[0])
    assert keys[0] not in items.get_many("src_1", keys[:2])


def test_a_staged_job_keeps_its_file_and_the_reconciler_sees_links_of_idle_sources_only(
    table: SourcesTable,
) -> None:
    jobs, items = SyncJobsView(table), ItemStatesView(table)
    links = SourceItemLinksTable(table._name)
    staged = StagedPage(bucket="stack-bucket", key="sources/src_1/sync_01A/staged/000001.json")
    jobs.put(SyncJob(id="sync_01A", source_id="src_1", tenant_id="acme", started_at=NOW, staged=staged, staged_files=1))
    stored = jobs.get("src_1", "sync_01A")
    assert stored is not None and (stored.staged, stored.staged_files) == (staged, 1)
    assert "staged" not in stored.model_dump()  # internal: the API does not show it

    for tenant, source_id in (("acme", "src_1"), ("acme", "src_2"), ("globex", "src_3")):
        table.create(source(source_id, tenant))
        items.put(ItemState(source_id=source_id, key="a.pdf", uri="s3://b/a.pdf", document_id=f"doc-{source_id}"))
    items.put(ItemState(source_id="src_1", key="gone.pdf", uri="s3://b/gone.pdf", document_id="x", outcome="deleted"))
    items.put(ItemState(source_id="src_1", key="claimed.pdf", uri="s3://b/claimed.pdf"))  # no document yet
    assert table.claim_sync("acme", "src_2", "sync_b")  # syncing: its items are being written
    found = list(links.links(["acme", "globex"]))
    assert [(link.tenant_id, link.source_id, link.key, link.document_id) for link in found] == [
        ("acme", "src_1", "a.pdf", "doc-src_1"),
        ("globex", "src_3", "a.pdf", "doc-src_3"),
    ]
    links.unlink(found[0])
    assert "a.pdf" not in items.get_many("src_1", ["a.pdf"])


def test_schedules_are_set_changed_and_cleared_in_the_stacks_group(aws: str) -> None:
    client = boto3.client("scheduler")
    group = f"rag-source-syncs-{uuid.uuid4().hex[:8]}"
    client.create_schedule_group(Name=group)
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:source-sync"
    role = "arn:aws:iam::123456789012:role/scheduler"
    schedules = SyncScheduler(group, machine, role)
    schedules.set("acme", "src_1", "cron(0 3 * * ? *)")
    schedules.set("acme", "src_1", "rate(6 hours)")
    stored = client.get_schedule(GroupName=group, Name="src_1")
    assert stored["ScheduleExpression"] == "rate(6 hours)"
    assert stored["Target"]["Arn"] == machine and stored["Target"]["RoleArn"] == role
    assert json.loads(stored["Target"]["Input"]) == {"tenant_id": "acme", "source_id": "src_1", "phase": "start"}
    schedules.clear("acme", "src_1")
    schedules.clear("acme", "src_1")  # already gone: fine
    assert client.list_schedules(GroupName=group)["Schedules"] == []
