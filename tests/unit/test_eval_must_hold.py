"""Every evaluation question's ``must_hold`` phrase is on its answer page, as the pipeline reads it:
the page text ``parse_pdf`` extracts, cleaned by the shipped rules and whitespace-normalised (what
small-to-big's answer-holding share compares passages with: docs/retrieval.md, "Small-to-big")."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import pytest
from rag_ingest.core.tokens import count_tokens
from rag_ingest.parsing.pdf.cleanup import SHIPPED_CLEANUP_RULES, clean_page_texts, join_continued_tables
from rag_ingest.parsing.pdf.extract import parse_pdf

from eval.retrieval import CORPUS_DIR, MAX_BYTES, MAX_PAGES, Passage, Question, holds_answer, load_questions, normalise

pytestmark = pytest.mark.unit


@cache
def page_texts(document: str) -> Mapping[int, str]:
    parsed = parse_pdf((CORPUS_DIR / document).read_bytes(), max_bytes=MAX_BYTES, max_pages=MAX_PAGES, clean=False)
    pages = join_continued_tables(clean_page_texts(parsed.pages, SHIPPED_CLEANUP_RULES))
    return {page.page_number: normalise(page.text) for page in pages}


@pytest.mark.slow  # parses the 22 PDFs of the corpus
@pytest.mark.parametrize("question", load_questions(), ids=lambda question: question.id)
def test_the_phrase_is_a_few_words_of_the_answer_page(question: Question) -> None:
    phrase = normalise(question.must_hold)
    assert phrase and count_tokens(phrase) <= 40, question.must_hold
    assert phrase in page_texts(question.document)[question.page], (question.document, question.page)


def test_holding_the_answer_needs_the_phrase_in_a_passage_of_the_questions_document() -> None:
    question = Question("q", "a.pdf", 2, "?", must_hold="spring  tides")
    assert holds_answer(question, [Passage("b.pdf", 2, 2, "spring tides"), Passage("a.pdf", 1, 3, "the spring\ntides")])
    assert not holds_answer(question, [Passage("b.pdf", 2, 2, "spring tides"), Passage("a.pdf", 2, 2, "spring")])
    with pytest.raises(ValueError, match="no must_hold"):
        holds_answer(Question("q", "a.pdf", 2, "?"), [])
