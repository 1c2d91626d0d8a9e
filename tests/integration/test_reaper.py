"""The stuck-document reaper against moto's DynamoDB (the by_status GSI) and Step Functions
(DescribeExecution): what it leaves alone, re-drives, and marks FAILED (STUCK), and its handler's
EMF metric."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.executions import Executions
from rag_ingest.adapters.workflow import WorkflowStarter
from rag_ingest.core.ids import execution_name, new_document_id
from rag_ingest.core.job import ObjectRef
from rag_ingest.core.operations import ExecutionState
from rag_ingest.core.record import QueueOutcome
from rag_ingest.operations.reaper import ReapAction, Reaper, ReaperSettings, ReapRequest
from rag_ingest.operations.replay import Replayer

from tests.support.aws import FakeLambdaContext, import_handler, moto_server
from tests.support.operations import RecordWriter, create_documents_table, create_state_machine, iso_ago

pytestmark = pytest.mark.integration
STUCK_AFTER = 1800


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
    with moto_server():
        table = f"documents-{uuid.uuid4().hex[:6]}"
        create_documents_table(table)
        state_machine_arn = create_state_machine()
        documents = DocumentsTable(table)
        workflow = WorkflowStarter(state_machine_arn)
        reaper = Reaper(
            documents=documents,
            executions=Executions(),
            replayer=Replayer(documents, workflow),
            settings=ReaperSettings(stuck_after_seconds=STUCK_AFTER, max_redrives=2, max_documents=50),
        )
        yield {
            "table": table,
            "state_machine_arn": state_machine_arn,
            "records": RecordWriter(table),
            "reaper": reaper,
            "workflow": workflow,
        }


def start(world: dict[str, Any], document_id: str, *, stop: bool = False) -> str:
    sfn = boto3.client("stepfunctions")
    arn = str(
        sfn.start_execution(
            stateMachineArn=world["state_machine_arn"], name=execution_name(document_id, "v1"), input="{}"
        )["executionArn"]
    )
    if stop:
        sfn.stop_execution(executionArn=arn)
    return arn


def test_reaper_compares_records_with_their_executions(world: dict[str, Any]) -> None:
    records: RecordWriter = world["records"]
    reaper: Reaper = world["reaper"]
    old = STUCK_AFTER + 600
    running, aborted, missing, fresh, spent, waiting = (new_document_id() for _ in range(6))
    records.put(running, "PROCESSING", age_seconds=old, stage="EMBED", execution_arn=start(world, running))
    # Its Embed tasks keep giving way to the shared embedding quota: not stuck, whatever its age.
    records.put(
        waiting,
        "PROCESSING",
        age_seconds=old,
        stage="EMBED",
        capacity_wait_until=iso_ago(-90),
        execution_arn=start(world, waiting),
    )
    records.put(aborted, "PROCESSING", age_seconds=old, stage="PARSE", execution_arn=start(world, aborted, stop=True))
    records.put(missing, "QUEUED", age_seconds=old)  # intake crashed before StartExecution
    records.put(fresh, "QUEUED", age_seconds=60)  # not past the deadline: not even a suspect
    records.put(spent, "PROCESSING", age_seconds=old, replays=2, execution_arn=start(world, spent, stop=True))

    dry = reaper.reap(ReapRequest(dry_run=True))
    assert {d.document_id for d in dry.redriven} == {aborted, missing}
    assert records.get(aborted)["status"] == "PROCESSING"

    report = reaper.reap()
    assert report.examined == 5
    assert sorted((d.document_id, d.reason) for d in report.left_alone) == sorted(
        [(running, "execution still running"), (waiting, "execution still running (waiting for embedding capacity)")]
    )
    assert records.get(waiting)["status"] == "PROCESSING"
    redriven = {d.document_id: d for d in report.redriven}
    assert set(redriven) == {aborted, missing}
    assert redriven[aborted].execution_state == ExecutionState.ABORTED
    assert redriven[missing].execution_state == ExecutionState.MISSING
    for document_id in (aborted, missing):
        record = records.get(document_id)
        assert (record["status"], record["replays"]) == ("QUEUED", 1)
        assert record["execution_arn"] == redriven[document_id].execution_arn
        assert record["execution_arn"].endswith(execution_name(document_id, "v1", replay=1))
        assert Executions().state(record["execution_arn"]) == ExecutionState.RUNNING
    [failed] = report.marked_failed
    assert failed.document_id == spent and failed.action == ReapAction.MARKED_FAILED
    record = records.get(spent)
    assert (record["status"], record["error_code"]) == ("FAILED", "STUCK")
    assert "2 replays already (max 2)" in record["error_detail"]
    assert report.counts() == {ReapAction.RESTARTED: 2, ReapAction.MARKED_FAILED: 1}

    # Run again: the re-driven ones were just updated (not suspects), the rest is settled.
    again = reaper.reap()
    assert again.redriven == [] and again.marked_failed == []
    assert sorted(d.document_id for d in again.left_alone) == sorted([running, waiting])


def test_reaper_loses_to_a_worker_that_moved_the_document(world: dict[str, Any]) -> None:
    records: RecordWriter = world["records"]
    documents = DocumentsTable(world["table"])
    document_id = new_document_id()
    records.put(document_id, "PROCESSING", age_seconds=STUCK_AFTER + 60)
    suspect = documents.get(document_id)
    assert suspect is not None
    records.put(document_id, "PROCESSING", age_seconds=0, stage="INDEX")  # a stage wrote meanwhile
    with pytest.raises(Exception, match="changed since it was read"):
        documents.mark_stuck(suspect, "stuck")
    with pytest.raises(Exception, match="changed since it was read"):
        documents.requeue_for_replay(suspect, execution_arn="arn:aws:states:us-east-1:123456789012:execution:x:y")
    assert records.get(document_id)["stage"] == "INDEX"


def test_reaper_handler_emits_documents_reaped_by_action(
    world: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    records: RecordWriter = world["records"]
    records.put(new_document_id(), "QUEUED", age_seconds=STUCK_AFTER + 60)
    records.put(new_document_id(), "QUEUED", age_seconds=STUCK_AFTER + 60, replays=2)
    never_uploaded = new_document_id()
    records.put(never_uploaded, "AWAITING_UPLOAD", age_seconds=900 + 3600 + 60)
    # What a DocumentFailed consumer sees: a rule on the default bus forwarding to a queue.
    sqs, events = boto3.client("sqs"), boto3.client("events")
    inbox = sqs.create_queue(QueueName=f"events-{uuid.uuid4().hex[:6]}")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule = f"failed-{uuid.uuid4().hex[:6]}"
    events.put_rule(Name=rule, EventPattern=json.dumps({"source": ["rag-ingest"], "detail-type": ["DocumentFailed"]}))
    events.put_targets(Rule=rule, Targets=[{"Id": "inbox", "Arn": inbox_arn}])
    module = import_handler(
        "reaper",
        {
            "DOCUMENTS_TABLE": world["table"],
            "STATE_MACHINE_ARN": world["state_machine_arn"],
            "STUCK_AFTER_SECONDS": str(STUCK_AFTER),
            "MAX_REDRIVES": "2",
            "UPLOAD_URL_EXPIRY_SECONDS": "900",
            "UPLOAD_GRACE_SECONDS": "3600",
            "POWERTOOLS_SERVICE_NAME": "rag-ingest-reaper",
        },
    )
    capsys.readouterr()
    schedule_event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    result = module.handler(schedule_event, FakeLambdaContext())
    assert len(result["redriven"]) == 1
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    metrics = {doc["Action"]: doc["DocumentsReaped"] for doc in emitted if "DocumentsReaped" in doc}
    assert metrics == {"Redriven": [1.0], "MarkedFailed": [1.0]}
    # The expired upload: its own metric, outside DocumentsReaped (whose alarm pages).
    assert [doc["UploadsExpired"] for doc in emitted if "UploadsExpired" in doc] == [[1.0]]
    assert [d["document_id"] for d in result["expired"]] == [never_uploaded]
    assert records.get(never_uploaded)["status"] == "EXPIRED"
    # The stuck one is reported like MarkFailed's failures: DocumentsFailed{ErrorCode, Cause} and an event.
    failed = [doc for doc in emitted if "DocumentsFailed" in doc]
    assert [(doc["ErrorCode"], doc["Cause"], doc["DocumentsFailed"]) for doc in failed] == [("STUCK", "system", [1.0])]
    for doc in emitted:
        directive = doc["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == "RagIngest"
        if "DocumentsReaped" in doc:
            assert directive["Dimensions"] == [["Action"]]  # no "service" dimension: Action alone

    [message] = sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=1)["Messages"]
    detail = json.loads(message["Body"])["detail"]
    assert (detail["error_code"], detail["tenant_id"], detail["version"]) == ("STUCK", "acme", "v1")
    assert "2 replays already" in detail["error_detail"]

    dry = module.handler({"dry_run": True, "stuck_after_seconds": 60}, FakeLambdaContext())
    assert dry["dry_run"] is True
    assert '"_aws"' not in capsys.readouterr().out  # a dry run counts nothing


def test_uploads_that_never_arrive_expire_and_a_late_upload_still_counts(world: dict[str, Any]) -> None:
    """AWAITING_UPLOAD past URL expiry + grace → EXPIRED (conditional); a younger one waits; a file
    that lands after all (an upload begun before its URL expired) is queued as usual."""
    records: RecordWriter = world["records"]
    expire_after = 900 + 3600
    stale, young = new_document_id(), new_document_id()
    records.put(stale, "AWAITING_UPLOAD", age_seconds=expire_after + 60, version=None)
    records.put(young, "AWAITING_UPLOAD", age_seconds=expire_after - 600, version=None)
    documents = DocumentsTable(world["table"])
    reaper = Reaper(
        documents=documents,
        executions=Executions(),
        replayer=Replayer(documents, world["workflow"]),
        settings=ReaperSettings(
            stuck_after_seconds=STUCK_AFTER, max_redrives=2, max_documents=50, expire_uploads_after_seconds=expire_after
        ),
    )
    report = reaper.reap()
    assert [d.document_id for d in report.expired] == [stale]
    assert records.get(stale)["status"] == "EXPIRED"
    assert "no file was uploaded" in records.get(stale)["error_detail"]
    assert records.get(young)["status"] == "AWAITING_UPLOAD"
    assert reaper.reap().expired == []  # settled: EXPIRED is not looked at again

    # A stale read loses: the record changed since (here: the upload arrived).
    racing = new_document_id()
    records.put(racing, "AWAITING_UPLOAD", age_seconds=expire_after + 60)
    suspect = documents.get(racing)
    assert suspect is not None
    records.put(racing, "QUEUED", age_seconds=0)
    with pytest.raises(Exception, match="changed since it was read"):
        documents.mark_expired(suspect, "expired")
    assert records.get(racing)["status"] == "QUEUED"

    late = DocumentsTable(world["table"]).mark_queued(
        document_id=stale,
        tenant_id="acme",
        ref=ObjectRef(bucket="docs", key=f"raw/acme/{stale}/a.pdf", version="v9"),
        event_time="2026-01-01T00:00:00+00:00",
        size_bytes=1000,
    )
    assert late.outcome is QueueOutcome.QUEUED
    assert records.get(stale)["status"] == "QUEUED"
