"""Fuzz the HTTP API from its own OpenAPI document with schemathesis (``make fuzz``; docs/fuzzing.md).

On a local stack (started here on free ports, or ``--api-url``), tenant B gets a document, a custom
source with an item and a webhook; schemathesis then runs every phase and check as tenant A, with
tools/fuzz_hooks.py aiming a quarter of A's paths at B's objects, in rounds (seed, seed + 1, ...)
until ``min_requests`` responses; B's objects must read the same afterwards. Imports local.client,
local.runtime and the standard library; schemathesis runs as its CLI, a subprocess.

    .venv/bin/python -m tools.fuzz                      # >= 10,000 requests on a fresh stack
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import REPO_ROOT, stack_name_from_cdk_json

HOOKS_MODULE = "tools.fuzz_hooks"
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
SAMPLE = REPO_ROOT / "samples" / "lighthouses.pdf"
PHASES = "examples,coverage,fuzzing,stateful"
REPORT = REPO_ROOT / "bench" / "results" / "fuzz.json"
# B's webhook receiver: the discard port on loopback (nothing is delivered: it wants document.deleted only).
OTHER_WEBHOOK_URL = "http://127.0.0.1:9/tenant-b-hook"


@dataclass
class OtherTenant:
    """Tenant B's objects: what A must never read or change."""

    tenant_id: str
    document_ids: list[str]
    source_id: str
    external_id: str
    endpoint_id: str
    secrets: list[str]

    def hooks_file(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "path_ids": {
                "document_id": self.document_ids,
                "source_id": [self.source_id],
                "external_id": [self.external_id],
                "endpoint_id": [self.endpoint_id],
            },
            "secrets": self.secrets,
        }


@dataclass
class FuzzReport:
    requests: int = 0
    seconds: float = 0.0
    rounds: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_operation: dict[str, int] = field(default_factory=dict)
    probes_of_other_tenant: int = 0
    #: schemathesis failures tools/fuzz_hooks.py accepts, by reason (docs/fuzzing.md, "Accepted findings").
    accepted: dict[str, int] = field(default_factory=dict)
    #: schemathesis' failures (its checks and ours), one line each, over every round.
    failures: list[str] = field(default_factory=list)
    #: What changed in tenant B's objects between before and after the run (read as B).
    other_tenant_changes: list[str] = field(default_factory=list)
    server_errors: int = 0

    @property
    def contract_breaks(self) -> list[str]:
        """Failures that break the contract: any but a schema-valid request refused or an invalid one
        taken (ST202, ST201: the request schema is looser or stricter than the validation; docs/fuzzing.md)."""
        return [line for line in self.failures if not any(code in line for code in REQUEST_STRICTNESS)]

    @property
    def clean(self) -> bool:
        return not self.contract_breaks and not self.other_tenant_changes and self.server_errors == 0


def _ok(response: Any, *statuses: int) -> Any:
    if response.status_code not in statuses:
        raise RuntimeError(f"{response.request.method} {response.request.url}: {response.status_code} {response.text}")
    return response.json() if response.content else None


def seed_other_tenant(api_url: str, timeout: float = 300.0) -> tuple[OfflineClient, OtherTenant]:
    """Tenant B's document (a PDF, READY), custom source with one item (READY) and webhook endpoint."""
    tenant = f"fuzz-b-{uuid.uuid4().hex[:8]}"
    client = OfflineClient(api_url=api_url, tenant_id=tenant, username=f"{tenant}-owner")
    marker = f"zebrafinch{uuid.uuid4().hex[:10]}"
    document_id = client.upload(SAMPLE, metadata={"owner_marker": marker})
    source = _ok(client.request("POST", "/sources", {"kind": "custom", "name": f"{marker}-source"}), 201)
    external_id = f"item-{uuid.uuid4().hex[:12]}"
    item = _ok(
        client.request(
            "PUT",
            f"/sources/{source['id']}/items/{external_id}",
            {"filename": f"{marker}.txt", "text": f"The {marker} nests in tenant B's hedges.\n" * 5},
        ),
        200,
    )
    endpoint = _ok(client.request("POST", "/webhooks", {"url": OTHER_WEBHOOK_URL, "events": ["document.deleted"]}), 201)
    documents = [document_id, item["document_id"]]
    states = client.wait_until_done(documents, timeout_seconds=timeout)
    not_ready = {d: s["status"] for d, s in states.items() if s["status"] != "READY"}
    if not_ready:
        raise RuntimeError(f"tenant B's documents did not get READY: {not_ready}")
    secrets = [tenant, marker, *documents, source["id"], external_id, endpoint["id"], endpoint["secret"]]
    other = OtherTenant(tenant, documents, source["id"], external_id, endpoint["id"], secrets)
    return client, other


