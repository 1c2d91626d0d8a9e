"""Defaults and settings shared by the stages, the search and the functions' environment models
(``rag_ingest.core.config``): defined here so that the environment can validate them without
importing the capabilities that use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

#: Resolution pages are rasterised at for OCR. 200 dpi gave the lowest character error rate per
#: second on the generated scans (docs/ocr.md): 150 loses small type, 300 costs twice the time.
OCR_DPI = 200
#: OCR'd pages per document unless configured (MAX_OCR_PAGES): OCR is the costliest step per page.
DEFAULT_MAX_OCR_PAGES = 50

#: The rank constant of the RRF paper; reciprocal_rank_fusion's default.
RRF_RANK_CONSTANT = 60
#: Each retriever of a search first fetches this many candidates per result asked for (at least
#: HYBRID_MIN_CANDIDATES, at most HYBRID_MAX_CANDIDATES); copies that fold deepen it (module doc).
HYBRID_CANDIDATES_PER_RESULT = 2
HYBRID_MIN_CANDIDATES = 20
HYBRID_MAX_CANDIDATES = 100

#: The optional rerank stage (rag_ingest.retrieval.rerank) scores the first ``RERANK_CANDIDATES``
#: fused passages (or ``k``, when larger). At most ``RERANK_MAX_CANDIDATES``: Bedrock bills reranking
#: per query, "a single call to the reranker model that can contain up to 100 document chunks"
#: (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-pricing.html), so one call stays one
#: billed query; 50 halves the scoring time of 100 while the first stage's hybrid list is the
#: candidates' source either way (docs/retrieval.md, "Reranking").
RERANK_CANDIDATES = 50
RERANK_MAX_CANDIDATES = 100
#: The reranker models Bedrock's Rerank API offers
#: (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-supported.html).
RerankModelId = Literal["amazon.rerank-v1:0", "cohere.rerank-v3-5:0"]
RERANK_MODEL_IDS: tuple[str, ...] = get_args(RerankModelId)
DEFAULT_RERANK_MODEL_ID: RerankModelId = "amazon.rerank-v1:0"


@dataclass(frozen=True)
class FusionSettings:
    """How a hybrid search fuses its two legs (weighted RRF) and how deep each leg looks."""

    bm25_weight: float = 1.0
    knn_weight: float = 1.0
    rank_constant: int = RRF_RANK_CONSTANT
    #: Candidates each leg fetches first: ``min_candidates`` or ``candidates_per_result x k``, at most 100.
    min_candidates: int = HYBRID_MIN_CANDIDATES
    candidates_per_result: int = HYBRID_CANDIDATES_PER_RESULT

    def __post_init__(self) -> None:
        if self.bm25_weight < 0 or self.knn_weight < 0 or self.bm25_weight + self.knn_weight <= 0:
            raise ValueError(f"fusion weights must be >= 0 and not both 0: {self.bm25_weight}, {self.knn_weight}")
        if self.rank_constant < 0:
            raise ValueError(f"the rank constant must be >= 0, got {self.rank_constant}")
        if not 1 <= self.min_candidates <= HYBRID_MAX_CANDIDATES or self.candidates_per_result < 1:
            raise ValueError(
                f"candidates: min 1..{HYBRID_MAX_CANDIDATES} and per result >= 1, "
                f"got {self.min_candidates} and {self.candidates_per_result}"
            )

    def candidates_for(self, k: int) -> int:
        return min(HYBRID_MAX_CANDIDATES, max(self.min_candidates, self.candidates_per_result * k))


#: Tuned on the evaluation's dev split only (python -m eval.tune): equal weights came out best, and
#: a small rank constant (1-5) slightly ahead of 10-100 (dev MRR 0.891 against 0.882 at 60); the
#: candidates per leg (10 to 100 at k=10) made no measurable difference, so the first pass is the
#: cheaper max(20, 2 x k).
DEFAULT_FUSION = FusionSettings(bm25_weight=1.0, knn_weight=1.0, rank_constant=5)


#: How Embed tasks share the embedding model's quota (rag_ingest.embeddings.capacity): ``off``, no
#: limiter (throttles become TransientError, retried by Step Functions); ``adaptive``, botocore's
#: adaptive retry mode on the embedder's client (a client-side rate per Lambda, learned from
#: throttles, not shared); ``shared``, one timeline in DynamoDB that every Embed task books.
CapacityMode = Literal["off", "adaptive", "shared"]
CAPACITY_MODES: tuple[CapacityMode, ...] = ("off", "adaptive", "shared")
