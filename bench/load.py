"""make load: 20 tenants' users for 10 minutes on a fresh local stack, then what must hold afterwards.

    .venv/bin/python -m bench.load [--minutes 10 --tenants 20 --users 20]   # make load LOAD_ARGS=...

The stack (``bench.chaos.fresh_stack``, an index of its own) runs the Bedrock profile with deterministic
vectors; the users (``bench.load_users``, locust, a process of its own) upload, search, list, read, PATCH
and delete. Then each document must be READY with its chunks indexed once, FAILED with its input's code,
or DELETED after a DELETE; no reconciler drift, no passage indexed twice. Writes bench/results/load-*.json
and .csv, exits 1 when a check fails. Imports ``bench``, ``tests.support``, the domain package's records.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rag_ingest.core.ids import version_hash
from rag_ingest.core.record import DocumentRecord

from bench.chaos import fresh_stack, settle
from bench.load_aftermath import (
    REVISION_KEY,
    Observed,
    RouteRow,
    Tracked,
    aftermath_table,
    judge,
    latency_table,
)
from local.runtime.settings import REPO_ROOT
from tests.support.pipeline_probe import PipelineProbe, reconcile_through_cli

RESULTS = REPO_ROOT / "bench" / "results"
# The stack's embedding server answers as Bedrock does (docs/local-stack.md, "The Bedrock emulation"):
# Titan V2's default quotas and the assumed latency; deterministic vectors keep this CPU for the pipeline.
STACK_ENV = {
    "LOCAL_EMBEDDING_PROFILE": "bedrock",
    "LOCAL_EMBEDDING_VECTORS": "deterministic",
    "LOCAL_PERSIST": "0",
}


def indexed(probe: PipelineProbe, tenant: str) -> dict[str, dict[str, Any]]:
    """Per document of ``tenant``: chunks by version, and by version the REVISION_KEY values on them."""
    probe.opensearch.indices.refresh(index=probe.index_name)
    field = f"metadata.n.{REVISION_KEY}"
    body = {
        "size": 0,
        "query": {"term": {"tenant_id": tenant}},
        "aggs": {
            "documents": {
                "terms": {"field": "document_id", "size": 10000},
                "aggs": {
                    "versions": {
                        "terms": {"field": "version", "size": 100},
                        "aggs": {"revisions": {"terms": {"field": field, "size": 100, "missing": -1}}},
                    }
                },
            }
        },
    }
    response = probe.opensearch.search(index=probe.index_name, body=body)
    found: dict[str, dict[str, Any]] = {}
    for document in response["aggregations"]["documents"]["buckets"]:
        versions = {str(v["key"]): int(v["doc_count"]) for v in document["versions"]["buckets"]}
        revisions = {
            str(v["key"]): {
                (None if float(r["key"]) == -1 else int(r["key"])): int(r["doc_count"])
                for r in v["revisions"]["buckets"]
            }
            for v in document["versions"]["buckets"]
        }
        found[str(document["key"])] = {"versions": versions, "revisions": revisions}
    return found


def observe(record: DocumentRecord | None, chunks: dict[str, Any] | None) -> Observed:
    if record is None:
        return Observed(status=None)
    # Chunks carry the version's hash (rag_ingest.core.ids.version_hash), the record the S3 version.
    version = version_hash(record.version) if record.version else None
    versions = (chunks or {}).get("versions", {})
    revisions = (chunks or {}).get("revisions", {}).get(version or "", {})
    value = record.metadata.get(REVISION_KEY)
    return Observed(
        status=record.status.value,
        error_code=record.error_code.value if record.error_code else None,
        version=version,
        chunk_count=record.chunk_count,
        revision_value=None if value is None else int(value),
        chunks_by_version=versions,
        chunk_revisions=revisions,
    )


def run_users(outputs: Path, tenants: list[str], args: argparse.Namespace, report: Path) -> dict[str, Any]:
    """``bench.load_users`` in its own process for ``--minutes``; its report."""
    command = [
        sys.executable, "-m", "bench.load_users", "--outputs", str(outputs), "--tenants", *tenants,
        "--users", str(args.users), "--seconds", str(args.minutes * 60), "--seed", str(args.seed),
        "--report", str(report),
    ]  # fmt: skip
    subprocess.run(command, cwd=REPO_ROOT, check=True, timeout=args.minutes * 60 + 600)
    return dict(json.loads(report.read_text()))


def write_csv(path: Path, rows: list[RouteRow]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the users run")
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--users", type=int, help="locust users, spread over the tenants (default: one each)")
    parser.add_argument("--settle-timeout", type=float, default=1800, help="seconds the documents may take after")
    parser.add_argument("--seed", type=int, default=45, help="the users' choices")
    parser.add_argument("--report", type=Path, help="the JSON (default bench/results/load-<time>.json; .csv beside)")
    args = parser.parse_args(argv)
    args.users = args.users or args.tenants
    report = args.report or RESULTS / f"load-{time.strftime('%Y%m%dT%H%M%S')}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:6]
    tenants = [f"load-{run_id}-t{n:02d}" for n in range(args.tenants)]
    load_before = os.getloadavg()
    with (
        tempfile.TemporaryDirectory(prefix="rag-load-") as folder,
        fresh_stack("run", Path(folder), retry_scale=1.0, env=STACK_ENV, prefix="rag-load") as (
            process,
            opensearch_url,
        ),
    ):
        outputs = process.state_dir / "outputs.json"
        print(f"{args.users} users over {args.tenants} tenants for {args.minutes:g} min (stack log {process.log_path})")
        users = run_users(outputs, tenants, args, Path(folder) / "users.json")
        load_during = os.getloadavg()
        probe = PipelineProbe(process.outputs, opensearch_url)
        tracked = [Tracked(**d) for d in users["documents"]]
        uploaded = [d.document_id for d in tracked if d.uploaded]
        began = time.monotonic()
        print(f"\nthe users stopped; waiting for {len(uploaded)} uploaded documents to settle ...", flush=True)
        settle(probe, uploaded, args.settle_timeout)
        settled_seconds = round(time.monotonic() - began, 1)
        records = probe.records(d.document_id for d in tracked)
        chunks = {tenant: indexed(probe, tenant) for tenant in tenants}
        duplicates = Counter[str]()
        for tenant in tenants:
            duplicates.update(probe.duplicate_passages(tenant))
        drift = {tenant: list(reconcile_through_cli(outputs, tenant)["findings"]) for tenant in tenants}
    aftermath = judge(
        ((d, observe(records.get(d.document_id), chunks[d.tenant_id].get(d.document_id))) for d in tracked),
        drift,
        duplicates["same_chunk_index"],
        duplicates["same_text"],
        users["status_codes"],
    )
    rows = [RouteRow(**row) for row in users["routes"]]
    print("\n" + latency_table(rows))
    print("\nstatus codes per route: " + json.dumps(users["status_codes"]))
    print("\n" + aftermath_table(aftermath))
    for line in aftermath.failures():
        print(f"  {line}")
    result = {
        "minutes": args.minutes,
        "tenants": args.tenants,
        "users": args.users,
        "stack_env": STACK_ENV,
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "end_of_users": load_during, "after": os.getloadavg()},
        "settle_seconds": settled_seconds,
        "routes": users["routes"],
        "errors": users["errors"],
        "status_codes": users["status_codes"],
        "aftermath": {
            "passed": aftermath.passed,
            "documents": aftermath.documents,
            "chunks": aftermath.chunks,
            "outcomes": dict(aftermath.outcomes),
            "problems": aftermath.problems,
            "drift": aftermath.drift,
            "drift_kinds": dict(aftermath.drift_kinds),
            "duplicated_passages": aftermath.duplicated_passages,
            "same_text": aftermath.same_text,
            "server_errors": aftermath.server_errors,
        },
    }
    report.write_text(json.dumps(result, indent=2) + "\n")
    write_csv(report.with_suffix(".csv"), rows)
    print(f"written: {report} and {report.with_suffix('.csv').name}")
    return 0 if aftermath.passed else 1


if __name__ == "__main__":
    sys.exit(main())
