"""make bench: per-stage time and pages/s on the sample corpus, in process and through the local stack.

Part 1 runs parse, chunk and embed in this process (no AWS), to isolate the compute of each stage.
Part 2 uploads the corpus through the running local stack (presigned POSTs, S3 → SQS → intake →
Step Functions → OpenSearch) and reads each document's stage timings from its status record.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.pdf.extract import parse_pdf

from local.client import OfflineClient

SAMPLES = Path("samples")
STAGES = ("VALIDATE", "PARSE", "CHUNK", "EMBED", "INDEX", "FINALIZE")


def _row(*cells: object) -> str:
    return "  ".join(f"{c!s:>14}" if i else f"{c!s:<22}" for i, c in enumerate(cells))


def bench_in_process(pdfs: list[Path], repeat: int) -> None:
    print(f"In process ({len(pdfs)} PDFs x {repeat}):")
    parse_seconds = chunk_seconds = 0.0
    pages = chunks = 0
    texts: list[str] = []
    for _ in range(repeat):
        for pdf in pdfs:
            data = pdf.read_bytes()
            started = time.perf_counter()
            parsed = parse_pdf(data, max_bytes=len(data) + 1, max_pages=10_000)
            parse_seconds += time.perf_counter() - started
            started = time.perf_counter()
            made = chunk_pages(parsed.pages, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)
            chunk_seconds += time.perf_counter() - started
            pages += parsed.page_count
            chunks += len(made)
            texts.extend(c.text for c in made)
    embedder = create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION)
    embedder.embed(texts[:2])  # load and warm the model outside the measurement
    sample = texts[: max(32, min(len(texts), 96))]
    started = time.perf_counter()
    embedder.embed(sample)
    embed_seconds = time.perf_counter() - started
    print(_row("stage", "items", "seconds", "items/s"))
    print(_row("parse (pages)", pages, f"{parse_seconds:.3f}", f"{pages / parse_seconds:.1f}"))
    print(_row("chunk (pages)", pages, f"{chunk_seconds:.3f}", f"{pages / chunk_seconds:.1f}"))
    print(_row("embed (chunks)", len(sample), f"{embed_seconds:.3f}", f"{len(sample) / embed_seconds:.1f}"))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {chunks} chunks from {pages} pages; peak RSS {peak_mib:.0f} MiB")


def bench_cleanup(pdfs: list[Path], repeat: int) -> None:
    """Parse pages/s and chunk throughput with and without cleanup (rag_ingest.parsing.pdf.cleanup.clean_pages).

    Extraction (pypdf) is timed once per file and repetition; cleanup is timed on the same raw
    texts, so its share of the parse time is measured, not inferred from two noisy totals.
    """
    from rag_ingest.parsing.pdf.cleanup import clean_pages

    extract_seconds = clean_seconds = chunk_raw_seconds = chunk_clean_seconds = 0.0
    pages = 0
    for _ in range(repeat):
        for pdf in pdfs:
            data = pdf.read_bytes()
            started = time.perf_counter()
            raw = parse_pdf(data, max_bytes=len(data) + 1, max_pages=10_000, clean=False).pages
            extract_seconds += time.perf_counter() - started
            started = time.perf_counter()
            cleaned_texts = clean_pages([page.text for page in raw])
            clean_seconds += time.perf_counter() - started
            cleaned = [page.model_copy(update={"text": text}) for page, text in zip(raw, cleaned_texts, strict=True)]
            for source, into in ((raw, "raw"), (cleaned, "clean")):
                started = time.perf_counter()
                chunk_pages(source, count_tokens=count_tokens, target_tokens=300, overlap_tokens=60)
                elapsed = time.perf_counter() - started
                if into == "raw":
                    chunk_raw_seconds += elapsed
                else:
                    chunk_clean_seconds += elapsed
            pages += len(raw)
    print(f"\nCleanup ({len(pdfs)} PDFs, {pages // repeat} pages, x {repeat}):")
    print(_row("step", "pages", "seconds", "pages/s"))
    print(_row("parse, raw (pypdf)", pages, f"{extract_seconds:.3f}", f"{pages / extract_seconds:.1f}"))
    parse_clean = extract_seconds + clean_seconds
    print(_row("parse + cleanup", pages, f"{parse_clean:.3f}", f"{pages / parse_clean:.1f}"))
    print(_row("chunk raw text", pages, f"{chunk_raw_seconds:.3f}", f"{pages / chunk_raw_seconds:.1f}"))
    print(_row("chunk cleaned text", pages, f"{chunk_clean_seconds:.3f}", f"{pages / chunk_clean_seconds:.1f}"))
    print(f"  cleanup costs {100 * clean_seconds / extract_seconds:.1f} % of the parse time (budget: 10 %)")


def bench_local_stack(pdfs: list[Path], copies: int, timeout: float) -> None:
    client = OfflineClient.from_outputs(tenant_id="bench")
    print(f"\nLocal stack, end to end ({len(pdfs)} PDFs x {copies} uploads):")
    started = time.monotonic()
    ids = [client.upload(pdf) for _ in range(copies) for pdf in pdfs]
    states = client.wait_until_done(ids, timeout_seconds=timeout)
    wall = time.monotonic() - started
    ready = [s for s in states.values() if s["status"] == "READY"]
    pages = sum(int(s["page_count"] or 0) for s in ready)
    print(_row("stage", "median ms", "p95 ms", "pages/s"))
    for stage in STAGES:
        times = sorted(int(s["timings_ms"].get(stage, 0)) for s in ready)
        if not times:
            continue
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        stage_pages_per_s = pages / (sum(times) / 1000) if sum(times) else float("inf")
        print(_row(stage, f"{statistics.median(times):.0f}", p95, f"{stage_pages_per_s:.1f}"))
    print(f"  {len(ready)}/{len(ids)} READY, {pages} pages in {wall:.1f}s wall: {pages / wall:.2f} pages/s end to end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="in-process repetitions of the corpus")
    parser.add_argument("--copies", type=int, default=3, help="uploads of each sample through the local stack")
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--in-process-only", action="store_true")
    args = parser.parse_args()
    pdfs = sorted(SAMPLES.glob("*.pdf"))
    bench_in_process(pdfs, args.repeat)
    bench_cleanup([*pdfs, *sorted(Path("eval/corpus").glob("*.pdf"))], args.repeat)
    if not args.in_process_only:
        bench_local_stack(pdfs, args.copies, args.timeout)


if __name__ == "__main__":
    main()
