import json
from pathlib import Path

import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.ids import document_id_for_object
from rag_ingest.documents.intake import (
    IntakeService,
    PoisonMessageError,
    UnaddressableObjectError,
    UploadedObject,
    address_of,
    parse_queue_message,
)

pytestmark = pytest.mark.unit
EVENTS = Path(__file__).parent.parent / "events"


def test_s3_record_is_parsed_with_decoded_key_and_version() -> None:
    [uploaded] = parse_queue_message((EVENTS / "s3_object_created.json").read_text())
    assert uploaded.bucket == "rag-ingest-documents"
    assert uploaded.key == "raw/acme/01JDX3ZK5Q8W7N2M4P6R8T0V2X/annual report 2026.pdf"
    assert uploaded.version == "3HL4kqtJvjVBH40Nrjfkd"
    assert uploaded.size_bytes == 48211


def test_etag_is_the_version_when_the_bucket_is_not_versioned() -> None:
    event = json.loads((EVENTS / "s3_object_created.json").read_text())
    del event["Records"][0]["s3"]["object"]["versionId"]
    [uploaded] = parse_queue_message(json.dumps(event))
    assert uploaded.version == "etag:9b2cf535f27731c974343645a3985328"


def test_s3_test_event_yields_nothing() -> None:
    assert parse_queue_message((EVENTS / "s3_test_event.json").read_text()) == []


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        json.dumps({"hello": "world"}),
        json.dumps({"Records": [{"eventName": "ObjectCreated:Put"}]}),
    ],
)
def test_malformed_messages_are_poison(body: str) -> None:
    with pytest.raises(PoisonMessageError):
        parse_queue_message(body)


@pytest.mark.parametrize(
    "records",
    [
        ["not a record"],
        [None],
        [{"eventName": "ObjectCreated:Put", "s3": []}],
        [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "b"}, "object": "raw/acme/x.pdf"}}],
    ],
)
def test_records_of_the_wrong_shape_are_poison(records: list[object]) -> None:
    with pytest.raises(PoisonMessageError):
        parse_queue_message(json.dumps({"Records": records}))


def test_moto_records_without_sequencer_user_identity_or_size_are_read() -> None:
    # moto leaves out sequencer, userIdentity, requestParameters and responseElements.
    event = json.loads((EVENTS / "s3_object_created.json").read_text())
    for name in ("userIdentity", "requestParameters", "responseElements", "eventVersion"):
        event["Records"][0].pop(name, None)
    for name in ("sequencer", "size"):
        event["Records"][0]["s3"]["object"].pop(name, None)
    [uploaded] = parse_queue_message(json.dumps(event))
    assert (uploaded.key, uploaded.size_bytes) == ("raw/acme/01JDX3ZK5Q8W7N2M4P6R8T0V2X/annual report 2026.pdf", None)


def test_every_record_of_a_message_is_read() -> None:
    # A multipart upload can reach intake as two records for the same object: both are read, intake dedupes.
    event = json.loads((EVENTS / "s3_object_created.json").read_text())
    event["Records"].append(json.loads(json.dumps(event["Records"][0])))
    event["Records"][1]["eventName"] = "ObjectCreated:CompleteMultipartUpload"
    first, second = parse_queue_message(json.dumps(event))
    assert first == second


def test_removal_events_are_poison_not_ingested() -> None:
    event = json.loads((EVENTS / "s3_object_created.json").read_text())
    event["Records"][0]["eventName"] = "ObjectRemoved:Delete"
    with pytest.raises(PoisonMessageError, match="unexpected S3 event"):
        parse_queue_message(json.dumps(event))


def test_api_key_layout_gives_tenant_and_document_id() -> None:
    address = address_of("raw/acme/01JDX3ZK5Q8W7N2M4P6R8T0V2X/report.pdf", "bucket")
    assert (address.tenant_id, address.document_id) == ("acme", "01JDX3ZK5Q8W7N2M4P6R8T0V2X")


def test_object_put_without_the_api_gets_a_deterministic_id() -> None:
    first = address_of("raw/acme/inbox/report.pdf", "bucket")
    again = address_of("raw/acme/inbox/report.pdf", "bucket")
    assert first == again
    assert first.tenant_id == "acme"
    assert first.document_id == document_id_for_object("bucket", "raw/acme/inbox/report.pdf")


def test_a_key_outside_raw_is_poison_not_an_upload() -> None:
    # The bucket notifies only for raw/: S3 never sends such a record, so it goes to the DLQ.
    with pytest.raises(PoisonMessageError) as caught:
        address_of("other/acme/x.pdf", "bucket")
    assert not isinstance(caught.value, UnaddressableObjectError)


UNADDRESSABLE_KEYS = [
    "raw/x.pdf",
    "raw//x.pdf",
    "raw/acme corp/x.pdf",  # a space: not a tenant id
    "raw/../x.pdf",
    "raw/" + "t" * 65 + "/x.pdf",  # too long
    "raw/acmé/x.pdf",
]


@pytest.mark.parametrize("key", UNADDRESSABLE_KEYS)
def test_keys_without_a_valid_tenant_folder_are_unaddressable(key: str) -> None:
    with pytest.raises(UnaddressableObjectError):
        address_of(key, "bucket")


class _MustNotBeCalled:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"intake touched {name} for an object that belongs to no tenant")


@pytest.mark.parametrize("key", UNADDRESSABLE_KEYS)
def test_intake_rejects_unaddressable_objects_with_a_permanent_code_without_failing(key: str) -> None:
    """Rejected, not raised: a raise would retry the message until the DLQ, and its alarm pages."""
    service = IntakeService(_MustNotBeCalled(), _MustNotBeCalled())  # type: ignore[arg-type]
    uploaded = UploadedObject(bucket="bucket", key=key, version="v1", event_time="2026-01-01T00:00:00Z")
    result = service.ingest(uploaded)
    assert (result.outcome, result.error_code, result.document_id) == ("REJECTED", ErrorCode.INVALID_OBJECT_KEY, None)


def test_unaddressable_is_still_poison_for_the_dlq_tools() -> None:
    # redrive's filters and the burst test treat an address failure as a poison message.
    assert issubclass(UnaddressableObjectError, PoisonMessageError)
