"""make bench-isolation: do small uploads wait behind a big one?

    .venv/bin/python -m bench.isolation run                         # 50 small, 2,000 pages (make bench-isolation)
    .venv/bin/python -m bench.isolation run --small 3 --big-pages 120 --timeout 600   # a quick run

Two phases, each through a fresh local stack: the ``--small`` 5-page PDFs alone, then the same right
behind a ``--big-pages`` PDF (documents from ``bench.big_document``). Per phase: READY, failed and stuck
counts and p50/p95/max latency from upload to READY; then p95(with big) / p95(alone) against the goal
(at most ``GOAL_RATIO``, every document READY). Writes bench/results/isolation-<time>.json. Imports
``bench``, ``local``, ``eval.stack`` and the domain package. Method and runs: docs/benchmarks.md (Isolation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.big_document import load_sources, write_big_document, write_small_documents

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
WARM_UP_PDF = REPO / "samples" / "lighthouses.pdf"
GOAL_RATIO = 1.5  # the isolation goal: p95 with the big document at most 1.5x p95 without it
DEFAULT_SMALL = 50
DEFAULT_BIG_PAGES = 2000
POLL_SECONDS = 1.0
READY = "READY"
# A document in one of these states will not change by itself: its wait is over.
TERMINAL = frozenset({"READY", "FAILED", "DELETED", "EXPIRED"})
UPLOAD_FAILED = "UPLOAD_FAILED"  # the upload request itself failed: no status record to wait for
NO_LANE = "-"  # the API's document JSON has no lane field (a stack from before the lanes)


# -- the figures: pure, unit-tested ------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, linearly interpolated between the closest ranks
    (numpy's default method, as bench.search_scale reports its percentiles)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    below, above = math.floor(rank), math.ceil(rank)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)


@dataclass(frozen=True)
class Outcome:
    """One small document at the end of a phase's wait."""

    name: str
    document_id: str | None
    status: str  # the last status seen (UPLOAD_FAILED: no record); not terminal = stuck
    seconds: float | None  # upload request to READY/FAILED, from the status record; None while in flight
    lane: str = NO_LANE
    stage: str | None = None  # where a stuck document was when the wait ended
    error: str | None = None

    @property
    def ready(self) -> bool:
        return self.status == READY

    @property
    def failed(self) -> bool:
        return self.status == UPLOAD_FAILED or (self.status in TERMINAL and self.status != READY)

    @property
    def stuck(self) -> bool:
        return not self.ready and not self.failed


@dataclass(frozen=True)
class PhaseSummary:
    phase: str
    n: int
    ready: int
    failed: int
    stuck: int
    # Over the READY documents only (None if there is none): failed and stuck ones are counted apart.
    p50: float | None
    p95: float | None
    max: float | None

    @property
    def all_ready(self) -> bool:
        return self.n > 0 and self.ready == self.n


def summarize(phase: str, outcomes: Sequence[Outcome]) -> PhaseSummary:
    latencies = [outcome.seconds for outcome in outcomes if outcome.ready and outcome.seconds is not None]
    return PhaseSummary(
        phase=phase,
        n=len(outcomes),
        ready=sum(outcome.ready for outcome in outcomes),
        failed=sum(outcome.failed for outcome in outcomes),
        stuck=sum(outcome.stuck for outcome in outcomes),
        p50=round(percentile(latencies, 50), 2) if latencies else None,
        p95=round(percentile(latencies, 95), 2) if latencies else None,
        max=round(max(latencies), 2) if latencies else None,
    )


@dataclass(frozen=True)
class Verdict:
    ratio: float | None  # p95(with big) / p95(alone); None when either phase has no READY document
    met: bool
    reason: str


def verdict(alone: PhaseSummary, with_big: PhaseSummary, goal: float = GOAL_RATIO) -> Verdict:
    """The isolation goal: every small document READY in both phases, and p95(with) <= goal x p95(alone)."""
    exact = with_big.p95 / alone.p95 if alone.p95 and with_big.p95 is not None else None
    ratio = None if exact is None else round(exact, 2)
    short = [f"{s.phase}: {s.n - s.ready} of {s.n} not READY" for s in (alone, with_big) if not s.all_ready]
    if short:
        return Verdict(ratio, False, "; ".join(short))
    if exact is None:
        return Verdict(None, False, "no p95 to compare")
    if exact <= goal:
        return Verdict(ratio, True, f"{exact:.3f} <= {goal}")
    return Verdict(ratio, False, f"{exact:.3f} > {goal}")


