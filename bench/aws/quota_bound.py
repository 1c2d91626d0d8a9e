"""make bench-quota: rag-ingest and the peers on a corpus of more than ten minutes of the default quota.

    .venv/bin/python -m bench.aws.quota_bound build [--minutes 11]   # .local/bench-quota/ and its manifest
    .venv/bin/python -m bench.aws.quota_bound run [--systems rag-ingest,langchain,llamaindex]

``build``: the real corpora's text pages (eval/corpus, bench/corpus) laid out again per copy, each page's
sentences in that copy's own order (``bench.versions.write_pdf``): the embedding cache serves no copy.
``run``: each system as ``make bench-aws`` runs it at the ``bedrock`` profile (the peers side by side),
the server's admitted calls and tokens sampled every 5 s: the share of the quota per minute, a chart,
bench/aws/quota-<time>.json. Imports only ``bench``, ``local`` and the domain package. docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.aws.__main__ import QUOTA_WINDOW_SECONDS, REGION, SYSTEMS, WARMUP_DOCUMENTS, figures, server_stats, table
from bench.aws.ceiling import EmbeddingCounters
from bench.peers.__main__ import PEERS_PYTHON, machine, run_peer, shown
from bench.peers.corpus import CorpusDocument, load_corpus
from bench.peers.ours import SYSTEM_NAME as OURS
from bench.peers.ours import ingest_through_local_stack
from local.embedding_server.process import SERVER_COMMAND, EmbeddingServerProcess
from local.runtime.settings import LOCAL_CREDENTIALS, REPO_ROOT

CORPUS_DIR = REPO_ROOT / ".local" / "bench-quota"
MANIFEST = CORPUS_DIR / "manifest.json"
SOURCES = (REPO_ROOT / "eval" / "corpus", REPO_ROOT / "bench" / "corpus")
PROFILE = "bedrock"
SAMPLE_SECONDS = 5.0
GOAL_SHARE = 0.90
MIN_PAGE_CHARACTERS = 300
MIN_CORPUS_PAGES = 3000
DEFAULT_TPM = 300_000  # the bedrock profile's tokens a minute (local.embedding_server.settings)
# Chunks overlap (300 tokens, 60 shared): the tokens sent are about 300/240 of the page tokens.
OVERLAP_FACTOR = 300 / 240
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


# -- the corpus ------------------------------------------------------------------------------------
def source_pages() -> dict[str, list[str]]:
    """Each source PDF's pages with enough Latin text to lay out again in a core font, by file name."""
    from rag_ingest.parsing.pdf.extract import parse_pdf

    pages: dict[str, list[str]] = {}
    for pdf in sorted({path.name: path for folder in SOURCES for path in folder.glob("*.pdf")}.values()):
        data = pdf.read_bytes()
        texts = [page.text for page in parse_pdf(data, max_bytes=len(data) + 1, max_pages=10_000).pages]
        kept = [
            text
            for text in texts
            if len(text) >= MIN_PAGE_CHARACTERS and sum(ord(c) < 256 for c in text) >= 0.95 * len(text)
        ]
        if kept:
            pages[pdf.stem] = kept
    return pages


def vary(text: str, seed: str) -> str:
    """The page with its sentences in an order of ``seed``'s own, and the seed's copy named at its head."""
    sentences = [part for part in _SENTENCE.split(text) if part.strip()]
    random.Random(seed).shuffle(sentences)
    return f"Copy {seed}. " + " ".join(sentences)


