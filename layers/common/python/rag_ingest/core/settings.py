"""Defaults and settings shared by the stages, the search and the functions' environment models
(``rag_ingest.core.config``): defined here so that the environment can validate them without
importing the capabilities that use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

#: Resolution pages are rasterised at for OCR: the best error rate per second on the generated scans
#: (docs/ocr.md).
OCR_DPI = 200
#: OCR'd pages per document unless configured (MAX_OCR_PAGES): OCR is the costliest step per page.
DEFAULT_MAX_OCR_PAGES = 50
#: Figures read (OCR, a vision model) per document unless configured (MAX_FIGURES_READ): the rest
#: are indexed by their caption alone.
DEFAULT_MAX_FIGURES_READ = 100
#: The vision model that describes figures when cdk.json figures.vision is enabled (off by default), and
#: what it is asked (the figure's caption follows): docs/formats.md, "Figures".
DEFAULT_FIGURE_VISION_MODEL_ID = "amazon.nova-lite-v1:0"
DEFAULT_FIGURE_VISION_PROMPT = (
    "Describe this figure from a document for someone searching the document: what it shows, its labels, "
    "and for a chart its axes, series and the values it shows. Answer in plain sentences, at most 120 words."
)

#: The rank constant of the RRF paper; reciprocal_rank_fusion's default.
RRF_RANK_CONSTANT = 60
#: Each retriever of a search first fetches this many candidates per result asked for (at least
#: HYBRID_MIN_CANDIDATES, at most HYBRID_MAX_CANDIDATES); copies that fold deepen it (module doc).
HYBRID_CANDIDATES_PER_RESULT = 2
HYBRID_MIN_CANDIDATES = 20
HYBRID_MAX_CANDIDATES = 100

#: The rerank stage scores the first ``RERANK_CANDIDATES`` fused passages (or ``k``, when larger), at
#: most one billed Rerank query's worth (docs/retrieval.md, "Reranking": the price and the choice of 50).
RERANK_CANDIDATES = 50
RERANK_MAX_CANDIDATES = 100

#: Small-to-big (rag_ingest.retrieval.expand): an expanded passage's text is cut to about this many
#: tokens around its matched chunks (five of the 300-token chunks; Bedrock's default parent size).
EXPAND_MAX_TOKENS = 1500
#: Chunks fetched on each side of the matched ones: more than a cut parent can hold.
EXPAND_RADIUS_CHUNKS = 12
#: The reranker models Bedrock's Rerank API offers (docs/retrieval.md, "Reranking").
RerankModelId = Literal["amazon.rerank-v1:0", "cohere.rerank-v3-5:0"]
RERANK_MODEL_IDS: tuple[str, ...] = get_args(RerankModelId)
DEFAULT_RERANK_MODEL_ID: RerankModelId = "amazon.rerank-v1:0"

#: POST /answer's default Converse model (docs/answers.md, "The model": why this one, its price).
DEFAULT_ANSWER_MODEL_ID = "amazon.nova-lite-v1:0"
DEFAULT_ANSWER_MIN_RELEVANCE = 0.05
DEFAULT_ANSWER_MAX_TOKENS = 512
MAX_ANSWER_TOKENS = 4096
#: The geographic prefixes of Bedrock's system-defined cross-Region inference profiles' ids.
INFERENCE_PROFILE_PREFIXES = ("us", "eu", "apac", "jp", "au", "ca", "us-gov", "global")
#: A Bedrock model id or inference profile id (``eu.amazon.nova-lite-v1:0``) as Converse takes it.
ANSWER_MODEL_ID_PATTERN = rf"^(?:(?:{'|'.join(INFERENCE_PROFILE_PREFIXES)})\.)?[a-z0-9-]+\.[a-z0-9.:-]+$"


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


#: Tuned on the evaluation's dev split only (python -m eval.tune; the figures: docs/retrieval.md,
#: "Fusion"): equal weights, a small rank constant, and the cheaper first pass, max(20, 2 x k).
DEFAULT_FUSION = FusionSettings(bm25_weight=1.0, knn_weight=1.0, rank_constant=5)


#: How Embed tasks share the embedding model's quota (rag_ingest.embeddings.capacity): none, botocore's
#: adaptive retries per client, or one DynamoDB ledger all book (docs/architecture.md, "One limiter").
CapacityMode = Literal["off", "adaptive", "shared"]
CAPACITY_MODES: tuple[CapacityMode, ...] = ("off", "adaptive", "shared")