def table(summaries: Sequence[PhaseSummary]) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = [f"{'phase':<10} {'n':>4} {'READY':>6} {'failed':>6} {'stuck':>6} {'p50 s':>7} {'p95 s':>7} {'max s':>7}"]
    lines += [
        f"{s.phase:<10} {s.n:>4} {s.ready:>6} {s.failed:>6} {s.stuck:>6} {seconds(s.p50):>7} {seconds(s.p95):>7} "
        f"{seconds(s.max):>7}"
        for s in summaries
    ]
    return "\n".join(lines)


def lane_counts(outcomes: Sequence[Outcome]) -> str:
    """``standard 50`` (or ``- 50`` while the API shows no lane)."""
    return ", ".join(f"{lane} {count}" for lane, count in sorted(Counter(o.lane for o in outcomes).items()))


def epoch_seconds(timestamp: str) -> float:
    """A status record's ISO 8601 time (``2026-12-01T20:03:49.123+00:00``) as seconds since the epoch."""
    return datetime.fromisoformat(timestamp).timestamp()


# -- through the local stack -------------------------------------------------------------------------
@dataclass(frozen=True)
class Upload:
    name: str
    started: float  # time.time() just before the upload's first request
    document_id: str | None
    error: str | None = None


@dataclass
class StatusTable:
    """The local stack's documents table, read straight from moto (not through the API)."""

    table: Any  # boto3's DynamoDB Table

    def scan(self) -> dict[str, dict[str, Any]]:
        """Every status record, by document_id: one paginated Scan (one request at these sizes)."""
        items: dict[str, dict[str, Any]] = {}
        kwargs: dict[str, Any] = {"ConsistentRead": True}
        while True:
            page = self.table.scan(**kwargs)
            items.update({str(item["document_id"]): item for item in page.get("Items", [])})
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def upload_all(client: Any, pdfs: Sequence[Path], uploaders: int) -> list[Upload]:
    """Upload ``pdfs`` as fast as the client can, ``uploaders`` at a time; a failed upload is kept."""

    def one(pdf: Path) -> Upload:
        started = time.time()
        try:
            return Upload(pdf.name, started, client.upload(pdf))
        except Exception as exc:  # any failure: counted as a failed document, never dropped
            return Upload(pdf.name, started, None, f"{type(exc).__name__}: {exc}"[:300])

    with ThreadPoolExecutor(max_workers=uploaders, thread_name_prefix="upload") as pool:
        return list(pool.map(one, pdfs))


def _progress_text(item: dict[str, Any] | None) -> str:
    from rag_ingest.core.record import DocumentRecord

    if item is None:
        return "no record yet"
    record = DocumentRecord.model_validate(item)
    progress = record.progress
    stage = f" {record.stage.value}" if record.stage else ""
    return (
        f"{record.status.value}{stage}, pages parsed {record.pages_parsed or 0}/{record.page_count or '?'}, "
        f"chunks embedded {progress.done if progress else 0}/{progress.total if progress else '?'}"
    )


def wait_for(
    statuses: StatusTable,
    uploads: Sequence[Upload],
    *,
    timeout: float,
    big_id: str | None = None,
    wait_big: bool = False,
) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Scan the documents table every POLL_SECONDS until every upload is terminal (and the big one if
    ``wait_big``) or ``timeout`` passes. Returns each terminal document's latency (its upload's start
    to the record's ``updated_at`` when first seen terminal), and the last records seen."""
    started = {u.document_id: u.started for u in uploads if u.document_id}
    latencies: dict[str, float] = {}
    clock = time.monotonic()
    deadline = clock + timeout
    items: dict[str, dict[str, Any]] = {}
    last_line = ""
    while True:
        items = statuses.scan()
        for document_id, began in started.items():
            item = items.get(document_id)
            if document_id not in latencies and item is not None and item["status"] in TERMINAL:
                # The record's own time: a second's polling would add up to a second to every latency.
                latencies[document_id] = round(epoch_seconds(str(item["updated_at"])) - began, 3)
        counts = Counter(str(items[d]["status"]) if d in items else "no record" for d in started)
        line = "small: " + ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
        if big_id:
            line += f" | big: {_progress_text(items.get(big_id))}"
        if line != last_line:
            print(f"{time.monotonic() - clock:7.1f} s  {line}", flush=True)
            last_line = line
        big_done = not (big_id and wait_big) or str(items.get(big_id, {}).get("status")) in TERMINAL
        if len(latencies) == len(started) and big_done:
            return latencies, items
        if time.monotonic() > deadline:
            print(f"stopped waiting after {timeout:.0f} s", flush=True)
            return latencies, items
        time.sleep(POLL_SECONDS)


