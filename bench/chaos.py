"""make chaos: a burst of uploads and, during it, one ``kill -9`` at a time; then what an operator checks.

    .venv/bin/python -m bench.chaos                                   # every fault, 30 documents each
    .venv/bin/python -m bench.chaos --faults worker,embedding --documents 10

Each fault (``opensearch``, ``embedding``, ``worker``, ``moto``, ``stack``) runs on a fresh local stack of
its own with the template's own retry intervals (``LOCAL_RETRY_SCALE=1``). Afterwards every document
must be READY or FAILED with a permanent code, ``rag-ingest reconcile`` must report no drift, and no
passage may be in the index twice. Prints a markdown table and writes ``--report`` (JSON). Imports
``local``, ``eval.stack``, ``tests.support`` and the domain package's records. Docs: docs/chaos.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from rag_ingest.core.errors import SYSTEM_ERROR_CODES
from rag_ingest.core.record import DocumentRecord, DocumentStatus

from eval.stack import eval_template
from local.runtime.harness import OfflineStackProcess, process_state
from local.runtime.settings import DEFAULT_OPENSEARCH_URL, REPO_ROOT, stack_name_from_cdk_json
from tests.support.pipeline_probe import (
    INVALID_SAMPLES,
    STAGE_FUNCTIONS,
    TERMINAL,
    VALID_SAMPLES,
    PipelineProbe,
    new_tenant,
    reconcile_through_cli,
    wait_until,
)

RESULTS = REPO_ROOT / "bench" / "results"
FAULTS = ("opensearch", "embedding", "worker", "moto", "stack")
# The bad inputs mixed into every burst, and the permanent code each must end with.
BAD_INPUTS = {
    INVALID_SAMPLES / "not-a-pdf.pdf": "UNSUPPORTED_TYPE",
    INVALID_SAMPLES / "encrypted.pdf": "ENCRYPTED_PDF",
    INVALID_SAMPLES / "truncated.pdf": "CORRUPT_PDF",
    INVALID_SAMPLES / "empty.pdf": "EMPTY_DOCUMENT",  # two blank pages
}
BAD_EVERY = 6  # one upload in six is a bad input
UPLOADERS = 8
POLL_SECONDS = 0.2
# A burst with no status change this long is stuck, the rest lost: longer than the template's longest
# retry wait and the ingest queue's visibility timeout (a message received before a kill comes back).
STALL_SECONDS = 240.0
# The worker processes the "worker" fault may kill, in the order it looks for a busy one.
KILLABLE_STAGES = ("EMBED", "PARSE", "CHUNK", "INDEX")
KILL_ATTEMPTS = 5  # kills of a busy worker before the "worker" fault gives up on being felt
FELT_SECONDS = 5.0  # how long a killed invocation may take to end in the stack log


# -- the burst ---------------------------------------------------------------------------------------
def burst_files(count: int) -> list[tuple[Path, str | None]]:
    """``count`` uploads: the valid samples in turn, every BAD_EVERY-th a bad input (with its code)."""
    bad = list(BAD_INPUTS.items())
    files: list[tuple[Path, str | None]] = []
    for number in range(count):
        if number % BAD_EVERY == BAD_EVERY - 1:
            files.append(bad[(number // BAD_EVERY) % len(bad)])
        else:
            files.append((VALID_SAMPLES[number % len(VALID_SAMPLES)], None))
    return files


@dataclass(frozen=True)
class Upload:
    document_id: str
    file: str
    expected_code: str | None  # None: a valid PDF, must end READY


@dataclass
class Outcomes:
    """Where the burst's documents ended."""

    documents: int
    ready: int
    permanent: dict[str, int]  # FAILED with an input code, by code
    system_failures: dict[str, int]  # FAILED with a system code (should have been retried to READY)
    lost: list[str]  # no terminal state when the wait ended (or no record at all)
    unexpected: list[str]  # terminal, but not what the input calls for (a valid PDF FAILED, ...)