def snapshot(client: OfflineClient, other: OtherTenant) -> dict[str, Any]:
    """Tenant B's objects as B reads them (no presigned URLs: they change with every call)."""
    reads = [f"/documents/{d}" for d in other.document_ids] + [
        "/documents?limit=100",
        "/sources",
        f"/sources/{other.source_id}",
        f"/sources/{other.source_id}/syncs",
        "/webhooks",
        f"/webhooks/{other.endpoint_id}/deliveries",
    ]
    state: dict[str, Any] = {path: _ok(client.request("GET", path), 200) for path in reads}
    query = {"query": "lighthouse keeper lamp", "k": 5, "mode": "bm25"}
    passages = _ok(client.request("POST", "/search", query), 200)["passages"]
    state["search"] = sorted((p["document_id"], p["text"]) for p in passages)
    return state


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [f"{key}: {before[key]!r} -> {after.get(key)!r}"[:600] for key in before if before[key] != after.get(key)]


def _config(workdir: Path, api_url: str, tenant_a: str, tenant_b: str) -> Path:
    """schemathesis.toml with Web Fuzzing Commons auth: A is every request's identity. B is not made a
    peer: schemathesis would replay reads as B and learn B's values into the data it sends as A, and
    then no_other_tenant_data could not tell a leak from A echoing what it had been fed (docs/fuzzing.md)."""
    users = []
    for name, tenant in (("tenant-a", tenant_a), ("tenant-b", tenant_b)):
        payload = json.dumps({"username": f"{tenant}-fuzzer", "tenant_id": tenant})
        users.append(
            {
                "name": name,
                "loginEndpointAuth": {
                    "externalEndpointURL": f"{api_url}/_local/oidc/token",
                    "verb": "POST",
                    "contentType": "application/json",
                    "payloadRaw": payload,
                    "token": {
                        "extractFrom": "body",
                        "extractSelector": "/id_token",
                        "sendIn": "header",
                        "sendName": "Authorization",
                        "sendTemplate": "Bearer {token}",
                    },
                },
            }
        )
    auth = workdir / "wfc-auth.json"
    auth.write_text(json.dumps({"schemaVersion": "0.1.0", "auth": users}, indent=2))
    config = workdir / "schemathesis.toml"
    config.write_text(
        "\n".join(
            [
                "[auth.wfc]",
                f"path = {json.dumps(str(auth))}",
                'user = "tenant-a"',
                # Tokens live an hour; a fresh sign-in every 5 minutes keeps a long run signed in.
                "refresh_interval = 300",
                "",
            ]
        )
    )
    return config


# schemathesis' codes for a request schema that disagrees with validation (the answer is a correct 4xx/2xx).
REQUEST_STRICTNESS = ("ST201", "ST202")
FAILURE_LINE = re.compile(r"^_+ (?P<title>.+?) _+$")


def _failures(output: str) -> list[str]:
    """Every failure schemathesis lists: ``<operation> - <code and title>``, from its FAILURES section
    (an operation's header ``___ <operation> ___``, then one ``- <failure>`` line per failure)."""
    found: list[str] = []
    title, section = "", False
    for raw in output.splitlines():
        line = raw.strip()
        match = FAILURE_LINE.match(line) or re.fullmatch(r"=+ (?P<title>[A-Z]+) =+", line)
        if match:
            name = match.group("title")
            if name.isupper():
                section = name == "FAILURES"
            else:
                title = name
            continue
        if section and title and re.match(r"- ST\d{3} ", line):
            found.append(f"{title} {line}")
    return found


