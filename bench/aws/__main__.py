"""make bench-aws: rag-ingest and the peers' own Bedrock integrations against emulated Bedrock quotas.

    .venv/bin/python -m bench.aws [--profiles bedrock,bedrock-low-quota] [--systems ...] [--output FILE]

Per profile, each system runs the same corpus against a fresh local Bedrock-compatible server of its
own (deterministic vectors: the run measures orchestration against the quota and latency, not CPU):
rag-ingest through its whole local stack (``bench.peers.ours``), the peers in their own venv
(``bench.peers.peer_ingest``). Prints a table per profile, with each system's share of the quota's
ceiling (``bench.aws.ceiling``), and writes bench/aws/measured-<UTC time>.json after every run.
Imports only ``bench`` and ``local``. Method and runs: docs/benchmarks.md (bench-aws).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from bench.aws.ceiling import EmbeddingCounters, Quota, ceiling
from bench.peers.__main__ import PEERS_PYTHON, machine, run_peer, shown
from bench.peers.corpus import CorpusDocument, load_corpus
from bench.peers.ours import SYSTEM_NAME as OURS
from bench.peers.ours import ingest_through_local_stack
from local.embedding_server.process import SERVER_COMMAND, EmbeddingServerProcess
from local.runtime.settings import LOCAL_CREDENTIALS, REPO_ROOT

MANIFEST = REPO_ROOT / "bench" / "corpus" / "manifest-aws.json"
# Bedrock's quotas are per minute; the emulation and the limiter count them over a sliding minute.
QUOTA_WINDOW_SECONDS = 60
# Through the stack before the clock: one per warm worker a function keeps (DEFAULT_LAMBDA_MAX_WORKERS).
WARMUP_DOCUMENTS = (REPO_ROOT / "samples" / "sourdough.pdf", REPO_ROOT / "samples" / "lighthouses.pdf")
PROFILES = ("bedrock", "bedrock-low-quota")
REGION = "us-east-1"


@dataclass(frozen=True)
class System:
    name: str
    label: str
    peer: str | None = None  # None: rag-ingest's local stack
    peer_options: tuple[str, ...] = ()
    headline: bool = True  # False: a documented variant, not the peer as its docs show it


SYSTEMS = {
    system.name: system
    for system in (
        System(OURS, "rag-ingest (whole local stack, presigned upload -> READY)"),
        System(
            "langchain",
            "LangChain: BedrockEmbeddings (botocore's defaults), PyPDFLoader, TokenTextSplitter, InMemoryVectorStore",
            peer="langchain-bedrock",
        ),
        System(
            "llamaindex",
            "LlamaIndex: BedrockEmbedding (max_retries=10), IngestionPipeline, TokenTextSplitter, SimpleVectorStore",
            peer="llamaindex-bedrock",
        ),
        System(
            "langchain+retries",
            'variant: LangChain with Config(retries={"mode": "standard", "max_attempts": 15})',
            peer="langchain-bedrock",
            peer_options=("--retry-mode", "standard", "--max-attempts", "15"),
            headline=False,
        ),
    )
}


def server_stats(endpoint: str) -> dict[str, Any]:
    response = requests.get(f"{endpoint.rstrip('/')}/_local/stats", timeout=30)
    response.raise_for_status()
    return dict(response.json())


def run_ours(documents: Sequence[CorpusDocument], profile: str, timeout: float) -> dict[str, Any]:
    from rag_ingest.core.tokens import count_tokens

    from bench.cost.measure import document_chunks, probe_client

    def after_run(outputs: Mapping[str, Any], states: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        s3 = probe_client("s3", outputs)
        # Every document's chunks (a failed one's too, when it got that far): what the quota must admit.
        texts = [
            chunk["text"] for document_id in states for chunk in document_chunks(s3, outputs["BucketName"], document_id)
        ]
        return {
            "corpus_requests": len(texts),
            "corpus_tokens": sum(count_tokens(text) for text in texts),
            "embedding_server": server_stats(str(outputs["EmbeddingEndpoint"])),
        }

    env = {
        "LOCAL_EMBEDDING_PROFILE": profile,
        "LOCAL_EMBEDDING_VECTORS": "deterministic",
        "LOCAL_PERSIST": "0",
        "LOCAL_RETRY_SCALE": "1",
        # The warm workers outlast the pause after the warm-up (the local default stops them after 30 s).
        "LOCAL_LAMBDA_IDLE_SECONDS": str(4 * QUOTA_WINDOW_SECONDS),
    }

    def before_clock(outputs: Mapping[str, Any]) -> dict[str, Any]:
        # The warm-up's calls leave the quota's sliding minute, so the run starts on a quota as unspent
        # as each peer's fresh server; they are subtracted from the server's counters after the run.
        time.sleep(QUOTA_WINDOW_SECONDS + 2)
        return {"embedding_server_before_clock": server_stats(str(outputs["EmbeddingEndpoint"]))}

    outcome = ingest_through_local_stack(
        documents,
        timeout,
        env=env,
        require_ready=False,
        after_run=after_run,
        warmup=WARMUP_DOCUMENTS,
        before_clock=before_clock,
    )
    outcome.pop("rss_samples", None)  # the memory profile is bench-peers' subject, not this one's
    return outcome


def run_peer_on_own_server(system: System, documents: Sequence[CorpusDocument], profile: str) -> dict[str, Any]:
    assert system.peer is not None
    server = EmbeddingServerProcess(command=(*SERVER_COMMAND, "--profile", profile, "--vectors", "deterministic"))
    server.start()
    try:
        options = ("--endpoint", server.url, "--region", REGION, *system.peer_options)
        env = {**LOCAL_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}
        outcome = run_peer(system.peer, documents, PEERS_PYTHON, options=options, env=env)
        return {**outcome, "embedding_server": server_stats(server.url)}
    finally:
        server.stop()


def figures(system: System, outcome: dict[str, Any], corpus_pages: int) -> dict[str, Any]:
    """The row: rates, the server's counters, the ceiling for the corpus as this system chunks it."""
    stats = outcome["embedding_server"]
    counters = EmbeddingCounters.from_stats(stats)
    if "embedding_server_before_clock" in outcome:
        counters = counters.since(EmbeddingCounters.from_stats(outcome["embedding_server_before_clock"]))
    quota = Quota.from_stats(stats)
    limit = ceiling(corpus_pages, int(outcome["corpus_requests"]), int(outcome["corpus_tokens"]), quota)
    seconds = float(outcome["seconds"])
    pages_per_second = int(outcome["pages"]) / seconds
    top = limit.pages_per_second
    # Against the ceiling only when every document made it: a run that gave documents up is fast for free.
    percent = round(100 * pages_per_second / top, 1) if top and not outcome["documents_failed"] else None
    return {
        "system": system.name,
        "label": system.label,
        "headline": system.headline,
        "seconds": round(seconds, 1),
        "pages": int(outcome["pages"]),
        "chunks": int(outcome["chunks"]),
        "pages_per_second": round(pages_per_second, 3),
        "chunks_per_second": round(int(outcome["chunks"]) / seconds, 2),
        "documents": int(outcome["documents"]),
        "documents_failed": int(outcome["documents_failed"]),
        "failures": outcome.get("failures", []),
        "embedding": counters.as_dict(),
        "ceiling": limit.as_dict(),
        "percent_of_ceiling": percent,
        "emulation": stats.get("emulation"),
        "latency_drawn": stats.get("latency"),
    }


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| system | pages/s | chunks/s | ceiling pages/s (binding quota) | % of ceiling | embedding calls "
        "(admitted) | throttles | documents failed | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        limit = row["ceiling"]
        top = limit["pages_per_second"]
        percent = "-" if row["percent_of_ceiling"] is None else f"{row['percent_of_ceiling']:.0f} %"
        if row["documents_failed"]:
            percent = "n/a (documents failed)"
        embedding = row["embedding"]
        lines.append(
            f"| {row['label']} | {row['pages_per_second']:.2f} | {row['chunks_per_second']:.2f} | "
            f"{'-' if top is None else f'{top:.2f}'} ({limit['binding']}: {limit['requests']} calls, "
            f"{limit['tokens']:,} tokens) | {percent} | {embedding['calls']} ({embedding['admitted']}) | "
            f"{embedding['throttled']} | {row['documents_failed']} of {row['documents']} | {row['seconds']:.0f} |"
        )
    ours = next((row for row in rows if row["system"] == OURS), None)
    peers = [row for row in rows if row["system"] != OURS and row["headline"]]
    if ours and peers:
        # Only runs that ingested the whole corpus compare: pages/s of a run that failed documents is not a rate.
        complete = [row for row in peers if not row["documents_failed"]]
        if ours["documents_failed"] or not complete:
            lines += ["", "rag-ingest / best peer: n/a (documents failed)"]
        else:
            best = max(complete, key=lambda row: row["pages_per_second"])
            ratio = ours["pages_per_second"] / best["pages_per_second"]
            lines += ["", f"rag-ingest / best peer ({best['system']}), pages/s: {ratio:.2f}x"]
    return "\n".join(lines)