def build(minutes: float, min_pages: int = MIN_CORPUS_PAGES, out: Path = CORPUS_DIR) -> dict[str, Any]:
    """As many copies as ``minutes`` of the default tokens quota need (and ``min_pages`` pages at least)."""
    from rag_ingest.core.parsed import PageText
    from rag_ingest.core.tokens import count_tokens

    from bench.versions import write_pdf

    out.mkdir(parents=True, exist_ok=True)
    pages = source_pages()
    tokens_per_copy = OVERLAP_FACTOR * sum(count_tokens(text) for texts in pages.values() for text in texts)
    pages_per_copy = sum(len(texts) for texts in pages.values())
    copies = max(math.ceil(minutes * DEFAULT_TPM / tokens_per_copy), math.ceil(min_pages / pages_per_copy))
    documents: list[dict[str, Any]] = []
    for copy in range(copies):
        for stem, texts in pages.items():
            varied = [vary(text, f"{copy}/{stem}/{number}") for number, text in enumerate(texts)]
            path = out / f"{stem}-copy{copy:02d}.pdf"
            write_pdf([PageText(page_number=n + 1, text=t) for n, t in enumerate(varied)], path)
            documents.append(
                {
                    "path": str(path.relative_to(REPO_ROOT)),
                    "pages": len(varied),
                    "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                }
            )
    manifest = {
        "description": f"{copies} varied copies of the text pages of eval/corpus and bench/corpus "
        "(bench.aws.quota_bound build)",
        "copies": copies,
        "total_pages": sum(len(texts) for texts in pages.values()) * copies,
        "estimated_tokens_sent": round(copies * tokens_per_copy),
        "documents": documents,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


# -- sampling the quota ----------------------------------------------------------------------------
@dataclass
class QuotaSampler:
    """The server's admitted requests and tokens every ``interval`` seconds, on a thread of its own."""

    endpoint: str
    interval: float = SAMPLE_SECONDS
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)  # (time, requests, tokens, throttled)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        counters = EmbeddingCounters.from_stats(server_stats(self.endpoint))
        self.samples.append((time.time(), counters.admitted, counters.admitted_tokens, counters.throttled))

    def start(self) -> None:
        self.sample()

        def loop() -> None:
            while not self._stop.wait(self.interval):
                try:
                    self.sample()
                except Exception:  # the server may be stopping; a missed sample is not a failure
                    continue

        self._thread = threading.Thread(target=loop, name="quota-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> list[tuple[float, int, int, int]]:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)
        return self.samples


def per_minute(
    samples: Sequence[tuple[float, ...]], started: float, seconds: float, quota: Mapping[str, int | None]
) -> list[dict[str, Any]]:
    """For each minute of the clock, requests and tokens admitted and the share of the binding quota
    (the larger of requests / RPM and tokens / TPM); the last minute may be partial."""
    minutes = []
    ordered = sorted(samples)

    def at(moment: float) -> tuple[float, float]:
        # Counters interpolated linearly between the samples around ``moment``.
        before = [s for s in ordered if s[0] <= moment]
        after = [s for s in ordered if s[0] >= moment]
        if not before:
            return float(ordered[0][1]), float(ordered[0][2])
        if not after:
            return float(before[-1][1]), float(before[-1][2])
        low, high = before[-1], after[0]
        if high[0] == low[0]:
            return float(low[1]), float(low[2])
        share = (moment - low[0]) / (high[0] - low[0])
        return low[1] + share * (high[1] - low[1]), low[2] + share * (high[2] - low[2])

    rpm, tpm = quota.get("requests_per_minute"), quota.get("tokens_per_minute")
    minute = 0
    while minute * 60 < seconds:
        begin, end = started + minute * 60, started + min((minute + 1) * 60, seconds)
        (r0, t0), (r1, t1) = at(begin), at(end)
        length = end - begin
        requests, tokens = (r1 - r0) * 60 / length, (t1 - t0) * 60 / length
        shares = [value / limit for value, limit in ((requests, rpm), (tokens, tpm)) if limit]
        minutes.append(
            {
                "minute": minute + 1,
                "seconds": round(length, 1),
                "requests_per_minute": round(requests),
                "tokens_per_minute": round(tokens),
                "share_of_quota": round(max(shares), 3) if shares else None,
            }
        )
        minute += 1
    return minutes


def sustained(minutes: Sequence[Mapping[str, Any]]) -> float | None:
    """The lowest share of the quota over the full minutes from minute 2 on (the goal's measure)."""
    full = [m["share_of_quota"] for m in minutes[1:] if m["seconds"] >= 59.9 and m["share_of_quota"] is not None]
    return min(full) if full else None


def chart(rows: Mapping[str, Sequence[Mapping[str, Any]]], width: int = 40) -> str:
    """A text chart: one line per minute and system, a bar of the share of the quota (| marks 90 %)."""
    lines = ["```", f"share of the quota per minute ({'#' * 4} = 10 %, | = the 90 % goal)"]
    for system, minutes in rows.items():
        lines.append(f"{system}:")
        for minute in minutes:
            share = minute["share_of_quota"] or 0.0
            filled = round(min(share, 1.1) * width)
            bar = "".join("|" if i == round(GOAL_SHARE * width) and i >= filled else "#" if i < filled else " "
                          for i in range(round(1.1 * width)))  # fmt: skip
            partial = "" if minute["seconds"] >= 59.9 else f" (last {minute['seconds']:.0f} s)"
            lines.append(
                f"  min {minute['minute']:>2} {bar.rstrip():<{round(1.1 * width)}} {100 * share:5.1f} %{partial}"
            )
    lines.append("```")
    return "\n".join(lines)


# -- the runs --------------------------------------------------------------------------------------
def run_ours(
    documents: Sequence[CorpusDocument], timeout: float, at_clock: Callable[[], None] = lambda: None
) -> dict[str, Any]:
    """rag-ingest through its local stack; ``at_clock`` is called as its clock starts."""
    from rag_ingest.core.tokens import count_tokens

    from bench.cost.measure import document_chunks, probe_client

    sampler: list[QuotaSampler] = []

    def before_clock(outputs: Mapping[str, Any]) -> dict[str, Any]:
        time.sleep(QUOTA_WINDOW_SECONDS + 2)  # the warm-up's calls leave the quota's minute (bench.aws)
        baseline = {"embedding_server_before_clock": server_stats(str(outputs["EmbeddingEndpoint"]))}
        sampler.append(QuotaSampler(str(outputs["EmbeddingEndpoint"])))
        sampler[0].start()
        at_clock()
        return {**baseline, "clock_started": time.time()}

    def after_run(outputs: Mapping[str, Any], states: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        samples = sampler[0].stop()
        s3 = probe_client("s3", outputs)
        texts = [
            chunk["text"] for document_id in states for chunk in document_chunks(s3, outputs["BucketName"], document_id)
        ]
        return {
            "corpus_requests": len(texts),
            "corpus_tokens": sum(count_tokens(text) for text in texts),
            "embedding_server": server_stats(str(outputs["EmbeddingEndpoint"])),
            "quota_samples": samples,
        }

    env = {
        "LOCAL_EMBEDDING_PROFILE": PROFILE,
        "LOCAL_EMBEDDING_VECTORS": "deterministic",
        "LOCAL_PERSIST": "0",
        "LOCAL_RETRY_SCALE": "1",
        "LOCAL_LAMBDA_IDLE_SECONDS": str(4 * QUOTA_WINDOW_SECONDS),
    }
    outcome = ingest_through_local_stack(
        documents,
        timeout,
        env=env,
        require_ready=False,
        after_run=after_run,
        warmup=WARMUP_DOCUMENTS,
        before_clock=before_clock,
    )
    outcome.pop("rss_samples", None)
    return outcome


def run_peer_sampled(name: str, documents: Sequence[CorpusDocument]) -> dict[str, Any]:
    system = SYSTEMS[name]
    assert system.peer is not None
    server = EmbeddingServerProcess(command=(*SERVER_COMMAND, "--profile", PROFILE, "--vectors", "deterministic"))
    server.start()
    sampler = QuotaSampler(server.url)
    try:
        sampler.start()
        clock_started = time.time()
        options = ("--endpoint", server.url, "--region", REGION, *system.peer_options)
        env = {**LOCAL_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}
        outcome = run_peer(system.peer, documents, PEERS_PYTHON, options=options, env=env)
        return {
            **outcome,
            "embedding_server": server_stats(server.url),
            "quota_samples": sampler.stop(),
            # The peer's own clock starts after its imports; the sampler's from the child's start.
            "clock_started": clock_started,
        }
    finally:
        sampler.stop()
        server.stop()


def with_minutes(name: str, outcome: dict[str, Any], corpus_pages: int) -> dict[str, Any]:
    row = figures(SYSTEMS[name], outcome, corpus_pages)
    quota = outcome["embedding_server"]["quota"]
    started = float(outcome["clock_started"])
    samples = outcome["quota_samples"]
    if name != OURS:
        # A peer's run: from its first admitted call to its last (its imports and PDF reading before them).
        first = next((s[0] for s in samples if s[1] > samples[0][1]), started)
        last = next((s[0] for s in reversed(samples) if s[1] < samples[-1][1]), samples[-1][0])
        started, seconds = first - SAMPLE_SECONDS, last - first + 2 * SAMPLE_SECONDS
    else:
        seconds = float(outcome["seconds"])
    minutes = per_minute(samples, started, seconds, quota)
    return {**row, "per_minute": minutes, "lowest_share_from_minute_2": sustained(minutes)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build", help="write the varied corpus and its manifest")
    make.add_argument("--minutes", type=float, default=11, help="minutes of the default tokens quota")
    go = commands.add_parser("run", help="ingest the corpus with each system")
    go.add_argument("--systems", default=f"{OURS},langchain,llamaindex")
    go.add_argument("--manifest", type=Path, default=MANIFEST)
    go.add_argument("--timeout", type=float, default=3600)
    go.add_argument("--output", type=Path)
    go.add_argument(
        "--alongside", action="store_true", help="the peers start with rag-ingest's clock (each on its own server)"
    )
    args = parser.parse_args(argv)
    if args.command == "build":
        manifest = build(args.minutes)
        minutes = manifest["estimated_tokens_sent"] / DEFAULT_TPM
        print(f"{len(manifest['documents'])} PDFs, {manifest['total_pages']} pages in {manifest['copies']} copies, "
              f"about {manifest['estimated_tokens_sent']:,} tokens sent: {minutes:.1f} minutes' quota")  # fmt: skip
        return
    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    if set(systems) - {OURS, "langchain", "llamaindex"}:
        parser.error("--systems: rag-ingest, langchain, llamaindex")
    if any(name != OURS for name in systems) and not PEERS_PYTHON.is_file():
        raise SystemExit(f"{PEERS_PYTHON} not found: make bench-quota installs the peers' venv")
    documents = load_corpus(args.manifest)
    pages = sum(document.pages for document in documents)
    started = datetime.now(UTC)
    output = args.output or REPO_ROOT / "bench" / "aws" / f"quota-{started:%Y-%m-%d-%H%M}.json"
    print(f"corpus: {len(documents)} PDFs, {pages} pages ({shown(args.manifest)})", flush=True)
    loads: list[tuple[float, float, float, float]] = []
    stop_load = threading.Event()

    def record_load() -> None:
        while not stop_load.wait(30):
            loads.append((time.time(), *os.getloadavg()))

    threading.Thread(target=record_load, daemon=True).start()
    outcomes: dict[str, dict[str, Any]] = {}
    peers = [name for name in systems if name != OURS]
    pool = ThreadPoolExecutor(max_workers=max(1, len(peers)))
    running: list[Any] = []

    def start_peers() -> None:
        if peers and not running:
            print(f"{', '.join(peers)} ...", flush=True)
            running.extend(pool.submit(run_peer_sampled, name, documents) for name in peers)

    with pool:
        if OURS in systems:
            print("rag-ingest ...", flush=True)
            outcomes[OURS] = run_ours(documents, args.timeout, start_peers if args.alongside else lambda: None)
        start_peers()
        outcomes.update(zip(peers, (future.result() for future in running), strict=True))
    stop_load.set()
    rows = {name: with_minutes(name, outcome, pages) for name, outcome in outcomes.items()}
    report = {
        "command": " ".join([Path(sys.executable).name, "-m", "bench.aws.quota_bound", *(argv or sys.argv[1:])]),
        "started": started.isoformat(timespec="seconds"),
        "machine": machine(),
        "corpus": {"manifest": shown(args.manifest), "documents": len(documents), "pages": pages},
        "load_average": loads,
        "rows": rows,
        "runs": {
            name: {k: v for k, v in outcome.items() if k != "quota_samples"} for name, outcome in outcomes.items()
        },
        "samples": {name: outcome["quota_samples"] for name, outcome in outcomes.items()},
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print("\n" + table(list(rows.values())))
    for name, row in rows.items():
        lowest = row["lowest_share_from_minute_2"]
        print(f"{name}: lowest share of the quota from minute 2 = "
              f"{'-' if lowest is None else f'{100 * lowest:.1f} %'}, {row['documents_failed']} failed")  # fmt: skip
    print("\n" + chart({name: row["per_minute"] for name, row in rows.items()}))
    if loads:
        print(f"load average (1 min) during the run: {min(x[1] for x in loads):.1f} to {max(x[1] for x in loads):.1f}")
    print(f"results: {shown(output)}")


if __name__ == "__main__":
    main()
