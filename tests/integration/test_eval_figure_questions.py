"""The formats evaluation's figure questions (eval/formats/figures.json) are figure questions: each
one's evidence is held whole by a passage of its document as the product reads it with Tesseract;
for a PDF, by a figure's passage (a caption stays in the page's text too); for an image, by a page's."""

from __future__ import annotations

from functools import cache

import pytest
from rag_ingest.core.parsed import Chunk, DocumentFormat

from eval.formats_eval import FigureQuestion, detected_format, figure_chunks, load_figure_questions, normalise
from eval.retrieval import SPLITS

pytestmark = pytest.mark.integration
QUESTIONS = load_figure_questions()


@cache
def chunks_of(document: str) -> tuple[Chunk, ...]:
    return tuple(figure_chunks(QUESTIONS[[q.document for q in QUESTIONS].index(document)].path))


def test_both_splits_ask_about_pdf_figures_and_image_documents() -> None:
    assert len({question.id for question in QUESTIONS}) == len(QUESTIONS)
    for split in SPLITS:
        asked = [question for question in QUESTIONS if question.split == split]
        kinds = {detected_format(question.path.read_bytes()) for question in asked}
        assert DocumentFormat.PDF in kinds and kinds - {DocumentFormat.PDF}, split
        assert {question.answered_by for question in asked} >= {"label", "page"}, split
    documents = {question.document: question.split for question in QUESTIONS}
    assert all(question.split == documents[question.document] for question in QUESTIONS)


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda question: question.id)
def test_the_evidence_is_where_the_question_says(question: FigureQuestion) -> None:
    evidence = normalise(question.evidence)
    holding = [chunk for chunk in chunks_of(question.document) if evidence in normalise(chunk.text)]
    assert holding, question.id
    if question.answered_by == "page":
        assert question.path.suffix in (".png", ".jpg", ".tiff")
    else:
        assert any(chunk.figure_sources is not None for chunk in holding), question.id
