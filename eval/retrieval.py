"""The retrieval evaluation: questions, the naive baseline, an in-process index, and the scores.

A question is answered at rank r when the r-th passage comes from the question's document and
its page span (page_start..page_end) contains the page that answers it. Recall@k is the share
of questions answered within the first k passages; MRR@10 averages 1/r over the questions
(0 when not answered in the first 10).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.chunking import chunk_pages, document_text
from rag_ingest.embeddings.base import Embedder
from rag_ingest.models import Chunk, SearchHit
from rag_ingest.pdf import parse_pdf
from rag_ingest.search import SearchMode, search_passages
from rag_ingest.tokens import count_tokens, load_tokenizer
from tokenizers import Tokenizer

EVAL_DIR = Path(__file__).resolve().parent
CORPUS_DIR = EVAL_DIR / "corpus"
QUESTIONS_PATH = EVAL_DIR / "questions.json"
#: Which split (dev or test) each corpus document belongs to; fixed once, never changed.
MANIFEST_PATH = CORPUS_DIR / "manifest.json"
SPLITS = ("dev", "test")
#: The ranks the scores look at: recall@1, recall@5 and MRR@10.
RESULTS_PER_QUESTION = 10
#: The naive baseline's chunks: fixed windows of raw extracted text, as character splitters make.
NAIVE_CHUNK_CHARS = 1000
MAX_BYTES = 50 * 1024 * 1024
MAX_PAGES = 500


@dataclass(frozen=True)
class Question:
    id: str
    document: str  # file name in the corpus
    page: int  # 1-based page of the PDF that answers it
    question: str


@dataclass(frozen=True)
class Passage:
    """What the scores need of a search result."""

    document: str
    page_start: int
    page_end: int


@dataclass(frozen=True)
class Scores:
    questions: int
    recall_at_1: float
    recall_at_5: float
    mrr_at_10: float


def load_questions(path: Path = QUESTIONS_PATH) -> list[Question]:
    return [Question(**item) for item in json.loads(path.read_text(encoding="utf-8"))]


def corpus_pdfs() -> list[Path]:
    return sorted(CORPUS_DIR.glob("*.pdf"))


def load_splits(path: Path = MANIFEST_PATH) -> dict[str, str]:
    """Document file name -> split, checked against the corpus and the split names."""
    splits = {entry["document"]: entry["split"] for entry in json.loads(path.read_text(encoding="utf-8"))}
    unknown = {name: split for name, split in splits.items() if split not in SPLITS}
    if unknown:
        raise ValueError(f"{path}: splits must be one of {SPLITS}: {unknown}")
    on_disk = {pdf.name for pdf in corpus_pdfs()}
    if on_disk != set(splits):
        raise ValueError(f"{path} and {CORPUS_DIR} disagree: {sorted(on_disk ^ set(splits))}")
    return splits


@dataclass(frozen=True)
class SplitCorpus:
    """One split evaluated as a corpus of its own: its documents and the questions about them."""

    name: str
    pdfs: list[Path]
    questions: list[Question]


def split_corpus(name: str, splits: Mapping[str, str], questions: Sequence[Question]) -> SplitCorpus:
    pdfs = [pdf for pdf in corpus_pdfs() if splits[pdf.name] == name]
    documents = {pdf.name for pdf in pdfs}
    return SplitCorpus(name, pdfs, [question for question in questions if question.document in documents])


def answer_rank(question: Question, passages: Sequence[Passage]) -> int | None:
    """1-based rank of the first passage that answers ``question``, or None."""
    for rank, passage in enumerate(passages, start=1):
        if passage.document == question.document and passage.page_start <= question.page <= passage.page_end:
            return rank
    return None


def score(questions: Sequence[Question], results: Mapping[str, Sequence[Passage]]) -> Scores:
    ranks = [answer_rank(question, results.get(question.id, ())) for question in questions]
    count = len(questions)
    return Scores(
        questions=count,
        recall_at_1=sum(1 for rank in ranks if rank == 1) / count,
        recall_at_5=sum(1 for rank in ranks if rank is not None and rank <= 5) / count,
        mrr_at_10=sum(1 / rank for rank in ranks if rank is not None and rank <= RESULTS_PER_QUESTION) / count,
    )


def pipeline_chunks(data: bytes, *, chunk_tokens: int, overlap_tokens: int) -> list[Chunk]:
    """What the Parse and Chunk stages make of a PDF (cleanup, headings, token-aware chunks)."""
    parsed = parse_pdf(data, max_bytes=MAX_BYTES, max_pages=MAX_PAGES)
    return chunk_pages(
        parsed.pages, count_tokens=count_tokens, target_tokens=chunk_tokens, overlap_tokens=overlap_tokens
    )


def naive_chunks(data: bytes, *, chunk_chars: int = NAIVE_CHUNK_CHARS) -> list[Chunk]:
    """The baseline: pypdf's raw text (no cleanup), cut every ``chunk_chars`` characters, no overlap.

    The page span of a window is computed from its offsets, so it is scored like ours.
    """
    pages = parse_pdf(data, max_bytes=MAX_BYTES, max_pages=MAX_PAGES, clean=False).pages
    text = document_text(pages)
    page_ends: list[tuple[int, int]] = []  # (end offset, page number)
    offset = 0
    for page in pages:
        offset += len(page.text)
        page_ends.append((offset, page.page_number))
        offset += 2  # the page separator of document_text

    def page_at(position: int) -> int:
        return next((number for end, number in page_ends if position < end + 2), pages[-1].page_number)

    chunks: list[Chunk] = []
    for start in range(0, len(text), chunk_chars):
        window = text[start : start + chunk_chars]
        if not window.strip():
            continue
        chunks.append(
            Chunk(
                chunk_index=len(chunks),
                text=window,
                page_start=page_at(start),
                page_end=page_at(start + len(window) - 1),
                char_start=start,
                char_end=start + len(window),
                token_count=count_tokens(window),
            )
        )
    return chunks


def truncate_to_tokens(text: str, limit: int) -> str:
    encoding = _tokenizer().encode(text, add_special_tokens=False)
    if len(encoding.ids) <= limit:
        return text
    return text[: encoding.offsets[limit - 1][1]]


@cache
def _tokenizer() -> Tokenizer:
    return load_tokenizer()


def passages_of(hits: Sequence[SearchHit]) -> list[Passage]:
    return [Passage(hit.filename or "", hit.page_start, hit.page_end) for hit in hits]


class InProcessIndex:
    """A temporary index of its own: chunks embedded here, searched with rag_ingest.search."""

    def __init__(self, endpoint: str, embedder: Embedder, *, name_prefix: str) -> None:
        self.tenant_id = f"eval-{uuid.uuid4().hex[:8]}"
        self.embedder = embedder
        self.store = VectorStore(
            connect(endpoint), IndexSettings(name=f"{name_prefix}-{uuid.uuid4().hex[:8]}", dimension=embedder.dimension)
        )
        self.chunk_count = 0
        self.chunk_chars = 0

    def add(self, filename: str, chunks: Sequence[Chunk], *, truncate: bool = False) -> None:
        """Embed and index ``chunks``. ``truncate`` cuts texts over the model's input limit for the
        embedding only (what naive pipelines do silently); ours never needs it."""
        texts = [chunk.text for chunk in chunks]
        if truncate:
            texts = [truncate_to_tokens(text, self.embedder.max_input_tokens) for text in texts]
        vectors = self.embedder.embed(texts)
        self.store.write_chunks(
            tenant_id=self.tenant_id,
            document_id=Path(filename).stem,
            version="eval",
            filename=filename,
            chunks=chunks,
            vectors=vectors,
        )
        self.chunk_count += len(chunks)
        self.chunk_chars += sum(len(chunk.text) for chunk in chunks)

    def search(self, query: str, mode: SearchMode) -> list[Passage]:
        hits = search_passages(
            self.store, self.embedder, tenant_id=self.tenant_id, query=query, k=RESULTS_PER_QUESTION, mode=mode
        )
        return passages_of(hits)

    def delete(self) -> None:
        self.store.drop_index()


@contextmanager
def in_process_index(
    endpoint: str,
    embedder: Embedder,
    *,
    name_prefix: str,
    chunker: Callable[[bytes], list[Chunk]],
    pdfs: Sequence[Path],
    truncate: bool = False,
) -> Iterator[InProcessIndex]:
    """An index holding ``chunker``'s chunks of every PDF; deleted on exit."""
    index = InProcessIndex(endpoint, embedder, name_prefix=name_prefix)
    try:
        index.store.ensure_index()
        for pdf in pdfs:
            index.add(pdf.name, chunker(pdf.read_bytes()), truncate=truncate)
        yield index
    finally:
        index.delete()


def run_questions(questions: Sequence[Question], search: Callable[[str], list[Passage]]) -> dict[str, list[Passage]]:
    return {question.id: search(question.question) for question in questions}
