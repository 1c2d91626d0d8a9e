"""Issue 43's crash guarantee for an S3 source (docs/sources.md): ``kill -9`` of the whole local
stack in the middle of a sync of 1,200 objects (two listing pages), then a restart on the same
state; the sync completes, each object is exactly one document, none missing, none deleted.

A stack of its own, with the ingest queue's consumer disabled: the guarantee is the sync's, and
the documents through Parse and Embed would add most of an hour here without changing it.
The team's bucket is a resource of the test's template: the kept state refuses, at the restart,
data for a bucket the template does not create (docs/local-stack.md, What a restart keeps).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess, template_with_environment
from local.runtime.settings import REPO_ROOT, stack_name_from_cdk_json
from tests.support.source_corpus import corpus, object_versions, put_objects, source_records

pytestmark = pytest.mark.reliability

# The figure is 2,000 objects (docs/benchmarks.md has that run); 1,200 cross the same page
# boundary in the test suite's time.
OBJECTS = 1_200
# Past the first listing page's checkpoint (1,000 items a page) and inside the second page.
KILL_AFTER_DOCUMENTS = 1_100
# A whole sync of these takes a minute or two here; this is plenty for what is left of it.
RESUME_DEADLINE_SECONDS = 300
GONE = ("DELETING", "DELETED")


SOURCE_BUCKET = f"crash-notes-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[OfflineStackProcess]:
    template = template_with_environment(
        REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json", {}
    )
    for logical_id, resource in template["Resources"].items():
        if logical_id.startswith("IntakeIntakeFunctionSqsEventSource"):
            resource["Properties"]["Enabled"] = False
    template["Resources"]["TeamNotesBucket"] = {
        "Type": "AWS::S3::Bucket",
        "Properties": {"BucketName": SOURCE_BUCKET, "VersioningConfiguration": {"Status": "Enabled"}},
    }
    path = tmp_path / "template.json"
    path.write_text(json.dumps(template))
    process = OfflineStackProcess(tmp_path / "stack", template=path)
    try:
        process.start(timeout=300)
        yield process
    finally:
        process.stop()


def _clients(outputs: dict[str, Any]) -> tuple[Any, Any, Any]:
    options = {
        "endpoint_url": outputs["MotoEndpoint"],
        "region_name": outputs.get("Region", "us-east-1"),
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    table = boto3.resource("dynamodb", **options).Table(outputs["DocumentsTableName"])  # type: ignore[call-overload]
    return boto3.client("s3", **options), table, boto3.client("stepfunctions", **options)  # type: ignore[call-overload]


def _count(table: Any, source_id: str) -> int:
    return sum(len(found) for found in source_records(table, source_id).values())


def _wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f}s")
        time.sleep(0.5)


def _sync_executions(sfn: Any, outputs: dict[str, Any]) -> list[str]:
    """The source sync workflow's executions moto knows of, as ``name status`` (for the message)."""
    arns = [
        str(arn)
        for logical_id, arn in outputs["Resources"].items()
        if logical_id.startswith("SourcesSyncStateMachine") and ":stateMachine:" in str(arn)
    ]
    try:
        return [
            f"{e['name']} {e['status']}" for arn in arns for e in sfn.list_executions(stateMachineArn=arn)["executions"]
        ]
    except Exception as exc:  # the listing is only for the failure message
        return [f"(listing failed: {type(exc).__name__})"]


def test_a_sync_killed_mid_listing_completes_after_a_restart_with_each_object_once(
    stack: OfflineStackProcess,
) -> None:
    s3, table, sfn = _clients(stack.outputs)
    client = OfflineClient(api_url=stack.outputs["ApiUrl"], tenant_id=f"crash-{uuid.uuid4().hex[:8]}")
    bucket = SOURCE_BUCKET
    bodies = corpus(OBJECTS)
    put_objects(s3, bucket, bodies)
    expected_uris = {f"s3://{bucket}/{key}" for key in bodies}
    created = client.request("POST", "/sources", {"kind": "s3", "name": "notes", "config": {"bucket": bucket}})
    assert created.status_code == 201, created.text
    source_id = created.json()["id"]
    started = client.request("POST", f"/sources/{source_id}/sync")
    assert started.status_code == 202, started.text
    sync_id = started.json()["id"]

    _wait(lambda: _count(table, source_id) >= KILL_AFTER_DOCUMENTS, 600, "the sync writing its second page")
    stack.kill()
    stack.restart(timeout=300)
    s3, table, sfn = _clients(stack.outputs)
    client = OfflineClient(api_url=stack.outputs["ApiUrl"], tenant_id=client.tenant_id)
    at_restart = client.request("GET", f"/sources/{source_id}/syncs/{sync_id}").json()
    assert at_restart["status"] == "IN_PROGRESS", at_restart
    assert 0 < _count(table, source_id) < OBJECTS  # killed mid-sync, not after it

    def ended() -> bool:
        return client.request("GET", f"/sources/{source_id}/syncs/{sync_id}").json()["status"] != "IN_PROGRESS"

    try:
        _wait(ended, RESUME_DEADLINE_SECONDS, f"sync {sync_id} ending after the restart")
    except AssertionError as stuck:
        again = client.request("POST", f"/sources/{source_id}/sync")
        job = client.request("GET", f"/sources/{source_id}/syncs/{sync_id}").json()
        raise AssertionError(
            f"{stuck}: nothing resumed it. The job: {job['status']}, listing_complete "
            f"{job['listing_complete']}, statistics {job['statistics']}; documents written "
            f"{_count(table, source_id)} of {OBJECTS}; sync workflow executions after the restart: "
            f"{_sync_executions(sfn, stack.outputs)}; a new POST /sync answers {again.status_code} "
            f"{again.text[:200]}"
        ) from None

    job = client.request("GET", f"/sources/{source_id}/syncs/{sync_id}").json()
    assert job["status"] == "COMPLETE", job
    assert job["statistics"]["added"] == OBJECTS and job["statistics"]["deleted"] == 0, job
    assert job["statistics"]["failed"] == 0, job

    records = source_records(table, source_id)
    assert set(records) == expected_uris  # none missing, none extra
    duplicates = {uri: len(found) for uri, found in records.items() if len(found) != 1}
    assert duplicates == {}
    deleted = sorted(uri for uri, found in records.items() if found[0]["status"] in GONE)
    assert deleted == []
    uploads = object_versions(s3, stack.outputs["BucketName"], f"raw/{client.tenant_id}/")
    assert len(uploads) == OBJECTS
    assert {key: ids for key, ids in uploads.items() if len(ids) != 1} == {}  # never written twice
