"""make bench-fairness: does a light tenant keep its latency beside another tenant's backfill?

    .venv/bin/python -m bench.fairness [--pages 400 --b-docs 8]   # make bench-fairness; a scaled run
Two phases, each through a fresh local stack under the model server's ``bedrock`` quota profile
(deterministic vectors, Step Functions' retry intervals unscaled): *quiet*, tenant B alone uploads a
1-page PDF every ``--interval`` seconds; *contended*, tenant A first uploads a ``--pages`` PDF and,
once it is embedding (the part the quota bounds), B uploads the same way. Prints B's p50/p95 from
upload to READY per phase, the p95 ratio against 1.5, and A's throughput. Imports ``bench``,
``local``, ``eval.stack`` and the domain package. Method and runs: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.big_document import load_sources, write_big_document, write_small_documents
from bench.isolation import (
    TERMINAL,
    WARM_UP_PDF,
    PhaseSummary,
    StatusTable,
    Upload,
    epoch_seconds,
    outcomes_of,
    summarize,
    table,
    verdict,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
GOAL_RATIO = 1.5  # issue 45: B's p95 beside A's backfill at most 1.5x B's p95 on a quiet stack
STACK_ENV = {
    "LOCAL_EMBEDDING_PROFILE": "bedrock",
    "LOCAL_EMBEDDING_VECTORS": "deterministic",
    "LOCAL_PERSIST": "0",
    "LOCAL_RETRY_SCALE": "1",  # a give-way waits as long as in AWS
}


def _numbers(value: Any) -> Any:
    """A record's map with DynamoDB's Decimals as ints (JSON has no Decimal)."""
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()}
    return int(value) if isinstance(value, Decimal) else value


def _record(statuses: StatusTable, document_id: str) -> dict[str, Any]:
    return statuses.scan().get(document_id, {})


def _progress(item: dict[str, Any]) -> int:
    """Chunks embedded so far (the record's embedded parts; 0 before Embed)."""
    from rag_ingest.core.record import DocumentRecord

    progress = DocumentRecord.model_validate(item).progress if item else None
    return progress.done if progress else 0


def _total(item: dict[str, Any]) -> int:
    from rag_ingest.core.record import DocumentRecord

    progress = DocumentRecord.model_validate(item).progress if item else None
    return progress.total if progress else 0


def upload_every(client: Any, pdfs: Sequence[Path], interval: float) -> list[Upload]:
    """One upload every ``interval`` seconds, each in its own thread (a slow upload does not push
    the next one back), as a person or a connector adding documents one by one."""
    uploads: list[Upload | None] = [None] * len(pdfs)

    def one(index: int, pdf: Path) -> None:
        started = time.time()
        try:
            uploads[index] = Upload(pdf.name, started, client.upload(pdf))
        except Exception as exc:  # counted as a failed document, never dropped
            uploads[index] = Upload(pdf.name, started, None, f"{type(exc).__name__}: {exc}"[:300])

    threads = []
    began = time.monotonic()
    for index, pdf in enumerate(pdfs):
        time.sleep(max(0.0, began + index * interval - time.monotonic()))
        thread = threading.Thread(target=one, args=(index, pdf), name=f"upload-{index}")
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return [upload for upload in uploads if upload is not None]


def run_phase(
    phase: str, b_pdfs: Sequence[Path], a_pdf: Path | None, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    import boto3
    from rag_ingest.wiring import vector_store_for

    from bench.isolation import wait_for
    from eval.stack import eval_template
    from local.client import OfflineClient
    from local.runtime.harness import OfflineStackProcess
    from local.runtime.settings import DEFAULT_OPENSEARCH_URL, stack_name_from_cdk_json

    source = REPO / "cdk.out" / f"{stack_name_from_cdk_json(REPO)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    index_name = f"rag-bench-fairness-{phase}-{uuid.uuid4().hex[:8]}"
    folder = work / phase
    folder.mkdir()
    template = folder / "template.json"
    template.write_text(json.dumps(eval_template(source, index_name)))
    print(f"\n== phase {phase}: starting a local stack (index {index_name}) ...", flush=True)
    process = OfflineStackProcess(folder / "state", template=template, env=STACK_ENV)
    result: dict[str, Any] = {"phase": phase}
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
            tenant_a = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"fair-a-{run}")
            tenant_b = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"fair-b-{run}")
            warm = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"fair-warm-{run}")
            tenant_a.token()
            tenant_b.token()
            a_id: str | None = None
            a_started = time.time()
            if a_pdf is not None:
                a_id = tenant_a.upload(a_pdf)
                print(f"tenant A uploaded {a_pdf.name}: {a_id}; waiting for its Embed ...", flush=True)
                deadline = time.monotonic() + args.timeout
                while time.monotonic() < deadline:
                    item = _record(statuses, a_id)
                    if (item.get("stage") == "EMBED" and _progress(item) > 0) or item.get("status") in TERMINAL:
                        break
                    time.sleep(1)
                result["a_embedding_after_seconds"] = round(time.time() - a_started, 1)
                print(f"tenant A embedding after {result['a_embedding_after_seconds']} s", flush=True)
            # Every stage's worker up right before B's clock, in both phases (untimed): workers idle
            # 30 s stop, and A's Parse outlasts that (docs/benchmarks.md, "Fair share").
            warm_id = warm.upload(WARM_UP_PDF)
            print(f"warm-up: {warm.wait_until_done([warm_id], timeout_seconds=args.timeout)[warm_id]['status']}")
            a_before = _progress(_record(statuses, a_id)) if a_id else 0
            b_began = time.time()
            uploads = upload_every(tenant_b, b_pdfs, args.interval)
            latencies, items = wait_for(statuses, uploads, timeout=args.timeout, big_id=a_id)
            b_seconds = time.time() - b_began
            outcomes = outcomes_of(uploads, latencies, items, {})
            result["summary"] = asdict(summarize(phase, outcomes))
            result["documents"] = [asdict(outcome) for outcome in outcomes]
            # Where each of B's documents spent its time: the record's per-stage times and attempts.
            result["b_stages"] = {
                upload.document_id: {
                    "timings_ms": _numbers(items.get(upload.document_id, {}).get("timings_ms")),
                    "attempts": _numbers(items.get(upload.document_id, {}).get("attempts")),
                }
                for upload in uploads
                if upload.document_id
            }
            for document_id, stages in result["b_stages"].items():
                print(f"B {document_id}: stage ms {stages['timings_ms']}, attempts {stages['attempts']}", flush=True)
            result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
            if a_id is not None:
                a_item = _record(statuses, a_id)
                a_during = _progress(a_item) - a_before
                result["a"] = {
                    "document_id": a_id,
                    "chunks_embedded_while_b_ran": a_during,
                    "chunks_per_second_while_b_ran": round(a_during / b_seconds, 2),
                    "seconds_b_ran": round(b_seconds, 1),
                }
                if args.wait_a:
                    deadline = time.monotonic() + args.timeout
                    while time.monotonic() < deadline:
                        a_item = _record(statuses, a_id)
                        if a_item.get("status") in TERMINAL:
                            break
                        time.sleep(2)
                    if a_item.get("status") == "READY":
                        seconds = epoch_seconds(str(a_item["updated_at"])) - a_started
                        pages = int(a_item.get("page_count") or args.pages)
                        result["a"].update(
                            status="READY",
                            seconds_to_ready=round(seconds, 1),
                            pages=pages,
                            chunks=_total(a_item),
                            pages_per_second=round(pages / seconds, 2),
                        )
                result["a"].setdefault("status", str(a_item.get("status")))
        finally:
            store.drop_index()
    finally:
        process.stop()
    return result


