"""make bench-peers: rag-ingest against LangChain and LlamaIndex on the same corpus, alternating.

    .venv/bin/python -m bench.peers [--runs 3] [--systems langchain,llamaindex,rag-ingest]

Each round runs every system once, the order rotated from round to round so that no system always
follows the same one; each peer is a fresh process in the peers' venv (its peak RSS is the child's
ru_maxrss), rag-ingest a fresh local stack (bench/peers/ours.py). Prints one table and writes
every figure to bench/results/peers-<time>.json. docs/benchmarks.md explains the method.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.peers.corpus import MANIFEST, CorpusDocument, load_corpus
from bench.peers.ours import SYSTEM_NAME as OURS
from bench.peers.ours import ingest_through_local_stack
from local.runtime.settings import REPO_ROOT

PEERS_PYTHON = REPO_ROOT / ".venv-peers" / "bin" / "python"
RESULTS_DIR = REPO_ROOT / "bench" / "results"
LANGCHAIN, LLAMAINDEX = "langchain", "llamaindex"
SYSTEMS = (LANGCHAIN, LLAMAINDEX, OURS)
LABELS = {
    LANGCHAIN: "LangChain (PyPDFLoader, TokenTextSplitter 300/60, InMemoryVectorStore)",
    LLAMAINDEX: "LlamaIndex (IngestionPipeline, TokenTextSplitter 300/60, SimpleVectorStore)",
    OURS: "rag-ingest (whole local stack, presigned upload -> all READY)",
}
GIB = 1024**3


def run_peer(
    peer: str,
    documents: Sequence[CorpusDocument],
    peers_python: Path,
    *,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One peer in a child process (``options`` after its name, ``env`` over this environment); its
    peak RSS is the child's own ru_maxrss (os.wait4)."""
    command = [str(peers_python), "-m", "bench.peers.peer_ingest", peer, *options, *(str(d.path) for d in documents)]
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        load_before = os.getloadavg()
        child = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{peer} failed ({child.returncode}):\n{stderr.read().decode(errors='replace')[-3000:]}")
        outcome = dict(json.loads(stdout.read().decode().strip().splitlines()[-1]))
    return {
        "system": peer,
        **outcome,
        "peak_rss_bytes": usage.ru_maxrss * 1024,  # Linux reports KiB
        # The whole child, model loading and PDF reading included (its own clock starts later).
        "cpu_seconds_by_role": {"process": round(usage.ru_utime + usage.ru_stime, 1)},
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }


def run_system(system: str, documents: Sequence[CorpusDocument], peers_python: Path, timeout: float) -> dict[str, Any]:
    if system == OURS:
        return ingest_through_local_stack(documents, timeout)
    return run_peer(system, documents, peers_python)


def summarise(system: str, runs: list[dict[str, Any]], corpus_pages: int) -> dict[str, Any]:
    rates = [corpus_pages / run["seconds"] for run in runs]
    summary: dict[str, Any] = {
        "system": system,
        "runs": len(runs),
        "pages_per_second_median": statistics.median(rates),
        "pages_per_second_min": min(rates),
        "pages_per_second_max": max(rates),
        "chunks": sorted({int(run["chunks"]) for run in runs}),
        "peak_rss_bytes": max(int(run["peak_rss_bytes"]) for run in runs),
    }
    if all("cpu_seconds_by_role" in run for run in runs):
        roles = dict.fromkeys(role for run in runs for role in run["cpu_seconds_by_role"])
        summary["cpu_seconds_by_role_median"] = {
            role: statistics.median(run["cpu_seconds_by_role"].get(role, 0.0) for run in runs) for role in roles
        }
    if system == OURS:
        summary["opensearch_peak_rss_bytes"] = max(int(run["opensearch_peak_rss_bytes"]) for run in runs)
        summary["stage_seconds_total_median"] = {
            stage: statistics.median(run["stage_seconds_total"][stage] for run in runs)
            for stage in runs[0]["stage_seconds_total"]
        }
    return summary


