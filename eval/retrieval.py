"""The retrieval evaluation: questions, the naive baseline, an in-process index, and the scores.

A question is answered at rank r when the r-th passage comes from the question's document and
its page span (page_start..page_end) contains the page that answers it. Recall@k is the share
of questions answered within the first k passages; MRR@10 averages 1/r over the questions
(0 when not answered in the first 10). Small-to-big (``score_expansion``) also asks whether a
returned passage's text holds the question's ``must_hold`` phrase, and counts the tokens returned.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rag_ingest.adapters.vector_store import IndexSettings, VectorEncoding, VectorStore, connect
from rag_ingest.core.config import SHIPPED_VECTOR_ENCODING
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp
from rag_ingest.core.retrieval_text import SHIPPED_CONTEXT_LINE, document_title, indexed_text
from rag_ingest.core.tokens import count_tokens, load_tokenizer
from rag_ingest.embeddings.base import Embedder
from rag_ingest.ingest.chunking import chunk_pages, document_text
from rag_ingest.parsing.ocr.engine import PageOcr
from rag_ingest.parsing.pdf.cleanup import SHIPPED_CLEANUP_RULES, CleanupRules, clean_page_texts, join_continued_tables
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.retrieval.hits import SearchHit
from rag_ingest.retrieval.ports import Reranker
from rag_ingest.retrieval.query import Expand, SearchQuery
from rag_ingest.retrieval.search import DEFAULT_FUSION, FusionSettings, SearchMode, search_passages
from tokenizers import Tokenizer

EVAL_DIR = Path(__file__).resolve().parent
REPO_DIR = EVAL_DIR.parent
#: The benchmark environment with LangChain (make bench-peers); never the product's.
PEERS_PYTHON = REPO_DIR / ".venv-peers" / "bin" / "python"
#: Vectors of texts embedded by earlier runs (.local/ is ignored by git).
EMBEDDINGS_CACHE = REPO_DIR / ".local" / "eval-embeddings.jsonl"
CORPUS_DIR = EVAL_DIR / "corpus"
QUESTIONS_PATH = EVAL_DIR / "questions.json"
#: Which split (dev or test) each corpus document belongs to; fixed once, never changed.
MANIFEST_PATH = CORPUS_DIR / "manifest.json"
SPLITS = ("dev", "test")
#: The ranks the scores look at: recall@1, recall@5 and MRR@10.
RESULTS_PER_QUESTION = 10
#: Small-to-big is scored on what a search of the API's default k returns.
EXPANSION_K = 5
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
    table: bool = False  # its answer sits in a table's cells (docs/retrieval.md, Table questions)
    must_hold: str = ""  # a short exact phrase of the answer page that answers it


@dataclass(frozen=True)
class Passage:
    """What the scores need of a search result."""

    document: str
    page_start: int
    page_end: int
    text: str = ""


@dataclass(frozen=True)
class Scores:
    questions: int
    recall_at_1: float
    recall_at_5: float
    mrr_at_10: float


@dataclass(frozen=True)
class ExpansionScores:
    """One ``expand`` setting over ``EXPANSION_K`` results a question: recall@5, MRR@5, the share of
    questions whose returned text holds their ``must_hold`` phrase, and tokens returned a query."""

    questions: int
    recall_at_5: float
    mrr_at_5: float
    holds_answer: float
    tokens_per_query: float


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


def normalise(text: str) -> str:
    """Whitespace-normalised text: the form ``must_hold`` phrases and passages are compared in."""
    return " ".join(text.split())


def holds_answer(question: Question, passages: Sequence[Passage]) -> bool:
    """Whether a passage of the question's document holds its ``must_hold`` phrase."""
    phrase = normalise(question.must_hold)
    if not phrase:
        raise ValueError(f"question {question.id} has no must_hold phrase")
    return any(p.document == question.document and phrase in normalise(p.text) for p in passages)


def score_expansion(questions: Sequence[Question], results: Mapping[str, Sequence[Passage]]) -> ExpansionScores:
    count = len(questions)
    returned = [list(results.get(question.id, ()))[:EXPANSION_K] for question in questions]
    ranks = [answer_rank(question, passages) for question, passages in zip(questions, returned, strict=True)]
    held = sum(holds_answer(question, passages) for question, passages in zip(questions, returned, strict=True))
    tokens = sum(count_tokens(passage.text) for passages in returned for passage in passages)
    return ExpansionScores(
        questions=count,
        recall_at_5=sum(1 for rank in ranks if rank is not None) / count,
        mrr_at_5=sum(1 / rank for rank in ranks if rank is not None) / count,
        holds_answer=held / count,
        tokens_per_query=tokens / count,
    )


