"""The scanned variant of the eval corpus (eval/scans/variant.py): which pages are scanned, that the
scanned pages lose their text layer (parse_pdf sends exactly them to OCR) while the others keep it
unchanged, and that a built variant is reused until its inputs change."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pypdf import PdfReader
from rag_ingest.parsing.ocr.engine import MIN_TEXT_LAYER_CHARS
from rag_ingest.parsing.pdf.extract import parse_pdf

from eval.retrieval import CORPUS_DIR, Question
from eval.scans.variant import build_scanned_corpus, pages_to_scan, scanned_page_counts, scanned_variant

pytestmark = pytest.mark.unit
SOURCE = CORPUS_DIR / "x11-ctext.pdf"
LIMITS = {"max_bytes": 50 * 1024 * 1024, "max_pages": 500}


def _alphanumerics(text: str) -> int:
    return sum(char.isalnum() for char in text)


def test_answer_pages_and_their_neighbours_are_scanned_within_the_document() -> None:
    assert pages_to_scan([3, 7], 10) == [2, 3, 4, 6, 7, 8]
    assert pages_to_scan([1, 2, 10], 10) == [1, 2, 3, 9, 10]  # no page 0 or 11; overlaps counted once
    assert pages_to_scan([4], 10, neighbours=0) == [4]
    assert pages_to_scan([], 10) == []


def test_scanned_pages_lose_their_text_layer_and_the_others_keep_it() -> None:
    original = SOURCE.read_bytes()
    variant = scanned_variant(original, [2], seed="test")
    before, after = PdfReader(io.BytesIO(original)), PdfReader(io.BytesIO(variant))

    assert len(after.pages) == len(before.pages)
    assert _alphanumerics(before.pages[1].extract_text()) > 100
    assert _alphanumerics(after.pages[1].extract_text()) < MIN_TEXT_LAYER_CHARS
    assert "/XObject" in after.pages[1]["/Resources"]  # an image is what the page draws now
    for index in (0, 2, len(before.pages) - 1):
        assert after.pages[index].extract_text() == before.pages[index].extract_text()
    # The page keeps its size (to the point: the image is stored at whole pixels) and the document its title.
    for box_before, box_after in zip(before.pages[1].mediabox, after.pages[1].mediabox, strict=True):
        assert abs(float(box_before) - float(box_after)) < 1
    assert after.metadata is not None and before.metadata is not None
    assert after.metadata.title == before.metadata.title


def test_parse_sends_exactly_the_scanned_pages_to_ocr() -> None:
    variant = scanned_variant(SOURCE.read_bytes(), [1, 3], seed="test")
    parsed = parse_pdf(variant, **LIMITS)  # OCR off: the pages that need it are failed pages
    assert parsed.failed_pages == [1, 3]
    assert set(parsed.failure_reasons) == {1, 3}
    assert all(page.text.strip() for page in parsed.pages if page.page_number not in (1, 3))


def test_the_same_seed_scans_the_same_image() -> None:
    def image_bytes(data: bytes) -> bytes:
        page = PdfReader(io.BytesIO(data)).pages[0]
        return b"".join(image.data for image in page.images)

    first = scanned_variant(SOURCE.read_bytes(), [1], seed="a")
    assert image_bytes(first) == image_bytes(scanned_variant(SOURCE.read_bytes(), [1], seed="a"))
    assert image_bytes(first) != image_bytes(scanned_variant(SOURCE.read_bytes(), [1], seed="b"))


def test_a_built_variant_is_reused_until_its_questions_change(tmp_path: Path) -> None:
    questions = [Question(id="q1", document=SOURCE.name, page=3, question="?")]
    variants = build_scanned_corpus([SOURCE], questions, tmp_path)
    target = variants[SOURCE]
    assert target == tmp_path / SOURCE.name
    assert scanned_page_counts(variants) == {SOURCE.name: 3}
    built = target.stat().st_mtime_ns

    build_scanned_corpus([SOURCE], questions, tmp_path)
    assert target.stat().st_mtime_ns == built

    moved = [Question(id="q1", document=SOURCE.name, page=1, question="?")]
    build_scanned_corpus([SOURCE], moved, tmp_path)
    assert scanned_page_counts(variants) == {SOURCE.name: 2}
    assert parse_pdf(target.read_bytes(), **LIMITS).failed_pages == [1, 2]
