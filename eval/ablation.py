"""Ablation: each cleanup rule and each retrieval feature off, one at a time.

    python -m eval.ablation [--split test|dev] [--only TEXT] [--scanned]

In process, with the same parse, cleanup, chunk and search code as the pipeline (see ``eval``), on one
split (default: test, the split a rule must help on to ship). Each variant is the shipped
configuration with one thing switched: a cleanup rule, all of the cleanup, the contextual text, the
tuned fusion, or table handling; table questions get a table of their own. ``--only`` runs the shipped
configuration and the variants named with TEXT; ``--scanned``, the split's scanned variant. Imports
the domain package and ``eval``. Results and what they decided: docs/retrieval.md (Ablation).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from functools import partial

from rag_ingest.core.retrieval_text import SHIPPED_CONTEXT_LINE
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.parsing.pdf.cleanup import SHIPPED_CLEANUP_RULES, CleanupRules
from rag_ingest.retrieval.search import DEFAULT_FUSION, FusionSettings, SearchMode

from eval.retrieval import (
    EMBEDDINGS_CACHE,
    SPLITS,
    MemoEmbedder,
    Scores,
    in_process_index,
    load_questions,
    load_splits,
    pipeline_chunks,
    run_questions,
    score,
    split_corpus,
)

DEFAULT_OPENSEARCH = "http://127.0.0.1:9200"
#: Fusion before it was tuned (docs/retrieval.md, Fusion): unweighted RRF with the paper's constant.
UNTUNED_FUSION = FusionSettings(bm25_weight=1.0, knn_weight=1.0, rank_constant=60)
MODES = (SearchMode.KNN, SearchMode.BM25, SearchMode.HYBRID)
NO_TABLES = "tables: none (cells as loose lines)"


@dataclass(frozen=True)
class Variant:
    name: str
    rules: CleanupRules = SHIPPED_CLEANUP_RULES
    context_line: bool = SHIPPED_CONTEXT_LINE
    with_title: bool = True
    embed_context: bool = False
    fusion: FusionSettings = DEFAULT_FUSION
    tables: bool = True  # tables as TABLE blocks (rag_ingest.parsing.pdf.tables); off: loose lines of cells


def variants() -> list[Variant]:
    no_cleanup = CleanupRules(**{rule.name: False for rule in fields(CleanupRules)})
    # Retrieval features first (the cleanup variants re-embed most chunks: the slow part).
    return [
        Variant("shipped"),
        Variant("untuned fusion (RRF 1:1, 60)", fusion=UNTUNED_FUSION),
        Variant("BM25 on the text alone (no contextual text)", context_line=False),
        Variant("contextual text in BM25, without the title", context_line=True, with_title=False),
        Variant("contextual text in BM25 and embedded", context_line=True, embed_context=True),
        Variant(NO_TABLES, tables=False),
        *(_switched(rule) for rule in (field.name for field in fields(CleanupRules))),
        Variant("cleanup: none at all", rules=no_cleanup),
    ]


def _switched(rule: str) -> Variant:
    """The shipped configuration with one cleanup rule the other way (off if shipped, else on)."""
    shipped = getattr(SHIPPED_CLEANUP_RULES, rule)
    label = f"cleanup: {'no' if shipped else 'with'} {rule.replace('_', ' ')}"
    return Variant(label, rules=replace(SHIPPED_CLEANUP_RULES, **{rule: not shipped}))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="run only the shipped configuration and the variants whose name contains TEXT (repeatable)",
    )
    parser.add_argument(
        "--scanned",
        action="store_true",
        help="on the split's scanned variant, its scanned pages read by Tesseract (eval.scans.variant)",
    )
    args = parser.parse_args(argv)
    endpoint = os.environ.get("OPENSEARCH_URL", "").strip() or DEFAULT_OPENSEARCH
    corpus = split_corpus(args.split, load_splits(), load_questions())
    embedder = MemoEmbedder(create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION), EMBEDDINGS_CACHE)
    pdfs, ocr = list(corpus.pdfs), None
    if args.scanned:
        from rag_ingest.parsing.ocr.engine import PageOcr
        from rag_ingest.parsing.ocr.local import local_engine

        from eval.scans.variant import build_scanned_corpus

        variants_of = build_scanned_corpus(corpus.pdfs, corpus.questions)
        pdfs, ocr = [variants_of[pdf] for pdf in corpus.pdfs], PageOcr(local_engine())
    print(
        f"ablation on the {corpus.name} split{' (scanned variant)' if ocr else ''}: {len(pdfs)} documents, "
        f"{len(corpus.questions)} questions"
    )
    table_questions = [question for question in corpus.questions if question.table]
    results: list[tuple[str, dict[SearchMode, Scores]]] = []
    table_results: list[tuple[str, dict[SearchMode, Scores]]] = []
    chosen = [v for v in variants() if v.name == "shipped" or not args.only or any(t in v.name for t in args.only)]
    for variant in chosen:
        chunker = partial(
            pipeline_chunks,
            chunk_tokens=300,
            overlap_tokens=60,
            rules=variant.rules,
            with_title=variant.with_title,
            tables=variant.tables,
            ocr=ocr,
        )
        index = in_process_index(
            endpoint,
            embedder,
            name_prefix=f"rag-eval-ablation-{corpus.name}",
            chunker=chunker,
            pdfs=pdfs,
            fusion=variant.fusion,
            embed_context=variant.embed_context,
            context_line=variant.context_line,
        )
        with index as opened:
            runs = {mode: run_questions(corpus.questions, partial(opened.search, mode=mode)) for mode in MODES}
        by_mode = {mode: score(corpus.questions, ranked) for mode, ranked in runs.items()}
        results.append((variant.name, by_mode))
        if table_questions:
            table_results.append(
                (variant.name, {mode: score(table_questions, ranked) for mode, ranked in runs.items()})
            )
        print(f"  {table_row(variant.name, by_mode)}", flush=True)

    print(f"\n| {corpus.name} split | k-NN MRR | BM25 MRR | hybrid R@1 | hybrid R@5 | hybrid MRR |")
    print("|---|---|---|---|---|---|")
    for name, by_mode in results:
        print(table_row(name, by_mode))
    if table_results:
        heading = f"{corpus.name} split, {len(table_questions)} table questions"
        print(f"\n| {heading} | k-NN MRR | BM25 MRR | hybrid R@1 | hybrid R@5 | hybrid MRR |")
        print("|---|---|---|---|---|---|")
        for name, by_mode in table_results:
            print(table_row(name, by_mode))
    return 0


def table_row(name: str, by_mode: dict[SearchMode, Scores]) -> str:
    knn, bm25, hybrid = (by_mode[mode] for mode in MODES)
    return (
        f"| {name} | {knn.mrr_at_10:.3f} | {bm25.mrr_at_10:.3f} | {hybrid.recall_at_1:.3f} | "
        f"{hybrid.recall_at_5:.3f} | {hybrid.mrr_at_10:.3f} |"
    )


if __name__ == "__main__":
    sys.exit(main())
