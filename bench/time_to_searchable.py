"""make bench-searchable: how long after an upload a passage of the document is found by POST /search.

    .venv/bin/python -m bench.time_to_searchable [--runs 20] [--sizes 1,10,100] [--poll 0.2]

One warm local stack under the ``bedrock`` emulation profile (Bedrock's latency and quotas,
deterministic vectors). Per size, ``--runs`` uploads of a real PDF cut to that many pages, one at a
time, each by a fresh tenant (a cold embedding cache, no duplicate); the clock runs from the upload
request until a BM25 search for a phrase of the document returns it. Each run's time is split by
stage from the workflow's history (``bench.searchable_model.breakdown``); then the AWS model prints.
Imports ``bench``, ``eval.stack``, ``local`` and the domain package. Runs: docs/latency.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.isolation import percentile
from bench.searchable_model import AwsOverheads, Breakdown, aws_model_report, breakdown

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SOURCE_PDF = REPO / "bench" / "corpus" / "r-intro-full.pdf"  # 113 pages of running text (bench/corpus/README.md)
FIRST_PAGE = 10  # 0-based: past the title, contents and preface pages
SIZES = (1, 10, 100)
WARMUP_DOCUMENTS = (REPO / "samples" / "sourdough.pdf", REPO / "samples" / "lighthouses.pdf")
PHRASE_WORDS = 6
WORKER_READY = re.compile(r"local\.lambda\.(?P<function>\S+): worker \d+ \(pid \d+\) ready in (?P<ms>\d+) ms")
STACK_ENV = {
    "LOCAL_EMBEDDING_PROFILE": "bedrock",
    "LOCAL_EMBEDDING_VECTORS": "deterministic",
    "LOCAL_PERSIST": "0",
    "LOCAL_RETRY_SCALE": "1",
    # Warm workers stay warm between runs (the local default stops a worker idle for 30 s).
    "LOCAL_LAMBDA_IDLE_SECONDS": "900",
}


@dataclass(frozen=True)
class Sample:
    pages: int
    path: Path
    phrase: str  # words of the document's first page, searched for with BM25


def cut_pdf(source: Path, first: int, pages: int, path: Path) -> Path:
    """``pages`` pages of ``source`` from ``first`` (0-based), as a PDF of their own."""
    from pypdf import PdfReader, PdfWriter

    reader = PdfReader(source)
    writer = PdfWriter()
    for index in range(first, first + pages):
        writer.add_page(reader.pages[index])
    with path.open("wb") as handle:
        writer.write(handle)
    return path


def phrase_of(text: str, words: int = PHRASE_WORDS) -> str:
    """``words`` consecutive alphabetic words from the middle of ``text`` (the search's query)."""
    found = re.findall(r"[A-Za-z]{4,}", text)
    if len(found) < words:
        raise SystemExit(f"too little text for a phrase: {text[:200]!r}")
    start = max(0, len(found) // 2 - words // 2)
    return " ".join(found[start : start + words])


def samples(sizes: Sequence[int], work: Path) -> list[Sample]:
    from rag_ingest.parsing.pdf.extract import parse_pdf

    made = []
    for pages in sizes:
        path = cut_pdf(SOURCE_PDF, FIRST_PAGE, pages, work / f"r-intro-{pages}p.pdf")
        data = path.read_bytes()
        first_page = parse_pdf(data, max_bytes=len(data) + 1, max_pages=pages).pages[0].text
        made.append(Sample(pages, path, phrase_of(first_page)))
    return made


@dataclass(frozen=True)
class Run:
    pages: int
    document_id: str
    seconds_to_searchable: float
    seconds_to_ready: float
    search_requests: int
    breakdown: Breakdown
    timings_ms: dict[str, int]
    load_average: tuple[float, float, float]


class Stack:
    """A warm local stack on free ports with an index of its own, and what the bench reads from it."""

    def __init__(self, work: Path, timeout: float) -> None:
        import boto3

        from eval.stack import eval_template
        from local.client import OfflineClient
        from local.runtime.harness import OfflineStackProcess
        from local.runtime.settings import LOCAL_CREDENTIALS, stack_name_from_cdk_json

        source = REPO / "cdk.out" / f"{stack_name_from_cdk_json(REPO)}.template.json"
        if not source.is_file():
            raise SystemExit(f"{source} not found: synthesize first (make synth)")
        self.index_name = f"rag-bench-searchable-{uuid.uuid4().hex[:8]}"
        template = work / "template.json"
        template.write_text(json.dumps(eval_template(source, self.index_name)))
        self.process = OfflineStackProcess(work / "state", template=template, env=dict(STACK_ENV))
        self.outputs = self.process.start(timeout=300)
        self.timeout = timeout
        self._client_class = OfflineClient
        session = boto3.session.Session(
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=LOCAL_CREDENTIALS["AWS_SESSION_TOKEN"],
            region_name=self.outputs["Region"],
        )
        endpoint = self.outputs["MotoEndpoint"]
        self.sfn = session.client("stepfunctions", endpoint_url=endpoint)
        self.documents = session.resource("dynamodb", endpoint_url=endpoint).Table(self.outputs["DocumentsTableName"])

    def client(self, tenant: str) -> Any:
        return self._client_class(api_url=self.outputs["ApiUrl"], tenant_id=tenant)

    def warm_up(self) -> None:
        """Every function's warm workers started before the clock, as in a pipeline at work."""
        client = self.client(f"warm-{uuid.uuid4().hex[:8]}")
        ids = [client.upload(path) for path in WARMUP_DOCUMENTS]
        states = client.wait_until_done(ids, timeout_seconds=self.timeout)
        if any(state["status"] != "READY" for state in states.values()):
            raise SystemExit(f"warm-up documents not READY: {states}")

    def history(self, document_id: str) -> list[dict[str, Any]]:
        from boto3.dynamodb.conditions import Attr

        items = self.documents.scan(FilterExpression=Attr("document_id").eq(document_id), ConsistentRead=True)
        arn = next((item.get("execution_arn") for item in items["Items"] if item.get("execution_arn")), None)
        if not arn:
            raise SystemExit(f"{document_id}: no execution_arn in its status record")
        events: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            events += page["events"]
            if not page.get("nextToken"):
                return events
            kwargs["nextToken"] = page["nextToken"]

    def worker_starts_ms(self) -> dict[str, list[int]]:
        """Each function's Lambda worker start times from the stack's log (a cold start's import and init)."""
        starts: dict[str, list[int]] = {}
        for match in WORKER_READY.finditer(self.process.log_path.read_text(errors="replace")):
            starts.setdefault(match["function"], []).append(int(match["ms"]))
        return starts

    def stop(self) -> None:
        from rag_ingest.wiring import vector_store_for

        from local.runtime.settings import DEFAULT_OPENSEARCH_URL

        try:
            url = self.process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL
            vector_store_for(url, self.index_name, 384).drop_index()
        finally:
            self.process.stop()


def measure_one(stack: Stack, sample: Sample, poll: float) -> Run:
    """One upload by a fresh tenant: the seconds until search finds it, then until READY, and the split."""
    client = stack.client(f"tts-{uuid.uuid4().hex[:10]}")
    client.token()  # signed in before the clock, as a user on the page is
    started = time.time()
    document_id = client.upload(sample.path)
    uploaded = time.time()
    requests_made = 0
    deadline = time.monotonic() + stack.timeout
    while True:
        response = client.search(sample.phrase, k=5, mode="bm25")
        requests_made += 1
        response.raise_for_status()
        if any(hit.get("document_id") == document_id for hit in response.json().get("passages", [])):
            found = time.time()
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{sample.path.name}: not found by search after {stack.timeout:.0f} s")
        time.sleep(poll)
    state = client.wait_until_done([document_id], timeout_seconds=stack.timeout)[document_id]
    if state["status"] != "READY":
        raise SystemExit(f"{sample.path.name}: {state['status']} {state.get('error_code')}")
    ready = datetime.fromisoformat(state["updated_at"]).timestamp()
    split = breakdown(stack.history(document_id), started=started, uploaded=uploaded, found=found)
    return Run(
        pages=sample.pages,
        document_id=document_id,
        seconds_to_searchable=round(found - started, 3),
        seconds_to_ready=round(ready - started, 3),
        search_requests=requests_made,
        breakdown=split,
        timings_ms={stage: int(ms) for stage, ms in (state.get("timings_ms") or {}).items()},
        load_average=os.getloadavg(),
    )


def summary(runs: Sequence[Run]) -> dict[str, Any]:
    """p50/p95 to searchable per size, and the median of each part of the split."""
    by_size: dict[int, list[Run]] = {}
    for run in runs:
        by_size.setdefault(run.pages, []).append(run)
    result: dict[str, Any] = {}
    for pages, group in sorted(by_size.items()):
        seconds = [run.seconds_to_searchable for run in group]
        parts = {
            name: round(percentile([getattr(run.breakdown, name) for run in group], 50), 3) for name in Breakdown.PARTS
        }
        states: dict[str, float] = {}
        for name in {state for run in group for state in run.breakdown.states}:
            states[name] = round(percentile([run.breakdown.states.get(name, 0.0) for run in group], 50), 3)
        result[str(pages)] = {
            "runs": len(group),
            "p50": round(percentile(seconds, 50), 2),
            "p95": round(percentile(seconds, 95), 2),
            "max": round(max(seconds), 2),
            "ready_p50": round(percentile([run.seconds_to_ready for run in group], 50), 2),
            "median_parts": parts,
            "median_states": dict(sorted(states.items(), key=lambda item: -item[1])),
            "transitions": group[0].breakdown.transitions,
        }
    return result


def table(figures: Mapping[str, Any]) -> str:
    lines = [
        "| pages | runs | p50 s | p95 s | max s | READY p50 s | upload | to workflow | workflow | after Index |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for pages, row in figures.items():
        parts = row["median_parts"]
        lines.append(
            f"| {pages} | {row['runs']} | {row['p50']:.2f} | {row['p95']:.2f} | {row['max']:.2f} | "
            f"{row['ready_p50']:.2f} | {parts['upload']:.2f} | {parts['to_workflow']:.2f} | "
            f"{parts['workflow_to_index']:.2f} | {parts['index_to_found']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="uploads per size (20 gives a p95 of one run's rank)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="pages per document, comma-separated")
    parser.add_argument("--poll", type=float, default=0.2, help="seconds between two searches")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--output", type=Path, help="results JSON (default bench/results/searchable-<time>.json)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    if not sizes or min(sizes) < 1 or max(sizes) > 100 or args.runs < 1:
        parser.error("--sizes: 1 to 100 pages each; --runs: at least 1")
    started = datetime.now(UTC)
    output = args.output or RESULTS / f"searchable-{started:%Y%m%d-%H%M%S}.json"
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="rag-bench-searchable-") as folder:
        work = Path(folder)
        made = samples(sizes, work)
        print("starting a local stack (bedrock profile, deterministic vectors) ...", flush=True)
        stack = Stack(work, args.timeout)
        try:
            stack.warm_up()
            load_before = os.getloadavg()
            for sample in made:
                for number in range(args.runs):
                    run = measure_one(stack, sample, args.poll)
                    runs.append(run)
                    print(
                        f"{sample.pages:>3} pages, run {number + 1}/{args.runs}: searchable after "
                        f"{run.seconds_to_searchable:.2f} s, READY {run.seconds_to_ready:.2f} s "
                        f"(load {run.load_average[0]:.1f})",
                        flush=True,
                    )
            load_after = os.getloadavg()
            worker_starts = stack.worker_starts_ms()
        finally:
            stack.stop()
    figures = summary(runs)
    report = {
        "command": " ".join(["python", "-m", "bench.time_to_searchable", *(argv or [])]),
        "started": started.isoformat(timespec="seconds"),
        "source": str(SOURCE_PDF.relative_to(REPO)),
        "poll_seconds": args.poll,
        "stack_env": STACK_ENV,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "summary": figures,
        "worker_starts_ms": worker_starts,
        "runs": [asdict(run) for run in runs],
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{table(figures)}\n\nload average before {load_before}, after {load_after}")
    starts = [ms for function, values in worker_starts.items() if "Workflow/" in function for ms in values]
    cold_init = percentile(starts, 50) / 1000 if starts else AwsOverheads().cold_init
    print(f"a stage function's worker start here (import and init), median of {len(starts)}: {cold_init:.2f} s")
    print(aws_model_report([asdict(run) for run in runs], replace(AwsOverheads(), cold_init=round(cold_init, 2))))
    print(f"\nresults: {output.relative_to(REPO) if output.is_relative_to(REPO) else output}")


if __name__ == "__main__":
    main()
