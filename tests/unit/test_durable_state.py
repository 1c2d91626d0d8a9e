"""The local stack's kept state (local/runtime/persistence/durable_state.py) on moto's in-process backends:
what a write leaves on disk, what a start puts back, what a crash can cut, what is refused."""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.runtime.persistence.durable_state import FORMAT_VERSION, DurableState, StateRefusedError
from local.runtime.persistence.journal import MAGIC, Journal, read_journal

pytestmark = pytest.mark.unit

ACCOUNT = "123456789012"
REGION = "us-east-1"
BUCKET = "raw-documents"
TABLE = "documents"
QUEUE = "ingest"
DLQ = "ingest-dlq"


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


def _clients(state: DurableState | None = None) -> dict[str, Any]:
    """boto3 clients of moto in-process; with ``state``, each call is one request scope, as the
    WSGI middleware makes each HTTP request to the stack's moto server."""
    clients = {name: boto3.client(name, region_name=REGION) for name in ("s3", "dynamodb", "sqs")}
    if state is not None:
        scopes: list[Any] = []

        def enter(**_: Any) -> None:
            scopes.append(state.request_scope())
            scopes[-1].__enter__()

        def leave(**_: Any) -> None:
            scopes.pop().__exit__(None, None, None)

        for client in clients.values():
            client.meta.events.register("before-call.*.*", enter)
            client.meta.events.register("after-call.*.*", leave)
            client.meta.events.register("after-call-error.*.*", leave)
    return clients


def _provision(clients: dict[str, Any]) -> dict[str, str]:
    """What the template creates at every start: empty containers."""
    clients["s3"].create_bucket(Bucket=BUCKET)
    clients["s3"].put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    clients["dynamodb"].create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    dlq_url = clients["sqs"].create_queue(QueueName=DLQ)["QueueUrl"]
    dlq_arn = clients["sqs"].get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": "3"}}'
    queue_url = clients["sqs"].create_queue(QueueName=QUEUE, Attributes={"RedrivePolicy": redrive})["QueueUrl"]
    return {"queue": queue_url, "dlq": dlq_url}


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _state(directory: Path) -> DurableState:
    return DurableState(directory, account_id=ACCOUNT, region=REGION, checkpoint_seconds=3600)


def _journaling(state_dir: Path) -> tuple[DurableState, dict[str, Any], dict[str, str]]:
    """Inside mock_aws: the containers provisioned, the state journaling, clients whose calls are requests."""
    urls = _provision(_clients())
    state = _state(state_dir)
    state.start()
    return state, _clients(state), urls


def _restored(state_dir: Path) -> tuple[DurableState, dict[str, Any], dict[str, str]]:
    """Inside mock_aws: a new start's containers, then the kept state put back into them."""
    clients = _clients()
    urls = _provision(clients)
    state = _state(state_dir)
    state.restore(state.load())
    return state, clients, urls


def _crash(state: DurableState) -> None:
    """What a kill -9 leaves: no final checkpoint, the hooks gone with the process."""
    state._stop.set()
    assert state._hooks is not None and state._journal is not None
    state._hooks.remove()
    state._journal.close()
    state._journal = None


