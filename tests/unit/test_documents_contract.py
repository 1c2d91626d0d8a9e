"""The documents repository's contract, run against both implementations: the in-memory fake the
unit tests use (marker ``unit``) and DocumentsTable on moto's DynamoDB (marker ``integration``).

A fake that accepted a write the table refuses would let a unit test pass on behaviour the system
does not have; these tests keep the two in step.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.core.errors import ErrorCode, StaleWriteError
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import Lane, ObjectRef, Stage
from rag_ingest.core.record import DocumentStatus, QueueOutcome

from tests.support.aws import moto_server
from tests.support.fakes import InMemoryDocuments
from tests.support.operations import create_documents_table

Documents = InMemoryDocuments | DocumentsTable


@pytest.fixture(scope="module")
def moto_documents_table() -> Iterator[str]:
    with moto_server():
        name = f"documents-{uuid.uuid4().hex[:6]}"
        create_documents_table(name)
        yield name


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.unit),
        pytest.param("dynamodb", marks=pytest.mark.integration),
    ]
)
def documents(request: pytest.FixtureRequest) -> Documents:
    if request.param == "memory":
        return InMemoryDocuments()
    return DocumentsTable(request.getfixturevalue("moto_documents_table"))


def ref(version: str, document_id: str) -> ObjectRef:
    return ObjectRef(bucket="bucket", key=f"raw/acme/{document_id}/a.pdf", version=version)


def queued(documents: Documents, version: str = "v1", *, event_time: str = "t1", tenant: str = "acme") -> str:
    document_id = new_document_id()
    result = documents.mark_queued(
        document_id=document_id, tenant_id=tenant, ref=ref(version, document_id), event_time=event_time, size_bytes=9
    )
    assert result.outcome is QueueOutcome.QUEUED
    return document_id


def test_queueing_explains_every_refusal(documents: Documents) -> None:
    document_id = new_document_id()
    documents.create_awaiting_upload(document_id=document_id, tenant_id="acme", filename="a.pdf", bucket="b", key="k")

    def queue(version: str, event_time: str, tenant: str = "acme") -> QueueOutcome:
        result = documents.mark_queued(
            document_id=document_id,
            tenant_id=tenant,
            ref=ref(version, document_id),
            event_time=event_time,
            size_bytes=1,
        )
        return result.outcome

    assert queue("v1", "t1") is QueueOutcome.QUEUED
    assert queue("v1", "t1") is QueueOutcome.RESUME
    documents.start_stage(document_id, "v1", Stage.PARSE)
    assert queue("v1", "t1") is QueueOutcome.DUPLICATE
    assert queue("v9", "t9", tenant="evil") is QueueOutcome.REJECTED
    assert queue("v2", "t2") is QueueOutcome.QUEUED
    assert queue("v0", "t0") is QueueOutcome.REJECTED  # an older event after a newer one
    record = documents.get(document_id)
    assert record is not None and (record.version, record.filename, record.attempts) == ("v2", "a.pdf", {})


def test_workflow_writes_apply_only_to_the_version_in_flight(documents: Documents) -> None:
    document_id = queued(documents)
    documents.start_stage(document_id, "v1", Stage.EMBED)
    documents.record_embed_plan(document_id, "v1", 5)
    documents.record_embedded_part(document_id, "v1", 0, 4)
    documents.record_embedded_part(document_id, "v1", 0, 4)  # a retried task counts once
    documents.record_stage(document_id, "v1", Stage.EMBED, 7, accumulate=True)
    documents.record_stage(document_id, "v1", Stage.EMBED, 5, accumulate=True, chunk_count=5)
    record = documents.get(document_id)
    assert record is not None and record.progress is not None
    assert (record.progress.done, record.progress.total) == (4, 5)
    assert (record.timings_ms, record.chunk_count, record.attempts) == ({"EMBED": 12}, 5, {"EMBED": 1})

    for write in (
        lambda: documents.start_stage(document_id, "v0", Stage.INDEX),
        lambda: documents.confirm_current(document_id, "v0"),
        lambda: documents.mark_failed(document_id, "v0", ErrorCode.INTERNAL_ERROR, "late"),
    ):
        with pytest.raises(StaleWriteError):
            write()
    documents.mark_ready(document_id, "v1")
    with pytest.raises(StaleWriteError):  # READY is terminal for this version
        documents.mark_failed(document_id, "v1", ErrorCode.INTERNAL_ERROR, "late")
    documents.set_execution(document_id, "v1", "arn:execution")  # allowed after READY
    with pytest.raises(StaleWriteError):
        documents.start_stage(new_document_id(), "v1", Stage.VALIDATE)  # no such document


def test_operator_writes_apply_only_to_the_record_as_read(documents: Documents) -> None:
    document_id = queued(documents)
    documents.start_stage(document_id, "v1", Stage.PARSE)
    documents.mark_failed(document_id, "v1", ErrorCode.TIMEOUT, "slow")
    failed = documents.get(document_id)
    assert failed is not None and failed.status is DocumentStatus.FAILED

    requeued = documents.requeue_for_replay(failed, execution_arn="arn:replay-1")
    assert (requeued.status, requeued.replays) == (DocumentStatus.QUEUED, 1)
    with pytest.raises(StaleWriteError):  # a second replay of the same failure loses
        documents.requeue_for_replay(failed, execution_arn="arn:replay-1b")
    current = documents.get(document_id)
    assert current is not None and (current.replays, current.error_code, current.execution_arn) == (
        1,
        None,
        "arn:replay-1",
    )
    assert current in list(documents.list_by_status(DocumentStatus.QUEUED, updated_before="9999"))

    documents.mark_stuck(current, "stuck for an hour")
    with pytest.raises(StaleWriteError):
        documents.mark_stuck(current, "again, on a stale read")
    stuck = documents.get(document_id)
    assert stuck is not None and (stuck.status, stuck.error_code) == (DocumentStatus.FAILED, ErrorCode.STUCK)


def test_expiry_and_deletion(documents: Documents) -> None:
    document_id = new_document_id()
    awaiting = documents.create_awaiting_upload(
        document_id=document_id, tenant_id="acme", filename="a.pdf", bucket="b", key="k"
    )
    documents.mark_expired(awaiting, "never uploaded")
    with pytest.raises(StaleWriteError):
        documents.mark_expired(awaiting, "twice")
    expired = documents.get(document_id)
    assert expired is not None and expired.status is DocumentStatus.EXPIRED

    assert documents.mark_deleting(document_id, "evil") is None  # another tenant's: like a missing one
    assert documents.mark_deleting(new_document_id(), "acme") is None
    deleting = documents.mark_deleting(document_id, "acme")
    assert deleting is not None and deleting.status is DocumentStatus.DELETING
    documents.mark_deleted(document_id)
    with pytest.raises(StaleWriteError):
        documents.mark_deleted(document_id)
    again = documents.mark_deleting(document_id, "acme")
    assert again is not None and again.status is DocumentStatus.DELETED


def test_listing_a_tenant_pages_newest_first_without_deleted(documents: Documents) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    ids = [queued(documents, tenant=tenant) for _ in range(3)]
    gone = queued(documents, tenant=tenant)
    documents.mark_deleting(gone, tenant)
    documents.mark_deleted(gone)
    first, cursor = documents.list_by_tenant(tenant, limit=2)
    assert cursor is not None
    rest, end = documents.list_by_tenant(tenant, limit=2, start_key=cursor)
    listed = [record.document_id for record in [*first, *rest]]
    assert end is None and sorted(listed) == sorted(ids) and gone not in listed
    created = [record.created_at for record in [*first, *rest]]
    assert created == sorted(created, reverse=True)


def test_embed_cache_counts_add_up_per_task_and_a_retry_counts_once(documents: Documents) -> None:
    document_id = queued(documents)
    documents.start_stage(document_id, "v1", Stage.EMBED)
    documents.record_embed_plan(document_id, "v1", 10)
    documents.record_embedded_part(document_id, "v1", 0, 6, cache_hits=4, cache_misses=2)
    documents.record_embedded_part(document_id, "v1", 0, 6, cache_hits=4, cache_misses=2)  # a retried task
    documents.record_embedded_part(document_id, "v1", 1, 4, cache_hits=0, cache_misses=4)
    record = documents.get(document_id)
    assert record is not None and record.embedding_cache is not None
    assert (record.embedding_cache.hits, record.embedding_cache.misses) == (4, 6)
    with pytest.raises(StaleWriteError):
        documents.record_embedded_part(document_id, "v0", 2, 1, cache_hits=1)
    # A new version starts with no counts, no hash and no copy.
    documents.record_stage(document_id, "v1", Stage.EMBED, 1, accumulate=True, content_sha256="ab", duplicate_of="x")
    result = documents.mark_queued(
        document_id=document_id, tenant_id="acme", ref=ref("v2", document_id), event_time="t2", size_bytes=9
    )
    fresh = result.record
    assert fresh is not None and (fresh.embedding_cache, fresh.content_sha256, fresh.duplicate_of) == (None, None, None)


def ready_with_bytes(documents: Documents, sha256: str, *, tenant: str = "acme") -> str:
    document_id = queued(documents, tenant=tenant)
    documents.start_stage(document_id, "v1", Stage.PARSE)
    documents.record_stage(document_id, "v1", Stage.PARSE, 1, content_sha256=sha256, content_key=f"{tenant}#{sha256}")
    documents.mark_ready(document_id, "v1")
    return document_id


def test_a_copy_is_the_same_tenants_ready_document_with_the_same_bytes(documents: Documents) -> None:
    sha = uuid.uuid4().hex
    original = ready_with_bytes(documents, sha)
    ready_with_bytes(documents, sha, tenant="globex")  # another tenant's upload of the same bytes
    newcomer = queued(documents)
    assert documents.find_ready_copy(tenant_id="acme", content_sha256=sha, document_id=newcomer) == original
    assert documents.find_ready_copy(tenant_id="acme", content_sha256=sha, document_id=original) is None  # itself
    assert documents.find_ready_copy(tenant_id="acme", content_sha256=uuid.uuid4().hex, document_id=newcomer) is None
    assert documents.find_ready_copy(tenant_id="initech", content_sha256=sha, document_id=newcomer) is None
    # Deleted, it is no copy any more.
    documents.mark_deleting(original, "acme")
    assert documents.find_ready_copy(tenant_id="acme", content_sha256=sha, document_id=newcomer) is None


def test_pages_parsed_add_up_per_range_a_retry_counts_once_and_a_new_version_starts_at_none(
    documents: Documents,
) -> None:
    document_id = queued(documents)
    documents.start_stage(document_id, "v1", Stage.PARSE)
    assert (record := documents.get(document_id)) is not None and record.pages_parsed is None
    documents.record_parsed_range(document_id, "v1", 1, 50)
    documents.record_parsed_range(document_id, "v1", 101, 7)  # ranges finish in any order
    documents.record_parsed_range(document_id, "v1", 101, 7)  # a retried range
    documents.record_parsed_range(document_id, "v1", 51, 50)
    assert (record := documents.get(document_id)) is not None and record.pages_parsed == 107
    with pytest.raises(StaleWriteError):
        documents.record_parsed_range(document_id, "v0", 108, 1)
    result = documents.mark_queued(
        document_id=document_id, tenant_id="acme", ref=ref("v2", document_id), event_time="t2", size_bytes=9
    )
    assert result.record is not None and result.record.pages_parsed is None


def test_the_lane_parse_records_is_read_back_and_a_new_version_clears_it(documents: Documents) -> None:
    document_id = queued(documents)
    documents.start_stage(document_id, "v1", Stage.PARSE)
    documents.record_stage(document_id, "v1", Stage.PARSE, 12, page_count=2000, lane=Lane.BULK.value)
    assert (record := documents.get(document_id)) is not None and record.lane is Lane.BULK
    result = documents.mark_queued(
        document_id=document_id, tenant_id="acme", ref=ref("v2", document_id), event_time="t2", size_bytes=9
    )
    assert result.record is not None and result.record.lane is None
