"""make bench-reingest: what a new version and a copy of a 113-page document cost, through the local stack.

Three uploads to a fresh local stack (an index of its own, warmed by one small sample, untimed): the
first ingest of ``v1.pdf`` (``bench.versions``), ``v2.pdf`` (10 % of the pages edited) as a new S3 version
of the same document, then ``v2.pdf``'s bytes as another document. Each is timed from its upload
request to READY. Prints the times, the speedup over the first ingest, the cache hit rate and the
chunks embedded, and writes them to bench/results/reingest-<time>.json. Imports ``bench``, ``local`` and
``eval.stack``. Method and runs: docs/benchmarks.md (Re-ingest); the cache: docs/embedding-cache.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import requests

from bench.versions import EDITED_FRACTION, write_versions
from eval.stack import eval_template
from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import DEFAULT_OPENSEARCH_URL, REPO_ROOT, stack_name_from_cdk_json

RESULTS = REPO_ROOT / "bench" / "results"


@dataclass(frozen=True)
class Step:
    name: str
    document_id: str
    seconds: float
    pages: int
    chunks: int
    cache_hits: int
    cache_misses: int
    embed_seconds: float
    duplicate_of: str | None
    stage_ms: dict[str, int]  # the status record's timings_ms (Embed: summed over its tasks)

    @property
    def hit_rate(self) -> float:
        looked_up = self.cache_hits + self.cache_misses
        return self.cache_hits / looked_up if looked_up else 0.0


def post_form(form: dict[str, Any], path: Path, timeout: float = 60) -> None:
    """The browser's upload: the presigned POST's fields and the file, straight to S3."""
    response = requests.post(
        form["url"], data=form["fields"], files={"file": (path.name, path.read_bytes(), "application/pdf")},
        timeout=timeout,
    )  # fmt: skip
    if response.status_code not in (200, 201, 204):
        raise SystemExit(f"upload of {path.name} failed: {response.status_code} {response.text[:300]}")


def ingest(client: OfflineClient, name: str, form: dict[str, Any], document_id: str, path: Path,
           *, after: str | None, timeout: float) -> Step:  # fmt: skip
    """Upload ``path`` with ``form`` and wait until the document's version is READY (not the one before)."""
    started = time.perf_counter()
    post_form(form, path)
    deadline = time.monotonic() + timeout
    while True:
        state = client.document(document_id)
        # A new version: the record still shows the old READY one until intake queues the upload.
        if state["updated_at"] != after and state["status"] in ("READY", "FAILED"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: not done after {timeout:.0f}s: {state['status']} {state.get('stage')}")
        time.sleep(0.2)
    seconds = time.perf_counter() - started
    if state["status"] != "READY":
        raise SystemExit(f"{name}: {state['status']} {state.get('error_code')}: {state.get('error_detail')}")
    cache = state["embedding_cache"]
    return Step(
        name=name,
        document_id=document_id,
        seconds=seconds,
        pages=int(state["page_count"]),
        chunks=int(state["chunk_count"]),
        cache_hits=int(cache["hits"]),
        cache_misses=int(cache["misses"]),
        embed_seconds=int(state["timings_ms"].get("EMBED", 0)) / 1000,
        duplicate_of=state.get("duplicate_of"),
        stage_ms={stage: int(ms) for stage, ms in state["timings_ms"].items()},
    )


def new_upload(client: OfflineClient, filename: str) -> tuple[str, dict[str, Any]]:
    ticket = client.create_upload(filename)
    ticket.raise_for_status()
    body = ticket.json()
    return str(body["document_id"]), dict(body["upload"])


def run(timeout: float, fraction: float) -> list[Step]:
    from rag_ingest.wiring import vector_store_for

    source = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    index_name = f"rag-bench-reingest-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="rag-bench-reingest-") as work:
        first_pdf, second_pdf = write_versions(Path(work) / "pdfs", fraction)
        template = Path(work) / "template.json"
        template.write_text(json.dumps(eval_template(source, index_name)))
        process = OfflineStackProcess(Path(work) / "state", template=template)
        outputs = process.start(timeout=300)
        store = vector_store_for(process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL, index_name, 384)
        try:
            client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"bench-{uuid.uuid4().hex[:8]}")
            client.token()  # signed in before the clock starts
            warm_up = client.upload(REPO_ROOT / "samples" / "lighthouses.pdf")
            client.wait_until_done([warm_up], timeout_seconds=timeout)
            document_id, form = new_upload(client, "manual.pdf")
            first = ingest(client, "first ingest", form, document_id, first_pdf, after=None, timeout=timeout)
            before = client.document(document_id)["updated_at"]
            edited = ingest(client, f"new version ({fraction:.0%} of pages edited)", form, document_id, second_pdf,
                            after=before, timeout=timeout)  # fmt: skip
            copy_id, copy_form = new_upload(client, "manual-copy.pdf")
            copy = ingest(client, "same bytes, another name", copy_form, copy_id, second_pdf, after=None,
                          timeout=timeout)  # fmt: skip
            return [first, edited, copy]
        finally:
            process.stop()
            store.drop_index()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--fraction", type=float, default=EDITED_FRACTION)
    args = parser.parse_args(argv)
    steps = run(args.timeout, args.fraction)
    first = steps[0]
    print(f"{'upload':<36} {'pages':>5} {'chunks':>6} {'seconds':>8} {'speedup':>7} {'embed s':>7} "
          f"{'hit rate':>8} {'embedded':>8}  duplicate_of")  # fmt: skip
    for step in steps:
        print(
            f"{step.name:<36} {step.pages:>5} {step.chunks:>6} {step.seconds:>8.1f} "
            f"{first.seconds / step.seconds:>6.1f}x {step.embed_seconds:>7.1f} {step.hit_rate:>8.1%} "
            f"{step.cache_misses:>8}  {step.duplicate_of or '-'}"
        )
    print("stage times (worker seconds; Embed summed over its tasks):")
    for step in steps:
        print(f"  {step.name}: " + ", ".join(f"{stage.lower()} {ms / 1000:.1f}" for stage, ms in step.stage_ms.items()))
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / f"reingest-{time.strftime('%Y%m%dT%H%M%S')}.json"
    report.write_text(json.dumps([asdict(step) | {"hit_rate": step.hit_rate} for step in steps], indent=2))
    print(f"written: {report.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
