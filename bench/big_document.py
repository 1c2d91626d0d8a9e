"""make bench-big: a 2,000-page PDF of freely licensed text, and what it costs to ingest.

    .venv/bin/python -m bench.big_document write /tmp/big.pdf --pages 2000
    .venv/bin/python -m bench.big_document rss --pages 2000   # peak RSS: one range vs the whole document
    .venv/bin/python -m bench.big_document run --pages 2000   # through a fresh local stack

Writes the document (and ``small_documents``, the isolation benchmark's 5-page PDFs) from the eval
corpus's text, every page distinct, the same bytes for the same arguments. Imports the domain
package, ``local`` and ``eval``; nothing in the product imports it. How the text is made, and why:
docs/benchmarks.md (A 2,000-page document); the figures: docs/architecture.md (Memory and time).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pypdf import PdfReader
from rag_ingest.parsing.pdf.extract import parse_pdf

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "eval" / "corpus"
RESULTS = REPO / "bench" / "results"
# Latin-script documents of the eval corpus (fpdf2's core fonts are Latin-1), in a fixed order.
SOURCES = (
    "r-intro.pdf",
    "latex-usrguide.pdf",
    "cfitsio-quick.pdf",
    "reportlab-userguide.pdf",
    "why3-manual.pdf",
    "groff-pdfmark.pdf",
    "prawn-manual.pdf",
    "hyperref-paper.pdf",
    "x11-ctext.pdf",
    "geobase-nhn-data-model.pdf",
)
DEFAULT_PAGES = 2000
PAGE_CHARACTERS = 2400  # a typical page of a manual
PAGES_PER_SECTION = 4
PAGES_PER_CHAPTER = 40
HEADING_AT_PAGE_END_EVERY = 10
SMALL_DOCUMENT_PAGES = 5
# A clause ends at . ! ? : or ; and a space, except after an abbreviation such as "e.g." ("2.1" has no space).
_CLAUSE_BORDER = re.compile(r"(?<=[.!?:;])(?<!\b[A-Za-z]\.[A-Za-z]\.)\s+")
RANGE_PAGES = 50  # cdk.json parsing.rangePages: the range the rss command measures


@dataclass(frozen=True)
class Source:
    title: str
    paragraphs: tuple[str, ...]


def _latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def load_sources() -> list[Source]:
    """Each source PDF's paragraphs (cleaned page text split at blank lines), in reading order; a
    paragraph printed more than once (a running header, a repeated notice) is kept only the first time."""
    sources = []
    seen: set[str] = set()
    for name in SOURCES:
        data = (CORPUS / name).read_bytes()
        parsed = parse_pdf(data, max_bytes=len(data) + 1, max_pages=10_000)
        paragraphs = []
        for page in parsed.pages:
            for paragraph in page.text.split("\n\n"):
                text = _latin1(" ".join(paragraph.split()))
                if len(paragraph) >= 80 and text not in seen:
                    seen.add(text)
                    paragraphs.append(text)
        sources.append(Source(title=Path(name).stem.replace("-", " ").title(), paragraphs=tuple(paragraphs)))
    return sources


def revised(paragraph: str, revision: int) -> str:
    """``paragraph`` as its ``revision``-th revision: itself for 0, else "Revision n." and its clauses
    shuffled with n as the seed (why: docs/benchmarks.md, A 2,000-page document)."""
    if revision == 0:
        return paragraph
    clauses = _CLAUSE_BORDER.split(paragraph)
    random.Random(revision).shuffle(clauses)  # an int seed: the same order on every run and platform
    return " ".join([f"Revision {revision}.", *clauses])


@dataclass
class _Cursor:
    """Where the text stream is: which source, and how many paragraphs each source has given so far
    (a source taken up again continues where it stopped; past its end, it gives revisions)."""

    sources: list[Source]
    source: int = 0
    taken: Counter[int] = field(default_factory=Counter)

    def next_source(self) -> Source:
        self.source = (self.source + 1) % len(self.sources)
        return self.sources[self.source]

    def take(self, characters: int) -> str:
        """About ``characters`` of whole paragraphs from the current source, none ever given before."""
        source = self.sources[self.source]
        paragraphs: list[str] = []
        while sum(len(p) for p in paragraphs) < characters:
            revision, index = divmod(self.taken[self.source], len(source.paragraphs))
            paragraphs.append(revised(source.paragraphs[index], revision))
            self.taken[self.source] += 1
        return "\n\n".join(paragraphs)


def page_texts(pages: int, sources: list[Source] | None = None) -> Iterator[tuple[str | None, str, str | None]]:
    """(heading at the top or None, body, heading at the bottom or None) for each page."""
    cursor = _Cursor(sources or load_sources())
    chapter = section = 0
    carried: str | None = None  # a heading printed at the bottom of the previous page
    for number in range(1, pages + 1):
        top: str | None = None
        if number % PAGES_PER_CHAPTER == 1:
            chapter, section = chapter + 1, 0
            source = cursor.sources[cursor.source] if number == 1 else cursor.next_source()
            top = f"{chapter} {source.title}"
        elif carried is None and number % PAGES_PER_SECTION == 1:
            section += 1
            top = f"{chapter}.{section} Notes from {cursor.sources[cursor.source].title}"
        body = cursor.take(PAGE_CHARACTERS)
        bottom = None
        # A section that starts at the foot of this page and continues on the next one.
        if number % HEADING_AT_PAGE_END_EVERY == 0 and (number + 1) % PAGES_PER_CHAPTER != 1:
            section += 1
            bottom = f"{chapter}.{section} Continued from {cursor.sources[cursor.source].title}"
        carried = bottom
        yield top, body, bottom


def small_documents(
    count: int, pages: int = SMALL_DOCUMENT_PAGES, sources: list[Source] | None = None
) -> Iterator[tuple[str, list[tuple[str | None, str, str | None]]]]:
    """(title, pages as ``page_texts`` gives them) of ``count`` short documents, no two alike: the n-th
    is the n-th source's (round robin) next ``pages`` pages of text, its title on the first page."""
    cursor = _Cursor(sources or load_sources())
    for number in range(1, count + 1):
        cursor.source = (number - 1) % len(cursor.sources)
        title = f"Note {number}: {cursor.sources[cursor.source].title}"
        yield title, [(title if page == 0 else None, cursor.take(PAGE_CHARACTERS), None) for page in range(pages)]