def report(results: dict[str, Any]) -> str:
    summaries = [PhaseSummary(**phase["summary"]) for phase in results["phases"]]
    lines = [table(summaries)]
    decided = results["verdict"]
    ratio = "-" if decided["ratio"] is None else f"{decided['ratio']:.2f}"
    lines.append(f"B's p95 contended / quiet: {ratio}; goal (<= {GOAL_RATIO}, every document READY): "
                 f"{'met' if decided['met'] else 'not met'} ({decided['reason']})")  # fmt: skip
    for phase in results["phases"]:
        if a := phase.get("a"):
            line = (f"tenant A ({results['pages']} pages): {a['chunks_embedded_while_b_ran']} chunks embedded in the "
                    f"{a['seconds_b_ran']} s B ran ({a['chunks_per_second_while_b_ran']} chunks/s)")  # fmt: skip
            if "pages_per_second" in a:
                line += f"; READY after {a['seconds_to_ready']} s: {a['pages_per_second']} pages/s"
            lines.append(line + f"; status {a['status']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=2000, help="pages of tenant A's backfill")
    parser.add_argument("--b-docs", type=int, default=20, help="tenant B's 1-page PDFs per phase")
    parser.add_argument("--interval", type=float, default=4.0, help="seconds between B's uploads")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds each wait lasts at most")
    parser.add_argument("--no-wait-a", dest="wait_a", action="store_false", help="do not wait for A's READY")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rag-bench-fairness-") as folder:
        work = Path(folder)
        sources = load_sources()
        b_pdfs = write_small_documents(work / "b", args.b_docs, pages=1, sources=sources)
        a_pdf = write_big_document(work / f"backfill-{args.pages}-pages.pdf", args.pages, sources)
        phases = [run_phase("quiet", b_pdfs, None, args, work), run_phase("contended", b_pdfs, a_pdf, args, work)]
    quiet, contended = (PhaseSummary(**phase["summary"]) for phase in phases)
    decided = verdict(quiet, contended, GOAL_RATIO)
    results = {
        "pages": args.pages,
        "b_docs": args.b_docs,
        "interval_seconds": args.interval,
        "stack_env": STACK_ENV,
        "cpus": os.cpu_count(),
        "phases": phases,
        "verdict": asdict(decided),
    }
    print()
    print(report(results))
    RESULTS.mkdir(parents=True, exist_ok=True)
    written = RESULTS / f"fairness-{time.strftime('%Y%m%dT%H%M%S')}.json"
    written.write_text(json.dumps(results, indent=2))
    print(f"written: {written.relative_to(REPO)}")


if __name__ == "__main__":
    main()
