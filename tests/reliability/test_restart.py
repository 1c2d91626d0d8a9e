"""What a restart keeps (docs/local-stack.md, "What a restart keeps"): a stack of its own, stopped
cleanly or with ``kill -9`` of its whole process group, and started again on the same state."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from rag_ingest.core.record import DocumentStatus

from local.runtime.harness import OfflineStackProcess, template_with_environment
from local.runtime.persistence.durable_state import FORMAT_VERSION
from local.runtime.persistence.journal import read_journal
from local.runtime.settings import REPO_ROOT, stack_name_from_cdk_json
from tests.support.pipeline_probe import SAMPLES, PipelineProbe, new_tenant, reconcile_through_cli, wait_until

pytestmark = pytest.mark.reliability

OPENSEARCH_URL = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")


def _template_with_short_ingest_visibility(target: Path) -> Path:
    """The synthesized template, the ingest queue's visibility timeout cut to the Intake timeout + 10 s.

    An upload the killed Intake had received comes back at the restart, fails on the killed
    invocation's idempotency lock (held until its timeout), and is redelivered after the queue's
    visibility timeout: 6x the Intake timeout in the template. Longer than the Intake timeout still
    means no redelivery while Intake runs, and the lock has expired by the next delivery.
    """
    template = template_with_environment(
        REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json", {}
    )
    resources = template["Resources"]
    [intake_timeout] = [
        int(r["Properties"]["Timeout"])
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function" and logical_id.startswith("IntakeIntakeFunction")
    ]
    [queue] = [
        r
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::SQS::Queue" and logical_id.startswith("IntakeIngestQueue")
    ]
    queue["Properties"]["VisibilityTimeout"] = intake_timeout + 10
    target.write_text(json.dumps(template))
    return target


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[OfflineStackProcess]:
    template = _template_with_short_ingest_visibility(tmp_path / "template.json")
    process = OfflineStackProcess(tmp_path / "stack", template=template)
    try:
        process.start(timeout=300)
        yield process
    finally:
        process.stop()


def _object_versions(probe: PipelineProbe, tenant: str) -> dict[str, list[str]]:
    versions: dict[str, list[str]] = {}
    pages = probe.s3.get_paginator("list_object_versions").paginate(Bucket=probe.bucket, Prefix=f"raw/{tenant}/")
    for page in pages:
        for version in page.get("Versions", []):
            versions.setdefault(version["Key"], []).append(version["VersionId"])
    return {key: sorted(ids) for key, ids in versions.items()}


def _assert_indexed_once(probe: PipelineProbe, document_id: str) -> None:
    """READY with no error; the index holds the current version's chunks once each (as many as
    chunk_count, ids deterministic) and nothing of another version. (Executions are not kept
    across a restart, so the probe's one-execution check does not apply.)"""
    record = probe.record(document_id)
    assert record.status == DocumentStatus.READY and record.error_code is None, record
    assert record.chunk_count and record.version, record
    assert probe.index_count(document_id, record.version) == record.chunk_count
    assert probe.index_count(document_id) == record.chunk_count


def test_kill_9_keeps_what_was_acknowledged_and_resumes_the_rest_and_a_clean_stop_keeps_all(
    stack: OfflineStackProcess,
) -> None:
    probe = PipelineProbe(stack.outputs, OPENSEARCH_URL)
    tenant = new_tenant("restart")
    client = probe.client(tenant)
    token_before = client.token()

    ready = probe.upload(client, SAMPLES / "urban-birds.pdf")
    probe.wait_terminal([ready.document_id])
    ready_before = probe.record(ready.document_id)
    assert ready_before.status == DocumentStatus.READY

    # Held in Embed (a slow embedding call) when the stack dies: it was mid-workflow.
    probe_stack_embed = probe.stage_function("EMBED")
    in_flight = probe.ticket(client, "sourdough.pdf")
    stack.arm_fault(probe_stack_embed, "delay", after_seconds=120, match=in_flight.document_id)
    probe.send(in_flight, SAMPLES / "sourdough.pdf")
    wait_until(
        lambda: probe.record(in_flight.document_id).attempts.get("EMBED", 0) >= 1,
        timeout=120,
        what="the second document reaching Embed",
    )
    # Accepted by S3 a moment before the kill: the intake may not even have seen it.
    accepted = probe.upload(client, SAMPLES / "lighthouses.pdf")
    versions_before = _object_versions(probe, tenant)

    stack.kill()  # kill -9 of serve, its workers and the embedding server, at once
    stack.restart(timeout=300)
    probe = PipelineProbe(stack.outputs, OPENSEARCH_URL)

    # Everything acknowledged is there: the object versions, the READY record, the sign-in.
    assert _object_versions(probe, tenant) == versions_before
    assert probe.record(ready.document_id) == ready_before
    answer = requests.get(
        f"{probe.api_url}/documents/{ready.document_id}",
        headers={"Authorization": f"Bearer {token_before}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text  # a token issued before the kill still signs in
    assert answer.json()["status"] == "READY"

    # What was in flight finishes: the held document re-driven, the unseen upload redelivered.
    records = probe.wait_terminal([in_flight.document_id, accepted.document_id], timeout=240)
    assert {record.status for record in records.values()} == {DocumentStatus.READY}
    assert records[in_flight.document_id].replays >= 1  # re-driven from its checkpoints, not re-uploaded
    for document_id in (ready.document_id, in_flight.document_id, accepted.document_id):
        _assert_indexed_once(probe, document_id)
    report = reconcile_through_cli(stack.state_dir / "outputs.json", tenant)
    assert report["findings"] == [], report["findings"]
    assert report["records"] == 3

    # Then a clean stop (make stack-down): everything folds into the snapshot, the journal is
    # empty, and the next start has it all again.
    settled = probe.records([ready.document_id, in_flight.document_id, accepted.document_id])
    stack.stop()
    assert len(read_journal(stack.state_dir / "data" / "journal.log").records) == 1  # its header only
    stack.restart(timeout=300)
    probe = PipelineProbe(stack.outputs, OPENSEARCH_URL)
    assert probe.records(settled) == settled
    assert _object_versions(probe, tenant) == {**versions_before, accepted.key: versions_before[accepted.key]}
    body = probe.s3.get_object(Bucket=probe.bucket, Key=ready.key, VersionId=ready_before.version)["Body"].read()
    assert body == (SAMPLES / "urban-birds.pdf").read_bytes()


def test_a_state_of_another_version_is_refused_at_start_with_what_to_do(tmp_path: Path) -> None:
    import pickle

    data = tmp_path / "stack" / "data"
    data.mkdir(parents=True)
    header = {"format": FORMAT_VERSION + 1, "moto": "0", "written_at": 0}
    (data / "snapshot.pickle").write_bytes(pickle.dumps({"header": header, "entities": {}}))
    process = OfflineStackProcess(tmp_path / "stack")
    with pytest.raises(RuntimeError) as refused:
        process.start(timeout=120)
    message = str(refused.value)
    assert f"format {FORMAT_VERSION + 1}" in message
    assert "python -m local.runtime reset" in message
    assert (data / "snapshot.pickle").exists()  # refused, never rewritten
