"""The optional second stage of search: rerank the fused candidates by a (query, passage) scorer.

It takes the first stage's first ``rerank_depth(k)`` passages (``RERANK_CANDIDATES``, or ``k`` when
larger), scores each (query, passage text) pair with a ``Reranker`` and returns the ``k`` best by
that score, which becomes each passage's ``score``. In AWS the reranker is Bedrock's ``Rerank``
(rag_ingest.adapters.reranker); offline, where no cross-encoder's weights install from a registry
reachable here, it is ``LexicalStandInReranker``: BM25 over the candidates, a labelled stand-in that
exercises the path and is no model. Off by default; why, with the figures: docs/retrieval.md, "Reranking".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from rag_ingest.core.settings import RERANK_CANDIDATES, RERANK_MAX_CANDIDATES
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.ports import Reranker
from rag_ingest.retrieval.query import SearchQuery

#: What the stand-in calls itself in responses, logs and tables: never mistaken for a model.
STAND_IN_NAME = "lexical-stand-in (BM25 over the candidates; not a cross-encoder)"

_WORD = re.compile(r"[0-9a-z]+")
# Words that say nothing about relevance; BM25's IDF over a few dozen candidates is too noisy to
# learn that on its own.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "does",
        "do",
        "did",
        "can",
    ]
)


def rerank_depth(k: int, candidates: int = RERANK_CANDIDATES) -> int:
    """How many fused passages the stage scores for ``k`` results: ``candidates``, or ``k`` when larger."""
    if not 1 <= candidates <= RERANK_MAX_CANDIDATES:
        raise ValueError(f"rerank candidates must be between 1 and {RERANK_MAX_CANDIDATES}, got {candidates}")
    return max(k, candidates)


def rerank_passages(reranker: Reranker, query: SearchQuery, passages: Sequence[SearchHit]) -> list[SearchHit]:
    """The ``query.k`` best of ``passages`` for the query's text by ``reranker``'s score, best first,
    each with that score."""
    if not passages or query.k < 1:
        return []
    top_n = min(query.k, len(passages))
    ranked = reranker.rerank(query.text, [passage.text for passage in passages], top_n)
    indexes = [index for index, _ in ranked]
    if len(set(indexes)) != len(indexes) or any(not 0 <= index < len(passages) for index in indexes):
        raise RuntimeError(f"{reranker.name} answered indexes {indexes} for {len(passages)} passages")
    return [replace(passages[index], score=float(score)) for index, score in ranked[:top_n]]


def words(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.casefold()) if word not in STOP_WORDS]


def lexical_scores(query: str, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> list[float]:
    """BM25 of ``query``'s words in each of ``texts``, with document frequencies counted over
    ``texts`` alone, mapped to [0, 1) by s / (1 + s) (Bedrock's relevance scores are in [0, 1])."""
    query_words = set(words(query))
    documents = [Counter(words(text)) for text in texts]
    if not documents:
        return []
    mean_length = sum(sum(counts.values()) for counts in documents) / len(documents) or 1.0
    frequency = {word: sum(1 for counts in documents if word in counts) for word in query_words}
    scores = []
    for counts in documents:
        length = sum(counts.values())
        total = 0.0
        for word in query_words:
            tf = counts.get(word, 0)
            if not tf:
                continue
            idf = math.log(1 + (len(documents) - frequency[word] + 0.5) / (frequency[word] + 0.5))
            total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / mean_length))
        scores.append(total / (1 + total))
    return scores


class LexicalStandInReranker:
    """The offline stand-in for a reranker model (module doc): ties keep the first stage's order."""

    name = STAND_IN_NAME

    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        scores = lexical_scores(query, texts)
        order = sorted(range(len(texts)), key=lambda index: -scores[index])  # stable: ties keep fused order
        return [(index, scores[index]) for index in order[:top_n]]
