"""The formats evaluation: DOCX, PPTX, HTML, XLSX and CSV documents (``eval/formats``) beside the PDFs.

    .venv/bin/python -m eval --formats-only --in-process      # these formats only, in process
    .venv/bin/python -m eval.formats_eval --in-process --split dev

Each split (``eval/formats/manifest.json``) is a corpus and an index of its own, scored per format and
mode; in process, the figure questions (``figures.json``: PDF figures, image documents) get a table of
their own with the figures found and skipped. A question is answered at rank r when the r-th passage
holds its ``evidence`` (whitespace-normalised). The default path uploads through a local stack's API;
``--in-process`` reads (figures by Tesseract), chunks, indexes, searches here. Imports eval.retrieval.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rag_ingest.core.parsed import IMAGE_FORMATS, Chunk, DocumentFormat, FigureCounts
from rag_ingest.core.retrieval_text import document_title
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import Embedder
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.blocks import FormatLimits, StructuredDocument
from rag_ingest.parsing.figures import ImageReader
from rag_ingest.parsing.formats import SNIFF_BYTES, detect_format, read_structured
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import SearchMode, search_passages
from rag_ingest_client.uploads import declared_type

from eval.retrieval import (
    MAX_BYTES,
    MAX_PAGES,
    RESULTS_PER_QUESTION,
    SPLITS,
    InProcessIndex,
    Scores,
    in_process_index,
)

FORMATS_DIR = Path(__file__).resolve().parent / "formats"
FORMATS_MANIFEST = FORMATS_DIR / "manifest.json"
FORMATS_QUESTIONS = FORMATS_DIR / "questions.json"
FIGURE_QUESTIONS = FORMATS_DIR / "figures.json"
MODES = (SearchMode.KNN, SearchMode.BM25, SearchMode.HYBRID)
#: The pipeline's defaults (cdk.json chunking), as for the PDF evaluation.
CHUNK_TOKENS = 300
CHUNK_OVERLAP_TOKENS = 60
NAIVE_NOTE = (
    "no naive baseline for these formats: the baseline is defined on pypdf's raw PDF text "
    "(fixed 1,000-character windows), which these files do not have"
)


@dataclass(frozen=True)
class FormatDocument:
    path: Path
    split: str
    document_format: DocumentFormat

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class EvidenceQuestion:
    id: str
    document: str  # file name in eval/formats
    question: str
    evidence: str  # a short exact phrase of the answering passage
    locator: str | None  # slide-<n> (PPTX) or the section's anchor (DOCX, HTML); None before any heading
    figure: bool = False  # answered by a figure's passage: its caption, alt text or the text inside it
    needs_ocr: bool = False  # the evidence is text read inside an image (Tesseract)


@dataclass(frozen=True)
class TextPassage:
    """What the evidence rule needs of a search result: its document and its text."""

    document: str
    text: str


def normalise(text: str) -> str:
    """Whitespace-normalised text: the form evidence and passages are compared in."""
    return " ".join(text.split())


def load_documents(path: Path = FORMATS_MANIFEST) -> list[FormatDocument]:
    entries = json.loads(path.read_text(encoding="utf-8"))
    documents = [
        FormatDocument(path.parent / entry["document"], entry["split"], DocumentFormat(entry["format"]))
        for entry in entries
    ]
    unknown = [document.name for document in documents if document.split not in SPLITS]
    if unknown:
        raise ValueError(f"{path}: splits must be one of {SPLITS}: {unknown}")
    return documents


def load_evidence_questions(path: Path = FORMATS_QUESTIONS) -> list[EvidenceQuestion]:
    return [EvidenceQuestion(**item) for item in json.loads(path.read_text(encoding="utf-8"))]


def detected_format(data: bytes) -> DocumentFormat:
    """What Validate decides the file is, from its bytes (rag_ingest.parsing.formats.detect_format)."""
    return detect_format(data[:SNIFF_BYTES], size=len(data), max_bytes=MAX_BYTES, read_all=lambda: data)


@functools.cache
def figure_reader() -> ImageReader:
    """What Parse reads figures' images with on the local stack: Tesseract (``make ocr-tools``)."""
    from rag_ingest.parsing.image_reading import OcrImageReader
    from rag_ingest.parsing.ocr.local import local_engine

    return OcrImageReader(local_engine())