def api_lanes(client: Any) -> dict[str, str]:
    """Each of the tenant's documents' ``lane`` in the API's JSON (GET /documents, every page); NO_LANE
    where the API shows none (today's main has no lanes yet)."""
    lanes: dict[str, str] = {}
    cursor: str | None = None
    while True:
        response = client.request("GET", "/documents?limit=100" + (f"&cursor={quote(cursor)}" if cursor else ""))
        response.raise_for_status()
        page = response.json()
        lanes.update({str(item["document_id"]): str(item.get("lane") or NO_LANE) for item in page["items"]})
        cursor = page.get("next_cursor")
        if not cursor:
            return lanes


def outcomes_of(
    uploads: Sequence[Upload], latencies: dict[str, float], items: dict[str, dict[str, Any]], lanes: dict[str, str]
) -> list[Outcome]:
    outcomes = []
    for upload in uploads:
        if upload.document_id is None:
            outcomes.append(Outcome(upload.name, None, UPLOAD_FAILED, None, error=upload.error))
            continue
        item = items.get(upload.document_id, {})
        error = item.get("error_code")
        outcomes.append(
            Outcome(
                name=upload.name,
                document_id=upload.document_id,
                status=str(item.get("status", "no record")),
                seconds=latencies.get(upload.document_id),
                lane=lanes.get(upload.document_id, NO_LANE),
                stage=item.get("stage"),
                error=f"{error}: {item.get('error_detail')}" if error else None,
            )
        )
    return outcomes


