"""Sources on the local stack: the template's sync workflow and function, moto's S3 as a team's
bucket, a loopback web site, and the API. A sync makes each item one document that search cites by
its URI; a second sync with nothing changed writes no version; a change and a removal are exactly
what the next sync re-ingests and deletes; a custom source upserts by external id."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from local.client import OfflineClient
from tests.support.web_site import serve_site

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
TERMINAL_SYNC = ("COMPLETE", "FAILED")


def created(client: OfflineClient, body: dict[str, Any]) -> str:
    response = client.request("POST", "/sources", body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def synced(client: OfflineClient, source_id: str, timeout: float = 240) -> dict[str, Any]:
    started = client.request("POST", f"/sources/{source_id}/sync")
    assert started.status_code == 202, started.text
    sync_id = started.json()["id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.request("GET", f"/sources/{source_id}/syncs/{sync_id}").json()
        if job["status"] in TERMINAL_SYNC:
            return dict(job)
        time.sleep(0.3)
    raise TimeoutError(f"sync {sync_id} still running after {timeout:.0f}s")


def documents_of(client: OfflineClient, source_id: str) -> dict[str, dict[str, Any]]:
    """The source's live documents by source URI."""
    found: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        page = client.request("GET", "/documents?limit=100" + (f"&cursor={cursor}" if cursor else "")).json()
        for document in page["items"]:
            if document.get("source_id") == source_id and document["status"] not in ("DELETING", "DELETED"):
                found[document["source_uri"]] = document
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def ready(client: OfflineClient, source_id: str, count: int) -> dict[str, dict[str, Any]]:
    documents = documents_of(client, source_id)
    assert len(documents) == count, sorted(documents)
    states = client.wait_until_done([d["document_id"] for d in documents.values()], timeout_seconds=300)
    assert {s["status"] for s in states.values()} == {"READY"}, states
    return documents_of(client, source_id)


def entered_states(stepfunctions: Any, outputs: dict[str, Any], sync_id: str) -> set[str]:
    """The states a sync's execution (named by its sync id) entered."""
    machine = outputs["SourceSyncStateMachineArn"]
    arn = machine.replace(":stateMachine:", ":execution:") + f":{sync_id}"
    events = stepfunctions.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return {event["stateEnteredEventDetails"]["name"] for event in events if "stateEnteredEventDetails" in event}


def test_an_s3_source_syncs_changes_and_deletions_and_search_cites_the_bucket(
    client: OfflineClient, aws_clients: dict[str, Any], local_stack: dict[str, Any]
) -> None:
    s3 = aws_clients["s3"]
    bucket = f"team-docs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    bodies = {
        "handbook/tides.md": "# Tides\nSpring tides follow the new and the full moon at Fairhaven harbour.\n",
        "handbook/lighthouses.md": "# Lighthouses\nThe Kestrel Point light flashes white every nine seconds.\n",
        "handbook/ferries.md": "# Ferries\nThe morning ferry to Gull Island leaves at half past seven.\n",
        "handbook/notes.txt": "not matched by the include glob",
    }
    for key, text in bodies.items():
        s3.put_object(Bucket=bucket, Key=key, Body=text.encode())
    sidecar = {"metadataAttributes": {"team": "harbour"}}
    s3.put_object(Bucket=bucket, Key="handbook/tides.md.metadata.json", Body=json.dumps(sidecar).encode())
    source_id = created(
        client,
        {
            "kind": "s3",
            "name": "handbook",
            "config": {"bucket": bucket, "prefix": "handbook/", "include": ["*.md"]},
            "metadata": {"origin": "bucket"},
            "schedule": "rate(1 day)",
        },
    )
    # The schedule lives in EventBridge Scheduler (moto keeps it; locally nothing fires it).
    assert client.request("GET", f"/sources/{source_id}").json()["schedule"] == "rate(1 day)"

    first = synced(client, source_id)
    assert first["status"] == "COMPLETE", first
    assert (first["statistics"]["added"], first["statistics"]["failed"], first["statistics"]["deleted"]) == (3, 0, 0)
    # The objects were applied by the workflow's Distributed Map, not in the listing step.
    assert "FanOut" in entered_states(aws_clients["stepfunctions"], local_stack, first["id"])
    documents = ready(client, source_id, 3)
    tides = documents[f"s3://{bucket}/handbook/tides.md"]
    assert tides["metadata"] == {"origin": "bucket", "team": "harbour"}
    hits = client.search("when are the spring tides", k=3).json()["passages"]
    assert hits[0]["source_uri"] == f"s3://{bucket}/handbook/tides.md"

    # Nothing changed: no document gets a version, nothing is read.
    again = synced(client, source_id)
    assert again["statistics"]["unchanged"] == 3 and again["statistics"]["scanned"] == 3
    assert again["statistics"]["added"] == again["statistics"]["modified"] == again["statistics"]["deleted"] == 0
    assert {uri: d["updated_at"] for uri, d in documents_of(client, source_id).items()} == {
        uri: d["updated_at"] for uri, d in documents.items()
    }

    # One changed, one removed: exactly those.
    s3.put_object(
        Bucket=bucket,
        Key="handbook/ferries.md",
        Body=b"# Ferries\nThe morning ferry to Gull Island now leaves at a quarter to eight.\n",
    )
    s3.delete_object(Bucket=bucket, Key="handbook/lighthouses.md")
    third = synced(client, source_id)
    counts = {name: third["statistics"][name] for name in ("modified", "deleted", "unchanged", "added")}
    assert counts == {"modified": 1, "deleted": 1, "unchanged": 1, "added": 0}, third
    after = ready(client, source_id, 2)
    assert (
        after[f"s3://{bucket}/handbook/ferries.md"]["document_id"]
        == documents[f"s3://{bucket}/handbook/ferries.md"]["document_id"]
    )
    hits = client.search("Kestrel Point light flashes", k=5).json()["passages"]
    assert all(hit.get("source_uri") != f"s3://{bucket}/handbook/lighthouses.md" for hit in hits)

    listed = client.request("GET", f"/sources/{source_id}/syncs").json()["syncs"]
    assert [job["id"] for job in listed] == [third["id"], again["id"], first["id"]]


