"""At-least-once delivery into the pipeline, exactly-once effects out of it: duplicate S3 events,
duplicate SQS deliveries, an intake that dies before acknowledging, and poison messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rag_ingest.core.ids import document_id_for_object, version_hash

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from tests.support.pipeline_probe import (
    SAMPLES,
    STAGE_FUNCTIONS,
    VALID_SAMPLES,
    PipelineProbe,
    intake_poller_stats,
    s3_notification_body,
    wait_until,
)

pytestmark = pytest.mark.reliability


def test_duplicate_s3_events_and_sqs_deliveries_start_one_execution(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    sample = SAMPLES / "lighthouses.pdf"
    ticket = probe.ticket(tenant_client, sample.name)
    before = intake_poller_stats(faults)
    # Short enough that a copy refused while its twin is in progress comes back within the test.
    with probe.visibility_timeout(10):
        # A multipart upload: S3 (and moto) may send two ObjectCreated events for one object version.
        upload = probe.s3.create_multipart_upload(Bucket=probe.bucket, Key=ticket.key, ContentType="application/pdf")
        part = probe.s3.upload_part(
            Bucket=probe.bucket, Key=ticket.key, UploadId=upload["UploadId"], PartNumber=1, Body=sample.read_bytes()
        )
        completed = probe.s3.complete_multipart_upload(
            Bucket=probe.bucket,
            Key=ticket.key,
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )
        version = str(completed["VersionId"])
        copy = s3_notification_body(probe.bucket, ticket.key, version, sample.stat().st_size, completed["ETag"])
        # SQS delivers at least once: three more copies while the first is being processed...
        probe.send_to_ingest_queue(copy, copy, copy)
        probe.wait_terminal([ticket.document_id])
        # ...and a late one after the document is READY.
        probe.send_to_ingest_queue(copy)
        probe.wait_ingest_queue_drained()
    after = intake_poller_stats(faults)

    # Every copy really reached the intake (at least one S3 event + 4 copies)...
    assert after["received"] - before["received"] >= 5
    # ...and still: one execution for the version, one set of chunks, one READY.
    assert probe.executions_per_version(ticket.document_id) == {version_hash(version): 1}
    record = probe.assert_ready_exactly_once(ticket.document_id)
    assert record.version == version
    assert record.attempts == dict.fromkeys(STAGE_FUNCTIONS, 1)
    probe.assert_queues_settled(tenant)


def test_intake_crash_before_the_ack_is_redelivered_and_starts_nothing_twice(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    sample = SAMPLES / "sourdough.pdf"
    ticket = probe.ticket(tenant_client, sample.name)
    # The intake handler does everything (QUEUED, StartExecution, idempotency record), then its
    # environment dies before answering: the poller cannot delete the message.
    faults.arm_fault("IntakeFunction", "crash_after", match=ticket.document_id)
    before = intake_poller_stats(faults)
    with probe.visibility_timeout(8):
        probe.send(ticket, sample)
        probe.wait_terminal([ticket.document_id])
        # The message comes back after the visibility timeout, and this time it is deleted.
        probe.wait_ingest_queue_drained()
    after = intake_poller_stats(faults)

    assert faults.faults()["faults"] == [], "the intake never crashed"
    # (>= 1, not == 1: on a loaded machine an unrelated intake batch may also time out.)
    assert after["invocation_errors"] - before["invocation_errors"] >= 1
    assert after["received"] - before["received"] >= 2, "the message was not redelivered"
    probe.assert_ready_exactly_once(ticket.document_id)
    assert len(probe.executions_of([ticket.document_id])) == 1
    probe.assert_queues_settled(tenant)


def test_poison_messages_reach_the_dlq_after_max_receives_and_the_rest_is_unaffected(
    probe: PipelineProbe, tenant: str, tenant_client: OfflineClient, faults: OfflineStackProcess
) -> None:
    redrive = json.loads(
        probe.sqs.get_queue_attributes(QueueUrl=probe.queue_url, AttributeNames=["RedrivePolicy"])["Attributes"][
            "RedrivePolicy"
        ]
    )
    max_receive = int(redrive["maxReceiveCount"])
    tickets = [probe.ticket(tenant_client, sample.name) for sample in VALID_SAMPLES[:2]]
    # An object put without the API; its record also travels in a message next to a bad record
    # (the whole message is poison, the object still arrives once by its own notification).
    mixed_key = f"raw/{tenant}/inbox/urban-birds.pdf"
    put = probe.s3.put_object(Bucket=probe.bucket, Key=mixed_key, Body=(SAMPLES / "urban-birds.pdf").read_bytes())
    good_record = json.loads(s3_notification_body(probe.bucket, mixed_key, put["VersionId"], 1, put["ETag"]))
    created: dict[str, Any] = {"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": probe.bucket}}}
    keyless = {**created, "s3": {**created["s3"], "object": {"size": 1, "eTag": tenant}}}
    poison = {
        "not JSON": f"{tenant}: this is not JSON",
        "not an S3 event": json.dumps({"tenant": tenant, "hello": "world"}),
        "a record without a key": json.dumps({"Records": [keyless]}),
        "a key outside raw/": s3_notification_body(probe.bucket, f"elsewhere/{tenant}/x.pdf", "v1", 1, "etag"),
        "a good record and a bad one": json.dumps(
            {"Records": [*good_record["Records"], {**created, "eventName": f"Unknown:{tenant}"}]}
        ),
    }
    with probe.visibility_timeout(8):  # > the batching window (5 s) + processing: successes stay deleted
        for ticket, sample in zip(tickets, VALID_SAMPLES, strict=False):
            probe.send(ticket, sample)
        probe.send_to_ingest_queue(*poison.values())

        def all_dead() -> list[dict[str, Any]] | None:
            found = probe.dead_letters(tenant)
            return found if len(found) == len(poison) else None

        dead = wait_until(all_dead, timeout=120, what="every poison message in the DLQ", interval=2.0)
        probe.wait_ingest_queue_drained()

    assert sorted(message["Body"] for message in dead) == sorted(poison.values())
    assert all(int(message["Attributes"]["ApproximateReceiveCount"]) >= max_receive for message in dead)
    # The good uploads of the same batches, and the object named in a poison message: READY once each.
    good_ids = [ticket.document_id for ticket in tickets] + [document_id_for_object(probe.bucket, mixed_key)]
    probe.wait_terminal(good_ids)
    for document_id in good_ids:
        probe.assert_ready_exactly_once(document_id)
    assert probe.delete_dead_letters(tenant) == len(poison)
    probe.assert_queues_settled(tenant)