def run(
    api_url: str,
    *,
    examples: int,
    seed: int,
    min_requests: int,
    workdir: Path,
    max_rounds: int = 20,
    phases: str = PHASES,
    log: Any = sys.stdout,
) -> FuzzReport:
    api_url = api_url.rstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    client_b, other = seed_other_tenant(api_url)
    before = snapshot(client_b, other)
    tenant_a = f"fuzz-a-{uuid.uuid4().hex[:8]}"
    config = _config(workdir, api_url, tenant_a, other.tenant_id)
    (workdir / "other.json").write_text(json.dumps(other.hooks_file(), indent=2))
    report = FuzzReport()
    while report.rounds < max_rounds and (report.rounds == 0 or report.requests < min_requests):
        stats_path = workdir / f"stats-{report.rounds}.json"
        env = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": HOOKS_MODULE,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
            "RAG_INGEST_FUZZ_OTHER": str(workdir / "other.json"),
            "RAG_INGEST_FUZZ_STATS": str(stats_path),
        }
        command = [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "--no-color",
            "run",
            f"{api_url}/openapi.json",
            "--checks",
            "all",
            "--phases",
            phases,
            "--max-examples",
            str(examples),
            "--seed",
            str(seed + report.rounds),
            "--workers",
            "1",
            "--request-timeout",
            "60",
            "--generation-database",
            "none",
            "--report",
            "junit",
            "--report-dir",
            str(workdir / f"report-{report.rounds}"),
        ]
        print(f"round {report.rounds + 1}: seed {seed + report.rounds}, {examples} examples per operation", file=log)
        # In the scratch directory: schemathesis keeps its crash cache (.schemathesis/) in the working directory.
        completed = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, check=False)
        (workdir / f"schemathesis-{report.rounds}.log").write_text(completed.stdout + completed.stderr)
        if not stats_path.exists():
            raise RuntimeError(f"schemathesis exited with {completed.returncode}:\n{completed.stdout[-3000:]}")
        stats = json.loads(stats_path.read_text())
        report.rounds += 1
        report.requests += stats["requests"]
        for key, value in stats["by_status"].items():
            report.by_status[key] = report.by_status.get(key, 0) + value
        for key, value in stats["by_operation"].items():
            report.by_operation[key] = report.by_operation.get(key, 0) + value
        report.probes_of_other_tenant += sum(stats["probes_of_other_tenant"].values())
        for key, value in stats["accepted_failures"].items():
            report.accepted[key] = report.accepted.get(key, 0) + value
        report.failures += _failures(completed.stdout)
        if re.search(r"^=+ ERRORS =+$", completed.stdout, re.MULTILINE):
            report.failures.append(f"round {report.rounds}: schemathesis errors (see its log)")
        if completed.returncode != 0 and not _failures(completed.stdout):
            report.failures.append(f"schemathesis exited with {completed.returncode} (see its log)")
        print(f"  {stats['requests']} requests, {report.requests} in all; exit {completed.returncode}", file=log)
    report.server_errors = sum(count for status, count in report.by_status.items() if int(status) >= 500)
    report.other_tenant_changes = changes(before, snapshot(client_b, other))
    report.seconds = round(time.monotonic() - started, 1)
    return report


def _local_stack(state_dir: Path) -> OfflineStackProcess:
    template = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not template.exists():
        raise SystemExit(f"{template} not found: run make synth first")
    return OfflineStackProcess(state_dir, template=template)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-url", help="a running stack's API (default: start one on free ports)")
    parser.add_argument("--examples", type=int, default=100, help="schemathesis --max-examples per round")
    parser.add_argument("--min-requests", type=int, default=10_000, help="rounds repeat until this many")
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rag-ingest-fuzz-") as scratch:
        workdir = Path(scratch) / "fuzz"
        stack = None if args.api_url else _local_stack(Path(scratch) / "stack")
        try:
            api_url = str(stack.start(timeout=300)["ApiUrl"]) if stack is not None else str(args.api_url)
            report = run(
                api_url, examples=args.examples, seed=args.seed, min_requests=args.min_requests, workdir=workdir
            )
        finally:
            if stack is not None:
                stack.stop()
        logs = sorted(workdir.glob("schemathesis-*.log"))
        if not report.clean:
            # The evidence outlives the scratch directory: schemathesis' rounds and the stack's log.
            kept = args.report.parent / "fuzz-logs"
            shutil.rmtree(kept, ignore_errors=True)
            kept.mkdir(parents=True)
            for path in [*logs, Path(scratch) / "stack" / "stack.log"]:
                if path.exists():
                    shutil.copy(path, kept / path.name)
            print(f"logs kept in {kept}")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    summary = {**asdict(report), "contract_breaks": report.contract_breaks, "clean": report.clean}
    args.report.write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"{report.requests} requests in {report.rounds} rounds, {report.seconds:.0f} s; "
        f"statuses {report.by_status}; {report.probes_of_other_tenant} aimed at tenant B's objects"
    )
    print(
        f"failures: {len(report.failures)}, of which contract breaks {len(report.contract_breaks)}; "
        f"tenant B changed: {len(report.other_tenant_changes)}; accepted: {report.accepted}"
    )
    for line in report.failures + report.other_tenant_changes:
        print(f"  - {line}")
    print(f"wrote {args.report.relative_to(REPO_ROOT) if args.report.is_relative_to(REPO_ROOT) else args.report}")
    return 0 if report.clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