def classify(uploads: Sequence[Upload], records: dict[str, DocumentRecord]) -> Outcomes:
    permanent: Counter[str] = Counter()
    system: Counter[str] = Counter()
    lost: list[str] = []
    unexpected: list[str] = []
    ready = 0
    for upload in uploads:
        record = records.get(upload.document_id)
        if record is None or record.status not in TERMINAL:
            lost.append(upload.document_id)
            continue
        code = record.error_code.value if record.error_code else None
        if record.status == DocumentStatus.READY:
            ready += 1
        elif code in SYSTEM_ERROR_CODES:
            system[str(code)] += 1
        else:
            permanent[str(code)] += 1
        wanted = DocumentStatus.READY.value if upload.expected_code is None else upload.expected_code
        got = record.status.value if record.status == DocumentStatus.READY else str(code)
        if got != wanted:
            unexpected.append(f"{upload.file} {upload.document_id}: {got}, expected {wanted}")
    return Outcomes(len(uploads), ready, dict(permanent), dict(system), lost, unexpected)


def upload_burst(probe: PipelineProbe, tenant: str, count: int) -> list[Upload]:
    client = probe.client(tenant)

    def one(item: tuple[Path, str | None]) -> Upload:
        path, code = item
        return Upload(probe.upload(client, path).document_id, path.name, code)

    with ThreadPoolExecutor(max_workers=UPLOADERS, thread_name_prefix="upload") as uploaders:
        return list(uploaders.map(one, burst_files(count)))


def settle(probe: PipelineProbe, document_ids: Sequence[str], timeout: float) -> dict[str, DocumentRecord]:
    """Poll the status records until every document is terminal, ``timeout`` passes, or nothing has
    changed for STALL_SECONDS; returns the last records read (a document not terminal is lost)."""
    deadline = time.monotonic() + timeout
    last_change, last_seen = time.monotonic(), None
    while True:
        try:
            records = probe.records(document_ids)
        except Exception as exc:  # the stack is down for good: nothing will settle any more
            print(f"  status table unreadable ({type(exc).__name__}): the documents are lost", flush=True)
            return {}
        if all(i in records and records[i].status in TERMINAL for i in document_ids):
            return records
        seen = sorted((i, r.status.value, r.stage or "", r.updated_at) for i, r in records.items())
        if seen != last_seen:
            last_change, last_seen = time.monotonic(), seen
        now = time.monotonic()
        if now > deadline or now - last_change > STALL_SECONDS:
            return records
        time.sleep(1.0)


# -- the faults --------------------------------------------------------------------------------------
@dataclass
class Run:
    """One fault's run: the stack, how to see it from outside, the burst, and the fault's notes."""

    process: OfflineStackProcess
    probe: PipelineProbe
    tenant: str
    opensearch_url: str
    uploads: list[Upload] = field(default_factory=list)
    target: str = ""  # what the fault killed, in words (filled in by its moment or its kill)
    target_pid: int | None = None
    target_function: str = ""  # the "worker" fault's function (construct id)
    log_offset: int = 0  # the stack log's size at the "worker" fault's kill

    def records(self) -> dict[str, DocumentRecord]:
        return self.probe.records(u.document_id for u in self.uploads)

    def in_stage(self, stage: str) -> bool:
        return any(r.status == DocumentStatus.PROCESSING and r.stage == stage for r in self.records().values())

    def mid_burst(self) -> bool:
        statuses = Counter(r.status for r in self.records().values())
        return statuses[DocumentStatus.READY] > 0 and statuses[DocumentStatus.PROCESSING] > 0

    def refresh_probe(self) -> None:
        self.probe = PipelineProbe(self.process.outputs, self.opensearch_url)


@dataclass(frozen=True)
class Fault:
    name: str
    moment: str  # when the kill comes, in words
    is_moment: Callable[[Run], bool]
    kill: Callable[[Run], None]
    recover: Callable[[Run], None]  # returns once the stack serves again


