"""The formats corpus of the evaluation (eval/formats): the manifest, the files and the questions
agree, read through the product's own readers (detect_format, read_structured, chunk_pages), and
the evidence rule scores what it says it scores. Questions whose evidence is text inside an image
are checked with Tesseract: tests/integration/test_eval_formats_figures.py."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache

import pytest
from rag_ingest.core.parsed import DocumentFormat

from eval.formats_eval import (
    FORMATS_DIR,
    FORMATS_MANIFEST,
    EvidenceQuestion,
    FormatDocument,
    TextPassage,
    answer_rank,
    detected_format,
    document_text,
    load_documents,
    load_evidence_questions,
    normalise,
    read_document,
    score,
    structured_chunks,
)
from eval.retrieval import SPLITS

pytestmark = pytest.mark.unit
DOCUMENTS = load_documents()
QUESTIONS = load_evidence_questions()
#: Answerable without OCR (captions, alt text, the text around): what this module checks.
PLAIN_QUESTIONS = [question for question in QUESTIONS if not question.needs_ocr]
EVALUATED_FORMATS = (DocumentFormat.DOCX, DocumentFormat.PPTX, DocumentFormat.HTML)
CORPUS_FILE_SUFFIXES = {".docx", ".pptx", ".xlsx", ".html", ".htm", ".md", ".txt", ".csv"}


@cache
def extracted_text(name: str) -> str:
    return document_text(read_document(FORMATS_DIR / name)[1])


@cache
def format_and_anchors(name: str) -> tuple[DocumentFormat, frozenset[str]]:
    document_format, document = read_document(FORMATS_DIR / name)
    return document_format, frozenset(block.anchor for page in document.pages for block in page.blocks if block.anchor)


@cache
def chunk_texts(name: str) -> tuple[str, ...]:
    return tuple(normalise(chunk.text) for chunk in structured_chunks(FORMATS_DIR / name))


def test_every_corpus_file_is_in_the_manifest_once_and_exists() -> None:
    names = [document.name for document in DOCUMENTS]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in FORMATS_DIR.iterdir() if p.suffix in CORPUS_FILE_SUFFIXES and p.name != "README.md"}
    assert on_disk == set(names)
    assert all(document.path.is_file() for document in DOCUMENTS)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda document: document.name)
def test_the_detected_format_is_the_manifests(document: FormatDocument) -> None:
    assert detected_format(document.path.read_bytes()) is document.document_format


def test_both_splits_have_every_evaluated_format() -> None:
    for split in SPLITS:
        formats = {document.document_format for document in DOCUMENTS if document.split == split}
        assert set(EVALUATED_FORMATS) <= formats, split


def test_every_manifest_entry_names_its_split_and_producer() -> None:
    for entry in json.loads(FORMATS_MANIFEST.read_text(encoding="utf-8")):
        assert entry["split"] in SPLITS
        assert entry["producer"].strip()


def test_questions_are_about_corpus_documents_with_unique_ids() -> None:
    names = {document.name for document in DOCUMENTS}
    assert {question.document for question in QUESTIONS} == names  # every document has questions
    assert len({question.id for question in QUESTIONS}) == len(QUESTIONS)
    per_document = Counter(question.document for question in QUESTIONS)
    figures_only = {q.document for q in QUESTIONS} - {q.document for q in QUESTIONS if not q.figure}
    # A document's questions span its sections; one asked only about its figures has as many as its figures.
    assert min(count for name, count in per_document.items() if name not in figures_only) >= 8
    assert min(per_document[name] for name in figures_only) >= 2


@pytest.mark.parametrize("question", PLAIN_QUESTIONS, ids=lambda question: question.id)
def test_evidence_occurs_exactly_once_in_its_document_and_whole_in_a_chunk(question: EvidenceQuestion) -> None:
    evidence = normalise(question.evidence)
    assert evidence == question.evidence.strip()  # stored whitespace-normalised
    assert extracted_text(question.document).count(evidence) == 1
    # A passage can hold it: the Chunk stage's chunks of the document contain it whole at least once.
    assert any(evidence in chunk for chunk in chunk_texts(question.document))


@pytest.mark.parametrize("question", PLAIN_QUESTIONS, ids=lambda question: question.id)
def test_the_locator_is_a_section_or_slide_of_the_document(question: EvidenceQuestion) -> None:
    document_format, anchors = format_and_anchors(question.document)
    if question.locator is None:  # before the first heading
        assert document_format is not DocumentFormat.PPTX
    else:
        assert question.locator in anchors
    if document_format is DocumentFormat.PPTX:
        assert question.locator is not None and question.locator.startswith("slide-")


def test_a_document_belongs_to_one_split_so_its_questions_do() -> None:
    split_of = {document.name: document.split for document in DOCUMENTS}
    for split in SPLITS:
        asked = {question.document for question in QUESTIONS if split_of[question.document] == split}
        others = {name for name, other in split_of.items() if other != split}
        assert not asked & others


def test_the_evidence_rule_needs_the_document_and_the_phrase() -> None:
    question = EvidenceQuestion("q", "a.docx", "?", "the tty group must have the GID 5", "s")
    right = TextPassage("a.docx", "There is one exception:\nthe  tty group must have\tthe GID 5. That is ...")
    elsewhere = TextPassage("b.docx", right.text)
    near_miss = TextPassage("a.docx", "the tty group must have the GID 6")
    assert answer_rank(question, [right]) == 1
    assert answer_rank(question, [elsewhere, near_miss, right]) == 3
    assert answer_rank(question, [elsewhere, near_miss]) is None
    scores = score([question], {"q": [near_miss, right]})
    assert (scores.recall_at_1, scores.recall_at_5, scores.mrr_at_10) == (0.0, 1.0, 0.5)