def asked_of(index: InProcessIndex, query: str, mode: SearchMode) -> list[TextPassage]:
    """The passages an in-process index answers ``query`` with, in ``mode``."""
    hits = search_passages(
        index.store,
        index.embedder,
        SearchQuery(tenant_id=index.tenant_id, text=query, k=RESULTS_PER_QUESTION, mode=mode),
        fusion=index.fusion,
    )
    return [TextPassage(hit.filename or "", hit.text) for hit in hits]


def read_document(path: Path, images: ImageReader | None = None) -> tuple[DocumentFormat, StructuredDocument]:
    """The file as Validate and Parse read it: its detected format, then pages of blocks
    (``images``: what reads the text inside its figures; None, captions and alt text only)."""
    data = path.read_bytes()
    document_format = detected_format(data)
    return document_format, read_structured(data, document_format, FormatLimits(max_pages=MAX_PAGES), images)


def document_text(document: StructuredDocument) -> str:
    """The extracted text of every page, whitespace-normalised (what evidence must occur in)."""
    return normalise("\n\n".join(page.text for page in document.pages))


def structured_chunks(
    path: Path,
    *,
    chunk_tokens: int = CHUNK_TOKENS,
    overlap_tokens: int = CHUNK_OVERLAP_TOKENS,
    images: ImageReader | None = None,
) -> list[Chunk]:
    """What the Parse and Chunk stages make of a structured file: its pages of blocks chunked by
    ``chunk_pages`` with the stated headings, each chunk carrying the document's title and format."""
    document_format, document = read_document(path, images)
    chunks = chunk_pages(
        document.pages, count_tokens=count_tokens, target_tokens=chunk_tokens, overlap_tokens=overlap_tokens
    )
    title = document_title(document.title, path.name)
    return [chunk.model_copy(update={"document_title": title, "document_format": document_format}) for chunk in chunks]


@dataclass(frozen=True)
class FigureQuestion:
    """A question answered by a PDF figure (its caption, a label inside it, a chart's data) or by
    an image document's page, with the phrase its answering passage holds."""

    id: str
    document: str  # relative to eval/formats (a PDF of eval/corpus, or an image here)
    split: str
    answered_by: str  # caption, label, chart (a PDF figure) or page (an image document)
    question: str
    evidence: str

    @property
    def path(self) -> Path:
        return FORMATS_DIR / self.document

    def as_evidence(self) -> EvidenceQuestion:
        return EvidenceQuestion(self.id, self.path.name, self.question, self.evidence, None)


@dataclass
class FigureParse:
    """What reading one document of the figure questions cost and found."""

    seconds: float
    figures: FigureCounts
    pages: int


def load_figure_questions(path: Path = FIGURE_QUESTIONS) -> list[FigureQuestion]:
    return [FigureQuestion(**item) for item in json.loads(path.read_text(encoding="utf-8"))]


def figure_chunks(path: Path, parses: dict[str, FigureParse] | None = None) -> list[Chunk]:
    """What Parse and Chunk make of a PDF with its figures read by Tesseract, or of an image document
    read by Tesseract (the local stack's engine), with the passages' rectangles; ``parses`` gets the
    parse time and the figure counts."""
    from rag_ingest.ingest.passage_boxes import passage_boxes
    from rag_ingest.parsing.image_document import read_image_document
    from rag_ingest.parsing.ocr.engine import PageOcr
    from rag_ingest.parsing.ocr.local import local_engine
    from rag_ingest.parsing.pdf.extract import join_page_ranges, parse_pdf
    from rag_ingest.parsing.pdf.figures import PdfFigures

    data = path.read_bytes()
    document_format = detected_format(data)
    started = time.perf_counter()
    if document_format in IMAGE_FORMATS:
        ranges = [read_image_document(data, document_format, max_pages=MAX_PAGES, ocr=PageOcr(local_engine()))]
        document = join_page_ranges(ranges, clean=False)
    else:
        figures = PdfFigures(figure_reader())
        document = parse_pdf(data, max_bytes=MAX_BYTES, max_pages=MAX_PAGES, figures=figures)
    if parses is not None:
        parses[path.name] = FigureParse(time.perf_counter() - started, document.figures, document.page_count)
    chunks = chunk_pages(
        document.pages, count_tokens=count_tokens, target_tokens=CHUNK_TOKENS, overlap_tokens=CHUNK_OVERLAP_TOKENS
    )
    title = document_title(document.metadata_title, path.name)
    update = {"document_title": title, "document_format": document_format}
    return [chunk.model_copy(update=update) for chunk in passage_boxes(chunks, document.pages)]