def opensearch_pid() -> int:
    from local.opensearch.server import running_pid
    from local.opensearch.settings import external_url, layout

    if external_url():
        raise SystemExit("OPENSEARCH_URL points at a server this machine does not run: it cannot be killed")
    pid = running_pid(layout())
    if pid is None:
        raise SystemExit("no local OpenSearch is running: make opensearch")
    return pid


def sigkill(pid: int) -> None:
    """SIGKILL ``pid`` and wait until it is gone (or a zombie: its parent reaps it)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process_state(pid) in (None, "Z"):
            return
        time.sleep(0.05)
    raise RuntimeError(f"pid {pid} still alive 30 s after SIGKILL")


def kill_opensearch(run: Run) -> None:
    run.target_pid = opensearch_pid()
    run.target = f"OpenSearch pid {run.target_pid}"
    sigkill(run.target_pid)


def start_opensearch(_: Run) -> None:
    """``python -m local.opensearch start``: returns once the cluster is yellow again."""
    subprocess.run([sys.executable, "-m", "local.opensearch", "start"], cwd=REPO_ROOT, check=True, timeout=600)


def embedding_requests_in_flight(run: Run) -> int:
    """Requests the embedding server is answering now (its /_local/stats); 0 when it does not answer."""
    endpoint = str(run.process.outputs["EmbeddingEndpoint"]).rstrip("/")
    try:
        with urllib.request.urlopen(f"{endpoint}/_local/stats", timeout=2) as response:
            return int(json.load(response).get("in_flight", 0))
    except OSError:
        return 0


def embedding_mid_batch(run: Run) -> bool:
    """The moment: the embedding server has a request in flight (an Embed batch or a query)."""
    in_flight = embedding_requests_in_flight(run)
    run.target = f"embedding server ({in_flight} requests in flight)"
    return in_flight > 0


def embedding_pid(run: Run) -> int | None:
    status = run.process.control("GET", "/_local/status") or {}
    server = status.get("embedding_server") or {}
    return int(server["pid"]) if server.get("pid") else None


def kill_embedding_server(run: Run) -> None:
    run.target_pid = embedding_pid(run)
    if run.target_pid is None:
        raise RuntimeError("the stack reports no embedding server")
    run.target = run.target.replace("server", f"server pid {run.target_pid}", 1)
    sigkill(run.target_pid)


def embedding_server_replaced(run: Run) -> None:
    """Until the stack's supervisor has another embedding server answering on the same URL."""
    endpoint = str(run.process.outputs["EmbeddingEndpoint"]).rstrip("/")

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"{endpoint}/ping", timeout=2):
                pass
        except OSError:
            return False
        return embedding_pid(run) not in (None, run.target_pid)

    wait_until(answers, timeout=180, what="the embedding server answering again", interval=POLL_SECONDS)


def busy_stage_worker(run: Run, stages: Sequence[str] = KILLABLE_STAGES) -> bool:
    """A worker process of one of ``stages``' functions running an invocation while a document of
    the run is PROCESSING: the moment; that worker becomes the target. The workers are looked at
    first (one status call): a warm stage on a small document is busy for a tenth of a second, less
    than reading the run's records takes, so a record read first would be stale by then."""
    for stage in stages:
        busy = run.process.busy_worker_pids(STAGE_FUNCTIONS[stage])
        if busy and any(r.status == DocumentStatus.PROCESSING for r in run.records().values()):
            run.target_function, run.target_pid = STAGE_FUNCTIONS[stage], busy[0]
            run.target = f"{run.target_function} worker pid {run.target_pid} (a document in {stage})"
            return True
    return False


