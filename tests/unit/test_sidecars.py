"""S3 sidecars (``<name>.metadata.json``, Bedrock Knowledge Bases' ``metadataAttributes`` shape): the
parsing and its rules, and intake's handling of both orders (sidecar first, document first), a bad
sidecar, and a sidecar never becoming a document. In-memory fakes; through moto's S3 and the whole
local stack: tests/e2e/test_sidecars_on_stack.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.ids import document_id_for_object
from rag_ingest.core.metadata import MAX_SIDECAR_BYTES, MetadataError, metadata_from_sidecar
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.s3_keys import sidecar_target
from rag_ingest.documents.intake import IntakeService, UploadedObject

from tests.support.fakes import InMemoryDocuments, InMemoryWorkflow

pytestmark = pytest.mark.unit
BUCKET = "docs"
DOC_KEY = "raw/acme/contracts/msa.pdf"
SIDECAR_KEY = DOC_KEY + ".metadata.json"
DOC_ID = document_id_for_object(BUCKET, DOC_KEY)


def sidecar(attributes: Any) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


def test_plain_and_typed_values_are_read_as_metadata() -> None:
    raw = sidecar(
        {
            "customer": "acme",
            "year": 2024,
            "signed": True,
            "tags": ["nda", "eu"],
            "region": {"value": {"type": "STRING", "stringValue": "emea"}, "includeForEmbedding": True},
            "score": {"value": {"type": "NUMBER", "numberValue": 0.5}},
            "active": {"value": {"type": "BOOLEAN", "booleanValue": False}, "includeForEmbedding": False},
            "labels": {"value": {"type": "STRING_LIST", "stringListValue": ["a", "b"]}},
        }
    )
    assert metadata_from_sidecar(raw) == {
        "customer": "acme",
        "year": 2024,
        "signed": True,
        "tags": ["nda", "eu"],
        "region": "emea",
        "score": 0.5,
        "active": False,
        "labels": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (b"{not json", "metadataAttributes"),
        (b"\xff\xfe", "metadataAttributes"),
        (json.dumps({"attributes": {}}).encode(), "metadataAttributes"),
        (json.dumps({"metadataAttributes": []}).encode(), "metadataAttributes"),
        (sidecar({"filename": "x"}), "metadataAttributes.filename"),
        (sidecar({"Bad": 1}), "metadataAttributes"),
        (sidecar({"a": None}), "metadataAttributes.a"),
        (sidecar({"a": {"value": {"type": "DATE", "stringValue": "x"}}}), "metadataAttributes.a"),
        (sidecar({"a": {"value": {"type": "NUMBER", "stringValue": "1"}}}), "metadataAttributes.a"),
        (sidecar({"a": {"value": {"type": "NUMBER", "numberValue": "1"}}}), "metadataAttributes.a"),
        (sidecar({"a": {"value": {"type": "STRING_LIST", "stringListValue": [1]}}}), "metadataAttributes.a[0]"),
        (b'{"metadataAttributes": {"a": NaN}}', "metadataAttributes"),
        (b" " * (MAX_SIDECAR_BYTES + 1), "metadataAttributes"),
    ],
)
def test_a_bad_sidecar_is_a_metadata_error_naming_the_part(raw: bytes, path: str) -> None:
    with pytest.raises(MetadataError) as caught:
        metadata_from_sidecar(raw)
    assert caught.value.path == path


def test_sidecar_keys_name_their_document() -> None:
    assert sidecar_target(SIDECAR_KEY) == DOC_KEY
    assert sidecar_target("raw/acme/a.pdf") is None
    assert sidecar_target("raw/acme/.metadata.json") is None
    assert sidecar_target(".metadata.json") is None


@dataclass
class Sidecars:
    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)

    def read_current(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        data = self.objects.get((bucket, key))
        return None if data is None else data[: max_bytes + 1]


@dataclass
class Refresher:
    refreshed: list[str] = field(default_factory=list)

    def check(self, record: DocumentRecord) -> None:
        return None

    def refresh(self, document_id: str) -> int:
        self.refreshed.append(document_id)
        return 1


@dataclass
class World:
    documents: InMemoryDocuments
    workflow: InMemoryWorkflow
    sidecars: Sidecars
    refresher: Refresher
    intake: IntakeService

    def event(self, key: str, version: str = "v1") -> Any:
        event_time = datetime.now(UTC).isoformat()
        return self.intake.ingest(UploadedObject(bucket=BUCKET, key=key, version=version, event_time=event_time))

    def record(self) -> DocumentRecord:
        record = self.documents.get(DOC_ID)
        assert record is not None
        return record


@pytest.fixture
def world() -> World:
    documents, workflow, sidecars, refresher = InMemoryDocuments(), InMemoryWorkflow(), Sidecars(), Refresher()
    return World(
        documents,
        workflow,
        sidecars,
        refresher,
        IntakeService(documents, workflow, sidecars=sidecars, refresher=refresher),
    )


def test_a_sidecar_first_waits_and_the_document_reads_it_before_its_workflow(world: World) -> None:
    world.sidecars.objects[(BUCKET, SIDECAR_KEY)] = sidecar({"customer": "acme"})
    waiting = world.event(SIDECAR_KEY)
    assert waiting.outcome == "SIDECAR_WAITING" and world.documents.items == {} and not world.workflow.started
    queued = world.event(DOC_KEY)
    assert queued.outcome == "QUEUED" and len(world.workflow.started) == 1
    assert world.record().metadata == {"customer": "acme"} and world.record().revision == 2


def test_a_sidecar_after_its_document_replaces_the_metadata_and_rewrites_a_ready_one(world: World) -> None:
    world.event(DOC_KEY)
    assert world.record().metadata == {}
    world.documents.items[DOC_ID]["status"] = DocumentStatus.READY.value
    world.sidecars.objects[(BUCKET, SIDECAR_KEY)] = sidecar({"customer": "globex"})
    applied = world.event(SIDECAR_KEY)
    assert applied.outcome == "SIDECAR_APPLIED" and world.refresher.refreshed == [DOC_ID]
    assert world.record().metadata == {"customer": "globex"} and world.record().revision == 2
    assert len(world.workflow.started) == 1  # the sidecar started nothing
    assert world.event(SIDECAR_KEY, version="v2").outcome == "SIDECAR_UNCHANGED"


def test_a_sidecar_for_a_document_in_flight_changes_its_record_only(world: World) -> None:
    world.event(DOC_KEY)
    world.sidecars.objects[(BUCKET, SIDECAR_KEY)] = sidecar({"customer": "initech"})
    assert world.event(SIDECAR_KEY).outcome == "SIDECAR_APPLIED"
    assert world.record().metadata == {"customer": "initech"} and world.refresher.refreshed == []


def test_a_bad_sidecar_fails_its_document_with_a_clear_code_and_starts_nothing(world: World) -> None:
    world.sidecars.objects[(BUCKET, SIDECAR_KEY)] = sidecar({"filename": "reserved"})
    result = world.event(DOC_KEY)
    assert result.outcome == "FAILED" and result.error_code is ErrorCode.INVALID_REQUEST
    record = world.record()
    assert record.status is DocumentStatus.FAILED and record.error_code is ErrorCode.INVALID_REQUEST
    assert record.error_detail and record.error_detail.startswith(f"sidecar {SIDECAR_KEY}: metadataAttributes.filename")
    assert not world.workflow.started


def test_a_bad_late_sidecar_changes_nothing_and_is_reported(world: World) -> None:
    world.event(DOC_KEY)
    world.sidecars.objects[(BUCKET, SIDECAR_KEY)] = b"{oops"
    result = world.event(SIDECAR_KEY)
    assert result.outcome == "REJECTED" and result.error_code is ErrorCode.INVALID_REQUEST
    assert SIDECAR_KEY in result.reason
    assert world.record().metadata == {} and world.record().status is DocumentStatus.QUEUED


def test_a_sidecar_of_another_tenants_document_is_never_applied(world: World) -> None:
    world.event(DOC_KEY)
    world.documents.items[DOC_ID]["tenant_id"] = "other"
    world.sidecars.objects[(BUCKET, SIDECAR_KEY)] = sidecar({"customer": "x"})
    assert world.event(SIDECAR_KEY).outcome == "SIDECAR_WAITING"
    assert world.record().metadata == {}
