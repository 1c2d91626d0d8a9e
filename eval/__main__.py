"""make eval: retrieval quality (recall@1/5, MRR) of ours against a naive baseline and LangChain's chunking.

Each split of ``eval/corpus`` (``--split dev|test``, default both) is a corpus of its own: uploaded
through a fresh local stack and searched with ``POST /search`` per mode, or with ``--in-process``
the same parse, chunk and search code in this process. The baselines are always indexed in process.
``--scanned`` adds the OCR variant (``eval.scans.variant``), ``--rerank`` a hybrid row with the rerank
stage; small-to-big's table scores hybrid with each ``expand``; the formats corpus follows
(``--formats-only``, ``--no-formats``). Indexes are dropped at the end. Imports the domain package,
``eval.*`` and ``local`` (via ``eval.stack``); nothing imports it. Method and results:
docs/retrieval.md (the scanned variant: docs/ocr.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.parsing.ocr.engine import PageOcr
from rag_ingest.retrieval.query import Expand
from rag_ingest.retrieval.rerank import LexicalStandInReranker
from rag_ingest.retrieval.search import SearchMode

from eval.retrieval import (
    EMBEDDINGS_CACHE,
    EXPANSION_K,
    SPLITS,
    ExpansionScores,
    InProcessIndex,
    MemoEmbedder,
    Passage,
    Question,
    Scores,
    SplitCorpus,
    answer_rank,
    in_process_index,
    langchain_default_chunks,
    load_questions,
    load_splits,
    naive_chunks,
    pipeline_chunks,
    run_questions,
    score,
    score_expansion,
    split_corpus,
)

MODES = (SearchMode.KNN, SearchMode.BM25, SearchMode.HYBRID)
DEFAULT_OPENSEARCH = "http://127.0.0.1:9200"
#: The pipeline's defaults (cdk.json chunking): 300 tokens, 60 of overlap.
CHUNK_TOKENS = 300
CHUNK_OVERLAP_TOKENS = 60
NAIVE_NAME = "naive (raw text, 1000 chars)"
LANGCHAIN_NAME = "LangChain default (recursive 300/60)"
RERANK_NAME = "ours + rerank (lexical stand-in)"

#: (system, chunks, characters of chunk text or None when not known, scores per mode)
Row = tuple[str, int, int | None, dict[SearchMode, Scores]]
Results = dict[SearchMode, dict[str, list[Passage]]]
#: Small-to-big's scores per ``expand`` (hybrid, EXPANSION_K results a question).
Expansion = dict[Expand, ExpansionScores]
#: The rank within which a question counts as answered (recall@5) when listing text-vs-scanned differences.
MISS_RANK = 5


def _row(*cells: object) -> str:
    widths = (40, 8, 11, 8, 10, 10, 8)
    aligned = (f"{c!s:<{w}}" if i == 0 else f"{c!s:>{w}}" for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
    return "  ".join(aligned)


def index_results(index: InProcessIndex, questions: Sequence[Question]) -> Results:
    return {mode: run_questions(questions, partial(index.search, mode=mode)) for mode in MODES}


def scores_of(questions: Sequence[Question], results: Results) -> dict[SearchMode, Scores]:
    return {mode: score(questions, by_question) for mode, by_question in results.items()}


def evaluate_index(index: InProcessIndex, questions: Sequence[Question]) -> dict[SearchMode, Scores]:
    return scores_of(questions, index_results(index, questions))


def answered_within(question: Question, passages: Sequence[Passage], rank: int = MISS_RANK) -> bool:
    found = answer_rank(question, passages)
    return found is not None and found <= rank


def print_differences(questions: Sequence[Question], text: Results, scanned: Results) -> None:
    """Per mode, the questions answered within the top 5 on one version and not on the other."""
    for mode in MODES:
        on_text = {q.id for q in questions if answered_within(q, text[mode][q.id])}
        on_scanned = {q.id for q in questions if answered_within(q, scanned[mode][q.id])}
        lost = [q for q in questions if q.id in on_text - on_scanned]
        won = [q for q in questions if q.id in on_scanned - on_text]
        print(f"  {mode.value}: top 5 on text only: {len(lost)}, on scanned only: {len(won)}")
        for label, group in (("text only", lost), ("scanned only", won)):
            for question in group:
                print(f"    {label}: {question.id} {question.document} p{question.page}: {question.question}")


def print_table(rows: list[Row]) -> None:
    print(_row("system", "chunks", "mean chars", "mode", "recall@1", "recall@5", "MRR@10"))
    for name, chunk_count, chunk_chars, by_mode in rows:
        mean: int | str = "n/a" if chunk_chars is None else round(chunk_chars / chunk_count) if chunk_count else 0
        for line, (mode, scores) in enumerate(by_mode.items()):
            system = (name, chunk_count, mean) if line == 0 else ("", "", "")
            recall_1, recall_5, mrr = (f"{v:.3f}" for v in (scores.recall_at_1, scores.recall_at_5, scores.mrr_at_10))
            print(_row(*system, mode.value, recall_1, recall_5, mrr))


def print_expansion_table(expansion: Expansion) -> None:
    print(_expansion_row("expand", "recall@5", "MRR@5", "holds answer", "tokens/query"))
    for expand, scores in expansion.items():
        cells = (f"{scores.recall_at_5:.3f}", f"{scores.mrr_at_5:.3f}", f"{scores.holds_answer:.3f}")
        print(_expansion_row(expand.value, *cells, f"{scores.tokens_per_query:.0f}"))


def _expansion_row(*cells: object) -> str:
    return "  ".join(f"{c!s:<10}" if i == 0 else f"{c!s:>12}" for i, c in enumerate(cells))


def evaluate_split(
    corpus: SplitCorpus,
    endpoint: str,
    embedder: Embedder,
    *,
    in_process: bool,
    timeout: float,
    scanned: Mapping[Path, Path] | None = None,
    rerank: bool = False,
) -> tuple[list[Row], Expansion]:
    """Ours and the naive baseline on one split's documents and questions, and ours (hybrid) with
    each ``expand``; with ``scanned`` (each PDF's scanned variant), ours on the scanned variant too,
    through the same path."""
    pdfs, questions = corpus.pdfs, corpus.questions
    rows: list[Row] = []
    started = time.monotonic()
    our_chunker = partial(pipeline_chunks, chunk_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP_TOKENS)
    if in_process:
        prefix = f"rag-eval-ours-{corpus.name}"
        with in_process_index(endpoint, embedder, name_prefix=prefix, chunker=our_chunker, pdfs=pdfs) as ours:
            text_results = index_results(ours, questions)
            rows.append(("ours, in process", ours.chunk_count, ours.chunk_chars, scores_of(questions, text_results)))
            if rerank:
                stand_in = LexicalStandInReranker()
                search = partial(ours.search, mode=SearchMode.HYBRID, reranker=stand_in)
                reranked = score(questions, run_questions(questions, search))
                rows.append((RERANK_NAME, ours.chunk_count, ours.chunk_chars, {SearchMode.HYBRID: reranked}))
            expanded = {
                expand: run_questions(
                    questions, partial(ours.search, mode=SearchMode.HYBRID, k=EXPANSION_K, expand=expand)
                )
                for expand in Expand
            }
    else:
        from eval.stack import evaluate_through_local_stack

        stack = evaluate_through_local_stack(pdfs, questions, MODES, timeout, rerank=rerank, expansions=tuple(Expand))
        text_results, expanded = stack.results, stack.expanded
        # The stack's chunks are the Chunk stage's: the same function, the same parameters (cdk.json).
        chunk_chars = sum(len(chunk.text) for pdf in pdfs for chunk in our_chunker(pdf))
        rows.append((stack.name, stack.chunk_count, chunk_chars, scores_of(questions, text_results)))
        if stack.reranked is not None:
            reranked = score(questions, stack.reranked)
            rows.append((RERANK_NAME, stack.chunk_count, chunk_chars, {SearchMode.HYBRID: reranked}))
    expansion = {expand: score_expansion(questions, by_question) for expand, by_question in expanded.items()}
    if rerank:
        plain = rows[0][3][SearchMode.HYBRID]
        print(
            f"{corpus.name}: rerank vs hybrid: recall@5 {plain.recall_at_5:.3f} -> {reranked.recall_at_5:.3f} "
            f"({reranked.recall_at_5 - plain.recall_at_5:+.3f}), MRR@10 {plain.mrr_at_10:.3f} -> "
            f"{reranked.mrr_at_10:.3f} ({reranked.mrr_at_10 - plain.mrr_at_10:+.3f})",
            flush=True,
        )
    print(f"{corpus.name}: ours done after {time.monotonic() - started:.0f}s", flush=True)

    if scanned is not None:
        scanned_pdfs = [scanned[pdf] for pdf in pdfs]
        scanned_results, row = evaluate_scanned(corpus, scanned_pdfs, endpoint, embedder, in_process, timeout)
        rows.append(row)
        print(f"{corpus.name}: scanned variant done after {time.monotonic() - started:.0f}s", flush=True)
        print(f"{corpus.name}: text vs scanned variant ({rows[0][0]}):")
        print_differences(questions, text_results, scanned_results)

    naive_index = in_process_index(
        endpoint, embedder, name_prefix=f"rag-eval-naive-{corpus.name}", chunker=naive_chunks, pdfs=pdfs, truncate=True
    )
    with naive_index as naive:
        rows.append((NAIVE_NAME, naive.chunk_count, naive.chunk_chars, evaluate_index(naive, questions)))
    print(f"{corpus.name}: baseline done after {time.monotonic() - started:.0f}s", flush=True)

    try:
        langchain = langchain_default_chunks(pdfs)
    except FileNotFoundError as missing:
        print(f"{corpus.name}: no LangChain row: {missing}", flush=True)
        return rows, expansion
    langchain_index = in_process_index(
        endpoint,
        embedder,
        name_prefix=f"rag-eval-langchain-{corpus.name}",
        chunker=lambda pdf: langchain[pdf.name],
        pdfs=pdfs,
        truncate=True,
    )
    with langchain_index as index:
        # k-NN only: LangChain's default retriever is the vector store's similarity search.
        knn = score(questions, run_questions(questions, partial(index.search, mode=SearchMode.KNN)))
        rows.append((LANGCHAIN_NAME, index.chunk_count, index.chunk_chars, {SearchMode.KNN: knn}))
    print(f"{corpus.name}: LangChain done after {time.monotonic() - started:.0f}s", flush=True)
    return rows, expansion


def evaluate_scanned(
    corpus: SplitCorpus,
    scanned_pdfs: Sequence[Path],
    endpoint: str,
    embedder: Embedder,
    in_process: bool,
    timeout: float,
) -> tuple[Results, Row]:
    """Ours on the scanned variant: in process with the local OCR engine (Tesseract, as the local
    stack's Parse runs it), or through a local stack of its own (its Parse stage OCRs)."""
    questions = corpus.questions
    if not in_process:
        from eval.stack import evaluate_through_local_stack

        stack = evaluate_through_local_stack(scanned_pdfs, questions, MODES, timeout)
        # Counting the characters would mean OCR-ing every page again here: not worth a table cell.
        name = f"{stack.name}, scanned variant"
        return stack.results, (name, stack.chunk_count, None, scores_of(questions, stack.results))
    from rag_ingest.parsing.ocr.local import local_engine

    from eval.scans.variant import TimedOcrEngine

    engine = TimedOcrEngine(local_engine())
    chunker = partial(
        pipeline_chunks, chunk_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP_TOKENS, ocr=PageOcr(engine)
    )
    prefix = f"rag-eval-scanned-{corpus.name}"
    with in_process_index(endpoint, embedder, name_prefix=prefix, chunker=chunker, pdfs=scanned_pdfs) as index:
        print(f"{corpus.name}: {engine.describe()}", flush=True)
        results = index_results(index, questions)
        scores = scores_of(questions, results)
        row: Row = ("ours, scanned variant, in process", index.chunk_count, index.chunk_chars, scores)
    return results, row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-process", action="store_true", help="skip the local stack (parse, chunk, search here)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds to wait for the corpus to be READY")
    parser.add_argument(
        "--split",
        choices=(*SPLITS, "all"),
        default="all",
        help="which split to evaluate (default: all, one table each)",
    )
    parser.add_argument(
        "--scanned",
        action="store_true",
        help="also evaluate ours on the scanned variant (answer pages scanned and OCR'd; eval.scans.variant)",
    )
    parser.add_argument(
        "--rerank",
        action="store_true",
        help="also evaluate ours in hybrid mode with the rerank stage on (a row, and its gain per split)",
    )
    formats = parser.add_mutually_exclusive_group()
    formats.add_argument("--formats-only", action="store_true", help="evaluate the formats corpus only (no PDFs)")
    formats.add_argument("--no-formats", action="store_true", help="skip the formats corpus (DOCX, PPTX, HTML)")
    args = parser.parse_args(argv)

    endpoint = os.environ.get("OPENSEARCH_URL", "").strip() or DEFAULT_OPENSEARCH
    questions = load_questions()
    splits = load_splits()
    chosen_splits = [name for name in SPLITS if args.split in (name, "all")]
    corpora = [] if args.formats_only else [split_corpus(name, splits, questions) for name in chosen_splits]
    # Vectors of texts embedded by earlier runs are reused (the same model, the same text).
    embedder = MemoEmbedder(create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION), EMBEDDINGS_CACHE)
    print(f"OpenSearch {endpoint}", flush=True)
    scanned = None
    if args.scanned:
        from eval.scans.variant import build_scanned_corpus, scanned_page_counts

        started = time.monotonic()
        scanned = build_scanned_corpus([pdf for corpus in corpora for pdf in corpus.pdfs], questions)
        pages = sum(scanned_page_counts(scanned).values())
        print(f"scanned variant: {pages} pages scanned in {len(scanned)} PDFs ({time.monotonic() - started:.0f}s)")
    tables: list[tuple[SplitCorpus, list[Row], Expansion]] = []
    for corpus in corpora:
        print(f"{corpus.name} split: {len(corpus.pdfs)} documents, {len(corpus.questions)} questions", flush=True)
        rows, expansion = evaluate_split(
            corpus,
            endpoint,
            embedder,
            in_process=args.in_process,
            timeout=args.timeout,
            scanned=scanned,
            rerank=args.rerank,
        )
        tables.append((corpus, rows, expansion))
    for corpus, rows, expansion in tables:
        print(f"\n{corpus.name} split ({len(corpus.pdfs)} documents, {len(corpus.questions)} questions)")
        print_table(rows)
        print(f"\n{corpus.name} split, small-to-big: {rows[0][0]}, hybrid, k={EXPANSION_K}")
        print_expansion_table(expansion)
    if not args.no_formats:
        from eval import formats_eval

        print(flush=True)
        formats_eval.run(
            splits=chosen_splits, in_process=args.in_process, endpoint=endpoint, embedder=embedder, timeout=args.timeout
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
