"""The reconciler's function against moto's S3 (a versioned bucket) and DynamoDB and the real
OpenSearch (an index of its own): a deliberately damaged state, each finding, the repairs, 0
repairable drift after, a second repair run that changes nothing, and the ``ReconcilerDrift`` EMF."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.core.ids import new_document_id, version_hash
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.s3_keys import CHUNKS_ARTIFACT, EMBEDDINGS_FOLDER, artifact_key, embedding_batch_key, upload_key
from rag_ingest.wiring import vector_store_for

from tests.support.aws import FakeLambdaContext, import_handler, moto_server
from tests.support.operations import RecordWriter, create_documents_table, create_sources_table, create_state_machine

pytestmark = pytest.mark.integration
OPENSEARCH_URL = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")
DIMENSION = 8
BATCH = 2  # vectors per embedding checkpoint


def _chunks(count: int, first: int = 0) -> list[Chunk]:
    return [
        Chunk(chunk_index=i, text=f"passage {i}", page_start=1, page_end=1, char_start=0, char_end=9, token_count=2)
        for i in range(first, count)
    ]


class World:
    def __init__(self, bucket: str, table: str, store: VectorStore, handler: ModuleType) -> None:
        self.bucket, self.store, self.handler = bucket, store, handler
        self.records = RecordWriter(table)
        self.s3 = boto3.client("s3")

    def upload(self, document_id: str, tenant: str = "acme") -> tuple[str, str]:
        key = upload_key(tenant, document_id, "a.pdf")
        version = str(self.s3.put_object(Bucket=self.bucket, Key=key, Body=b"%PDF-1.4")["VersionId"])
        return key, version

    def index(self, document_id: str, version: str, count: int, *, first: int = 0, tenant: str = "acme") -> None:
        self.store.write_chunks(
            DocumentStamp(tenant, document_id, version, filename="a.pdf"),
            _chunks(count, first),
            [[0.1] * DIMENSION] * (count - first),
        )

    def ready(self, count: int, *, indexed: int | None = None, checkpoints: bool = True) -> tuple[str, str, str]:
        """A READY document: its upload, record, chunks in the index and (optionally) its checkpoints."""
        document_id = new_document_id()
        key, version = self.upload(document_id)
        self.records.put(
            document_id, "READY", bucket=self.bucket, key=key, version=version, chunk_count=count, indexed_count=count
        )
        self.index(document_id, version, count if indexed is None else indexed)
        if checkpoints:
            chunks = json.dumps([c.model_dump() for c in _chunks(count)])
            self.s3.put_object(Bucket=self.bucket, Key=artifact_key(document_id, version, CHUNKS_ARTIFACT), Body=chunks)
            prefix = artifact_key(document_id, version, EMBEDDINGS_FOLDER)
            for number, start in enumerate(range(0, count, BATCH)):
                vectors = [[0.2] * DIMENSION] * min(BATCH, count - start)
                batch_key = embedding_batch_key(prefix, number)
                self.s3.put_object(Bucket=self.bucket, Key=batch_key, Body=json.dumps(vectors))
        return document_id, key, version

    def run(self, **request: Any) -> dict[str, Any]:
        return dict(self.handler.handler(request, FakeLambdaContext()))

    def state(self) -> tuple[dict[tuple[str, str, str], int], list[dict[str, Any]]]:
        counts = {(v.tenant_id, v.document_id, v.version_hash): v.chunks for v in self.store.indexed_versions()}
        items = boto3.resource("dynamodb").Table(self.records.table_name).scan()["Items"]
        return counts, sorted(items, key=lambda item: str(item["document_id"]))


@pytest.fixture
def world() -> Iterator[World]:
    with moto_server():
        suffix = uuid.uuid4().hex[:8]
        bucket, table, index = f"docs-{suffix}", f"documents-{suffix}", f"test-reconcile-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)
        create_sources_table(sources := f"sources-{suffix}")
        state_machine_arn = create_state_machine()
        store = vector_store_for(OPENSEARCH_URL, index, DIMENSION)
        store.ensure_index()
        handler = import_handler(
            "reconciler",
            {
                "DOCUMENTS_TABLE": table,
                "SOURCES_TABLE": sources,
                "BUCKET_NAME": bucket,
                "OPENSEARCH_ENDPOINT": OPENSEARCH_URL,
                "OPENSEARCH_INDEX": index,
                "EMBEDDING_DIMENSION": str(DIMENSION),
                "STATE_MACHINE_ARN": state_machine_arn,
                "STUCK_AFTER_SECONDS": "1800",
                "UPLOAD_URL_EXPIRY_SECONDS": "900",
                "UPLOAD_GRACE_SECONDS": "3600",
                "OBJECT_GRACE_SECONDS": "0",
                "REPAIR": "false",
                "POWERTOOLS_SERVICE_NAME": "rag-ingest-reconciler",
            },
        )
        try:
            yield World(bucket, table, store, handler)
        finally:
            store.drop_index()


def _by_kind(report: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {(f["kind"], f["document_id"]): f for f in report["findings"]}


def test_a_damaged_state_is_found_repaired_and_stays_repaired(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    healthy, _, _ = world.ready(3)
    # 1. A record deleted: its chunks are orphans, its upload an object with no record.
    lost_record, lost_key, _ = world.ready(2)
    boto3.resource("dynamodb").Table(world.records.table_name).delete_item(Key={"document_id": lost_record})
    # 2. An object deleted (its version, outside the API): the record is marked, its chunks go.
    lost_object, lost_object_key, lost_version = world.ready(2)
    world.s3.delete_object(Bucket=world.bucket, Key=lost_object_key, VersionId=lost_version)
    # 3. Orphan chunks injected: no record, no object.
    orphan = new_document_id()
    world.index(orphan, "v-orphan", 4)
    # 4. Chunks of an old version beside the current version's.
    superseded, _, _ = world.ready(2)
    world.index(superseded, "an-old-version", 5)
    # 5. Some chunks of a READY document dropped (checkpoints present: re-indexed from them)...
    dropped, _, dropped_version = world.ready(5)
    world.store.delete_chunks(dropped, version_hash(dropped_version), from_index=2)
    # 6. ...and without checkpoints (replayed through a new execution).
    no_checkpoints, _, _ = world.ready(3, indexed=1, checkpoints=False)

    capsys.readouterr()
    report = world.run()
    found = _by_kind(report)
    assert set(found) == {
        ("OrphanChunks", lost_record),
        ("ObjectWithoutRecord", lost_record),
        ("RecordWithoutObject", lost_object),
        ("OrphanChunks", orphan),
        ("StaleChunks", superseded),
        ("ChunkCountMismatch", dropped),
        ("ChunkCountMismatch", no_checkpoints),
    }, report["findings"]
    assert found[("ObjectWithoutRecord", lost_record)]["key"] == lost_key
    assert found[("OrphanChunks", orphan)]["chunks"] == 4
    assert found[("StaleChunks", superseded)]["version_hash"] == version_hash("an-old-version")
    assert found[("ChunkCountMismatch", dropped)]["reason"] == "READY with 5 chunks recorded, 2 in the index"
    assert all(f["repaired"] is None for f in report["findings"])  # REPAIR=false: report only
    assert (report["records"], report["object_keys"]) == (5, 5)  # one record and one object deleted
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    drift = {doc["Kind"]: doc["ReconcilerDrift"] for doc in emitted if "ReconcilerDrift" in doc}
    assert drift == {
        "OrphanChunks": [2.0],
        "StaleChunks": [1.0],
        "ChunkCountMismatch": [2.0],
        "ObjectWithoutRecord": [1.0],
        "RecordWithoutObject": [1.0],
        "Stuck": [0.0],
        "SourceItemWithoutDocument": [0.0],  # zeros too: the graph stays whole
    }
    assert all(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Kind"]] for doc in emitted)

    repaired = world.run(repair=True)
    fixed = _by_kind(repaired)
    assert fixed[("ChunkCountMismatch", dropped)]["repaired"] == "re-indexed 5 chunks from the checkpoints"
    assert fixed[("ChunkCountMismatch", no_checkpoints)]["repaired"].startswith("replayed")
    assert fixed[("RecordWithoutObject", lost_object)]["repaired"] == "marked FAILED (SOURCE_OBJECT_MISSING)"
    assert fixed[("StaleChunks", lost_object)]["repaired"] == "deleted 2 chunks"  # same run, after the mark
    assert fixed[("OrphanChunks", orphan)]["repaired"] == "deleted 4 chunks"
    assert fixed[("StaleChunks", superseded)]["repaired"] == "deleted 5 chunks"
    assert fixed[("ObjectWithoutRecord", lost_record)]["repaired"] is None  # reported only, by design
    assert not any(f["error"] for f in repaired["findings"])
    marked = world.records.get(lost_object)
    assert (marked["status"], marked["error_code"]) == ("FAILED", "SOURCE_OBJECT_MISSING")
    assert world.records.get(no_checkpoints)["status"] == "QUEUED"  # its replay's execution started
    assert world.store.count(document_id=dropped) == 5
    assert world.store.count(document_id=healthy) == 3

    after = world.run()
    assert [(f["kind"], f["document_id"]) for f in after["findings"]] == [("ObjectWithoutRecord", lost_record)]
    before_second = world.state()
    executions = _executions(world)
    again = world.run(repair=True)
    assert [f["repaired"] for f in again["findings"]] == [None]
    assert world.state() == before_second
    assert _executions(world) == executions


def test_one_tenant_only(world: World) -> None:
    world.ready(2)
    other = new_document_id()
    world.index(other, "v1", 2, tenant="other")
    assert world.run(tenant_id="acme")["findings"] == []
    assert [(f["kind"], f["tenant_id"]) for f in world.run(tenant_id="other")["findings"]] == [
        ("OrphanChunks", "other")
    ]


def _executions(world: World) -> list[str]:
    listed = boto3.client("stepfunctions").list_executions(stateMachineArn=world.handler.ENV.state_machine_arn)
    return sorted(execution["name"] for execution in listed["executions"])
