"""Figures on PDF pages (rag_ingest.parsing.pdf.figures): the images pdfium finds, where they stand
on the displayed page, their captions, decoration skipped and counted, the reading cap, and the
FIGURE blocks the document gets; on PDFs generated here and on the evaluation corpus's real ones.
Tesseract reading a figure: tests/integration/test_figure_reading.py."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw
from rag_ingest.core.parsed import BlockKind, Figure, ParsedDocument
from rag_ingest.parsing.figures import ImageReading, figure_text, image_size
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.parsing.pdf.figures import PdfFigures

pytestmark = pytest.mark.unit
LIMITS = {"max_bytes": 50 * 1024 * 1024, "max_pages": 100}
CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"
BODY = "The gauge on the river records its level every hour, and the readings are published daily."


class RecordingReader:
    """Reads every image as the same label, and keeps what it was given."""

    def __init__(self, label: str = "GAUGE 7") -> None:
        self.label = label
        self.images: list[bytes] = []
        self.contexts: list[str] = []

    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        self.images.append(image)
        self.contexts.append(context)
        return ImageReading(ocr_text=self.label)


def png(width: int, height: int, shade: int = 120) -> io.BytesIO:
    image = Image.new("L", (width, height), 255)
    ImageDraw.Draw(image).rectangle((4, 4, width - 5, height - 5), outline=0, fill=shade)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    buffer.seek(0)
    return buffer


def figure_pdf(*, pages: int = 1, logo: bool = False, icon: bool = False, rotate: int = 0) -> bytes:
    """A text page with a 400x200 px chart 100 mm wide at (50 mm, 60 mm) and its caption below;
    ``logo``: the same small image in the corner of every page; ``icon``: a 20 px bullet on page 1."""
    pdf = FPDF(format="A4")
    pdf.set_font("helvetica", size=11)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(0, 6, BODY)
        if number == 1:
            pdf.image(png(400, 200), x=50, y=60, w=100)
            pdf.set_xy(50, 112)
            pdf.cell(100, 6, "Figure 1: River level at the gauge, 2024")
        if logo:
            pdf.image(png(120, 120, shade=30), x=180, y=10, w=15)
        if icon and number == 1:
            pdf.image(png(20, 20, shade=0), x=10, y=200, w=4)
    data = bytes(pdf.output())
    if rotate:  # /Rotate on every page: fpdf writes none, pypdf sets it
        from pypdf import PdfReader, PdfWriter

        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
        for page in writer.pages:
            page.rotate(rotate)
        buffer = io.BytesIO()
        writer.write(buffer)
        data = buffer.getvalue()
    return data


def figures_of(document: ParsedDocument) -> list[tuple[int, Figure, str]]:
    return [
        (page.page_number, block.figure, page.text[block.start : block.end])
        for page in document.pages
        for block in page.blocks
        if block.kind is BlockKind.FIGURE and block.figure is not None
    ]


def test_a_chart_becomes_a_figure_block_with_its_box_caption_and_reading() -> None:
    reader = RecordingReader()

    document = parse_pdf(figure_pdf(), **LIMITS, figures=PdfFigures(reader))

    [(page, figure, text)] = figures_of(document)
    assert page == 1
    assert figure.caption == "Figure 1: River level at the gauge, 2024"
    assert figure.ocr_text == "GAUGE 7"
    assert text == figure_text(figure) == "Figure 1: River level at the gauge, 2024\nText in the image: GAUGE 7"
    assert document.pages[0].text.endswith(text)  # after the page's own text
    assert figure.box is not None
    # 50..150 mm of 210 across, 60..110 mm of 297 down.
    assert (figure.box.x0, figure.box.x1) == pytest.approx((50 / 210, 150 / 210), abs=0.005)
    assert (figure.box.y0, figure.box.y1) == pytest.approx((60 / 297, 110 / 297), abs=0.005)
    assert (figure.width_px, figure.height_px) == (400, 200)
    # The reader got the figure's region of the page (2:1, as the chart) and its caption.
    size = image_size(reader.images[0])
    assert size is not None and size[0] / size[1] == pytest.approx(2.0, rel=0.05)
    assert reader.contexts == ["Figure 1: River level at the gauge, 2024"]
    assert document.figures.indexed == 1


def test_a_rotated_page_gives_the_box_on_the_page_as_displayed() -> None:
    document = parse_pdf(figure_pdf(rotate=90), **LIMITS, figures=PdfFigures(RecordingReader()))

    [(_, figure, _)] = figures_of(document)
    assert figure.box is not None
    # Turned a quarter clockwise: the chart's top edge (60 mm down) is now 60 mm from the right.
    assert (figure.box.x0, figure.box.x1) == pytest.approx((1 - 110 / 297, 1 - 60 / 297), abs=0.005)
    assert (figure.box.y0, figure.box.y1) == pytest.approx((50 / 210, 150 / 210), abs=0.005)


def test_a_repeated_logo_and_a_tiny_icon_are_skipped_and_counted() -> None:
    reader = RecordingReader()

    document = parse_pdf(figure_pdf(pages=3, logo=True, icon=True), **LIMITS, figures=PdfFigures(reader))

    assert [figure.caption for _, figure, _ in figures_of(document)] == ["Figure 1: River level at the gauge, 2024"]
    assert document.figures.skipped_repeated == 3  # the logo on each of the 3 pages
    assert document.figures.skipped_tiny == 1  # 20 px is a bullet
    assert len(reader.images) == 1  # decoration is never read


def test_figures_over_the_reading_cap_keep_their_caption_and_are_counted() -> None:
    reader = RecordingReader()

    document = parse_pdf(figure_pdf(), **LIMITS, figures=PdfFigures(reader, max_read=0))

    [(_, figure, text)] = figures_of(document)
    assert figure.ocr_text == ""
    assert text == "Figure 1: River level at the gauge, 2024"
    assert document.figures.over_read_cap == 1
    assert reader.images == []


def test_figures_are_not_looked_for_unless_asked() -> None:
    document = parse_pdf(figure_pdf(), **LIMITS)

    assert figures_of(document) == []
    assert document.figures.indexed == 0


def test_a_figure_with_nothing_to_say_has_no_passage_and_is_counted() -> None:
    pdf = FPDF(format="A4")
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, BODY)
    pdf.image(png(300, 300), x=50, y=60, w=80)

    document = parse_pdf(bytes(pdf.output()), **LIMITS, figures=PdfFigures(RecordingReader(label="")))

    assert figures_of(document) == []
    assert document.figures.without_text == 1


def test_the_corpus_figures_get_their_captions() -> None:
    """Real documents: MNRAS's author guide and the Why3 manual caption their figures below them."""
    reader = RecordingReader(label="")
    mnras = parse_pdf((CORPUS / "mnras-guide.pdf").read_bytes(), **LIMITS, figures=PdfFigures(reader))
    why3 = parse_pdf((CORPUS / "why3-manual.pdf").read_bytes(), **LIMITS, figures=PdfFigures(reader))

    assert [(page, text) for page, _, text in figures_of(mnras)] == [(4, "Figure 1. An example figure.")]
    captions = [text for _, _, text in figures_of(why3)]
    assert captions[0] == "Fig. 2.1: The GUI when started the very first time."
    assert len(captions) == 6 and all(caption.startswith("Fig. 2.") for caption in captions)


def test_counts_a_structured_reader_made_itself_reach_the_document() -> None:
    """A DOCX reader places its FIGURE blocks and counts its figures in the range; the join keeps them."""
    from rag_ingest.core.parsed import DocumentFormat, FigureCounts, PageText, ParsedRange
    from rag_ingest.parsing.pdf.extract import join_page_ranges

    counts = FigureCounts(indexed=2, skipped_tiny=1, skipped_repeated=3)
    page = PageText(page_number=1, text="Harbour dues are paid before the ship leaves.")
    parsed = ParsedRange(
        document_format=DocumentFormat.DOCX, page_count=1, first_page=1, last_page=1, pages=[page], figures=counts
    )

    assert join_page_ranges([parsed], clean=False).figures == counts
