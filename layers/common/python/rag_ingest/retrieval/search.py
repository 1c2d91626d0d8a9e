"""Search the indexed passages of one tenant: k-NN, BM25, or both fused (hybrid, the default).

``search_passages`` runs one ``SearchQuery``: each retriever, with the tenant and the query's
filters inside its query, fetches ``fusion.candidates_for(k)`` hits; hybrid fuses the two lists by
weighted reciprocal rank fusion, its BM25 request sent from a second thread while the query is
embedded. A text is returned once: passages of the same text fold into the best-ranked one
(``copies``), and a search whose folds leave fewer than ``k`` asks again twice as deep (at most
``HYBRID_MAX_CANDIDATES``). A reranker may then order the first passages (rag_ingest.retrieval.rerank),
and the ``k`` best may be expanded to their section or page (rag_ingest.retrieval.expand).
Why ranks, the weights and the depths: docs/retrieval.md, "The four steps" and "Fusion".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rag_ingest.core.access import Principal
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.filters import Filter, FilterError, parse_filter
from rag_ingest.core.parsed import DocumentFormat, FigureSource, PassageBox
from rag_ingest.core.settings import (
    DEFAULT_FUSION,
    EXPAND_MAX_TOKENS,
    HYBRID_MAX_CANDIDATES,
    RERANK_CANDIDATES,
    RERANK_MAX_CANDIDATES,
    RRF_RANK_CONSTANT,
    FusionSettings,
)
from rag_ingest.core.tracing import in_callers_trace
from rag_ingest.embeddings.base import Embedder
from rag_ingest.retrieval.expand import expand_hits
from rag_ingest.retrieval.hits import PassageCopy, SearchHit
from rag_ingest.retrieval.ports import PassageRetriever, Reranker
from rag_ingest.retrieval.query import Expand, SearchMode, SearchQuery
from rag_ingest.retrieval.rerank import rerank_depth, rerank_passages

MAX_K = 50
MAX_QUERY_CHARS = 1000
#: What a request that says nothing gets: more of the answer's text, the same recall, on the
#: evaluation (docs/retrieval.md, "Small-to-big").
DEFAULT_EXPAND = Expand.SECTION

#: Where hybrid searches send their BM25 leg (module doc); made once per process, its threads are
#: started on first use and kept by a warm Lambda container.
_BM25_LEGS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bm25-leg")


def candidates_for(k: int) -> int:
    return DEFAULT_FUSION.candidates_for(k)


def search_passages(
    store: PassageRetriever,
    embedder: Embedder,
    query: SearchQuery,
    *,
    fusion: FusionSettings = DEFAULT_FUSION,
    reranker: Reranker | None = None,
    rerank_candidates: int = RERANK_CANDIDATES,
) -> list[SearchHit]:
    """The ``query.k`` best passages for ``query``, best first (rag_ingest.retrieval.query says what
    narrows them). With ``reranker``, the first ``rerank_depth(k, rerank_candidates)`` passages are
    reranked by it; ``fusion`` weighs the hybrid mode's two lists. With ``query.expand``, those
    ``k`` are expanded and merged by parent (rag_ingest.retrieval.expand): at most ``k`` results.

    Raises ``PermanentError(INVALID_REQUEST)`` for an empty query, a missing tenant, k outside
    1..MAX_K or an unknown mode.
    """
    if not query.text.strip():
        raise PermanentError(ErrorCode.INVALID_REQUEST, "the query is empty")
    if not query.tenant_id:
        raise PermanentError(ErrorCode.INVALID_REQUEST, "a tenant is required: search never crosses tenants")
    if not 1 <= query.k <= MAX_K:
        raise PermanentError(ErrorCode.INVALID_REQUEST, f"k must be between 1 and {MAX_K}, got {query.k}")
    try:
        query = replace(query, mode=SearchMode(query.mode))
    except ValueError:
        modes = ", ".join(m.value for m in SearchMode)
        message = f"unknown mode {query.mode!r}: expected one of {modes}"
        raise PermanentError(ErrorCode.INVALID_REQUEST, message) from None

    # The first stage's k: the reranker's candidates when there is one (module doc).
    wanted = query.k if reranker is None else rerank_depth(query.k, rerank_candidates)
    depth = fusion.candidates_for(wanted)
    bm25_leg = _start_bm25_leg(store, query, depth)
    vector = None if query.mode is SearchMode.BM25 else embedder.embed([query.text])[0]
    while True:
        hits, more_exist = _candidates(store, query, vector, depth, fusion, bm25_leg)
        passages = collapse_copies(hits)
        if len(passages) >= wanted or not more_exist or depth >= HYBRID_MAX_CANDIDATES:
            if reranker is not None:
                passages = rerank_passages(reranker, query, passages[:wanted])
            return expand_hits(store, query, passages[: query.k])
        depth = min(HYBRID_MAX_CANDIDATES, 2 * depth)
        bm25_leg = _start_bm25_leg(store, query, depth)


def _start_bm25_leg(store: PassageRetriever, query: SearchQuery, depth: int) -> Future[list[SearchHit]] | None:
    """A hybrid pass's BM25 request, sent from another thread (its subsegment under the caller's);
    None for the other modes."""
    if query.mode is not SearchMode.HYBRID:
        return None
    return _BM25_LEGS.submit(in_callers_trace(lambda: store.bm25_search(query, k=depth)))


def _candidates(
    store: PassageRetriever,
    query: SearchQuery,
    vector: list[float] | None,
    depth: int,
    fusion: FusionSettings,
    bm25_leg: Future[list[SearchHit]] | None,
) -> tuple[list[SearchHit], bool]:
    """The ranked candidates of one pass ``depth`` deep, and whether a deeper pass could find more
    (some retriever filled its ``depth``). A hybrid pass's BM25 hits come from ``bm25_leg``."""
    knn_hits = store.knn_search(query, vector, k=depth) if vector is not None else []
    if bm25_leg is not None:
        bm25_hits = bm25_leg.result()  # its error, if any, is raised here
    elif query.mode is SearchMode.BM25:
        bm25_hits = store.bm25_search(query, k=depth)
    else:
        bm25_hits = []
    more_exist = len(bm25_hits) >= depth or len(knn_hits) >= depth
    if query.mode is SearchMode.BM25:
        return bm25_hits, more_exist
    if query.mode is SearchMode.KNN:
        return knn_hits, more_exist
    fused = reciprocal_rank_fusion(
        [bm25_hits, knn_hits],
        k=2 * depth,
        weights=(fusion.bm25_weight, fusion.knn_weight),
        rank_constant=fusion.rank_constant,
    )
    return fused, more_exist


