"""Tesseract reading figures and image documents for real: the label inside a PDF chart, the text of
PNG, JPEG and two-page TIFF documents with its words' rectangles where the text was drawn. Needs
``make ocr-tools`` (tesseract, DejaVu fonts)."""

from __future__ import annotations

import io

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont
from rag_ingest.core.parsed import BlockKind, DocumentFormat
from rag_ingest.parsing.image_document import read_image_document
from rag_ingest.parsing.image_reading import OcrImageReader
from rag_ingest.parsing.ocr.engine import PageOcr
from rag_ingest.parsing.ocr.local import local_engine
from rag_ingest.parsing.pdf.extract import join_page_ranges, parse_pdf
from rag_ingest.parsing.pdf.figures import PdfFigures
from rag_ingest.parsing.pdf.layout import unpack_layout

pytestmark = pytest.mark.integration
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def drawn(lines: list[str], size: tuple[int, int] = (1200, 500), at: tuple[int, int] = (60, 60)) -> Image.Image:
    picture = Image.new("L", size, 255)
    draw = ImageDraw.Draw(picture)
    font = ImageFont.truetype(FONT, 40)
    for number, line in enumerate(lines):
        draw.text((at[0], at[1] + 70 * number), line, fill=0, font=font)
    return picture


def encoded(pictures: list[Image.Image], kind: str) -> bytes:
    buffer = io.BytesIO()
    first, *rest = pictures
    extra = {"save_all": True, "append_images": rest, "compression": "tiff_deflate"} if kind == "TIFF" else {}
    first.save(buffer, format=kind, dpi=(200, 200), **extra)
    return buffer.getvalue()


def test_the_label_inside_a_pdf_chart_is_read_into_its_figure_passage() -> None:
    chart = drawn(["RESERVOIR INFLOW", "peak 418 cubic metres"])
    pdf = FPDF(format="A4")
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "The reservoir is filled by three streams in spring.")
    buffer = io.BytesIO()
    chart.save(buffer, format="PNG")
    pdf.image(buffer, x=30, y=50, w=150)
    pdf.set_xy(30, 120)
    pdf.cell(150, 6, "Figure 4: Inflow over the year")

    document = parse_pdf(
        bytes(pdf.output()), max_bytes=10**8, max_pages=10, figures=PdfFigures(OcrImageReader(local_engine()))
    )

    [figure] = [block.figure for page in document.pages for block in page.blocks if block.kind is BlockKind.FIGURE]
    assert figure is not None and figure.caption == "Figure 4: Inflow over the year"
    assert "RESERVOIR INFLOW" in figure.ocr_text
    assert "418" in figure.ocr_text


@pytest.mark.parametrize(("kind", "document_format"), [("PNG", DocumentFormat.PNG), ("JPEG", DocumentFormat.JPEG)])
def test_an_image_document_is_read_with_its_words_where_they_stand(kind: str, document_format: DocumentFormat) -> None:
    data = encoded([drawn(["Harbour dues are paid", "before the ship leaves"], at=(60, 300))], kind)

    parsed = read_image_document(data, document_format, max_pages=10, ocr=PageOcr(local_engine()))
    document = join_page_ranges([parsed], clean=False)

    [page] = document.pages
    assert "Harbour dues are paid" in page.text
    assert page.layout is not None
    harbour = next(word for word in unpack_layout(page.layout) if word.text == "Harbour")
    assert harbour.x0 == pytest.approx(60 / 1200, abs=0.02)
    assert harbour.y0 == pytest.approx(300 / 500, abs=0.04)


def test_a_two_page_tiff_is_two_pages_read_one_by_one() -> None:
    pages = [drawn(["First page about pilots"]), drawn(["Second page about tugs"], size=(900, 600))]

    parsed = read_image_document(encoded(pages, "TIFF"), DocumentFormat.TIFF, max_pages=10, ocr=PageOcr(local_engine()))
    document = join_page_ranges([parsed], clean=False)

    assert [page.page_number for page in document.pages] == [1, 2]
    assert "pilots" in document.pages[0].text and "tugs" not in document.pages[0].text
    assert "tugs" in document.pages[1].text and "pilots" not in document.pages[1].text