def test_a_custom_source_upserts_by_external_id_and_deletes(client: OfflineClient) -> None:
    source_id = created(client, {"kind": "custom", "name": "wiki"})
    item = {"filename": "berths.md", "text": "# Berths\nVisitors moor on the north pontoon, berths 40 to 52.\n"}
    path = f"/sources/{source_id}/items/page-berths"
    first = client.request("PUT", path, item)
    assert first.status_code == 200, first.text
    assert first.json()["outcome"] == "added"
    document_id = first.json()["document_id"]
    assert client.wait_until_done([document_id], timeout_seconds=300)[document_id]["status"] == "READY"
    same = client.request("PUT", path, item).json()
    assert same == {"external_id": "page-berths", "document_id": document_id, "outcome": "unchanged"}
    assert client.document(document_id)["source_uri"] == f"custom://{source_id}/page-berths"
    assert client.request("DELETE", path).status_code == 204
    assert client.document(document_id)["status"] == "DELETED"
    assert client.request("DELETE", path).status_code == 404
    refused = client.request("POST", f"/sources/{source_id}/sync")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "SOURCE_KIND_MISMATCH"


def test_a_web_source_crawls_a_loopback_site_and_a_resync_reads_only_what_changed(client: OfflineClient) -> None:
    with serve_site() as site:
        source_id = created(
            client,
            {
                "kind": "web",
                "name": "site",
                "config": {"seeds": [site.url("/site/")], "max_pages": 40, "max_depth": 3},
            },
        )
        first = synced(client, source_id, timeout=300)
        assert first["status"] == "COMPLETE", first
        documents = documents_of(client, source_id)
        assert site.url("/site/about.html") in documents and site.url("/site/files/report.pdf") in documents
        assert not any("/private/" in uri or "/outside/" in uri for uri in documents)
        assert not any(path.startswith("/site/private/") for path in site.paths())
        failed_codes = {failure["code"] for failure in first["failures"]}
        assert "WEB_PAGE_TOO_LARGE" in failed_codes
        second = synced(client, source_id, timeout=300)
        assert second["statistics"]["added"] == second["statistics"]["modified"] == 0, second
        assert second["statistics"]["unchanged"] >= len(documents) - 1


def test_a_source_on_a_private_address_and_a_delete_without_a_choice_are_refused(client: OfflineClient) -> None:
    refused = client.request(
        "POST", "/sources", {"kind": "web", "name": "metadata", "config": {"seeds": ["http://169.254.169.254/"]}}
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "SOURCE_CONFIG_INVALID"
    source_id = created(client, {"kind": "custom", "name": "to-delete"})
    assert client.request("DELETE", f"/sources/{source_id}").status_code == 400
    assert client.request("DELETE", f"/sources/{source_id}?documents=keep").status_code == 204
    assert client.request("GET", f"/sources/{source_id}").status_code == 404