@dataclass
class Results:
    output: Path
    header: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, profile: str, system: System, outcome: dict[str, Any], row: dict[str, Any]) -> None:
        self.rows.setdefault(profile, []).append(row)
        self.runs[f"{profile}/{system.name}"] = outcome

    def write(self, *, complete: bool) -> None:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        document = {
            **self.header,
            "complete": complete,
            "tables": {profile: table(rows) for profile, rows in self.rows.items()},
            "rows": self.rows,
            "runs": self.runs,
        }
        self.output.write_text(json.dumps(document, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", default=",".join(PROFILES), help=f"comma-separated, of {PROFILES}")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {tuple(SYSTEMS)}")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for the stack to finish every document")
    parser.add_argument("--output", type=Path, help="results JSON (default bench/aws/measured-<UTC date-HHMM>.json)")
    args = parser.parse_args(argv)
    profiles = [name.strip() for name in args.profiles.split(",") if name.strip()]
    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    if set(profiles) - set(PROFILES) or not profiles:
        parser.error(f"--profiles: choose from {PROFILES}")
    if set(systems) - set(SYSTEMS) or not systems:
        parser.error(f"--systems: choose from {tuple(SYSTEMS)}")
    if any(SYSTEMS[name].peer for name in systems) and not PEERS_PYTHON.is_file():
        raise SystemExit(f"{PEERS_PYTHON} not found: make bench-aws installs the peers' venv")
    documents = load_corpus(args.manifest)
    corpus_pages = sum(document.pages for document in documents)
    started = datetime.now(UTC)
    output = args.output or REPO_ROOT / "bench" / "aws" / f"measured-{started:%Y-%m-%d-%H%M}.json"
    print(f"corpus: {len(documents)} PDFs, {corpus_pages} pages ({shown(args.manifest)})", flush=True)
    results = Results(
        output,
        {
            "command": " ".join([Path(sys.executable).name, "-m", "bench.aws", *(argv or sys.argv[1:])]),
            "started": started.isoformat(timespec="seconds"),
            "machine": machine(),
            "corpus": {
                "manifest": shown(args.manifest),
                "documents": [shown(document.path) for document in documents],
                "pages": corpus_pages,
            },
        },
    )
    for profile in profiles:
        for name in systems:
            system = SYSTEMS[name]
            print(f"{profile}: {name} ...", end=" ", flush=True)
            clock = time.monotonic()
            if system.peer is None:
                outcome = run_ours(documents, profile, args.timeout)
            else:
                outcome = run_peer_on_own_server(system, documents, profile)
            row = figures(system, outcome, corpus_pages)
            results.add(profile, system, outcome, row)
            results.write(complete=False)  # a run stopped half-way keeps what it measured
            print(
                f"{row['pages_per_second']:.2f} pages/s, {row['embedding']['throttled']} throttles, "
                f"{row['documents_failed']} failed ({time.monotonic() - clock:.0f} s with setup)",
                flush=True,
            )
    results.write(complete=True)
    for profile, rows in results.rows.items():
        print(f"\nprofile {profile}:\n{table(rows)}")
    print(f"\nresults: {shown(output)}")


if __name__ == "__main__":
    main()
