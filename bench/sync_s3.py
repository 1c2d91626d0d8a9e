"""make bench-sync: the S3 source on the local stack (issue 43 section 6), in two phases, each on a
fresh stack on free ports with an index of its own.

``scale``: N objects (``--objects``) in a versioned moto bucket, synced with the ingest queue's
consumer disabled (the sync alone; each new document version is one queued message, counted);
then a re-sync with nothing changed, then 1 % changed and 1 % deleted. ``end-to-end``: the same at
``--e2e-objects`` with the whole pipeline: time to every document READY, Parse runs (the records'
attempts), embedding calls (the embedding server's counters), and deleted documents gone from
search. Prints a table, writes bench/results/sync-s3-<time>.json; exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import requests

from eval.stack import eval_template
from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import DEFAULT_OPENSEARCH_URL, REPO_ROOT, stack_name_from_cdk_json
from tests.support.source_corpus import (
    codeword,
    corpus,
    delete_objects,
    document_text,
    object_versions,
    put_objects,
    source_records,
)

RESULTS = REPO_ROOT / "bench" / "results"
GONE = ("DELETING", "DELETED")
PREFIX = "notes/"


@dataclass
class Check:
    name: str
    expected: Any
    measured: Any

    @property
    def ok(self) -> bool:
        return bool(self.expected == self.measured)


@dataclass
class Phase:
    name: str
    objects: int
    pipeline: bool
    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def check(self, name: str, expected: Any, measured: Any) -> None:
        self.checks.append(Check(name, expected, measured))
        shown = (
            (f"{len(expected)} items, the same" if expected == measured else f"{len(expected)} vs {len(measured)}")
            if isinstance(expected, list)
            else f"expected {expected}, measured {measured}"
        )
        print(f"  {'ok ' if expected == measured else 'FAILED'} {name}: {shown}")


class Bench:
    """One stack and one tenant: the API, moto's S3, SQS and DynamoDB, the embedding server."""

    def __init__(self, process: OfflineStackProcess, outputs: dict[str, Any]) -> None:
        self.process = process
        self.outputs = outputs
        self.client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"bench-{uuid.uuid4().hex[:8]}")
        options = {
            "endpoint_url": outputs["MotoEndpoint"],
            "region_name": outputs.get("Region", "us-east-1"),
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self.s3 = boto3.client("s3", **options)  # type: ignore[call-overload]
        self.sqs = boto3.client("sqs", **options)  # type: ignore[call-overload]
        self.table = boto3.resource("dynamodb", **options).Table(outputs["DocumentsTableName"])  # type: ignore[call-overload]
        self.stack_bucket = str(outputs["BucketName"])
        [self.ingest_queue] = [
            str(url) for logical_id, url in outputs["Resources"].items() if logical_id.startswith("IntakeIngestQueue")
        ]

    def create_source(self, bucket: str) -> str:
        body = {"kind": "s3", "name": "bench", "config": {"bucket": bucket, "prefix": PREFIX, "include": ["*.md"]}}
        answer = self.client.request("POST", "/sources", body)
        if answer.status_code != 201:
            raise SystemExit(f"POST /sources: {answer.status_code} {answer.text}")
        return str(answer.json()["id"])

    def sync(self, source_id: str, timeout: float) -> dict[str, Any]:
        """Start a sync and wait for its end; the job, with ``seconds`` from its own timestamps."""
        started = self.client.request("POST", f"/sources/{source_id}/sync")
        if started.status_code != 202:
            raise SystemExit(f"POST /sources/{source_id}/sync: {started.status_code} {started.text}")
        sync_id = started.json()["id"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = dict(self.client.request("GET", f"/sources/{source_id}/syncs/{sync_id}").json())
            if job["status"] != "IN_PROGRESS":
                if job["status"] != "COMPLETE":
                    raise SystemExit(f"sync {sync_id} ended {job['status']}: {job.get('error')}")
                job["seconds"] = round(_seconds(job["started_at"], job["ended_at"]), 2)
                return job
            time.sleep(0.5)
        raise SystemExit(f"sync {sync_id} still running after {timeout:.0f}s:\n{self.process.log_tail()}")

    def records(self, source_id: str) -> dict[str, list[dict[str, Any]]]:
        return source_records(self.table, source_id)

    def uploads(self) -> dict[str, list[str]]:
        return object_versions(self.s3, self.stack_bucket, f"raw/{self.client.tenant_id}/")

    def queued_messages(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.ingest_queue,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(value) for value in attributes.values())

    def embedding_counts(self) -> dict[str, int]:
        """The embedding server's own counters: requests by lane and texts embedded."""
        endpoint = urlsplit(str(self.outputs["EmbeddingEndpoint"]))
        stats = requests.get(f"{endpoint.scheme}://{endpoint.netloc}/_local/stats", timeout=10).json()
        return {
            **{f"requests_{k}": int(v) for k, v in stats["requests_by_lane"].items()},
            "texts": stats["batcher"]["texts"],
        }

    def wait_ready(self, source_id: str, uris: set[str], since: float, timeout: float) -> float:
        """Seconds from ``since`` until the live document of every URI in ``uris`` is READY (or
        FAILED: then the bench stops)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            records = self.records(source_id)
            live = {uri: [r for r in found if r["status"] not in GONE] for uri, found in records.items()}
            statuses = {uri: live[uri][0]["status"] if live.get(uri) else "MISSING" for uri in uris}
            failed = {uri: status for uri, status in statuses.items() if status == "FAILED"}
            if failed:
                raise SystemExit(f"documents FAILED: {sorted(failed)[:5]}")
            if all(status == "READY" for status in statuses.values()):
                return round(time.monotonic() - since, 1)
            time.sleep(2)
        raise SystemExit(f"documents not READY after {timeout:.0f}s")


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _live(records: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {uri: r for uri, found in records.items() for r in found if r["status"] not in GONE}


def _fingerprint(record: dict[str, Any]) -> tuple[Any, ...]:
    attempts = {stage: int(count) for stage, count in (record.get("attempts") or {}).items()}
    return record.get("version"), record.get("change_token"), record.get("updated_at"), tuple(sorted(attempts.items()))


def _parse_runs(records: dict[str, dict[str, Any]]) -> int:
    return sum(int((r.get("attempts") or {}).get("PARSE", 0)) for r in records.values())


def _searchable(bench: Bench, word: str) -> set[str]:
    answer = bench.client.search(word, k=5, mode="bm25")
    answer.raise_for_status()
    return {str(p.get("source_uri")) for p in answer.json()["passages"] if word in p["text"]}


def run_phase(name: str, objects: int, pipeline: bool, timeout: float, seed: int) -> Phase:
    phase = Phase(name, objects, pipeline)
    source_template = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not source_template.is_file():
        raise SystemExit(f"{source_template} not found: synthesize first (make synth)")
    index_name = f"rag-bench-sync-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="rag-bench-sync-") as work:
        template = eval_template(source_template, index_name)
        if not pipeline:
            for logical_id, resource in template["Resources"].items():
                if logical_id.startswith("IntakeIntakeFunctionSqsEventSource"):
                    resource["Properties"]["Enabled"] = False  # uploads queue up; nothing ingests them
        template_path = Path(work) / "template.json"
        template_path.write_text(json.dumps(template))
        process = OfflineStackProcess(Path(work) / "state", template=template_path)
        print(f"\n{name}: {objects} objects, pipeline {'on' if pipeline else 'off'}; starting a local stack ...")
        outputs = process.start(timeout=300)
        from rag_ingest.wiring import vector_store_for

        store = vector_store_for(process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL, index_name, 384)
        try:
            _measure(phase, Bench(process, outputs), timeout, seed)
        finally:
            process.stop()
            store.drop_index()
    return phase


def _measure(phase: Phase, bench: Bench, timeout: float, seed: int) -> None:
    bench.client.token()
    bucket = f"team-notes-{uuid.uuid4().hex[:8]}"
    bench.s3.create_bucket(Bucket=bucket)
    bench.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    bodies = corpus(phase.objects, PREFIX, seed)
    started = time.monotonic()
    put_objects(bench.s3, bucket, bodies)
    phase.figures["put_objects_seconds"] = round(time.monotonic() - started, 1)
    uris = {f"s3://{bucket}/{key}" for key in bodies}
    source_id = bench.create_source(bucket)
    f = phase.figures

    # 1. The first sync.
    queued_before = bench.queued_messages()
    clock = time.monotonic()
    first = bench.sync(source_id, timeout)
    f["first_sync_seconds"] = first["seconds"]
    f["first_sync_statistics"] = first["statistics"]
    print(f"  first sync: {first['seconds']} s, {first['statistics']}")
    phase.check("first sync: added", phase.objects, first["statistics"]["added"])
    if phase.pipeline:
        f["first_sync_to_all_ready_seconds"] = bench.wait_ready(source_id, uris, clock, timeout)
        print(f"  every document READY {f['first_sync_to_all_ready_seconds']} s after the sync started")
    else:
        f["first_sync_queued_messages"] = bench.queued_messages() - queued_before
        phase.check("first sync: uploads queued for ingest", phase.objects, f["first_sync_queued_messages"])
    records = bench.records(source_id)
    phase.check(
        "first sync: one live document per object",
        (len(uris), 1),
        (len(_live(records)), max(map(len, records.values()))),
    )
    uploads = bench.uploads()
    phase.check(
        "first sync: one upload version per document",
        (phase.objects, 1),
        (len(uploads), max(map(len, uploads.values()))),
    )

    # 2. Nothing changed.
    before = {uri: _fingerprint(r) for uri, r in _live(records).items()}
    embedding_before = bench.embedding_counts()
    queued_before = bench.queued_messages()
    again = bench.sync(source_id, timeout)
    f["resync_seconds"] = again["seconds"]
    f["resync_statistics"] = again["statistics"]
    print(f"  re-sync, nothing changed: {again['seconds']} s, {again['statistics']}")
    stats = again["statistics"]
    phase.check(
        "re-sync: unchanged / added+modified+deleted",
        (phase.objects, 0),
        (stats["unchanged"], stats["added"] + stats["modified"] + stats["deleted"]),
    )
    after_records = _live(bench.records(source_id))
    f["resync_new_versions"] = sum(len(v) for v in bench.uploads().values()) - sum(len(v) for v in uploads.values())
    f["resync_records_changed"] = sum(1 for uri, r in after_records.items() if before.get(uri) != _fingerprint(r))
    f["resync_queued_messages"] = bench.queued_messages() - queued_before
    f["resync_parse_runs"] = _parse_runs(after_records) - _parse_runs(_live(records))
    embedding_after = bench.embedding_counts()
    f["resync_embedding_calls"] = {k: embedding_after[k] - embedding_before.get(k, 0) for k in embedding_after}
    phase.check("re-sync: new upload versions", 0, f["resync_new_versions"])
    phase.check("re-sync: records changed (version, token, updated_at, attempts)", 0, f["resync_records_changed"])
    phase.check("re-sync: messages queued for ingest", 0, f["resync_queued_messages"])
    phase.check("re-sync: Parse runs", 0, f["resync_parse_runs"])
    phase.check("re-sync: embedding requests and texts", 0, sum(f["resync_embedding_calls"].values()))

    # 3. 1 % changed, 1 % deleted (disjoint, random but seeded).
    rng = random.Random(seed)
    keys = sorted(bodies)
    picked = rng.sample(keys, 2 * max(1, phase.objects // 100))
    changed, deleted = sorted(picked[: len(picked) // 2]), sorted(picked[len(picked) // 2 :])
    deleted_words = {f"s3://{bucket}/{key}": codeword(int(key[len(PREFIX) : -3])) for key in deleted}
    if phase.pipeline:
        found = {uri for uri, word in deleted_words.items() if uri in _searchable(bench, word)}
        phase.check("before: the to-be-deleted documents found by search", len(deleted_words), len(found))
    put_objects(bench.s3, bucket, {key: document_text(int(key[len(PREFIX) : -3]), seed, 1).encode() for key in changed})
    delete_objects(bench.s3, bucket, deleted)
    live_before = _live(bench.records(source_id))
    before = {uri: _fingerprint(r) for uri, r in live_before.items()}
    uploads_before = bench.uploads()
    embedding_before = bench.embedding_counts()
    queued_before = bench.queued_messages()
    clock = time.monotonic()
    third = bench.sync(source_id, timeout)
    f["change_sync_seconds"] = third["seconds"]
    f["change_sync_statistics"] = third["statistics"]
    f["changed"], f["deleted"] = len(changed), len(deleted)
    print(f"  {len(changed)} changed, {len(deleted)} deleted: {third['seconds']} s, {third['statistics']}")
    stats = third["statistics"]
    phase.check(
        "change sync: modified / deleted / unchanged / added",
        (len(changed), len(deleted), phase.objects - len(changed) - len(deleted), 0),
        (stats["modified"], stats["deleted"], stats["unchanged"], stats["added"]),
    )
    changed_uris = {f"s3://{bucket}/{key}" for key in changed}
    deleted_uris = set(deleted_words)
    if phase.pipeline:
        f["change_sync_to_ready_seconds"] = bench.wait_ready(source_id, changed_uris, clock, timeout)
    records_after = bench.records(source_id)
    live_after = _live(records_after)
    uploads_after = bench.uploads()
    new_version_keys = {
        uri
        for uri, r in live_before.items()
        if uri in live_after and len(uploads_after.get(str(r["key"]), [])) > len(uploads_before.get(str(r["key"]), []))
    }
    retouched = {uri for uri, r in live_after.items() if before.get(uri) != _fingerprint(r)}
    phase.check(
        "change sync: documents with a new version == the changed objects",
        sorted(changed_uris),
        sorted(new_version_keys),
    )
    phase.check("change sync: records that changed == the changed objects", sorted(changed_uris), sorted(retouched))
    phase.check("change sync: live documents == objects left", sorted(uris - deleted_uris), sorted(live_after))
    removed = {uri for uri, found in records_after.items() if all(r["status"] in GONE for r in found)}
    phase.check("change sync: removed documents == the deleted objects", sorted(deleted_uris), sorted(removed))
    phase.check(
        "change sync: same document id for a changed object",
        True,
        all(live_after[uri]["document_id"] == live_before[uri]["document_id"] for uri in changed_uris),
    )
    if phase.pipeline:
        embedding_after = bench.embedding_counts()
        f["change_embedding_calls"] = {k: embedding_after[k] - embedding_before.get(k, 0) for k in embedding_after}
        parsed = {
            uri
            for uri, r in live_after.items()
            if int((r.get("attempts") or {}).get("PARSE", 0)) and before.get(uri) != _fingerprint(r)
        }
        phase.check("change sync: documents parsed again == the changed objects", sorted(changed_uris), sorted(parsed))
        still = {uri for uri, word in deleted_words.items() if uri in _searchable(bench, word)}
        phase.check("change sync: deleted documents still found by search", 0, len(still))
    else:
        f["change_queued_messages"] = bench.queued_messages() - queued_before
        phase.check("change sync: messages queued for ingest", len(changed), f["change_queued_messages"])


def _table(phases: list[Phase]) -> str:
    rows = [("", *(f"{p.name} ({p.objects:,})" for p in phases))]

    def row(label: str, key: str, fmt: str = "{}") -> None:
        rows.append((label, *(fmt.format(p.figures[key]) if key in p.figures else "-" for p in phases)))

    row("put the objects (s)", "put_objects_seconds")
    row("first sync, to COMPLETE (s)", "first_sync_seconds")
    row("first sync, to every document READY (s)", "first_sync_to_all_ready_seconds")
    row("re-sync, nothing changed (s)", "resync_seconds")
    row("  new versions", "resync_new_versions")
    row("  records changed", "resync_records_changed")
    row("  Parse runs", "resync_parse_runs")
    row("  uploads queued for ingest", "resync_queued_messages")
    row("1 % changed + 1 % deleted, sync (s)", "change_sync_seconds")
    row("  changed / deleted objects", "changed")
    row("  changed documents READY after (s)", "change_sync_to_ready_seconds")
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000, help="objects in the scale phase (pipeline off)")
    parser.add_argument("--e2e-objects", type=int, default=1_000, help="objects in the end-to-end phase")
    parser.add_argument("--phases", default="scale,end-to-end")
    parser.add_argument("--timeout", type=float, default=7200, help="seconds a sync or a wait for READY may take")
    parser.add_argument("--seed", type=int, default=43)
    args = parser.parse_args(argv)
    wanted = args.phases.split(",")
    phases = []
    if "scale" in wanted:
        phases.append(run_phase("scale", args.objects, False, args.timeout, args.seed))
    if "end-to-end" in wanted:
        phases.append(run_phase("end-to-end", args.e2e_objects, True, args.timeout, args.seed))
    print("\n" + _table(phases))
    for phase in phases:
        if "resync_embedding_calls" in phase.figures:
            print(f"{phase.name}: re-sync embedding server deltas {phase.figures['resync_embedding_calls']}")
        if "change_embedding_calls" in phase.figures:
            print(f"{phase.name}: change sync embedding server deltas {phase.figures['change_embedding_calls']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / f"sync-s3-{time.strftime('%Y%m%dT%H%M%S')}.json"
    measured = [
        {
            "phase": p.name,
            "objects": p.objects,
            "pipeline": p.pipeline,
            "figures": p.figures,
            "checks": [{"name": c.name, "ok": c.ok, "expected": c.expected, "measured": c.measured} for c in p.checks],
        }
        for p in phases
    ]
    report.write_text(json.dumps(measured, indent=2, default=str))
    print(f"written: {report.relative_to(REPO_ROOT)}")
    failed = [f"{p.name}: {c.name}" for p in phases for c in p.checks if not c.ok]
    if failed:
        print("FAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
