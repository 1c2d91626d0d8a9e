"""The offline OCR engine (Tesseract, the local stack's OCR_ENGINE=local) on the generated scans
(eval/scans/generate.py): character error rate per page style against the typeset text, and
parse_pdf on an image-only and a mixed PDF. Needs ``make ocr-tools`` (tesseract, DejaVu fonts)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import PageText, TextSource
from rag_ingest.ingest.passage_boxes import align_page
from rag_ingest.parsing.ocr.engine import OCR_DPI, PageOcr, render_page_png
from rag_ingest.parsing.ocr.local import TesseractEngine, local_engine
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.parsing.pdf.layout import unpack_layout

from eval.scans.cer import character_error_rate, normalise
from eval.scans.generate import STYLES, PageStyle, generate_mixed, generate_style

pytestmark = pytest.mark.integration
LIMITS = {"max_bytes": 50 * 1024 * 1024, "max_pages": 100}
#: The goals of issue 12: clean 150-300 dpi scans, and noisy ones (desk scanner, fax).
CLEAN_GOAL = 0.02
NOISY_GOAL = 0.05


@pytest.fixture(scope="module")
def engine() -> TesseractEngine:
    return local_engine()


@pytest.mark.parametrize("style", STYLES, ids=[style.name for style in STYLES])
def test_cer_per_page_style_meets_its_goal(engine: TesseractEngine, style: PageStyle) -> None:
    data, truths = generate_style(style)
    # Two pages per style keep the suite's time down; `python -m eval.scans` measures all of them.
    rates = [
        character_error_rate(engine.recognize(render_page_png(data, index, OCR_DPI)).text, truth)
        for index, truth in enumerate(truths[:2])
    ]
    assert max(rates) <= (NOISY_GOAL if style.noisy else CLEAN_GOAL), rates


def test_a_broken_engine_fails_the_cer_check() -> None:
    """The measure itself discriminates: text missing a tenth of its characters is far over the goal."""
    _data, truths = generate_style(STYLES[0])
    damaged = "".join(char for index, char in enumerate(normalise(truths[0])) if index % 10)
    assert character_error_rate(damaged, truths[0]) > 5 * CLEAN_GOAL
    assert character_error_rate("", truths[0]) == 1.0


def test_an_image_only_pdf_is_read_by_ocr_with_its_confidence(engine: TesseractEngine) -> None:
    data, truths = generate_style(STYLES[1])
    parsed = parse_pdf(data, **LIMITS, ocr=PageOcr(engine))
    assert parsed.ocr_pages == parsed.page_count == len(truths)
    for page, truth in zip(parsed.pages, truths, strict=True):
        assert page.source is TextSource.OCR
        assert page.ocr_confidence is not None and page.ocr_confidence > 0.8
        assert character_error_rate(page.text, truth) <= CLEAN_GOAL
        assert_words_placed_as_read(page)


def test_a_mixed_pdf_ocrs_its_scanned_pages_only(engine: TesseractEngine) -> None:
    data, truths, scanned = generate_mixed()
    parsed = parse_pdf(data, **LIMITS, ocr=PageOcr(engine))
    assert [page.source is TextSource.OCR for page in parsed.pages] == scanned
    assert parsed.failed_pages == []
    for page, truth in zip(parsed.pages, truths, strict=True):
        assert character_error_rate(page.text, truth) <= CLEAN_GOAL


def test_the_sample_drawing_without_text_stays_no_text_layer(engine: TesseractEngine) -> None:
    """samples/invalid/image-only.pdf (a vector drawing, a raster drawing): OCR finds no text on it."""
    data = (Path(__file__).resolve().parents[2] / "samples" / "invalid" / "image-only.pdf").read_bytes()
    with pytest.raises(PermanentError) as caught:
        parse_pdf(data, **LIMITS, ocr=PageOcr(engine))
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER


def test_a_scan_stored_sideways_with_a_page_rotation_is_read_upright(engine: TesseractEngine) -> None:
    """A scanner that stores the page sideways and sets /Rotate 90: pdfium renders it upright for OCR."""
    import io

    from PIL import Image
    from pypdf import PdfReader, PdfWriter

    style = next(style for style in STYLES if style.name == "clean-sans-200")
    data, truths = generate_style(style)
    upright = Image.open(io.BytesIO(render_page_png(data, 0, style.dpi)))
    sideways = io.BytesIO()
    upright.rotate(90, expand=True).save(sideways, format="PDF", resolution=style.dpi)  # stored 90° anticlockwise
    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(sideways.getvalue())).pages:
        writer.add_page(page.rotate(90))  # shown 90° clockwise: upright
    rotated = io.BytesIO()
    writer.write(rotated)
    parsed = parse_pdf(rotated.getvalue(), **LIMITS, ocr=PageOcr(engine))
    assert parsed.pages[0].source is TextSource.OCR
    assert character_error_rate(parsed.pages[0].text, truths[0]) <= CLEAN_GOAL
    # The words' rectangles are on the page as shown (upright), where a viewer draws them.
    assert_words_placed_as_read(parsed.pages[0])


def assert_words_placed_as_read(page: PageText) -> None:
    """An OCR'd page's layout: its words match the page's text, and read as a page reads: along a
    line left to right at one height, lines from the top down."""
    assert page.layout is not None
    words = unpack_layout(page.layout)
    assert len(align_page(page.text, words)) >= 0.95 * len(re.findall(r"\w+", page.text))
    assert all(0 <= word.x0 < word.x1 <= 1 and 0 <= word.y0 < word.y1 <= 1 for word in words)
    lines = [line for line in page.text.splitlines() if line.split()]
    assert len(lines) >= 5 and sum(len(line.split()) for line in lines) == len(words)
    position = 0
    previous_line_top = -1.0
    for line in lines:
        count = len(line.split())
        placed = words[position : position + count]
        position += count
        tops = [word.y0 for word in placed]
        assert max(tops) - min(tops) < 0.02, (line, placed)  # one line, one height
        assert [word.x0 for word in placed] == sorted(word.x0 for word in placed), line
        assert min(tops) > previous_line_top, line
        previous_line_top = min(tops)