def pipeline_chunks(
    pdf: Path,
    *,
    chunk_tokens: int,
    overlap_tokens: int,
    rules: CleanupRules = SHIPPED_CLEANUP_RULES,
    with_title: bool = True,
    ocr: PageOcr | None = None,
    tables: bool = True,
) -> list[Chunk]:
    """What the Parse and Chunk stages make of a PDF (cleanup, headings, token-aware chunks, the
    document's title on each chunk). ``rules`` and ``with_title`` are for the ablation:
    ``with_title=False`` leaves the title out of the contextual text but keeps the heading path.
    ``ocr`` reads the pages without a text layer, as Parse does (the scanned variant). ``tables``
    off leaves a table's cells as loose lines (the ablation's switch)."""
    parsed = parse_pdf(pdf.read_bytes(), max_bytes=MAX_BYTES, max_pages=MAX_PAGES, clean=False, ocr=ocr, tables=tables)
    # As the Chunk stage joins the page ranges (rag_ingest.parsing.pdf.extract.join_page_ranges): cleaned, then a
    # table continued on the next page joined to its first part.
    pages = join_continued_tables(clean_page_texts(parsed.pages, rules))
    chunks = chunk_pages(pages, count_tokens=count_tokens, target_tokens=chunk_tokens, overlap_tokens=overlap_tokens)
    title = document_title(parsed.metadata_title, pdf.name) if with_title else ""
    return [chunk.model_copy(update={"document_title": title}) for chunk in chunks]


def naive_chunks(pdf: Path, *, chunk_chars: int = NAIVE_CHUNK_CHARS) -> list[Chunk]:
    """The baseline: pypdf's raw text (no cleanup), cut every ``chunk_chars`` characters, no overlap.

    The page span of a window is computed from its offsets, so it is scored like ours.
    """
    pages = parse_pdf(pdf.read_bytes(), max_bytes=MAX_BYTES, max_pages=MAX_PAGES, clean=False).pages
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


def langchain_default_chunks(pdfs: Sequence[Path], peers_python: Path = PEERS_PYTHON) -> dict[str, list[Chunk]]:
    """LangChain's default chunks of each PDF (``eval.langchain_chunks``, run in the peers'
    environment), by file name. Raises FileNotFoundError when that environment is absent."""
    if not peers_python.is_file():
        raise FileNotFoundError(f"{peers_python} not found: create it with make bench-peers")
    completed = subprocess.run(
        [str(peers_python), "-m", "eval.langchain_chunks", *map(str, pdfs)],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"eval.langchain_chunks failed ({completed.returncode}): {completed.stderr[-2000:]}")
    by_document: dict[str, list[Chunk]] = {pdf.name: [] for pdf in pdfs}
    for item in json.loads(completed.stdout):
        chunks = by_document[item["document"]]
        text = item["text"]
        chunks.append(
            Chunk(
                chunk_index=len(chunks),
                text=text,
                page_start=item["page"],
                page_end=item["page"],
                char_start=0,  # offsets into the page are not needed for scoring
                char_end=len(text),
                token_count=count_tokens(text),
            )
        )
    return by_document


def truncate_to_tokens(text: str, limit: int) -> str:
    encoding = _tokenizer().encode(text, add_special_tokens=False)
    if len(encoding.ids) <= limit:
        return text
    return text[: encoding.offsets[limit - 1][1]]


@cache
def _tokenizer() -> Tokenizer:
    return load_tokenizer()


def passages_of(hits: Sequence[SearchHit]) -> list[Passage]:
    return [Passage(hit.filename or "", hit.page_start, hit.page_end, hit.text) for hit in hits]