def run_phase(
    phase: str,
    small_pdfs: Sequence[Path],
    big_pdf: Path | None,
    *,
    uploaders: int,
    timeout: float,
    wait_big: bool,
    warm_up: bool,
    work: Path,
) -> dict[str, Any]:
    import boto3
    from rag_ingest.wiring import vector_store_for

    from eval.stack import eval_template
    from local.client import OfflineClient
    from local.runtime.harness import OfflineStackProcess
    from local.runtime.settings import DEFAULT_OPENSEARCH_URL, stack_name_from_cdk_json

    source = REPO / "cdk.out" / f"{stack_name_from_cdk_json(REPO)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    slug = phase.replace(" ", "-")
    index_name = f"rag-bench-isolation-{slug}-{uuid.uuid4().hex[:8]}"
    folder = work / slug
    folder.mkdir()
    template = folder / "template.json"
    template.write_text(json.dumps(eval_template(source, index_name)))
    print(f"\n== phase {phase}: starting a local stack (index {index_name}) ...", flush=True)
    process = OfflineStackProcess(folder / "state", template=template)
    try:
        outputs = process.start(timeout=300)
        store = vector_store_for(process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL, index_name, 384)
        try:
            options: dict[str, Any] = {
                "endpoint_url": outputs["MotoEndpoint"],
                "region_name": outputs.get("Region", "us-east-1"),
                "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing",
            }
            statuses = StatusTable(boto3.resource("dynamodb", **options).Table(outputs["DocumentsTableName"]))
            run = uuid.uuid4().hex[:8]
            small = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"iso-small-{run}")
            big = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"iso-big-{run}")
            if warm_up:  # every stage's worker started and the model loaded before the clock
                warm = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"iso-warm-{run}")
                began = time.perf_counter()
                warm_id = warm.upload(WARM_UP_PDF)
                state = warm.wait_until_done([warm_id], timeout_seconds=timeout)[warm_id]
                print(f"warm-up ({WARM_UP_PDF.name}, untimed): {state['status']} after "
                      f"{time.perf_counter() - began:.1f} s", flush=True)  # fmt: skip
            small.token()  # signed in before the clock starts
            big.token()
            load_before = os.getloadavg()
            big_id: str | None = None
            big_started = time.time()
            big_upload_seconds: float | None = None
            if big_pdf is not None:
                big_id = big.upload(big_pdf)
                big_upload_seconds = round(time.time() - big_started, 2)
                print(f"uploaded {big_pdf.name} in {big_upload_seconds} s: {big_id}", flush=True)
            began = time.perf_counter()
            uploads = upload_all(small, small_pdfs, uploaders)
            print(f"uploaded {len(uploads)} small PDFs in {time.perf_counter() - began:.1f} s", flush=True)
            latencies, items = wait_for(statuses, uploads, timeout=timeout, big_id=big_id, wait_big=wait_big)
            load_after = os.getloadavg()
            big_state = big.document(big_id) if big_id else None  # the API's JSON: lane when it has one
            outcomes = outcomes_of(uploads, latencies, items, api_lanes(small))
        finally:
            store.drop_index()
    finally:
        process.stop()
    result: dict[str, Any] = {
        "phase": phase,
        "summary": asdict(summarize(phase, outcomes)),
        "lanes": lane_counts(outcomes),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "documents": [asdict(outcome) for outcome in outcomes],
    }
    if big_state is not None:
        progress = big_state.get("progress") or {}
        result["big"] = {
            "document_id": big_id,
            "pages": big_state.get("page_count"),
            "upload_seconds": big_upload_seconds,
            "status": big_state["status"],
            "stage": big_state.get("stage"),
            "pages_parsed": big_state.get("pages_parsed"),
            "chunks_embedded": progress.get("done"),
            "chunks": progress.get("total"),
            "lane": big_state.get("lane") or NO_LANE,
            # Upload request to READY/FAILED, as for the small ones (None while it is in flight).
            "seconds": round(epoch_seconds(big_state["updated_at"]) - big_started, 1)
            if big_state["status"] in TERMINAL
            else None,
        }
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rag-bench-isolation-") as folder:
        work = Path(folder)
        began = time.perf_counter()
        sources = load_sources()  # once for both: reading the source PDFs takes seconds
        small_pdfs = write_small_documents(work / "small", args.small, sources=sources)
        big_pdf = write_big_document(work / f"manual-{args.big_pages}-pages.pdf", args.big_pages, sources)
        print(f"wrote {len(small_pdfs)} small PDFs and {big_pdf.name} ({big_pdf.stat().st_size / 1e6:.1f} MB) "
              f"in {time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
        phases = [
            run_phase(
                phase,
                small_pdfs,
                big,
                uploaders=args.uploaders,
                timeout=args.timeout,
                wait_big=args.wait_big,
                warm_up=args.warm_up,
                work=work,
            )
            for phase, big in (("alone", None), ("with big", big_pdf))
        ]
    alone, with_big = (PhaseSummary(**phase["summary"]) for phase in phases)
    return {
        "small": args.small,
        "big_pages": args.big_pages,
        "uploaders": args.uploaders,
        "timeout_seconds": args.timeout,
        "wait_big": args.wait_big,
        "warm_up": args.warm_up,
        "cpus": os.cpu_count(),
        "phases": phases,
        "verdict": asdict(verdict(alone, with_big)),
    }


def report(results: dict[str, Any]) -> str:
    summaries = [PhaseSummary(**phase["summary"]) for phase in results["phases"]]
    lines = [table(summaries)]
    for phase in results["phases"]:
        lines.append(f"{phase['phase']}: lanes {phase['lanes']}; load average (1 min) "
                     f"{phase['load_average_before'][0]} -> {phase['load_average_after'][0]}")  # fmt: skip
        for document in phase["documents"]:
            if document["status"] != READY:
                detail = " ".join(filter(None, (document["status"], document["stage"], document["error"])))
                lines.append(f"  {document['name']} {document['document_id'] or ''}: {detail}")
        if big := phase.get("big"):
            stage = f" {big['stage']}" if big["stage"] else ""
            pages = big["pages"] or results["big_pages"]
            lines.append(
                f"  big document ({pages} pages) when the wait ended: {big['status']}{stage}, "
                f"pages parsed {big['pages_parsed'] or 0}/{pages}, chunks embedded "
                f"{big['chunks_embedded'] or 0}/{big['chunks'] or '?'}, lane {big['lane']}"
                + (f", READY after {big['seconds']} s" if big["status"] == READY and big["seconds"] else "")
            )
    decided = results["verdict"]
    ratio = "-" if decided["ratio"] is None else f"{decided['ratio']:.2f}"
    lines.append(f"p95 with big / p95 alone: {ratio}; goal (<= {GOAL_RATIO}, every document READY): "
                 f"{'met' if decided['met'] else 'not met'} ({decided['reason']})")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("run", help="both phases, each through a fresh local stack")
    command.add_argument("--small", type=int, default=DEFAULT_SMALL, help="small 5-page PDFs per phase")
    command.add_argument("--big-pages", type=int, default=DEFAULT_BIG_PAGES, help="pages of the big PDF")
    command.add_argument("--uploaders", type=int, default=4, help="small uploads in flight at once")
    command.add_argument("--timeout", type=float, default=3600, help="seconds each phase waits at most")
    command.add_argument("--wait-big", action="store_true", help="also wait for the big document to finish")
    command.add_argument("--no-warm-up", dest="warm_up", action="store_false", help="no untimed warm-up upload")
    args = parser.parse_args(argv)
    results = run(args)
    print()
    print(report(results))
    RESULTS.mkdir(parents=True, exist_ok=True)
    written = RESULTS / f"isolation-{time.strftime('%Y%m%dT%H%M%S')}.json"
    written.write_text(json.dumps(results, indent=2))
    print(f"written: {written.relative_to(REPO)}")


if __name__ == "__main__":
    main()