def _write_everything(clients: dict[str, Any], urls: dict[str, str]) -> dict[str, Any]:
    s3, dynamodb, sqs = clients["s3"], clients["dynamodb"], clients["sqs"]
    first = s3.put_object(Bucket=BUCKET, Key="t/doc.pdf", Body=b"%PDF-1 first")["VersionId"]
    second = s3.put_object(Bucket=BUCKET, Key="t/doc.pdf", Body=b"%PDF-1 second", Metadata={"tenant": "t"})["VersionId"]
    s3.put_object(Bucket=BUCKET, Key="t/gone.pdf", Body=b"%PDF-1 gone")
    marker = s3.delete_object(Bucket=BUCKET, Key="t/gone.pdf")["VersionId"]
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "doc"}, "sk": {"S": "v1"}, "status": {"S": "QUEUED"}})
    dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "doc"}, "sk": {"S": "v1"}},
        UpdateExpression="SET #s = :s, attempts = :a",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "READY"}, ":a": {"N": "2"}},
    )
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "doc"}, "sk": {"S": "v0"}})
    dynamodb.delete_item(TableName=TABLE, Key={"pk": {"S": "doc"}, "sk": {"S": "v0"}})
    dynamodb.transact_write_items(
        TransactItems=[{"Put": {"TableName": TABLE, "Item": {"pk": {"S": "other"}, "sk": {"S": "v1"}}}}]
    )
    kept = sqs.send_message(QueueUrl=urls["queue"], MessageBody="kept")["MessageId"]
    received = sqs.send_message(QueueUrl=urls["queue"], MessageBody="received once")["MessageId"]
    deleted = sqs.send_message(QueueUrl=urls["queue"], MessageBody="deleted")["MessageId"]
    for message in sqs.receive_message(QueueUrl=urls["queue"], MaxNumberOfMessages=10, VisibilityTimeout=600)[
        "Messages"
    ]:
        if message["MessageId"] == deleted:
            sqs.delete_message(QueueUrl=urls["queue"], ReceiptHandle=message["ReceiptHandle"])
    return {"versions": [first, second], "marker": marker, "messages": {kept, received}, "deleted": deleted}


def _assert_restored(clients: dict[str, Any], urls: dict[str, str], written: dict[str, Any]) -> None:
    s3, dynamodb, sqs = clients["s3"], clients["dynamodb"], clients["sqs"]
    versions = s3.list_object_versions(Bucket=BUCKET, Prefix="t/doc.pdf")["Versions"]
    assert {v["VersionId"] for v in versions} == set(written["versions"])
    assert [v["VersionId"] for v in versions if v["IsLatest"]] == [written["versions"][1]]
    latest = s3.get_object(Bucket=BUCKET, Key="t/doc.pdf")
    assert latest["Body"].read() == b"%PDF-1 second"
    assert latest["VersionId"] == written["versions"][1]
    assert latest["Metadata"] == {"tenant": "t"}
    old = s3.get_object(Bucket=BUCKET, Key="t/doc.pdf", VersionId=written["versions"][0])
    assert old["Body"].read() == b"%PDF-1 first"
    markers = s3.list_object_versions(Bucket=BUCKET, Prefix="t/gone.pdf")["DeleteMarkers"]
    assert [m["VersionId"] for m in markers] == [written["marker"]]
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=BUCKET, Key="t/gone.pdf")
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "doc"}, "sk": {"S": "v1"}})["Item"]
    assert item["status"] == {"S": "READY"} and item["attempts"] == {"N": "2"}
    assert "Item" not in dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "doc"}, "sk": {"S": "v0"}})
    assert "Item" in dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "other"}, "sk": {"S": "v1"}})
    # In flight at the stop: visible again at once, the receive count kept.
    messages = sqs.receive_message(
        QueueUrl=urls["queue"], MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    assert {m["MessageId"] for m in messages} == written["messages"]
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "2" for m in messages)


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_what_was_written_comes_back_after_a_stop(state_dir: Path, stop: str) -> None:
    with mock_aws():
        state, clients, urls = _journaling(state_dir)
        written = _write_everything(clients, urls)
        if stop == "clean":
            state.stop()
            assert read_journal(state.journal_path).records[1:] == []  # all in the snapshot
        else:
            _crash(state)
            assert len(read_journal(state.journal_path).records) > 10  # the journal holds the writes
    with mock_aws():
        clients = _clients()
        urls = _provision(clients)
        restarted = _state(state_dir)
        report = restarted.restore(restarted.load())  # the report of what _restored() does
        assert (report.objects, report.items, report.messages) == (2, 2, 2)
        _assert_restored(clients, urls, written)