def write_small_documents(
    folder: Path, count: int, pages: int = SMALL_DOCUMENT_PAGES, sources: list[Source] | None = None
) -> list[Path]:
    """Write ``small_documents`` as ``note-001.pdf`` ... in ``folder`` (deterministic, like the big one)."""
    return [
        _write_pdf(folder / f"note-{number:03d}.pdf", title, texts)
        for number, (title, texts) in enumerate(small_documents(count, pages, sources), start=1)
    ]


def write_big_document(path: Path, pages: int = DEFAULT_PAGES, sources: list[Source] | None = None) -> Path:
    """Write the ``pages``-page PDF to ``path`` (deterministic: the same pages give the same bytes)."""
    return _write_pdf(path, f"A {pages}-page manual from freely licensed text", page_texts(pages, sources))


def _write_pdf(path: Path, title: str, pages: Iterable[tuple[str | None, str, str | None]]) -> Path:
    from fpdf import FPDF  # a dev dependency: only the benchmarks and tests write PDFs

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=False)
    pdf.set_creation_date(datetime(2026, 1, 1, tzinfo=UTC))  # fixed, so the bytes are too
    pdf.set_title(title)
    for top, body, bottom in pages:
        pdf.add_page()
        if top:
            pdf.set_font("Helvetica", style="B", size=13)
            pdf.multi_cell(0, 7, top)
            pdf.ln(2)
        pdf.set_font("Helvetica", size=8)
        pdf.multi_cell(0, 3.6, body)
        if bottom:
            pdf.ln(3)
            pdf.set_font("Helvetica", style="B", size=13)
            pdf.multi_cell(0, 7, bottom)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


# -- peak RSS: one Parse range against the whole document -------------------------------------------
_RSS_CHILD = """
import re, sys
from pathlib import Path
from rag_ingest.parsing.pdf.budget import ParseBudget
from rag_ingest.parsing.pdf.extract import parse_page_range, parse_pdf

def memory_mb(field):
    return int(re.search(field + r":\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) / 1024

data = Path(sys.argv[1]).read_bytes()
Path("/proc/self/clear_refs").write_text("5")  # the peak so far (imports) no longer counts: VmHWM = VmRSS
before = memory_mb("VmRSS")
if sys.argv[2] == "whole":
    # The document budgets (180 s, 5 M characters) would stop the whole-document parse: lifted here.
    unbounded = ParseBudget(document_seconds=1e6, document_text_chars=10**12)
    pages = len(parse_pdf(data, max_bytes=len(data) + 1, max_pages=100_000, budget=unbounded).pages)
else:
    first, last = int(sys.argv[2]), int(sys.argv[3])
    pages = len(parse_page_range(data, first_page=first, last_page=last, max_bytes=len(data) + 1,
                                 max_pages=100_000).pages)
print(pages, before, memory_mb("VmHWM"))
"""