class MemoEmbedder:
    """An embedder that embeds each distinct text once (the ablation's variants share most chunks),
    remembered across runs in ``path`` (JSON lines of text hash and vector) when given."""

    def __init__(self, embedder: Embedder, path: Path | None = None) -> None:
        self.model_id = embedder.model_id
        self.dimension = embedder.dimension
        self.max_input_tokens = embedder.max_input_tokens
        self._embedder = embedder
        self._path = path
        self._vectors: dict[str, list[float]] = {}
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    key, vector = json.loads(line)
                except ValueError:
                    continue  # a line cut short (a run stopped while writing): embed that text again
                self._vectors[key] = vector

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\n{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [self._key(text) for text in texts]
        missing = dict.fromkeys(
            key_text for key_text in zip(keys, texts, strict=True) if key_text[0] not in self._vectors
        )
        if missing:
            vectors = self._embedder.embed([text for _key, text in missing])
            new = dict(zip((key for key, _text in missing), vectors, strict=True))
            self._vectors.update(new)
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                lines = "".join(json.dumps([key, vector]) + "\n" for key, vector in new.items())
                # One unbuffered append per batch: runs sharing the file never interleave inside a line.
                with self._path.open("ab", buffering=0) as cache:
                    cache.write(lines.encode())
        return [self._vectors[key] for key in keys]


class InProcessIndex:
    """A temporary index of its own: chunks embedded here, searched with rag_ingest.retrieval.search."""

    def __init__(
        self,
        endpoint: str,
        embedder: Embedder,
        *,
        name_prefix: str,
        fusion: FusionSettings = DEFAULT_FUSION,
        context_line: bool = SHIPPED_CONTEXT_LINE,
        vector_encoding: VectorEncoding = SHIPPED_VECTOR_ENCODING,
    ) -> None:
        self.tenant_id = f"eval-{uuid.uuid4().hex[:8]}"
        self.embedder = embedder
        self.fusion = fusion
        name = f"{name_prefix}-{uuid.uuid4().hex[:8]}"
        self.store = VectorStore(
            connect(endpoint),
            IndexSettings(
                name=name, dimension=embedder.dimension, context_line=context_line, vector_encoding=vector_encoding
            ),
        )
        self.chunk_count = 0
        self.chunk_chars = 0

    def add(
        self, filename: str, chunks: Sequence[Chunk], *, truncate: bool = False, embed_context: bool = False
    ) -> None:
        """Embed (the plain text, as the Embed stage does) and index ``chunks``. ``truncate`` cuts
        texts over the model's input limit for the embedding only (what naive pipelines do
        silently); ours never needs it."""
        texts = [indexed_text(chunk) if embed_context else chunk.text for chunk in chunks]
        if truncate:
            texts = [truncate_to_tokens(text, self.embedder.max_input_tokens) for text in texts]
        vectors = self.embedder.embed(texts)
        self.store.write_chunks(
            DocumentStamp(self.tenant_id, Path(filename).stem, "eval", filename=filename), chunks, vectors
        )
        self.chunk_count += len(chunks)
        self.chunk_chars += sum(len(chunk.text) for chunk in chunks)

    def search(
        self,
        query: str,
        mode: SearchMode,
        reranker: Reranker | None = None,
        *,
        k: int = RESULTS_PER_QUESTION,
        expand: Expand = Expand.NONE,
    ) -> list[Passage]:
        hits = search_passages(
            self.store,
            self.embedder,
            SearchQuery(tenant_id=self.tenant_id, text=query, k=k, mode=mode, expand=expand),
            fusion=self.fusion,
            reranker=reranker,
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
    chunker: Callable[[Path], list[Chunk]],
    pdfs: Sequence[Path],
    truncate: bool = False,
    fusion: FusionSettings = DEFAULT_FUSION,
    embed_context: bool = False,
    context_line: bool = SHIPPED_CONTEXT_LINE,
    vector_encoding: VectorEncoding = SHIPPED_VECTOR_ENCODING,
) -> Iterator[InProcessIndex]:
    """An index holding ``chunker``'s chunks of every PDF; deleted on exit. Like the pipeline, the
    plain text is embedded and BM25 indexes the text; the ablation's variants switch on
    ``context_line`` (BM25 indexes the contextual text) and ``embed_context`` (embeds it too);
    bench.vector_settings, ``vector_encoding`` (with an embedder whose vectors match it)."""
    index = InProcessIndex(
        endpoint,
        embedder,
        name_prefix=name_prefix,
        fusion=fusion,
        context_line=context_line,
        vector_encoding=vector_encoding,
    )
    try:
        index.store.ensure_index()
        for pdf in pdfs:
            index.add(pdf.name, chunker(pdf), truncate=truncate, embed_context=embed_context)
        yield index
    finally:
        index.delete()


def run_questions(questions: Sequence[Question], search: Callable[[str], list[Passage]]) -> dict[str, list[Passage]]:
    return {question.id: search(question.question) for question in questions}