def test_a_restart_after_a_restart_keeps_everything_and_drops_unreferenced_bodies(state_dir: Path) -> None:
    with mock_aws():
        state, clients, urls = _journaling(state_dir)
        written = _write_everything(clients, urls)
        clients["s3"].put_object(Bucket=BUCKET, Key="t/scratch", Body=b"scratch")
        clients["s3"].delete_object(Bucket=BUCKET, Key="t/scratch", VersionId=_latest(clients, "t/scratch"))
        _crash(state)
    for _ in range(2):
        with mock_aws():
            state, _, _ = _restored(state_dir)
            state.start()
            state.stop()
    bodies = {path.read_bytes() for path in (state_dir / "blobs").glob("*/*")}
    assert bodies == {b"%PDF-1 first", b"%PDF-1 second", b"%PDF-1 gone"}
    with mock_aws():
        _, clients, urls = _restored(state_dir)
        _assert_restored(clients, urls, written)


def _latest(clients: dict[str, Any], key: str) -> str:
    return str(clients["s3"].head_object(Bucket=BUCKET, Key=key)["VersionId"])


def test_a_torn_last_record_is_cut_and_the_rest_loads(state_dir: Path) -> None:
    with mock_aws():
        state, clients, _ = _journaling(state_dir)
        clients["dynamodb"].put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"S": "1"}})
        clients["dynamodb"].put_item(TableName=TABLE, Item={"pk": {"S": "b"}, "sk": {"S": "1"}})
        _crash(state)
    whole = state.journal_path.read_bytes()
    state.journal_path.write_bytes(whole[:-3])  # the kill came in the middle of the last write
    loaded = _state(state_dir).load()
    assert loaded.journal_dropped_bytes > 0
    pks = {json_key[2] for json_key in loaded.entities if json_key[0] == "dynamodb"}
    assert pks == {'{"S":"a"}'}
    Journal.open(state.journal_path).close()  # opening for append cuts the torn tail
    assert read_journal(state.journal_path).dropped_bytes == 0


def test_a_state_of_another_format_is_refused_with_what_to_do(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    header = {"format": FORMAT_VERSION + 1, "moto": "5.2.5", "written_at": 0}
    (state_dir / "snapshot.pickle").write_bytes(pickle.dumps({"header": header, "entities": {}}))
    with pytest.raises(StateRefusedError) as refused:
        _state(state_dir).load()
    message = str(refused.value)
    assert f"format {FORMAT_VERSION + 1}" in message and "python -m local.runtime reset" in message


def test_a_state_of_another_moto_is_refused(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    header = {"format": FORMAT_VERSION, "moto": "4.0.0", "written_at": 0}
    (state_dir / "snapshot.pickle").write_bytes(pickle.dumps({"header": header, "entities": {}}))
    with pytest.raises(StateRefusedError, match=re.escape("moto 4.0.0")):
        _state(state_dir).load()


def test_a_file_that_is_not_a_journal_is_refused(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "journal.log").write_bytes(b"not a journal")
    with pytest.raises(Exception, match="not a rag-ingest journal"):
        _state(state_dir).load()


def test_data_for_a_table_the_template_dropped_is_refused_before_anything_loads(state_dir: Path) -> None:
    with mock_aws():
        state, clients, urls = _journaling(state_dir)
        _write_everything(clients, urls)
        state.stop()
    with mock_aws():
        clients = _clients()
        clients["s3"].create_bucket(Bucket=BUCKET)  # the new template has no table and no queues
        restarted = _state(state_dir)
        with pytest.raises(StateRefusedError, match=re.escape(f"dynamodb {TABLE}")):
            restarted.restore(restarted.load())
        assert clients["s3"].list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0  # nothing half-loaded


def test_the_journal_frame_rejects_a_corrupt_record(tmp_path: Path) -> None:
    path = tmp_path / "journal.log"
    journal = Journal.open(path, fsync=False)
    journal.append(b"first")
    journal.append(b"second")
    journal.close()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # a flipped bit in the last payload
    path.write_bytes(bytes(data))
    contents = read_journal(path)
    assert contents.records == [b"first"]
    assert contents.dropped_bytes == 4 + 4 + len(b"second")
    assert path.read_bytes().startswith(MAGIC)


def _entities(state: DurableState) -> Iterator[Any]:
    yield from state.entities.all_entities(state.blobs)
