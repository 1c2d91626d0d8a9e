"""The formats corpus's figure questions, read as the evaluation reads them (figures' images OCR'd by
Tesseract, ``make ocr-tools``): every evidence occurs exactly once in its document's text and whole
in one of its chunks, every locator is an anchor of it, and the documents' figures are what
eval/formats/README.md says."""

from __future__ import annotations

from functools import cache

import pytest
from rag_ingest.core.parsed import BlockKind
from rag_ingest.parsing.blocks import StructuredDocument

from eval.formats_eval import (
    FORMATS_DIR,
    EvidenceQuestion,
    document_text,
    figure_reader,
    load_evidence_questions,
    normalise,
    read_document,
    structured_chunks,
)

pytestmark = pytest.mark.integration
FIGURE_QUESTIONS = [question for question in load_evidence_questions() if question.figure]


@cache
def read_with_ocr(name: str) -> StructuredDocument:
    return read_document(FORMATS_DIR / name, figure_reader())[1]


@cache
def chunk_texts(name: str) -> tuple[str, ...]:
    return tuple(normalise(chunk.text) for chunk in structured_chunks(FORMATS_DIR / name, images=figure_reader()))


@pytest.mark.parametrize("question", FIGURE_QUESTIONS, ids=lambda question: question.id)
def test_figure_evidence_occurs_once_with_ocr_in_a_figure_and_a_chunk(question: EvidenceQuestion) -> None:
    document = read_with_ocr(question.document)
    evidence = normalise(question.evidence)
    assert document_text(document).count(evidence) == 1
    assert any(evidence in chunk for chunk in chunk_texts(question.document))
    holders = [
        block
        for page in document.pages
        for block in page.blocks
        if evidence in normalise(page.text[block.start : block.end])
    ]
    assert [block.kind for block in holders] == [BlockKind.FIGURE]
    anchors = {block.anchor for page in document.pages for block in page.blocks if block.anchor}
    assert question.locator in anchors


def test_ocr_questions_need_the_ocr() -> None:
    for question in FIGURE_QUESTIONS:
        plain = document_text(read_document(FORMATS_DIR / question.document)[1])
        assert (normalise(question.evidence) not in plain) is question.needs_ocr, question.id


@pytest.mark.parametrize(
    ("name", "figures", "read"),
    [
        ("debian-handbook-installation.docx", 21, 21),
        ("debian-handbook-release-lifecycle.docx", 5, 5),
        ("debian-handbook-desktops.pptx", 8, 9),
        ("debian-handbook-unix-services.pptx", 3, 4),
        ("debian-handbook-apt-frontends.html", 4, 0),
    ],
)
def test_the_figure_documents_figures(name: str, figures: int, read: int) -> None:
    document = read_with_ocr(name)
    assert (document.figures, document.figures_ocr) == (figures, read)
