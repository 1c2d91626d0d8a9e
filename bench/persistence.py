"""The kept state at scale: ``local.runtime serve``'s time to ready with N documents in its state.

    .venv/bin/python -m bench.persistence --documents 1000 --runs 3

Ingests the three valid samples through a stack of its own, grows its snapshot to ``--documents`` by
copying every entity that names a document under a new id, then times ``serve`` from spawn to ready on
that state and on an empty one, a checkpoint of the grown state, and ``--burst`` uploads with the
journal off and on. Imports ``local``, ``tests.support`` and the domain package's ids.
Method: docs/benchmarks.md (The kept state at scale); figures: docs/local-stack.md (What a restart keeps).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_ingest.core.ids import new_document_id

from local.runtime.harness import OfflineStackProcess
from local.runtime.persistence.durable_state import BLOBS_DIR, SNAPSHOT_FILE
from tests.support.pipeline_probe import VALID_SAMPLES, PipelineProbe, new_tenant

OPENSEARCH_URL = os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")


def ingest_samples(state_dir: Path) -> list[str]:
    stack = OfflineStackProcess(state_dir)
    stack.start(timeout=300)
    try:
        probe = PipelineProbe(stack.outputs, OPENSEARCH_URL)
        client = probe.client(new_tenant("persist-bench"))
        ids = [probe.upload(client, sample).document_id for sample in VALID_SAMPLES]
        records = probe.wait_terminal(ids, timeout=300)
        not_ready = {i: r.status for i, r in records.items() if r.status != "READY"}
        if not_ready:
            raise RuntimeError(f"samples not READY: {not_ready}")
        return ids
    finally:
        stack.stop()


def grow_snapshot(source: Path, target: Path, document_ids: list[str], documents: int) -> dict[str, int]:
    """``target``'s data dir: ``source``'s snapshot with its documents copied up to ``documents``."""
    snapshot = pickle.loads((source / SNAPSHOT_FILE).read_bytes())
    entities: dict[Any, Any] = snapshot["entities"]
    originals = [id_.encode() for id_ in document_ids]
    naming: dict[bytes, list[tuple[Any, Any]]] = {original: [] for original in originals}
    for key, record in entities.items():
        frozen = pickle.dumps((key, record), protocol=pickle.HIGHEST_PROTOCOL)
        for original in originals:
            if original in frozen:
                naming[original].append((key, frozen))
    grown = dict(entities)
    copies = documents - len(document_ids)
    for index in range(copies):
        original = originals[index % len(originals)]
        copy_id = new_document_id().encode()
        if len(copy_id) != len(original):
            raise RuntimeError("document ids changed length: the byte-level copy would corrupt the pickles")
        for _, frozen in naming[original]:
            key, record = pickle.loads(frozen.replace(original, copy_id))
            grown[key] = record
    target.mkdir(parents=True, exist_ok=True)
    snapshot["entities"] = grown
    (target / SNAPSHOT_FILE).write_bytes(pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL))
    shutil.copytree(source / BLOBS_DIR, target / BLOBS_DIR, copy_function=os.link, dirs_exist_ok=True)
    kinds: dict[str, int] = {}
    for key in grown:
        kinds[key[0]] = kinds.get(key[0], 0) + 1
    return {**kinds, "entities": len(grown), "snapshot_bytes": (target / SNAPSHOT_FILE).stat().st_size}


def timed_start(state_dir: Path, data: Path | None) -> dict[str, Any]:
    if data is not None:
        shutil.copytree(data, state_dir / "data", copy_function=os.link)
    stack = OfflineStackProcess(state_dir)
    started = time.monotonic()
    stack.start(timeout=600)
    ready = time.monotonic() - started
    try:
        status = stack.control("GET", "/_local/status") or {}
        kept = status.get("kept_state") or {}
        return {"ready_seconds": round(ready, 2), "checkpoint_seconds": kept.get("last_checkpoint_seconds")}
    finally:
        stack.stop()


def timed_burst(state_dir: Path, uploads: int, *, persist: bool) -> dict[str, Any]:
    """``uploads`` samples uploaded at once; seconds until every one is READY, with the journal on or off."""
    stack = OfflineStackProcess(state_dir, env={"LOCAL_PERSIST": "1" if persist else "0"})
    stack.start(timeout=300)
    try:
        probe = PipelineProbe(stack.outputs, OPENSEARCH_URL)
        client = probe.client(new_tenant("persist-burst"))
        started = time.monotonic()
        ids = [probe.upload(client, VALID_SAMPLES[i % len(VALID_SAMPLES)]).document_id for i in range(uploads)]
        records = probe.wait_terminal(ids, timeout=900)
        elapsed = time.monotonic() - started
        status = stack.control("GET", "/_local/status") or {}
        return {
            "persist": persist,
            "seconds": round(elapsed, 1),
            "ready": sum(1 for record in records.values() if record.status == "READY"),
            "journal_bytes": (status.get("kept_state") or {}).get("journal_bytes"),
        }
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burst", type=int, default=30, help="uploads timed with the journal on and off (0: skip)")
    parser.add_argument("--report", type=Path, default=Path("bench/results/persistence.json"))
    arguments = parser.parse_args()
    bursts: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="persist-bench-") as workspace:
        root = Path(workspace)
        ids = ingest_samples(root / "source")
        grown = grow_snapshot(root / "source" / "data", root / "grown", ids, arguments.documents)
        print(f"state: {arguments.documents} documents, {json.dumps(grown)}")
        empty_runs, full_runs = [], []
        for run in range(arguments.runs):
            empty_runs.append(timed_start(root / f"empty-{run}", None))
            full_runs.append(timed_start(root / f"full-{run}", root / "grown"))
            print(f"run {run + 1}: empty {empty_runs[-1]}, {arguments.documents} documents {full_runs[-1]}")
        for run in range(arguments.runs if arguments.burst else 0):
            for persist in (False, True):
                bursts.append(timed_burst(root / f"burst-{run}-{persist}", arguments.burst, persist=persist))
                print(f"burst of {arguments.burst}: {bursts[-1]}")
    empty = statistics.median(run["ready_seconds"] for run in empty_runs)
    full = statistics.median(run["ready_seconds"] for run in full_runs)
    report = {
        "documents": arguments.documents,
        "state": grown,
        "empty_start_seconds": empty,
        "full_start_seconds": full,
        "ratio": round(full / empty, 2),
        "checkpoint_seconds": statistics.median(float(run["checkpoint_seconds"] or 0) for run in full_runs),
        "runs": {"empty": empty_runs, "full": full_runs},
        "bursts": bursts,
    }
    arguments.report.parent.mkdir(parents=True, exist_ok=True)
    arguments.report.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"ready: empty {empty:.1f} s, {arguments.documents} documents {full:.1f} s "
        f"({report['ratio']}x); checkpoint of that state {report['checkpoint_seconds']:.2f} s"
    )
    for persist in (False, True):
        seconds = [burst["seconds"] for burst in bursts if burst["persist"] is persist]
        if seconds:
            label = "journal on " if persist else "journal off"
            median = statistics.median(seconds)
            print(f"burst of {arguments.burst}, {label}: median {median:.1f} s to all READY {seconds}")


if __name__ == "__main__":
    main()