def text_fingerprint(text: str) -> str:
    """What makes two passages "the same text": equal after folding case and white space."""
    return hashlib.sha256(" ".join(text.casefold().split()).encode()).hexdigest()


def collapse_copies(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """``hits`` (best first) with each text once: the best-ranked passage of a text stays in its
    place and lists the lower-ranked passages of the same text in ``copies``."""
    kept: dict[str, SearchHit] = {}
    copies: dict[str, list[PassageCopy]] = {}
    for hit in hits:
        fingerprint = text_fingerprint(hit.text)
        if fingerprint in kept:
            copies[fingerprint].append(hit.as_copy())
        else:
            kept[fingerprint] = hit
            copies[fingerprint] = list(hit.copies)
    return [replace(hit, copies=tuple(copies[key])) if copies[key] else hit for key, hit in kept.items()]


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[SearchHit]],
    *,
    k: int,
    weights: Sequence[float] | None = None,
    rank_constant: int = RRF_RANK_CONSTANT,
) -> list[SearchHit]:
    """Fuse ranked lists by weighted RRF: ``Σ weight / (rank_constant + rank)`` (weights default
    to 1 each); ties keep the order of first appearance (earlier lists first). A list of weight 0
    adds nothing to the scores but still adds its hits (after every scored one).

    A hit found by several retrievers keeps the first list's fields (its highlights, when the
    first list is BM25's), its ``retrieved_by`` names all of them and its score is the fused one.
    """
    list_weights = [1.0] * len(ranked_lists) if weights is None else list(weights)
    if len(list_weights) != len(ranked_lists):
        raise ValueError(f"{len(ranked_lists)} ranked lists but {len(list_weights)} weights")
    fused: dict[str, SearchHit] = {}
    scores: dict[str, float] = {}
    for hits, weight in zip(ranked_lists, list_weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            contribution = weight / (rank_constant + rank)
            known = fused.get(hit.chunk_id)
            if known is None:
                fused[hit.chunk_id] = hit
                scores[hit.chunk_id] = contribution
            else:
                fused[hit.chunk_id] = replace(
                    known,
                    retrieved_by=known.retrieved_by + tuple(r for r in hit.retrieved_by if r not in known.retrieved_by),
                    highlights=known.highlights or hit.highlights,
                )
                scores[hit.chunk_id] += contribution
    order = sorted(fused, key=lambda chunk: -scores[chunk])  # sorted() is stable: ties keep insertion order
    return [replace(fused[chunk], score=scores[chunk]) for chunk in order[:k]]


class SearchRequest(BaseModel):
    """The body of ``POST /search``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=5, ge=1, le=MAX_K, strict=True)
    mode: SearchMode = SearchMode.HYBRID
    rerank: bool | None = Field(
        default=None,
        strict=True,
        description=(
            "Rerank the first stage's candidates with the deployment's reranker model (docs/api.md, "
            '"Reranking"): true or false; absent, the deployment\'s default (cdk.json search.rerank.default).'
        ),
    )
    expand: Expand = Field(
        default=DEFAULT_EXPAND,
        description=(
            'Small-to-big (docs/api.md, "Small-to-big"): "none" returns the matched passages; "section" '
            'each one\'s section (the chunks under its heading path), "page" its page(s), cut to about '
            f"{EXPAND_MAX_TOKENS} tokens around the match. Passages that share a section or page are merged "
            f'into one result (chunk_ids). Absent: "{DEFAULT_EXPAND.value}", chosen by measurement '
            '(docs/retrieval.md, "Small-to-big").'
        ),
    )
    filter: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Only passages matching this filter, in the JSON shape of Bedrock Knowledge Bases' RetrievalFilter: "
            'one operator per object, {"equals": {"key": "customer", "value": "acme"}} or '
            '{"andAll": [filter, filter, ...]} (docs/api.md, "Filters"). Keys: metadata keys and the built-ins '
            "document_id, filename, created_at, page, content_type."
        ),
        json_schema_extra={
            "example": {
                "andAll": [
                    {"equals": {"key": "customer", "value": "acme"}},
                    {"greaterThan": {"key": "year", "value": 2020}},
                ]
            }
        },
    )

    @field_validator("query")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the query is empty")
        return value.strip()


class PassageCopyView(BaseModel):
    """Where else a passage's text is indexed."""

    chunk_id: str
    document_id: str
    filename: str | None
    page_start: int
    page_end: int

    @classmethod
    def of(cls, copy: PassageCopy) -> PassageCopyView:
        return cls(**asdict(copy))


class PassageView(BaseModel):
    """One passage as the API returns it. ``highlights`` are HTML-escaped fragments of ``text``
    with the query's words in ``<em>``; empty when none of the words occurs (a k-NN-only match,
    see ``retrieved_by``)."""

    chunk_id: str
    document_id: str
    filename: str | None
    #: Where a source's item lives (s3://..., https://...), what to cite; null for an upload.
    source_uri: str | None = None
    page_start: int
    page_end: int
    heading_path: list[str]
    #: What the document is: a hit opens a PDF at ``page_start``, a PPTX at slide ``page_start``, the
    #: others' rendered view at ``anchor`` (the section), ``paragraph_index`` its paragraph there.
    document_format: DocumentFormat = DocumentFormat.PDF
    anchor: str | None = None
    paragraph_index: int | None = None
    #: A PDF passage's rectangles on its pages (fractions of the displayed page, origin top-left):
    #: one per line it covers. Empty for other formats, and for a page whose words had no geometry.
    boxes: list[PassageBox] = Field(default_factory=list)
    #: A figure's passage (its caption, alt text, the text inside it, a model's description): which
    #: of those its text holds ("caption", "alt_text", "ocr", "vision"). Null for a passage of text.
    figure_sources: list[FigureSource] | None = None
    #: An XLSX or CSV passage's cells as a spreadsheet names them (``Budget!A12:F40``; a CSV's have no
    #: sheet: ``A12:F40``); null for other formats.
    cell_range: str | None = None
    score: float
    text: str
    highlights: list[str]
    retrieved_by: list[str]
    #: Other passages with the same text (another upload of the same PDF, a repeated page), folded
    #: into this result instead of repeating it.
    copies: list[PassageCopyView] = Field(default_factory=list)
    #: The passage's document's metadata (as given at upload; {} when it has none).
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: Small-to-big: "none", or what ``text`` is ("section", "page"); then ``page_start``/``page_end``
    #: span that text, ``boxes`` are the matched chunks' and ``chunk_id`` the best match's.
    expanded: Expand = Expand.NONE
    #: The matched chunks this result holds, best first (one unless hits shared a section or page).
    chunk_ids: list[str] = Field(default_factory=list)
    #: The section or page was longer than the size cap: ``text`` is the part around the matches.
    truncated: bool = False

    @model_validator(mode="after")
    def _one_chunk_at_least(self) -> PassageView:
        if not self.chunk_ids:
            self.chunk_ids = [self.chunk_id]  # an unexpanded passage is its own one match
        return self

    @classmethod
    def of(cls, hit: SearchHit) -> PassageView:
        return cls(
            chunk_id=hit.chunk_id,
            document_id=hit.document_id,
            filename=hit.filename,
            source_uri=hit.source_uri,
            page_start=hit.page_start,
            page_end=hit.page_end,
            heading_path=list(hit.heading_path),
            document_format=hit.document_format,
            anchor=hit.anchor,
            paragraph_index=hit.paragraph_index,
            boxes=list(hit.boxes),
            figure_sources=list(hit.figure_sources) if hit.figure_sources is not None else None,
            cell_range=hit.cell_range,
            score=hit.score,
            text=hit.text,
            highlights=list(hit.highlights),
            retrieved_by=list(hit.retrieved_by),
            copies=[PassageCopyView.of(copy) for copy in hit.copies],
            metadata=dict(hit.metadata or {}),
            expanded=hit.expanded,
            chunk_ids=list(hit.chunk_ids),
            truncated=hit.truncated,
        )


class SearchResponse(BaseModel):
    query: str
    mode: SearchMode
    k: int
    #: Whether the passages were reranked (then each ``score`` is the reranker's relevance score).
    reranked: bool = False
    #: What each passage was expanded to (the request's ``expand``).
    expand: Expand = Expand.NONE
    passages: list[PassageView]


@dataclass(frozen=True)
class RerankSettings:
    """The deployment's reranking (rag_ingest.core.config.RerankEnv): on when a request says
    nothing, and how many fused passages the reranker scores."""

    default: bool = False
    candidates: int = RERANK_CANDIDATES

    def __post_init__(self) -> None:
        if not 1 <= self.candidates <= RERANK_MAX_CANDIDATES:
            raise ValueError(f"rerank candidates must be between 1 and {RERANK_MAX_CANDIDATES}")


class SearchService:
    """``POST /search`` for one tenant; the store and the embedder are made on first use."""

    def __init__(
        self,
        store: Callable[[], PassageRetriever],
        embedder: Callable[[], Embedder],
        fusion: FusionSettings = DEFAULT_FUSION,
        reranker: Callable[[], Reranker] | None = None,
        rerank: RerankSettings = RerankSettings(),
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._fusion = fusion
        self._reranker = reranker
        self._rerank = rerank

    def search(self, tenant_id: str, request: SearchRequest, reader: Principal | None = None) -> SearchResponse:
        """Raises ``PermanentError(INVALID_REQUEST)`` naming the JSON path of a bad filter's part.
        With ``reader`` (the API always passes the caller), only passages of documents it may read."""
        where = parse_request_filter(request.filter)
        # BM25 alone never embeds: do not load (or pay for) the model for it.
        embedder = self._embedder() if request.mode is not SearchMode.BM25 else _NoEmbedder()
        wants_rerank = self._rerank.default if request.rerank is None else request.rerank
        if wants_rerank and self._reranker is None:
            raise PermanentError(ErrorCode.INVALID_REQUEST, "reranking is not configured for this deployment")
        reranker = self._reranker() if wants_rerank and self._reranker is not None else None
        query = SearchQuery(
            tenant_id=tenant_id,
            text=request.query,
            k=request.k,
            mode=request.mode,
            where=where,
            reader=reader,
            expand=request.expand,
        )
        hits = search_passages(
            self._store(),
            embedder,
            query,
            fusion=self._fusion,
            reranker=reranker,
            rerank_candidates=self._rerank.candidates,
        )
        return SearchResponse(
            query=request.query,
            mode=request.mode,
            k=request.k,
            reranked=reranker is not None,
            expand=request.expand,
            passages=[PassageView.of(hit) for hit in hits],
        )


def parse_request_filter(raw: dict[str, Any] | None, path: str = "filter") -> Filter | None:
    """A request's ``filter`` parsed (None: no filter); a bad one is ``PermanentError(INVALID_REQUEST)``
    whose detail starts with the JSON path of the bad part."""
    if raw is None:
        return None
    try:
        return parse_filter(raw, path)
    except FilterError as exc:
        raise PermanentError(ErrorCode.INVALID_REQUEST, str(exc)) from None


class _NoEmbedder:
    model_id = "none"
    dimension = 0
    max_input_tokens = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("BM25 search does not embed")
