"""The scanned variant of the eval corpus read back by the offline OCR engine (Tesseract, as the
local stack's Parse runs it): a scanned page yields the words of the page it was made from, and the
pages around it keep their text layer. Needs ``make ocr-tools``."""

from __future__ import annotations

import re

import pytest
from rag_ingest.core.parsed import TextSource
from rag_ingest.parsing.ocr.engine import PageOcr
from rag_ingest.parsing.ocr.local import local_engine
from rag_ingest.parsing.pdf.extract import parse_pdf

from eval.retrieval import CORPUS_DIR
from eval.scans.variant import scanned_variant

pytestmark = pytest.mark.integration
SOURCE = CORPUS_DIR / "x11-ctext.pdf"
LIMITS = {"max_bytes": 50 * 1024 * 1024, "max_pages": 500}
#: Share of the text layer's words an OCR'd desk scan of the same page must give back.
MIN_WORD_RECALL = 0.95


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]{4,}", text.casefold())


def test_a_scanned_page_reads_back_as_the_page_it_was_made_from() -> None:
    original = parse_pdf(SOURCE.read_bytes(), **LIMITS)
    variant = parse_pdf(scanned_variant(SOURCE.read_bytes(), [4], seed="test"), **LIMITS, ocr=PageOcr(local_engine()))

    assert [page.page_number for page in variant.pages if page.source is TextSource.OCR] == [4]
    assert variant.failed_pages == []
    truth, read = _words(original.pages[3].text), set(_words(variant.pages[3].text))
    assert len(truth) > 200
    recall = sum(word in read for word in truth) / len(truth)
    assert recall >= MIN_WORD_RECALL, recall
    # Another page of the document, rasterised instead, would share few of its words.
    assert sum(word in read for word in _words(original.pages[5].text)) / len(_words(original.pages[5].text)) < 0.8
    for number in (3, 5):
        assert variant.pages[number - 1].text == original.pages[number - 1].text
