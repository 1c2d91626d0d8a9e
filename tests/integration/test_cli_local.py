"""``python -m rag_ingest.cli --local`` against moto's server through an outputs.json, as the
local stack writes it: the same reports as the Lambda functions, as JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.cli import main
from rag_ingest.ids import new_document_id

from tests.support.aws import REPO, moto_server
from tests.support.operations import RecordWriter, create_documents_table, create_state_machine

pytestmark = pytest.mark.integration


@pytest.fixture
def outputs(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with moto_server() as endpoint:
        sqs = boto3.client("sqs")
        suffix = uuid.uuid4().hex[:6]
        table = f"documents-{suffix}"
        create_documents_table(table)
        values = {
            "MotoEndpoint": endpoint,
            "Region": "us-east-1",
            "DocumentsTableName": table,
            "DeadLetterQueueUrl": sqs.create_queue(QueueName=f"dlq-{suffix}")["QueueUrl"],
            "IngestQueueUrl": sqs.create_queue(QueueName=f"ingest-{suffix}")["QueueUrl"],
            "StateMachineArn": create_state_machine(),
        }
        path = tmp_path / "outputs.json"
        path.write_text(json.dumps(values))
        yield {"path": path, "records": RecordWriter(table), "sqs": sqs, **values}


def cli(outputs: dict[str, Any], capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["--local", "--outputs", str(outputs["path"]), *argv])
    return code, json.loads(capsys.readouterr().out)


def test_replay_reap_and_redrive_from_the_command_line(
    outputs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    records: RecordWriter = outputs["records"]
    failed, stuck = new_document_id(), new_document_id()
    records.put(failed, "FAILED", age_seconds=600, error_code="INTERNAL_ERROR")
    records.put(stuck, "QUEUED", age_seconds=7200)

    code, dry = cli(outputs, capsys, "replay", "--dry-run")
    assert code == 0 and [d["document_id"] for d in dry["would_replay"]] == [failed]
    code, replayed = cli(outputs, capsys, "replay", "--error-code", "INTERNAL_ERROR", "--older-than", "5m")
    assert code == 0 and replayed["replayed"][0]["execution_name"].endswith("-r1")
    assert records.get(failed)["status"] == "QUEUED"

    code, reaped = cli(outputs, capsys, "reap", "--stuck-after", "1h")
    assert code == 0 and [d["document_id"] for d in reaped["redriven"]] == [stuck]

    outputs["sqs"].send_message(QueueUrl=outputs["DeadLetterQueueUrl"], MessageBody="not an event")
    code, redriven = cli(outputs, capsys, "redrive")
    assert code == 0 and redriven["moved"] == [] and redriven["skipped"][0]["reason"].startswith("unparseable")


def test_python_dash_m_entry_point(outputs: dict[str, Any]) -> None:
    # The module runs as documented, in a process of its own (no AWS_ENDPOINT_URL: outputs.json decides).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    result = subprocess.run(
        [sys.executable, "-m", "rag_ingest.cli", "--local", "--outputs", str(outputs["path"]), "reap", "--dry-run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["dry_run"] is True