def table(summaries: list[dict[str, Any]]) -> str:
    lines = [
        "| system | pages/s median (min-max) | chunks | peak RSS |",
        "|---|---|---|---|",
    ]
    for summary in summaries:
        rss = f"{summary['peak_rss_bytes'] / GIB:.2f} GiB"
        if "opensearch_peak_rss_bytes" in summary:
            rss += f" (process tree) + {summary['opensearch_peak_rss_bytes'] / GIB:.2f} GiB OpenSearch"
        chunks = "-".join(str(count) for count in summary["chunks"])
        rates = (
            f"{summary['pages_per_second_median']:.2f} "
            f"({summary['pages_per_second_min']:.2f}-{summary['pages_per_second_max']:.2f})"
        )
        lines.append(f"| {LABELS[summary['system']]} | {rates} | {chunks} | {rss} |")
    ours = next((s for s in summaries if s["system"] == OURS), None)
    peers = [s for s in summaries if s["system"] != OURS]
    if ours and peers:
        best = max(peers, key=lambda s: s["pages_per_second_median"])
        ratio = ours["pages_per_second_median"] / best["pages_per_second_median"]
        lines.append("")
        lines.append(
            f"rag-ingest / best peer ({best['system']}), median pages/s: {ratio:.2f}x; "
            f"peak RSS: {ours['peak_rss_bytes'] / best['peak_rss_bytes']:.2f}x"
        )
    profiled = [s for s in summaries if "cpu_seconds_by_role_median" in s]
    if profiled:
        lines += ["", "| system | CPU seconds (median), by process |", "|---|---|"]
        for summary in profiled:
            by_role = summary["cpu_seconds_by_role_median"]
            parts = ", ".join(f"{role} {seconds:.1f}" for role, seconds in by_role.items())
            lines.append(f"| {LABELS[summary['system']]} | {sum(by_role.values()):.1f}: {parts} |")
    return "\n".join(lines)


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    path = path.resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu_model = next((line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line), platform.processor())
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model,
        "memory_gib": round(memory_kib / 1024**2, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="rounds; each runs every system once")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {SYSTEMS}")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for the stack to make all READY")
    parser.add_argument("--output", type=Path, help="results JSON (default bench/results/peers-<time>.json)")
    args = parser.parse_args()
    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown or not systems:
        parser.error(f"--systems: unknown {sorted(unknown)}; choose from {SYSTEMS}")
    if any(system != OURS for system in systems) and not args.peers_python.is_file():
        raise SystemExit(f"{args.peers_python} not found: make bench-peers installs the peers' venv")
    documents = load_corpus(args.manifest)
    corpus_pages = sum(document.pages for document in documents)
    print(f"corpus: {len(documents)} PDFs, {corpus_pages} pages ({shown(args.manifest)})", flush=True)

    runs: dict[str, list[dict[str, Any]]] = {system: [] for system in systems}
    started = time.time()
    output = args.output or RESULTS_DIR / f"peers-{time.strftime('%Y%m%d-%H%M%S', time.localtime(started))}.json"
    header = {
        "command": " ".join([Path(sys.executable).name, "-m", "bench.peers", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "machine": machine(),
        "corpus": {"manifest": shown(args.manifest), "documents": len(documents), "pages": corpus_pages},
    }
    for round_index in range(args.runs):
        # Rotate the order so that no system always runs first or right after the same one.
        order = systems[round_index % len(systems) :] + systems[: round_index % len(systems)]
        for system in order:
            print(f"round {round_index + 1}/{args.runs}: {system} ...", end=" ", flush=True)
            outcome = run_system(system, documents, args.peers_python, args.timeout)
            if outcome["pages"] != corpus_pages:
                raise SystemExit(f"{system} read {outcome['pages']} pages, the corpus has {corpus_pages}")
            runs[system].append(outcome)
            print(
                f"{corpus_pages / outcome['seconds']:.2f} pages/s, {outcome['chunks']} chunks, "
                f"peak RSS {outcome['peak_rss_bytes'] / GIB:.2f} GiB, load {outcome['load_average_after'][0]:.1f}",
                flush=True,
            )
            # Written after every run: a long comparison stopped half-way keeps what it measured.
            rendered = write_results(output, header, runs, corpus_pages, started, complete=False)
    rendered = write_results(output, header, runs, corpus_pages, started, complete=True)
    print()
    print(rendered)
    print(f"\nresults: {shown(output)}")


def write_results(
    output: Path,
    header: dict[str, Any],
    runs: dict[str, list[dict[str, Any]]],
    corpus_pages: int,
    started: float,
    *,
    complete: bool,
) -> str:
    """Write the results JSON (the runs so far and their summaries); return the rendered table."""
    summaries = [summarise(system, measured, corpus_pages) for system, measured in runs.items() if measured]
    rendered = table(summaries)
    results = {
        **header,
        "complete": complete,
        "wall_seconds": time.time() - started,
        "summaries": summaries,
        "runs": runs,
        "table": rendered,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    return rendered


if __name__ == "__main__":
    main()
