"""make eval: retrieval quality on the evaluation corpus, ours against a naive baseline.

By default the corpus goes through a local stack started here (free ports, an index of its
own): uploaded through the API as a browser would, ingested by the real pipeline, searched with
``POST /search`` in each mode. ``--in-process`` runs the same parse and chunk functions and the
same search code in this process instead (faster, for iterating). The naive baseline (raw text,
fixed 1,000-character windows, the same embedder and search code) is always indexed in process,
in a temporary index of its own. Every index made here is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from functools import partial

from rag_ingest.embeddings.base import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.search import SearchMode

from eval.retrieval import (
    InProcessIndex,
    Question,
    Scores,
    corpus_pdfs,
    in_process_index,
    load_questions,
    naive_chunks,
    pipeline_chunks,
    run_questions,
    score,
)

MODES = (SearchMode.KNN, SearchMode.BM25, SearchMode.HYBRID)
DEFAULT_OPENSEARCH = "http://127.0.0.1:9200"
#: The pipeline's defaults (cdk.json chunking): 300 tokens, 60 of overlap.
CHUNK_TOKENS = 300
CHUNK_OVERLAP_TOKENS = 60
NAIVE_NAME = "naive (raw text, 1000 chars)"


def _row(*cells: object) -> str:
    widths = (34, 8, 11, 8, 10, 10, 8)
    aligned = (f"{c!s:<{w}}" if i == 0 else f"{c!s:>{w}}" for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
    return "  ".join(aligned)


def evaluate_index(index: InProcessIndex, questions: Sequence[Question]) -> dict[SearchMode, Scores]:
    return {mode: score(questions, run_questions(questions, partial(index.search, mode=mode))) for mode in MODES}


def print_table(rows: list[tuple[str, int, int, dict[SearchMode, Scores]]]) -> None:
    print(_row("system", "chunks", "mean chars", "mode", "recall@1", "recall@5", "MRR@10"))
    for name, chunk_count, chunk_chars, by_mode in rows:
        mean = round(chunk_chars / chunk_count) if chunk_count else 0
        for line, (mode, scores) in enumerate(by_mode.items()):
            system = (name, chunk_count, mean) if line == 0 else ("", "", "")
            recall_1, recall_5, mrr = (f"{v:.3f}" for v in (scores.recall_at_1, scores.recall_at_5, scores.mrr_at_10))
            print(_row(*system, mode.value, recall_1, recall_5, mrr))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-process", action="store_true", help="skip the local stack (parse, chunk, search here)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds to wait for the corpus to be READY")
    args = parser.parse_args(argv)

    endpoint = os.environ.get("OPENSEARCH_URL", "").strip() or DEFAULT_OPENSEARCH
    questions = load_questions()
    pdfs = corpus_pdfs()
    embedder = create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION)
    print(f"{len(pdfs)} documents, {len(questions)} questions; OpenSearch {endpoint}", flush=True)
    rows: list[tuple[str, int, int, dict[SearchMode, Scores]]] = []
    started = time.monotonic()

    our_chunker = partial(pipeline_chunks, chunk_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP_TOKENS)
    if args.in_process:
        with in_process_index(endpoint, embedder, name_prefix="rag-eval-ours", chunker=our_chunker, pdfs=pdfs) as ours:
            rows.append(("ours, in process", ours.chunk_count, ours.chunk_chars, evaluate_index(ours, questions)))
    else:
        from eval.stack import evaluate_through_local_stack

        name, chunk_count, results = evaluate_through_local_stack(pdfs, questions, MODES, args.timeout)
        # The stack's chunks are the Chunk stage's: the same function, the same parameters (cdk.json).
        chunk_chars = sum(len(chunk.text) for pdf in pdfs for chunk in our_chunker(pdf.read_bytes()))
        rows.append((name, chunk_count, chunk_chars, {mode: score(questions, results[mode]) for mode in MODES}))
    print(f"ours done after {time.monotonic() - started:.0f}s", flush=True)

    naive_index = in_process_index(
        endpoint, embedder, name_prefix="rag-eval-naive", chunker=naive_chunks, pdfs=pdfs, truncate=True
    )
    with naive_index as naive:
        rows.append((NAIVE_NAME, naive.chunk_count, naive.chunk_chars, evaluate_index(naive, questions)))
    print(f"baseline done after {time.monotonic() - started:.0f}s\n", flush=True)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
