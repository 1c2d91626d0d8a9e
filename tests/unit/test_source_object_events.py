"""S3 object events between syncs (rag_ingest.sources.object_events): each S3 source over the bucket
takes the one key as a sync would, described again from the bucket, never trusted from the event."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from rag_ingest.sources.buckets import ObjectPin
from rag_ingest.sources.model import SourceRequest
from rag_ingest.sources.object_events import ObjectEventApplier, parse_object_event
from rag_ingest.sources.s3 import S3Connector, S3SourceConfig
from rag_ingest.sources.sync import CHANGE_TOKEN_METADATA

from tests.support.sources import DictConnector
from tests.unit.test_s3_source import MemoryBucket, sidecar
from tests.unit.test_source_sync import TENANT, Harness

pytestmark = pytest.mark.unit


class Copier:
    """CopyObject into the stack's bucket: the pinned version's bytes become the document's."""

    def __init__(self, bucket: MemoryBucket, harness: Harness) -> None:
        self.bucket, self.harness = bucket, harness

    def copy_version(self, pin: ObjectPin, bucket: str, key: str, metadata: Mapping[str, str]) -> str:
        body = self.bucket.read_version(pin, 10_000_000)
        self.harness.documents.put_bytes(key, body, metadata[CHANGE_TOKEN_METADATA])
        return "v-copy"


def event(key: str, detail_type: str = "Object Created", bucket: str = "team-docs") -> dict[str, object]:
    return {
        "source": "aws.s3",
        "detail-type": detail_type,
        "detail": {"bucket": {"name": bucket}, "object": {"key": key, "size": 10}},
    }


@pytest.fixture
def setup() -> tuple[Harness, MemoryBucket, ObjectEventApplier, str]:
    harness = Harness(DictConnector({}))
    bucket = MemoryBucket()
    copier = Copier(bucket, harness)
    view = harness.service.create(
        TENANT,
        SourceRequest(kind="s3", name="docs", config={"bucket": "team-docs", "prefix": "handbook/"}),  # type: ignore[arg-type]
    )

    def connector(source: object) -> S3Connector:
        config = S3SourceConfig(bucket="team-docs", prefix="handbook/")
        return S3Connector(config, bucket, max_object_bytes=1_000_000, copier=copier)

    applier = ObjectEventApplier(
        sources=harness.sources, items=harness.items, engine=harness.engine, connectors=connector
    )
    return harness, bucket, applier, view.id


def test_created_changed_sidecar_and_deleted_objects_follow_at_once(
    setup: tuple[Harness, MemoryBucket, ObjectEventApplier, str],
) -> None:
    harness, bucket, applier, source_id = setup
    bucket.put("handbook/tides.md", b"# Tides")
    created = parse_object_event(event("handbook/tides.md"))
    assert created is not None
    assert applier.apply(created) == {source_id: "added"}
    assert applier.apply(created) == {source_id: "unchanged"}  # a repeated event changes nothing
    bucket.put("handbook/tides.md.metadata.json", sidecar(team="harbour"))
    assert applier.apply(parse_object_event(event("handbook/tides.md.metadata.json"))) == {  # type: ignore[arg-type]
        source_id: "modified"
    }
    (document,) = harness.documents.documents.values()
    assert document.metadata == {"team": "harbour"} and document.versions == [b"# Tides", b"# Tides"]
    bucket.delete("handbook/tides.md")
    assert applier.apply(parse_object_event(event("handbook/tides.md", "Object Deleted"))) == {  # type: ignore[arg-type]
        source_id: "deleted"
    }
    assert harness.documents.documents == {}


def test_events_outside_the_prefix_or_of_other_buckets_or_shapes_touch_nothing(
    setup: tuple[Harness, MemoryBucket, ObjectEventApplier, str],
) -> None:
    harness, bucket, applier, source_id = setup
    bucket.put("elsewhere/x.md", b"x")
    assert applier.apply(parse_object_event(event("elsewhere/x.md"))) == {source_id: "ignored"}  # type: ignore[arg-type]
    assert applier.apply(parse_object_event(event("handbook/x.md", bucket="other"))) == {}  # type: ignore[arg-type]
    assert parse_object_event({"source": "aws.events", "detail": {}}) is None
    assert parse_object_event({"source": "aws.s3", "detail-type": "Object Created", "detail": {"bucket": {}}}) is None
    assert harness.documents.documents == {}


def test_an_event_during_a_sync_counts_as_that_syncs_so_it_is_neither_redone_nor_deleted(
    setup: tuple[Harness, MemoryBucket, ObjectEventApplier, str],
) -> None:
    harness, bucket, applier, source_id = setup
    job = harness.service.start_sync(TENANT, source_id)
    bucket.put("handbook/ferries.md", b"# Ferries")
    applier.apply(parse_object_event(event("handbook/ferries.md")))  # type: ignore[arg-type]
    (state,) = harness.items.states.values()
    assert state.seen_in == job.id