def evaluate_figures(
    split: str, questions: Sequence[FigureQuestion], endpoint: str, embedder: Embedder
) -> tuple[dict[SearchMode, Scores], dict[str, FigureParse]]:
    """The split's figure questions, in process: their documents read with figures, indexed, asked."""
    parses: dict[str, FigureParse] = {}
    paths = list(dict.fromkeys(question.path.resolve() for question in questions))
    with in_process_index(
        endpoint,
        embedder,
        name_prefix=f"rag-eval-figures-{split}",
        chunker=lambda path: figure_chunks(path, parses),
        pdfs=paths,
    ) as index:
        asked = [question.as_evidence() for question in questions]
        answers = {mode: {q.id: asked_of(index, q.question, mode) for q in asked} for mode in MODES}
        return {mode: score(asked, answers[mode]) for mode in MODES}, parses


def print_figures(split: str, questions: Sequence[FigureQuestion], scores: Mapping[SearchMode, Scores],
                  parses: Mapping[str, FigureParse]) -> None:  # fmt: skip
    counts = sum((parse.figures for parse in parses.values()), FigureCounts())
    read = counts.indexed + counts.without_text
    pdf_seconds = sum(parse.seconds for name, parse in parses.items() if name.endswith(".pdf"))
    image_pages = sum(parse.pages for name, parse in parses.items() if not name.endswith(".pdf"))
    image_seconds = sum(parse.seconds for name, parse in parses.items() if not name.endswith(".pdf"))
    print(f"\nfigures, {split} split ({len(parses)} documents, {len(questions)} questions)")
    print(
        f"figures found {read + counts.skipped_tiny + counts.skipped_repeated}: indexed {counts.indexed}, "
        f"without text {counts.without_text}, skipped as decoration {counts.skipped_tiny} tiny + "
        f"{counts.skipped_repeated} repeated, over the read cap {counts.over_read_cap}"
    )
    print(f"parse: PDFs with figures {pdf_seconds:.1f} s; image pages {image_pages} in {image_seconds:.1f} s; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    for mode, mode_scores in scores.items():
        print(f"  {mode.value:<7} recall@5 {mode_scores.recall_at_5:.3f}  MRR@10 {mode_scores.mrr_at_10:.3f}")


def answer_rank(question: EvidenceQuestion, passages: Sequence[TextPassage]) -> int | None:
    """1-based rank of the first passage of the question's document whose text holds the evidence."""
    evidence = normalise(question.evidence)
    for rank, passage in enumerate(passages, start=1):
        if passage.document == question.document and evidence in normalise(passage.text):
            return rank
    return None


def score(questions: Sequence[EvidenceQuestion], results: Mapping[str, Sequence[TextPassage]]) -> Scores:
    ranks = [answer_rank(question, results.get(question.id, ())) for question in questions]
    count = len(questions)
    if not count:
        return Scores(questions=0, recall_at_1=0.0, recall_at_5=0.0, mrr_at_10=0.0)
    return Scores(
        questions=count,
        recall_at_1=sum(1 for rank in ranks if rank == 1) / count,
        recall_at_5=sum(1 for rank in ranks if rank is not None and rank <= 5) / count,
        mrr_at_10=sum(1 / rank for rank in ranks if rank is not None and rank <= RESULTS_PER_QUESTION) / count,
    )


Results = dict[SearchMode, dict[str, list[TextPassage]]]


@dataclass(frozen=True)
class SplitRun:
    """One split's documents and questions, and the passages each mode returned for each question."""

    name: str
    system: str
    documents: list[FormatDocument]
    questions: list[EvidenceQuestion]
    chunk_count: int
    results: Results

    def scores(
        self, document_format: DocumentFormat | None = None, *, figures: bool = False
    ) -> dict[SearchMode, Scores]:
        """Per mode, over the questions of ``document_format`` (all: None), the figure questions only
        when ``figures``."""
        formats = {d.name: d.document_format for d in self.documents}
        questions = [
            q
            for q in self.questions
            if (document_format is None or formats[q.document] is document_format) and (q.figure or not figures)
        ]
        return {mode: score(questions, by_question) for mode, by_question in self.results.items()}


def evaluate_in_process(
    name: str,
    documents: Sequence[FormatDocument],
    questions: Sequence[EvidenceQuestion],
    endpoint: str,
    embedder: Embedder,
    *,
    figure_ocr: bool = True,
) -> SplitRun:
    """Read, chunk, embed and index the split's documents here; search each question in each mode
    (``figure_ocr``: figures' images read by Tesseract, as the local stack does; else captions only)."""
    with in_process_index(
        endpoint,
        embedder,
        name_prefix=f"rag-eval-formats-{name}",
        chunker=functools.partial(structured_chunks, images=figure_reader() if figure_ocr else None),
        pdfs=[document.path for document in documents],
    ) as index:
        results = {mode: {q.id: asked_of(index, q.question, mode) for q in questions} for mode in MODES}
        return SplitRun(name, "ours, in process", list(documents), list(questions), index.chunk_count, results)


def evaluate_through_stack(
    name: str, documents: Sequence[FormatDocument], questions: Sequence[EvidenceQuestion], timeout: float
) -> SplitRun:
    """Upload the split's documents through a local stack's API (an index of its own), wait for
    READY, and search each question in each mode with ``POST /search``."""
    from eval.stack import eval_stack, upload_all

    with eval_stack("formats") as (client, process):
        uploads = {
            document.path: declared_type(document.name, document.path.read_bytes()[:SNIFF_BYTES])
            for document in documents
        }
        states = upload_all(client, process, uploads, timeout)
        chunk_count = sum(int(state["chunk_count"]) for state in states.values())

        def search(query: str, mode: SearchMode) -> list[TextPassage]:
            response = client.search(query, k=RESULTS_PER_QUESTION, mode=mode.value, rerank=False)
            if response.status_code != 200:
                raise RuntimeError(f"POST /search answered {response.status_code}: {response.text[:500]}")
            return [TextPassage(p["filename"] or "", p["text"]) for p in response.json()["passages"]]

        results = {mode: {q.id: search(q.question, mode) for q in questions} for mode in MODES}
        return SplitRun(name, "ours, through the local stack", list(documents), list(questions), chunk_count, results)


def _row(*cells: object) -> str:
    widths = (12, 5, 9, 8, 8, 8, 8)
    left = (0, 3)  # format and mode
    aligned = (
        f"{c!s:<{w}}" if i in left else f"{c!s:>{w}}" for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )
    return "  ".join(aligned)


def print_split(run: SplitRun) -> None:
    formats = [f for f in DocumentFormat if any(d.document_format is f for d in run.documents)]
    print(
        f"\nformats, {run.name} split ({run.system}; {len(run.documents)} documents, "
        f"{len(run.questions)} questions, {run.chunk_count} chunks)"
    )
    print(_row("format", "docs", "questions", "mode", "recall@1", "recall@5", "MRR@10"))
    figure_formats = [f for f in formats if any(q.figure for q in run.questions if _format_of(run, q) is f)]
    groups = [(f, False) for f in [*formats, None]] + [(f, True) for f in [*figure_formats, None] if figure_formats]
    for document_format, figures in groups:
        label = (document_format.value if document_format else "all") + (" figures" if figures else "")
        asked = {q.document for q in run.questions if q.figure or not figures}
        documents = [
            d
            for d in run.documents
            if (document_format is None or d.document_format is document_format) and d.name in asked
        ]
        by_mode = run.scores(document_format, figures=figures)
        for line, (mode, scores) in enumerate(by_mode.items()):
            first = (label, len(documents), scores.questions) if line == 0 else ("", "", "")
            print(
                _row(
                    *first,
                    mode.value,
                    f"{scores.recall_at_1:.3f}",
                    f"{scores.recall_at_5:.3f}",
                    f"{scores.mrr_at_10:.3f}",
                )
            )
    print(NAIVE_NOTE)


def _format_of(run: SplitRun, question: EvidenceQuestion) -> DocumentFormat:
    return next(d.document_format for d in run.documents if d.name == question.document)


def print_misses(run: SplitRun, mode: SearchMode = SearchMode.HYBRID, rank: int = 5) -> None:
    """The questions not answered within ``rank`` in ``mode``: every mode's rank, the top passage's start."""
    for question in run.questions:
        passages = run.results[mode][question.id]
        found = answer_rank(question, passages)
        if found is None or found > rank:
            ranks = " / ".join(
                f"{other.value} {answer_rank(question, run.results[other][question.id]) or '-'}"
                for other in run.results
            )
            top = f"{passages[0].document}: {normalise(passages[0].text)[:100]}" if passages else "(nothing)"
            print(f"  miss ({mode.value}, rank {found}; {ranks}): {question.id} {question.question}\n    top: {top}")


def split_documents(split: str, documents: Sequence[FormatDocument]) -> list[FormatDocument]:
    return [document for document in documents if document.split == split]


def run(
    *,
    splits: Sequence[str],
    in_process: bool,
    endpoint: str,
    embedder: Embedder | None,
    timeout: float,
    show_misses: bool = False,
    figure_ocr: bool = True,
) -> list[SplitRun]:
    """Evaluate each split of the formats corpus; print a table per split (per format and mode)."""
    documents = load_documents()
    questions = load_evidence_questions()
    runs: list[SplitRun] = []
    for split in splits:
        chosen = split_documents(split, documents)
        names = {document.name for document in chosen}
        asked = [question for question in questions if question.document in names]
        started = time.monotonic()
        print(f"formats {split} split: {len(chosen)} documents, {len(asked)} questions", flush=True)
        if in_process:
            if embedder is None:
                raise ValueError("the in-process evaluation needs an embedder")
            split_run = evaluate_in_process(split, chosen, asked, endpoint, embedder, figure_ocr=figure_ocr)
        else:
            split_run = evaluate_through_stack(split, chosen, asked, timeout)
        print(f"formats {split}: done after {time.monotonic() - started:.0f}s", flush=True)
        runs.append(split_run)
    for split_run in runs:
        print_split(split_run)
        if show_misses:
            print_misses(split_run)
    if in_process and embedder is not None:
        figure_questions = load_figure_questions()
        for split in splits:
            asked_figures = [question for question in figure_questions if question.split == split]
            if asked_figures:
                figure_scores, parses = evaluate_figures(split, asked_figures, endpoint, embedder)
                print_figures(split, asked_figures, figure_scores, parses)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    from rag_ingest.embeddings.factory import create_embedder
    from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION

    from eval.retrieval import EMBEDDINGS_CACHE, MemoEmbedder

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-process", action="store_true", help="skip the local stack (read, chunk, search here)")
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds to wait for the documents to be READY")
    parser.add_argument("--misses", action="store_true", help="list the questions hybrid misses within the top 5")
    parser.add_argument(
        "--no-figure-ocr", action="store_true", help="in process: figures are captions and alt text only (an ablation)"
    )
    args = parser.parse_args(argv)
    endpoint = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
    embedder = MemoEmbedder(create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION), EMBEDDINGS_CACHE)
    splits = [name for name in SPLITS if args.split in (name, "all")]
    run(
        splits=splits,
        in_process=args.in_process,
        endpoint=endpoint,
        embedder=embedder,
        timeout=args.timeout,
        show_misses=args.misses,
        figure_ocr=not args.no_figure_ocr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
