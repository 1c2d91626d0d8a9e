"""``POST /answer``: search as the caller, then a model answers from the passages found, citing them.

The passages come from ``SearchService`` with the request's query, filter, mode and rerank, so the
tenant and per-document access are the search's. Reranked passages below ``min_relevance`` are
dropped; when none is left the model is not called and the answer says nothing supports one. The
model sees the passages as escaped, delimited data (rag_ingest.answers.prompt); markers naming no
passage are removed, and each ``[n]`` kept is returned with its passage. ``stream`` gives the same
answer as events (the numbered passages, the text's deltas, the whole response) for the live
channel. Imports rag_ingest.answers, rag_ingest.retrieval and rag_ingest.core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from rag_ingest.answers.ports import AnswerModel, Generation
from rag_ingest.answers.prompt import PromptPassage, answer_prompt, cited_numbers, without_unknown_markers
from rag_ingest.core.access import Principal
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import DocumentFormat
from rag_ingest.core.settings import DEFAULT_ANSWER_MAX_TOKENS, DEFAULT_ANSWER_MIN_RELEVANCE, MAX_ANSWER_TOKENS
from rag_ingest.retrieval.search import PassageView, SearchRequest, SearchService

MAX_ANSWER_PASSAGES = 20
NOT_SUPPORTED = "No passage in the documents you can read supports an answer to this question."


@dataclass(frozen=True)
class AnswerSettings:
    """The deployment's answers (rag_ingest.core.config.AnswerEnv): the model, the reranked score a
    passage needs to be used, the answer's length cap, and whether a request reranks by default."""

    model_id: str
    min_relevance: float = DEFAULT_ANSWER_MIN_RELEVANCE
    max_tokens: int = DEFAULT_ANSWER_MAX_TOKENS
    rerank_default: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.min_relevance <= 1:
            raise ValueError("min_relevance must be between 0 and 1")
        if not 1 <= self.max_tokens <= MAX_ANSWER_TOKENS:
            raise ValueError(f"max_tokens must be between 1 and {MAX_ANSWER_TOKENS}")


class AnswerRequest(SearchRequest):
    """The body of ``POST /answer``: a search's fields; ``k`` is how many passages the model reads."""

    k: int = Field(default=5, ge=1, le=MAX_ANSWER_PASSAGES, strict=True)


class Unsupported(StrEnum):
    """Why no model was called: nothing was found, or nothing found was relevant enough."""

    NO_PASSAGES = "no_passages"
    BELOW_THRESHOLD = "below_threshold"


class Citation(BaseModel):
    """A passage the answer cites as ``[number]``."""

    number: int
    passage: PassageView


class AnswerUsage(BaseModel):
    input_tokens: int
    output_tokens: int


class AnswerResponse(BaseModel):
    query: str
    #: The answer with its ``[n]`` markers; when ``supported`` is false, the sentence saying why not.
    answer: str
    #: Whether a model answered from passages (false: nothing supported one, and no model was called).
    supported: bool
    unsupported_reason: Unsupported | None = None
    #: The cited passages, in order of first citation, each with the number its markers use.
    citations: list[Citation] = Field(default_factory=list)
    #: How many passages the model read (the first ``k`` found above the threshold).
    passages_read: int = 0
    reranked: bool = False
    model_id: str | None = None
    #: What wrote the answer when it was no model (the local extractive stand-in); null in AWS.
    stand_in: str | None = None
    usage: AnswerUsage | None = None


class AnswerPassages(BaseModel):
    """A stream's first event: the passages the model reads, numbered as its markers will be."""

    type: Literal["answer.passages"] = "answer.passages"
    passages: list[Citation]


class AnswerDelta(BaseModel):
    """A piece of the answer's text as the model wrote it (markers not yet checked)."""

    type: Literal["answer.delta"] = "answer.delta"
    text: str


class AnswerCompleted(BaseModel):
    """A stream's last event: the response ``POST /answer`` returns."""

    type: Literal["answer.completed"] = "answer.completed"
    answer: AnswerResponse


AnswerEvent = AnswerPassages | AnswerDelta | AnswerCompleted


@dataclass(frozen=True)
class _Prompted:
    """Passages found and numbered, and the prompt that shows them to the model."""

    numbered: dict[int, PassageView]
    system: str
    message: str
    reranked: bool


