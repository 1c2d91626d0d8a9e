"""rag-ingest's side: the whole local stack, presigned upload -> every document READY.

Each run starts a fresh local stack on free ports with an index of its own (the template copy of
``eval.stack.eval_template``), so runs do not share warm workers or index state; starting it is
not timed. The clock runs from the first upload request to the moment every document is READY,
as a browser user would see it; the stack's process tree (and OpenSearch) is sampled for RSS and
CPU time per process role meanwhile: the profile of where the run's core-seconds go.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.peers.corpus import CorpusDocument
from bench.peers.process_memory import PeakRssSampler, pids_with_argument
from eval.stack import eval_template
from local.client import OfflineClient
from local.opensearch.server import BOOTSTRAP_CLASS
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import DEFAULT_OPENSEARCH_URL, REPO_ROOT, stack_name_from_cdk_json

SYSTEM_NAME = "rag-ingest"
STAGES = ("VALIDATE", "PARSE", "CHUNK", "EMBED", "INDEX", "FINALIZE")
#: Reads more from the stack after the run, before it stops: (outputs, each document's final state) -> figures.
AfterRun = Callable[[Mapping[str, Any], Mapping[str, dict[str, Any]]], dict[str, Any]]
#: Reads from the stack after the warm-up, just before the clock starts: outputs -> figures (a baseline).
BeforeClock = Callable[[Mapping[str, Any]], dict[str, Any]]


def ingest_through_local_stack(
    documents: Sequence[CorpusDocument],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    require_ready: bool = True,
    after_run: AfterRun | None = None,
    warmup: Sequence[Path] = (),
    before_clock: BeforeClock | None = None,
) -> dict[str, Any]:
    """One measured run: pages, chunks, seconds, peak RSS of the stack and of OpenSearch, stage times.

    ``warmup`` documents go through the stack before the clock starts (``warm_up``), and
    ``before_clock``'s figures, read then, are added to the result.
    ``env`` is the stack's environment over this one's (e.g. the embedding server's Bedrock profile);
    a document not READY ends the run unless ``require_ready`` is false, when the figures count the
    READY ones and list the others; ``after_run``'s figures are added to the result."""
    from rag_ingest.wiring import vector_store_for

    source = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    index_name = f"rag-bench-peers-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="rag-bench-peers-") as work:
        template = Path(work) / "template.json"
        template.write_text(json.dumps(eval_template(source, index_name)))
        process = OfflineStackProcess(Path(work) / "state", template=template, env=dict(env or {}))
        outputs = process.start(timeout=300)
        assert process.process is not None  # started above
        opensearch_url = process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL
        store = vector_store_for(opensearch_url, index_name, 384)
        try:
            client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"bench-{uuid.uuid4().hex[:8]}")
            client.token()  # sign in before the clock starts, as a user already on the page is
            warmed = warm_up(client, warmup, timeout)
            baseline = before_clock(outputs) if before_clock else {}
            load_before = os.getloadavg()
            with PeakRssSampler(process.process.pid, pids_with_argument(BOOTSTRAP_CLASS)) as memory:
                started = time.perf_counter()
                ids = [client.upload(document.path) for document in documents]
                states = client.wait_until_done(ids, timeout_seconds=timeout)
                seconds = time.perf_counter() - started
            failed = {d: (s["status"], s.get("error_code")) for d, s in states.items() if s["status"] != "READY"}
            if failed and require_ready:
                raise SystemExit(f"documents not READY: {failed}\n{process.log_tail()}")
            ready = [state for state in states.values() if state["status"] == "READY"]
            stage_seconds = {
                stage: sum(int(state.get("timings_ms", {}).get(stage, 0)) for state in states.values()) / 1000
                for stage in STAGES
            }
            return {
                "system": SYSTEM_NAME,
                "pages": sum(int(state["page_count"]) for state in ready),
                "chunks": sum(int(state["chunk_count"]) for state in ready),
                "documents": len(states),
                "documents_failed": len(failed),
                "failures": [
                    {
                        "file": documents[ids.index(d)].path.name,
                        "status": s,
                        "error_code": c,
                        "error_detail": str(states[d].get("error_detail") or "")[:300],
                    }
                    for d, (s, c) in failed.items()
                ],
                "seconds": seconds,
                "peak_rss_bytes": memory.peak_tree_bytes,
                "peak_rss_processes": memory.peak_tree_processes,
                "opensearch_peak_rss_bytes": memory.peak_separate_bytes,
                "cpu_seconds_by_role": memory.cpu_seconds_by_role,
                "rss_samples": memory.samples,
                "stage_seconds_total": stage_seconds,
                "warmup_documents": warmed,
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                **baseline,
                **(after_run(outputs, states) if after_run else {}),
            }
        finally:
            process.stop()
            store.drop_index()


def warm_up(client: OfflineClient, documents: Sequence[Path], timeout: float) -> list[str]:
    """Uploads ``documents`` at once and waits until they are READY, before the clock starts: every
    function then has warm workers, as in a pipeline already at work (the peers' libraries are
    imported before their clocks start too). Their chunks are not the corpus's, so nothing of the
    measured run is cached by them."""
    if not documents:
        return []
    ids = [client.upload(path) for path in documents]
    states = client.wait_until_done(ids, timeout_seconds=timeout)
    failed = {d: s["status"] for d, s in states.items() if s["status"] != "READY"}
    if failed:
        raise SystemExit(f"warm-up documents not READY: {failed}")
    return [path.name for path in documents]