def peak_rss_mb(pdf: Path, *what: str) -> tuple[int, float, float, float]:
    """(pages parsed, RSS before parsing (interpreter, imports, the PDF's bytes), peak RSS while
    parsing, seconds) of one parse in a fresh interpreter. /proc/self/status, not getrusage:
    ru_maxrss survives exec, so a child would report its parent's peak."""
    started = time.perf_counter()
    output = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(pdf), *what], check=True, capture_output=True, text=True
    ).stdout.split()
    return int(output[-3]), float(output[-2]), float(output[-1]), time.perf_counter() - started


def measure_rss(pages: int, pdf: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rag-big-") as work:
        pdf = pdf or write_big_document(Path(work) / "big.pdf", pages)
        pages = len(PdfReader(pdf).pages)
        results: dict[str, Any] = {"pages": pages, "pdf_bytes": pdf.stat().st_size}
        last = min(pages, RANGE_PAGES)
        middle = max(1, pages // 2 // RANGE_PAGES * RANGE_PAGES + 1)
        for name, what in (
            ("first range", ("1", str(last))),
            ("middle range", (str(middle), str(min(pages, middle + RANGE_PAGES - 1)))),
            ("whole document", ("whole",)),
        ):
            parsed, before, peak, seconds = peak_rss_mb(pdf, *what)
            results[name] = {"pages": parsed, "rss_before_mb": round(before, 1), "peak_rss_mb": round(peak, 1),
                             "parse_mb": round(peak - before, 1), "seconds": round(seconds, 1)}  # fmt: skip
            print(f"{name:<15} {parsed:>5} pages  peak RSS {peak:7.1f} MB, {peak - before:6.1f} MB over the "
                  f"{before:.1f} MB of interpreter, imports and PDF bytes  {seconds:6.1f} s")  # fmt: skip
        return results


# -- through the local stack -------------------------------------------------------------------------
class WorkerMemory:
    """Peak RSS (VmHWM) of the local stack's Lambda worker processes, per function, sampled from /proc."""

    def __init__(self, functions: tuple[str, ...] = ("ParseFunction", "ChunkFunction")) -> None:
        self._functions = functions
        self.peak_kb: dict[str, int] = dict.fromkeys(functions, 0)
        self.workers: dict[str, set[int]] = {name: set() for name in functions}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="worker-memory", daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    command = (proc / "cmdline").read_bytes().split(b"\0")
                    status = (proc / "status").read_text()
                except OSError:
                    continue
                module = next((part.decode() for part in command if part.startswith(b"rag_fn_")), "")
                for name in self._functions:
                    if name in module:
                        self.workers[name].add(int(proc.name))
                        for line in status.splitlines():
                            if line.startswith("VmHWM:"):
                                self.peak_kb[name] = max(self.peak_kb[name], int(line.split()[1]))


def _execution_events(sfn: Any, execution_arn: str) -> Counter[str]:
    events: Counter[str] = Counter()
    for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
        events.update(event["type"] for event in page["events"])
    return events


def run_through_stack(pages: int, timeout: float, template_source: Path | None = None) -> dict[str, Any]:
    import boto3
    from rag_ingest.wiring import vector_store_for

    from eval.stack import eval_template
    from local.client import OfflineClient
    from local.runtime.harness import OfflineStackProcess
    from local.runtime.settings import DEFAULT_OPENSEARCH_URL, stack_name_from_cdk_json

    # --template: another synthesis (e.g. with embedding.batchInference on, docs/cost.md).
    source = template_source or REPO / "cdk.out" / f"{stack_name_from_cdk_json(REPO)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    index_name = f"rag-bench-big-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="rag-bench-big-") as work:
        started = time.perf_counter()
        pdf = write_big_document(Path(work) / f"manual-{pages}-pages.pdf", pages)
        pdf_bytes = pdf.stat().st_size
        print(f"wrote {pdf.name}: {pdf_bytes / 1e6:.1f} MB in {time.perf_counter() - started:.0f} s")
        template = Path(work) / "template.json"
        template.write_text(json.dumps(eval_template(source, index_name)))
        process = OfflineStackProcess(Path(work) / "state", template=template)
        outputs = process.start(timeout=300)
        store = vector_store_for(process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL, index_name, 384)
        try:
            client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=f"bench-{uuid.uuid4().hex[:8]}")
            client.token()  # signed in before the clock starts
            progress: list[dict[str, Any]] = []
            with WorkerMemory() as memory:
                started = time.perf_counter()
                document_id = client.upload(pdf)
                last: tuple[Any, ...] = ()
                deadline = time.monotonic() + timeout
                stopped = ""  # why the wait ended before READY/FAILED: the figures so far are still reported
                while True:
                    state = client.document(document_id)
                    chunks = state.get("progress") or {}
                    line = (state["status"], state.get("stage"), state.get("pages_parsed"), chunks.get("done"))
                    if line != last:
                        last = line
                        elapsed = time.perf_counter() - started
                        progress.append({"seconds": round(elapsed, 1), "status": state["status"],
                                         "stage": state.get("stage"), "pages_parsed": state.get("pages_parsed"),
                                         "page_count": state.get("page_count"), "chunks_embedded": chunks.get("done"),
                                         "chunks": chunks.get("total")})  # fmt: skip
                        print(f"{elapsed:7.1f} s  {state['status']:<10} {state.get('stage') or '':<8} "
                              f"pages parsed {state.get('pages_parsed') or 0:>5}/{state.get('page_count') or '?':<5} "
                              f"chunks embedded {chunks.get('done') or 0:>5}/{chunks.get('total') or '?'}",
                              flush=True)  # fmt: skip
                    if state["status"] in ("READY", "FAILED"):
                        break
                    if time.monotonic() > deadline:
                        stopped = f"not done after {timeout:.0f} s"
                        break
                    try:
                        time.sleep(1.0)
                    except KeyboardInterrupt:
                        stopped = "interrupted"
                        break
                wall = time.perf_counter() - started
            options: dict[str, Any] = {
                "endpoint_url": outputs["MotoEndpoint"],
                "region_name": outputs.get("Region", "us-east-1"),
                "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing",
            }
            table = boto3.resource("dynamodb", **options).Table(outputs["DocumentsTableName"])
            execution_arn = str(table.get_item(Key={"document_id": document_id})["Item"]["execution_arn"])
            events = _execution_events(boto3.client("stepfunctions", **options), execution_arn)
        finally:
            process.stop()
            store.drop_index()
    return {
        "pages": pages,
        "pdf_bytes": pdf_bytes,
        "status": state["status"],
        "stopped": stopped or None,
        "wall_seconds": round(wall, 1),
        "chunks": state.get("chunk_count"),
        "timings_ms": state.get("timings_ms"),
        "attempts": state.get("attempts"),
        "failed_pages": len(state.get("failed_pages") or []),
        "history_events": sum(events.values()),
        "history_event_types": dict(sorted(events.items())),
        "peak_rss_mb": {name: round(kb / 1024, 1) for name, kb in memory.peak_kb.items()},
        "workers": {name: len(pids) for name, pids in memory.workers.items()},
        "progress": progress,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="write the PDF")
    write.add_argument("path", type=Path)
    write.add_argument("--pages", type=int, default=DEFAULT_PAGES)
    rss = commands.add_parser("rss", help="peak RSS of one Parse range against the whole document")
    rss.add_argument("--pages", type=int, default=DEFAULT_PAGES)
    rss.add_argument("--pdf", type=Path, help="an already written PDF (default: write one of --pages pages)")
    run = commands.add_parser("run", help="ingest it through a fresh local stack")
    run.add_argument("--pages", type=int, default=DEFAULT_PAGES)
    run.add_argument("--timeout", type=float, default=3600)
    run.add_argument("--template", type=Path, help="a synthesized template (default: cdk.out's)")
    args = parser.parse_args(argv)
    if args.command == "write":
        path = write_big_document(args.path, args.pages)
        print(f"{path}: {args.pages} pages, {path.stat().st_size / 1e6:.1f} MB")
        return
    results = (
        measure_rss(args.pages, args.pdf)
        if args.command == "rss"
        else run_through_stack(args.pages, args.timeout, args.template)
    )
    if args.command == "run":
        stopped = f" ({results['stopped']})" if results["stopped"] else ""
        print(f"{results['status']} after {results['wall_seconds']} s{stopped}: "
              f"{results['chunks']} chunks, {results['history_events']} history events")  # fmt: skip
        print(
            "stage times (worker seconds; Parse and Embed summed over their tasks): "
            + ", ".join(f"{stage.lower()} {ms / 1000:.1f}" for stage, ms in (results["timings_ms"] or {}).items())
        )
        print("peak RSS of the workers: " + ", ".join(f"{name} {mb} MB" for name, mb in results["peak_rss_mb"].items()))
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / f"big-{args.command}-{results['pages']}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    report.write_text(json.dumps(results, indent=2))
    print(f"written: {report.relative_to(REPO)}")


if __name__ == "__main__":
    main()