def source_label(passage: PassageView) -> str:
    """Where a passage is, as the model sees it: ``report.pdf, page 3``, a section, or a spreadsheet's
    cells (``budget.xlsx, Budget!A12:F40``)."""
    name = passage.filename or passage.source_uri or passage.document_id
    if passage.cell_range:
        return f"{name}, {passage.cell_range}"
    if passage.heading_path and passage.document_format not in (DocumentFormat.PDF, DocumentFormat.PPTX):
        return f"{name}, {' > '.join(passage.heading_path)}"
    unit = "slide" if passage.document_format is DocumentFormat.PPTX else "page"
    first, last = passage.page_start, passage.page_end
    pages = str(first) if first == last else f"{first}-{last}"
    return f"{name}, {unit} {pages}"


class AnswerService:
    """Answers for one tenant; the model is made on first use."""

    def __init__(self, search: SearchService, model: Callable[[], AnswerModel], settings: AnswerSettings) -> None:
        self._search = search
        self._model = model
        self._settings = settings

    def answer(self, tenant_id: str, request: AnswerRequest, reader: Principal | None = None) -> AnswerResponse:
        prompted = self._prompt(tenant_id, request, reader)
        if isinstance(prompted, AnswerResponse):
            return prompted
        generation = self._model().generate(prompted.system, prompted.message, max_tokens=self._settings.max_tokens)
        return self._response(request, prompted, generation)

    def stream(self, tenant_id: str, request: AnswerRequest, reader: Principal | None = None) -> Iterator[AnswerEvent]:
        prompted = self._prompt(tenant_id, request, reader)
        if isinstance(prompted, AnswerResponse):
            yield AnswerCompleted(answer=prompted)
            return
        yield AnswerPassages(passages=[Citation(number=n, passage=p) for n, p in prompted.numbered.items()])
        pieces = self._model().stream(prompted.system, prompted.message, max_tokens=self._settings.max_tokens)
        for piece in pieces:
            if isinstance(piece, Generation):
                yield AnswerCompleted(answer=self._response(request, prompted, piece))
            else:
                yield AnswerDelta(text=piece)

    def _prompt(self, tenant_id: str, request: AnswerRequest, reader: Principal | None) -> _Prompted | AnswerResponse:
        """The passages and the prompt; the unsupported answer when no passage is good enough."""
        rerank = self._settings.rerank_default if request.rerank is None else request.rerank
        search = SearchRequest.model_validate(request.model_dump(exclude={"rerank"}) | {"rerank": rerank})
        found = self._search.search(tenant_id, search, reader)
        passages = found.passages
        if found.reranked:
            passages = [p for p in passages if p.score >= self._settings.min_relevance]
        if not passages:
            reason = Unsupported.BELOW_THRESHOLD if found.passages else Unsupported.NO_PASSAGES
            logger.info("answer not supported", extra={"reason": reason.value, "found": len(found.passages)})
            return AnswerResponse(
                query=request.query,
                answer=NOT_SUPPORTED,
                supported=False,
                unsupported_reason=reason,
                reranked=found.reranked,
            )
        numbered = {number: passage for number, passage in enumerate(passages, start=1)}
        system, message = answer_prompt(
            request.query, [PromptPassage(n, source_label(p), p.text) for n, p in numbered.items()]
        )
        return _Prompted(numbered, system, message, found.reranked)

    def _response(self, request: AnswerRequest, prompted: _Prompted, generation: Generation) -> AnswerResponse:
        numbered = prompted.numbered
        text = without_unknown_markers(generation.text, list(numbered)).strip()
        cited = cited_numbers(text, list(numbered))
        logger.info(
            "answered",
            extra={
                "model_id": generation.model_id,
                "stand_in": generation.stand_in,
                "passages_read": len(numbered),
                "cited": cited,
                "input_tokens": generation.input_tokens,
                "output_tokens": generation.output_tokens,
            },
        )
        return AnswerResponse(
            query=request.query,
            answer=text,
            supported=True,
            citations=[Citation(number=n, passage=numbered[n]) for n in cited],
            passages_read=len(numbered),
            reranked=prompted.reranked,
            model_id=generation.model_id,
            stand_in=generation.stand_in,
            usage=AnswerUsage(input_tokens=generation.input_tokens, output_tokens=generation.output_tokens),
        )
