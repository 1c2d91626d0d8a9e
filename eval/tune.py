"""Tune hybrid fusion on the dev split only: ``python -m eval.tune [--top N]``.

Indexes the dev split's documents as the pipeline does (in process, the shipped chunks), asks
each dev question once per leg at the deepest depth (100 candidates), and then fuses the two
lists client-side for every point of a grid: weighted RRF (BM25 weight against k-NN's 1, rank
constant, candidates per leg) and, for comparison, min-max score normalisation with a convex
combination. Each point is scored like ``make eval`` (recall@1, recall@5, MRR@10 over
``RESULTS_PER_QUESTION`` passages, copies collapsed). The test split is never looked at here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import product

from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import DEFAULT_FUSION, HYBRID_MAX_CANDIDATES, collapse_copies, reciprocal_rank_fusion

from eval.retrieval import (
    RESULTS_PER_QUESTION,
    InProcessIndex,
    Passage,
    Question,
    Scores,
    in_process_index,
    load_questions,
    load_splits,
    passages_of,
    pipeline_chunks,
    score,
    split_corpus,
)

DEFAULT_OPENSEARCH = "http://127.0.0.1:9200"
TUNING_SPLIT = "dev"
BM25_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0)
RANK_CONSTANTS = (1, 5, 10, 20, 40, 60, 100)
DEPTHS = (10, 20, 40, 100)
MINMAX_BM25_SHARES = tuple(round(0.1 * step, 1) for step in range(11))

Legs = dict[str, tuple[list[SearchHit], list[SearchHit]]]


@dataclass(frozen=True)
class Point:
    method: str
    setting: str
    depth: int
    scores: Scores


def leg_results(index: InProcessIndex, questions: Sequence[Question], depth: int = HYBRID_MAX_CANDIDATES) -> Legs:
    """Each question's BM25 and k-NN hits, ``depth`` of each, best first."""
    legs: Legs = {}
    for question in questions:
        [vector] = index.embedder.embed([question.question])
        bm25 = index.store.bm25_search(SearchQuery(tenant_id=index.tenant_id, text=question.question), k=depth)
        knn = index.store.knn_search(SearchQuery(tenant_id=index.tenant_id, text=""), vector, k=depth)
        legs[question.id] = (bm25, knn)
    return legs


def min_max_fusion(ranked_lists: Sequence[Sequence[SearchHit]], shares: Sequence[float]) -> list[SearchHit]:
    """Each list's scores scaled to 0..1 (min-max), then a convex combination (missing = 0)."""
    scores: dict[str, float] = {}
    hits: dict[str, SearchHit] = {}
    for ranked, share in zip(ranked_lists, shares, strict=True):
        if not ranked:
            continue
        high, low = max(hit.score for hit in ranked), min(hit.score for hit in ranked)
        spread = (high - low) or 1.0
        for hit in ranked:
            hits.setdefault(hit.chunk_id, hit)
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + share * (hit.score - low) / spread
    order = sorted(hits, key=lambda chunk: -scores[chunk])
    return [replace(hits[chunk], score=scores[chunk]) for chunk in order]


Fuse = Callable[[list[SearchHit], list[SearchHit]], list[SearchHit]]


def evaluate(questions: Sequence[Question], legs: Legs, depth: int, fuse: Fuse) -> Scores:
    results: dict[str, list[Passage]] = {}
    for question in questions:
        bm25, knn = legs[question.id]
        fused = fuse(bm25[:depth], knn[:depth])
        results[question.id] = passages_of(collapse_copies(fused)[:RESULTS_PER_QUESTION])
    return score(questions, results)


def rrf(bm25_weight: float, rank_constant: int, bm25: list[SearchHit], knn: list[SearchHit]) -> list[SearchHit]:
    return reciprocal_rank_fusion(
        [bm25, knn], k=len(bm25) + len(knn), weights=(bm25_weight, 1.0), rank_constant=rank_constant
    )


def min_max(bm25_share: float, bm25: list[SearchHit], knn: list[SearchHit]) -> list[SearchHit]:
    return min_max_fusion([bm25, knn], (bm25_share, 1 - bm25_share))


def grid(questions: Sequence[Question], legs: Legs) -> list[Point]:
    points = []
    for bm25_weight, rank_constant, depth in product(BM25_WEIGHTS, RANK_CONSTANTS, DEPTHS):
        scores = evaluate(questions, legs, depth, partial(rrf, bm25_weight, rank_constant))
        points.append(Point("rrf", f"bm25 weight {bm25_weight:g}, k-NN 1, constant {rank_constant}", depth, scores))
    for share, depth in product(MINMAX_BM25_SHARES, DEPTHS):
        scores = evaluate(questions, legs, depth, partial(min_max, share))
        points.append(Point("min-max", f"bm25 share {share:g}", depth, scores))
    return points


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=25, help="how many of the best points to print")
    args = parser.parse_args(argv)
    endpoint = os.environ.get("OPENSEARCH_URL", "").strip() or DEFAULT_OPENSEARCH
    corpus = split_corpus(TUNING_SPLIT, load_splits(), load_questions())
    embedder = create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION)
    chunker = partial(pipeline_chunks, chunk_tokens=300, overlap_tokens=60)
    print(f"tuning on the {corpus.name} split: {len(corpus.pdfs)} documents, {len(corpus.questions)} questions")
    with in_process_index(endpoint, embedder, name_prefix="rag-eval-tune", chunker=chunker, pdfs=corpus.pdfs) as index:
        legs = leg_results(index, corpus.questions)
    points = grid(corpus.questions, legs)
    ranked = sorted(points, key=lambda p: (-p.scores.mrr_at_10, -p.scores.recall_at_1, -p.scores.recall_at_5))
    default = DEFAULT_FUSION
    print(
        f"default: bm25 {default.bm25_weight:g}, k-NN {default.knn_weight:g}, constant {default.rank_constant}, "
        f"depth at k={RESULTS_PER_QUESTION}: {default.candidates_for(RESULTS_PER_QUESTION)}"
    )
    print(f"{'method':<8} {'setting':<42} {'depth':>5} {'R@1':>6} {'R@5':>6} {'MRR':>6}")
    for point in ranked[: args.top]:
        s = point.scores
        print(
            f"{point.method:<8} {point.setting:<42} {point.depth:>5} "
            f"{s.recall_at_1:>6.3f} {s.recall_at_5:>6.3f} {s.mrr_at_10:>6.3f}"
        )
    legs_alone: tuple[tuple[str, Fuse], ...] = (
        ("bm25 alone", lambda bm25, knn: bm25),
        ("k-NN alone", lambda bm25, knn: knn),
    )
    for leg, pick in legs_alone:
        alone = evaluate(corpus.questions, legs, HYBRID_MAX_CANDIDATES, pick)
        print(f"{leg:<51} {alone.recall_at_1:>6.3f} {alone.recall_at_5:>6.3f} {alone.mrr_at_10:>6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