def kill_stage_worker(run: Run) -> None:
    """SIGKILL the busy worker until a kill is felt (an invocation ends in Runtime.ExitError): a
    warm worker seen busy may finish its invocation before the signal lands, and then the next busy
    one of the same stage is the target."""
    if run.target_pid is None:
        raise RuntimeError("no busy stage worker was found")
    run.log_offset = run.process.log_path.stat().st_size
    stage = next(name for name, function in STAGE_FUNCTIONS.items() if function == run.target_function)
    for _ in range(KILL_ATTEMPTS):
        sigkill(run.target_pid)
        if poll(lambda: killed_mid_invocation(run), timeout=FELT_SECONDS):
            return
        if not poll(lambda: busy_stage_worker(run, [stage]), timeout=STALL_SECONDS, interval=0.01):
            return


def killed_mid_invocation(run: Run) -> bool:
    ended = function_invocations_ended(run.process.log_path, run.log_offset, run.target_function)
    return "error Runtime.ExitError" in ended


def poll(check: Callable[[], bool], timeout: float, interval: float = POLL_SECONDS) -> bool:
    """Whether ``check`` holds within ``timeout`` seconds, asked every ``interval``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def function_invocations_ended(log_path: Path, offset: int, construct_id: str) -> list[str]:
    """The statuses (``ok``, ``error <type>``) of the invocations of ``construct_id`` that ended in
    the stack log since ``offset``, in order."""
    with log_path.open("rb") as log:
        log.seek(offset)
        text = log.read().decode("utf-8", errors="replace")
    logger = rf"local\.lambda\.(?:\S+/)?{re.escape(construct_id)}"
    pattern = rf"{logger}: END RequestId: \S+ Duration: \S+ ms Status: (ok|error \S+)"
    return re.findall(pattern, text)


def stage_function_serves_again(run: Run) -> None:
    """Until the killed process is gone from the function's pool and an invocation of the function
    has ended ok since the kill: the function serves again. (Not "a new worker": the retried
    invocation may go to a worker that was idle at the kill, and then the pool starts none.)"""
    wait_until(
        lambda: (
            run.target_pid not in run.process.worker_pids(run.target_function)
            and "ok" in function_invocations_ended(run.process.log_path, run.log_offset, run.target_function)
        ),
        timeout=180,
        what=f"{run.target_function} serving again after the kill",
        interval=POLL_SECONDS,
    )


def kill_serve_process(run: Run) -> None:
    run.target = f"serve process group {run.process.pid}"
    run.process.kill()


def restart_stack(run: Run) -> None:
    run.process.restart(timeout=300)
    run.refresh_probe()


def kill_everything(run: Run) -> None:
    kill_serve_process(run)
    pid = opensearch_pid()
    run.target += f" and OpenSearch pid {pid}"
    sigkill(pid)


def restart_everything(run: Run) -> None:
    start_opensearch(run)
    restart_stack(run)


FAULT_PLANS = {
    fault.name: fault
    for fault in (
        Fault(
            "opensearch", "a document in Index", lambda run: run.in_stage("INDEX"), kill_opensearch, start_opensearch
        ),
        Fault(
            "embedding",
            "the embedding server has a request in flight",
            embedding_mid_batch,
            kill_embedding_server,
            embedding_server_replaced,
        ),
        Fault(
            "worker",
            "a document in Embed, Parse, Chunk or Index (first found), and a worker of that stage busy",
            busy_stage_worker,
            kill_stage_worker,
            stage_function_serves_again,
        ),
        Fault("moto", "a document READY and another in flight", Run.mid_burst, kill_serve_process, restart_stack),
        Fault("stack", "a document READY and another in flight", Run.mid_burst, kill_everything, restart_everything),
    )
}


def invocation_errors(log_path: Path, offset: int) -> dict[str, int]:
    """Failed Lambda invocations in the stack log since ``offset``, by errorType: the fault was felt."""
    with log_path.open("rb") as log:
        log.seek(offset)
        text = log.read().decode("utf-8", errors="replace")
    return dict(Counter(re.findall(r"END RequestId: \S+ Duration: \S+ ms Status: error (\S+)", text)))


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> bool:
    """Poll ``check`` every POLL_SECONDS; False (and a note) after ``timeout``."""
    if poll(check, timeout):
        return True
    print(f"  gave up waiting for {what} after {timeout:.0f} s", flush=True)
    return False


# -- one fault, end to end ---------------------------------------------------------------------------
@dataclass
class FaultResult:
    fault: str
    moment: str
    moment_seen: bool
    killed: str
    outcomes: Outcomes
    duplicates: dict[str, int]
    drift: int | None  # findings of the reconciler (None: it could not run)
    drift_by_kind: dict[str, int]
    serving_seconds: float | None  # from the kill to the stack serving again
    settled_seconds: float | None  # from the kill to the last document's final status (None: some lost)
    invocation_errors: dict[str, int] = field(default_factory=dict)  # after the kill, by errorType
    error: str | None = None

    @property
    def passed(self) -> bool:
        o = self.outcomes
        return (
            self.error is None
            and not o.lost
            and not o.system_failures
            and not o.unexpected
            and self.drift == 0
            and not any(self.duplicates.values())
        )


@contextmanager
def fresh_stack(
    fault: str, work: Path, retry_scale: float, env: dict[str, str] | None = None, prefix: str = "rag-chaos"
) -> Iterator[tuple[OfflineStackProcess, str]]:
    """A local stack of its own for ``fault`` (its index ``prefix-fault-…``, dropped at the end), with
    ``env`` added to its environment: (process, OpenSearch URL). bench.load starts its stack here too."""
    from rag_ingest.embeddings.base import MINILM_DIMENSION
    from rag_ingest.wiring import vector_store_for

    source = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    index_name = f"{prefix}-{fault}-{uuid.uuid4().hex[:8]}"
    folder = work / fault
    folder.mkdir(parents=True)
    template = folder / "template.json"
    template.write_text(json.dumps(eval_template(source, index_name)))
    process = OfflineStackProcess(
        folder / "state", template=template, env={"LOCAL_RETRY_SCALE": str(retry_scale), **(env or {})}
    )
    opensearch_url = process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL
    print(f"\n== {fault}: starting a local stack (index {index_name}, state {folder / 'state'}) ...", flush=True)
    try:
        process.start(timeout=300)
        yield process, opensearch_url
    finally:
        process.stop()
        try:
            vector_store_for(opensearch_url, index_name, MINILM_DIMENSION).drop_index()
        except Exception as exc:  # OpenSearch down after a failed recovery: say so, do not hide the run
            print(f"  could not drop {index_name}: {type(exc).__name__}: {exc}", flush=True)


def run_fault(name: str, documents: int, settle_timeout: float, work: Path, retry_scale: float) -> FaultResult:
    fault = FAULT_PLANS[name]
    with fresh_stack(name, work, retry_scale) as (process, opensearch_url):
        run = Run(process, PipelineProbe(process.outputs, opensearch_url), new_tenant("chaos"), opensearch_url)
        run.uploads = upload_burst(run.probe, run.tenant, documents)
        print(f"  uploaded {len(run.uploads)} documents (tenant {run.tenant}); waiting for: {fault.moment}", flush=True)
        moment_seen = wait_for(fault.moment, lambda: fault.is_moment(run), timeout=300)
        killed_at, log_offset = time.time(), process.log_path.stat().st_size
        error: str | None = None
        serving: float | None = None
        try:
            fault.kill(run)
            print(f"  killed {run.target}", flush=True)
        except Exception as exc:  # e.g. the moment never came: no busy worker to kill
            error = f"kill failed: {type(exc).__name__}: {exc}"[:500]
        try:
            if error is None:
                fault.recover(run)
                serving = round(time.time() - killed_at, 1)
                print(f"  serving again after {serving} s", flush=True)
        except Exception as exc:  # reported in the table: the next fault still runs
            error = f"recovery failed: {type(exc).__name__}: {exc}"[:500]
        if error:
            print(f"  {error}", flush=True)
        # Settled or not, the documents are counted: a stack that did not recover loses them.
        records = settle(run.probe, [u.document_id for u in run.uploads], settle_timeout)
        outcomes = classify(run.uploads, records)
        settled = None
        if records and not outcomes.lost:
            last = max(datetime.fromisoformat(r.updated_at).timestamp() for r in records.values())
            settled = round(max(0.0, last - killed_at), 1)
        drift, by_kind, duplicates = None, {}, {}
        try:
            report = reconcile_through_cli(process.state_dir / "outputs.json", run.tenant)
            drift = len(report["findings"])
            by_kind = dict(Counter(str(f["kind"]) for f in report["findings"]))
            duplicates = run.probe.duplicate_passages(run.tenant)
        except Exception as exc:  # a stack or OpenSearch that did not come back: reported, not raised
            error = "; ".join(filter(None, (error, f"checks failed: {type(exc).__name__}: {exc}"[:500])))
        return FaultResult(
            fault=name,
            moment=fault.moment,
            moment_seen=moment_seen,
            killed=run.target,
            outcomes=outcomes,
            duplicates=duplicates,
            drift=drift,
            drift_by_kind=by_kind,
            serving_seconds=serving,
            settled_seconds=settled,
            invocation_errors=invocation_errors(process.log_path, log_offset),
            error=error,
        )


# -- the report --------------------------------------------------------------------------------------
def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{code} {count}" for code, count in sorted(counts.items())) or "0"


def table(results: Sequence[FaultResult]) -> str:
    lines = [
        "| fault | documents | READY | permanent error (by code) | other failures | lost | duplicated passages "
        "| reconciler drift | recover: serving / settled (s) | invocation errors after the kill | result |",
        "| --- | ---: | ---: | --- | --- | ---: | ---: | --- | --- | --- | --- |",
    ]
    for r in results:
        o = r.outcomes
        duplicated = "-" if not r.duplicates else str(sum(r.duplicates.values()))
        drift = "-" if r.drift is None else (f"{r.drift} ({_counts(r.drift_by_kind)})" if r.drift else "0")
        recover = f"{'-' if r.serving_seconds is None else r.serving_seconds} / "
        recover += "-" if r.settled_seconds is None else str(r.settled_seconds)
        verdict = "pass" if r.passed else "FAIL" + (f": {r.error}" if r.error else "")
        lines.append(
            f"| {r.fault} | {o.documents} | {o.ready} | {_counts(o.permanent)} | {_counts(o.system_failures)} "
            f"| {len(o.lost)} | {duplicated} | {drift} | {recover} | {_counts(r.invocation_errors)} | {verdict} |"
        )
    return "\n".join(lines)


def write_report(path: Path, args: argparse.Namespace, results: Sequence[FaultResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "documents_per_fault": args.documents,
        "retry_scale": args.retry_scale,
        "cpus": os.cpu_count(),
        "results": [{**asdict(r), "passed": r.passed} for r in results],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=30, help="uploads per fault (one in six a bad input)")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {', '.join(FAULTS)}")
    parser.add_argument("--report", type=Path, default=RESULTS / "chaos.json", help="the JSON report")
    parser.add_argument("--settle-timeout", type=float, default=600, help="seconds each burst may take to settle")
    parser.add_argument(
        "--retry-scale", type=float, default=1.0, help="LOCAL_RETRY_SCALE of the stacks (1: the template's waits)"
    )
    args = parser.parse_args(argv)
    faults = [name.strip() for name in args.faults.split(",") if name.strip()]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        parser.error(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    results: list[FaultResult] = []
    with tempfile.TemporaryDirectory(prefix="rag-chaos-") as work:
        for name in faults:
            results.append(run_fault(name, args.documents, args.settle_timeout, Path(work), args.retry_scale))
            print(table(results[-1:]).splitlines()[-1], flush=True)
            write_report(args.report, args, results)  # after each fault: a run cut short keeps what it measured
    print()
    print(table(results))
    print(f"written: {args.report}")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
