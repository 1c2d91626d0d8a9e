"""Figures in DOCX, PPTX, HTML and Markdown: each reader places a FIGURE block where the picture
stands, with its caption and alt text; decoration is skipped and counted; the images handed to the
image reader are PNG or JPEG within the caps; a chart is its title, alt text and data. The text
read inside real images by Tesseract: tests/integration/test_figures_ocr.py."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from rag_ingest.core.parsed import BlockKind, DocumentFormat, PageText
from rag_ingest.documents.schemas import DocumentContent
from rag_ingest.parsing.blocks import FormatLimits, StructuredDocument
from rag_ingest.parsing.figures import ImageReading
from rag_ingest.parsing.formats import read_structured
from rag_ingest.parsing.office.charts import read_chart

from tests.support.figure_images import docx_with_picture, image_with_text

pytestmark = pytest.mark.unit
LIMITS = FormatLimits(max_pages=50)


class RecordingReader:
    """An image reader that answers a fixed text and records what it was handed (the port's
    contract: which images reach an engine, and with what context)."""

    def __init__(self, answer: str = "LABEL") -> None:
        self.answer = answer
        self.images: list[bytes] = []
        self.contexts: list[str] = []

    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        self.images.append(image)
        self.contexts.append(context)
        return ImageReading(ocr_text=self.answer)


def blocks(page: PageText, kind: BlockKind) -> list[str]:
    return [page.text[block.start : block.end] for block in page.blocks if block.kind is kind]


def kinds_and_texts(document: StructuredDocument) -> list[tuple[BlockKind, str]]:
    return [(block.kind, page.text[block.start : block.end]) for page in document.pages for block in page.blocks]


# -- Word ----------------------------------------------------------------------------------------
def test_a_word_picture_is_a_figure_after_its_paragraph_with_caption_and_alt_text() -> None:
    data = docx_with_picture(image_with_text("PUMP 7B"), caption="Figure 1: The pump room", alt="Floor plan")
    reader = RecordingReader("PUMP 7B")
    document = read_structured(data, DocumentFormat.DOCX, LIMITS, reader)
    assert kinds_and_texts(document) == [
        (BlockKind.HEADING, "Pump station"),
        (BlockKind.PARAGRAPH, "The pump room is drawn below."),
        (BlockKind.FIGURE, "Figure 1: The pump room\nAlt text: Floor plan\nText in the image: PUMP 7B"),
        (BlockKind.PARAGRAPH, "Valves are checked weekly."),  # the caption is read once, in its figure
    ]
    (figure,) = [block.figure for block in document.pages[0].blocks if block.figure is not None]
    assert figure.width_px == 480 and figure.height_px == 133  # 5 inches wide at 96 dpi, as Word shows it
    assert figure.image_sha256 is not None and len(reader.images) == 1
    assert reader.images[0].startswith(b"\x89PNG") and reader.contexts == ["Figure 1: The pump room"]
    assert (document.figures, document.figures_ocr, document.figures_not_ocr) == (1, 1, 0)


def test_a_caption_above_the_picture_is_taken_and_a_table_caption_is_not() -> None:
    above = docx_with_picture(image_with_text("A"), caption="Figure 2. Inlet valves", caption_first=True)
    (page,) = read_structured(above, DocumentFormat.DOCX, LIMITS).pages
    assert blocks(page, BlockKind.FIGURE) == ["Figure 2. Inlet valves"]
    assert "Figure 2. Inlet valves" not in blocks(page, BlockKind.PARAGRAPH)
    table_caption = docx_with_picture(image_with_text("A"), caption="Table 3: Flow rates", alt="Inlet")
    (page,) = read_structured(table_caption, DocumentFormat.DOCX, LIMITS).pages
    assert blocks(page, BlockKind.FIGURE) == ["Alt text: Inlet"]
    assert "Table 3: Flow rates" in blocks(page, BlockKind.PARAGRAPH)


def test_a_silent_picture_without_an_engine_adds_nothing_and_a_tiny_one_is_counted() -> None:
    icon = image_with_text("", size=(20, 20))
    document = read_structured(docx_with_picture(image_with_text("X"), more=[icon]), DocumentFormat.DOCX, LIMITS)
    assert not blocks(document.pages[0], BlockKind.FIGURE)  # CaptionsOnly: no caption, alt text or OCR
    assert (document.figures, document.figures_skipped_tiny, document.figures_ocr) == (0, 1, 1)


def test_the_same_picture_three_times_is_decoration_and_gif_is_not_handed_to_ocr() -> None:
    logo = image_with_text("ACME", size=(400, 120))
    gif = image_with_text("GIF TEXT", image_format="GIF")
    data = docx_with_picture(image_with_text("SCHEMA"), alt="Schema", more=[logo, logo, logo, gif])
    reader = RecordingReader()
    document = read_structured(data, DocumentFormat.DOCX, LIMITS, reader)
    assert document.figures_skipped_repeated == 3
    assert document.figures_not_ocr == 1  # the GIF: caption and alt text only
    assert all(image.startswith(b"\x89PNG") for image in reader.images) and len(reader.images) == 1


def test_the_ocr_cap_and_the_byte_bound_leave_images_to_their_alt_text() -> None:
    images = [image_with_text(f"PART {n}") for n in range(3)]
    data = docx_with_picture(images[0], alt="First", more=images[1:])
    reader = RecordingReader()
    capped = read_structured(data, DocumentFormat.DOCX, FormatLimits(max_pages=5, max_figures_ocr=2), reader)
    assert (capped.figures_ocr, capped.figures_not_ocr, len(reader.images)) == (2, 1, 2)
    tight = FormatLimits(max_pages=5, max_figure_image_bytes=min(map(len, images)) - 1)
    bounded = read_structured(data, DocumentFormat.DOCX, tight, RecordingReader())
    assert bounded.figures_ocr == 0 and bounded.figures_not_ocr == 3
    assert blocks(bounded.pages[0], BlockKind.FIGURE) == ["Alt text: First"]


def test_a_picture_in_a_word_table_cell_follows_the_table() -> None:
    import docx
    from docx.shared import Inches

    document = docx.Document()
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Gauge"
    table.cell(0, 1).paragraphs[0].add_run().add_picture(io.BytesIO(image_with_text("PSI")), width=Inches(2))
    document.element.body.xpath(".//wp:docPr")[-1].set("descr", "Pressure gauge dial")
    document.add_paragraph("After the table.")
    buffer = io.BytesIO()
    document.save(buffer)
    kinds = kinds_and_texts(read_structured(buffer.getvalue(), DocumentFormat.DOCX, LIMITS))
    assert kinds == [
        (BlockKind.TABLE, "Gauge |"),
        (BlockKind.FIGURE, "Alt text: Pressure gauge dial"),
        (BlockKind.PARAGRAPH, "After the table."),
    ]


def _docx_with_chart(chart_xml: bytes, alt: str) -> bytes:
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_heading("Rainfall", 1)
    chart_type = "application/vnd.openxmlformats-officedocument.drawingml.chart+xml"
    part = Part(PackURI("/word/charts/chart1.xml"), chart_type, chart_xml, document.part.package)
    relation = document.part.relate_to(part, RELATIONSHIP_TYPE.CHART)
    drawing = (
        '<w:drawing xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
        ' xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"'
        ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
        ' xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart"'
        ' xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        f'<wp:inline><wp:extent cx="5486400" cy="3200400"/><wp:docPr id="7" name="Chart 1" descr="{alt}"/>'
        '<a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/chart">'
        f'<c:chart r:id="{relation}"/></a:graphicData></a:graphic></wp:inline></w:drawing>'
    )
    document.add_paragraph().add_run()._r.append(parse_xml(drawing))
    document.add_paragraph("Figure 5: Rain at the two gauges", style="Caption")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _chart_xml(title: str) -> bytes:
    from pptx.chart.data import CategoryChartData
    from pptx.chart.xmlwriter import ChartXmlWriter
    from pptx.enum.chart import XL_CHART_TYPE

    data = CategoryChartData()
    data.categories = ["March", "April"]
    data.add_series("North gauge", (81.5, 64.0))
    data.add_series("South gauge", (47.0, 52.25))
    xml = ChartXmlWriter(XL_CHART_TYPE.COLUMN_CLUSTERED, data).xml
    title_xml = f"<c:title><c:tx><c:rich><a:bodyPr/><a:p><a:r><a:t>{title}</a:t></a:r></a:p></c:rich></c:tx></c:title>"
    return xml.replace("<c:chart>", "<c:chart>" + title_xml, 1).encode()


def test_a_word_chart_is_its_caption_title_alt_text_and_data() -> None:
    document = read_structured(_docx_with_chart(_chart_xml("Rain (mm)"), "Two gauges"), DocumentFormat.DOCX, LIMITS)
    (page,) = document.pages
    assert blocks(page, BlockKind.PARAGRAPH) == [
        "Figure 5: Rain at the two gauges\nChart: Rain (mm)\nAlt text: Two gauges"
    ]
    assert blocks(page, BlockKind.TABLE) == ["| North gauge | South gauge\nMarch | 81.5 | 47\nApril | 64 | 52.25"]


def test_a_chart_part_without_series_is_its_title() -> None:
    chart = read_chart(_chart_xml("Empty").replace(b"<c:ser>", b"<c:unused>").replace(b"</c:ser>", b"</c:unused>"))
    assert chart.title == "Empty" and chart.rows == []


# -- PowerPoint ------------------------------------------------------------------------------------
def _deck() -> bytes:
    import pptx
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    logo = image_with_text("ACME", size=(300, 100))
    deck = pptx.Presentation()
    for number in range(1, 5):
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        slide.shapes.title.text = f"Quarter {number}"
        slide.shapes.add_picture(io.BytesIO(logo), Inches(8), Inches(0.1), width=Inches(1.5))
        if number == 2:
            picture = slide.shapes.add_picture(io.BytesIO(image_with_text("VALVE V-12")), Inches(1), Inches(2))
            picture._element.nvPicPr.cNvPr.set("descr", "Valve diagram")
            box = slide.shapes.add_textbox(Inches(1), Inches(4.2), Inches(6), Inches(0.5))
            box.text_frame.text = "Fig. 2: The valve, open"
            far = slide.shapes.add_textbox(Inches(1), Inches(6), Inches(6), Inches(0.5))
            far.text_frame.text = "Pressure is logged hourly."
        if number == 3:
            data = CategoryChartData()
            data.categories = ["Q1", "Q2"]
            data.add_series("Widgets", (12, 15))
            frame = slide.shapes.add_chart(
                XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(2), Inches(5), Inches(3), data
            )
            frame._element.nvGraphicFramePr.cNvPr.set("descr", "Widgets sold per quarter")
    untitled = deck.slides.add_slide(deck.slide_layouts[6])
    picture = untitled.shapes.add_picture(io.BytesIO(image_with_text("MAP")), Inches(1), Inches(1))
    picture._element.nvPicPr.cNvPr.set("descr", "Site map")
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def test_slide_pictures_are_figures_with_a_nearby_caption_and_a_logo_on_every_slide_is_skipped() -> None:
    reader = RecordingReader("VALVE V-12")
    document = read_structured(_deck(), DocumentFormat.PPTX, LIMITS, reader)
    second = document.pages[1]
    assert blocks(second, BlockKind.FIGURE) == [
        "Fig. 2: The valve, open\nAlt text: Valve diagram\nText in the image: VALVE V-12"
    ]
    assert blocks(second, BlockKind.PARAGRAPH) == ["Pressure is logged hourly."]
    assert document.figures_skipped_repeated == 4  # the logo, on slides 1 to 4
    assert blocks(document.pages[2], BlockKind.PARAGRAPH) == ["Alt text: Widgets sold per quarter"]
    assert blocks(document.pages[2], BlockKind.TABLE) == ["| Widgets\nQ1 | 12\nQ2 | 15"]
    last = document.pages[4]
    assert [block.anchor for block in last.blocks if block.kind is BlockKind.HEADING] == ["slide-5"]
    assert blocks(last, BlockKind.FIGURE) == ["Alt text: Site map\nText in the image: VALVE V-12"]
    assert document.figures == 2 and document.figures_ocr == 2


def test_a_deck_of_undescribed_pictures_has_no_text_without_ocr() -> None:
    from samples import documents

    document = read_structured(documents.image_only_pptx(image_with_text("")), DocumentFormat.PPTX, LIMITS)
    assert all(not page.blocks for page in document.pages)  # python-pptx's "image.png" alt text is no text


# -- HTML and Markdown ----------------------------------------------------------------------------------
def _data_uri(image: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(image).decode()


def test_html_figures_images_and_decoration() -> None:
    sign = image_with_text("EXIT 4")
    html = f"""<!DOCTYPE html><html><body><main><h1>Station</h1>
    <p>Trains stop here <img src="https://example.org/map.png" alt="Route map of line 2"> every hour.</p>
    <figure><img src="{_data_uri(sign)}" alt="A sign"><figcaption>Figure 3: The exit sign</figcaption></figure>
    <img src="spacer.gif" alt=""><img src="logo.png" alt="Logo" role="presentation">
    <img src="info.png" alt="Info" width="16" height="16"><img src="photo.jpg">
    <figure><pre>not an image</pre><figcaption>Listing 1</figcaption></figure>
    <p>Shown <span hidden><img src="h.png" alt="A hidden badge"></span> text.</p></main></body></html>"""
    reader = RecordingReader("EXIT 4")
    document = read_structured(html.encode(), DocumentFormat.HTML, LIMITS, reader)
    (page,) = document.pages
    assert blocks(page, BlockKind.FIGURE) == [
        "Alt text: Route map of line 2",
        "Figure 3: The exit sign\nAlt text: A sign\nText in the image: EXIT 4",
    ]
    assert blocks(page, BlockKind.PARAGRAPH)[0] == "Trains stop here every hour."
    assert "Listing 1" in blocks(page, BlockKind.PARAGRAPH)  # a figure without an image stays text
    assert reader.images == [sign]  # a URL is never fetched: only the data: image is read
    assert (document.figures_skipped_marked, document.figures_skipped_tiny) == (2, 1)


def test_an_icon_repeated_in_html_is_decoration() -> None:
    note = '<p>Note <img src="images/note.png" alt="[Note]"> text.</p>'
    html = f"<html><body>{note * 3}<p><img src='chart.png' alt='Throughput by month'></p></body></html>"
    document = read_structured(html.encode(), DocumentFormat.HTML, LIMITS)
    assert blocks(document.pages[0], BlockKind.FIGURE) == ["Alt text: Throughput by month"]
    assert document.figures_skipped_repeated == 3


def test_markdown_images_take_their_title_or_the_figure_line_after_them() -> None:
    wiring = image_with_text("PANEL B")
    markdown = (
        "# Wiring\n\nSee ![the badge](https://ci.example/badge.svg) above.\n\n"
        f'![Panel wiring]({_data_uri(wiring)} "The panel")\n\n'
        "![Flow of requests](flow.png)\n\nFigure 4: Requests through the gateway\n\nEnd.\n"
    )
    reader = RecordingReader("PANEL B")
    document = read_structured(markdown.encode(), DocumentFormat.MARKDOWN, LIMITS, reader)
    (page,) = document.pages
    assert blocks(page, BlockKind.FIGURE) == [
        "Alt text: the badge",
        "The panel\nAlt text: Panel wiring\nText in the image: PANEL B",
        "Figure 4: Requests through the gateway\nAlt text: Flow of requests",
    ]
    assert blocks(page, BlockKind.PARAGRAPH) == ["See above.", "End."]
    assert reader.contexts == ["The panel"]


# -- the rendered view ----------------------------------------------------------------------------------
def test_the_rendered_view_shows_a_figure_block_with_its_sources() -> None:
    from rag_ingest.core.record import DocumentRecord

    data = docx_with_picture(image_with_text("PUMP 7B"), caption="Figure 1: The pump room", alt="Floor plan")
    pages = read_structured(data, DocumentFormat.DOCX, LIMITS, RecordingReader("PUMP 7B")).pages
    record: Any = DocumentRecord.model_construct(document_id="d1", filename="pumps.docx")
    view = DocumentContent.of(record, DocumentFormat.DOCX, pages)
    figure = next(block for block in view.pages[0].blocks if block.kind == "figure")
    assert figure.text.splitlines() == ["Figure 1: The pump room", "Alt text: Floor plan", "Text in the image: PUMP 7B"]
    assert figure.figure_sources == ["caption", "alt_text", "ocr"]
    assert figure.anchor == "pump-station-p2"  # the section's second block, as a passage's paragraph_index says
    assert all(block.figure_sources is None for block in view.pages[0].blocks if block.kind != "figure")


def test_a_docbook_figure_div_is_one_figure_titled_by_its_caption() -> None:
    html = (
        "<html><body><h1>Releases</h1><div class='figure'><div class='mediaobject'>"
        "<img src='images/release-cycle.png' alt='A package path'></div>"
        "<p class='title'><strong>Figure 1.3. A package's path through the versions</strong></p></div>"
        "<div class='figure'><img src='a.png' alt='Long'><p>" + "A section that holds a picture. " * 20 + "</p></div>"
        "</body></html>"
    )
    (page,) = read_structured(html.encode(), DocumentFormat.HTML, LIMITS).pages
    assert blocks(page, BlockKind.FIGURE) == [
        "Figure 1.3. A package's path through the versions\nAlt text: A package path",
        "Alt text: Long",  # too much text for a caption: a container, its picture a figure of its own
    ]
    assert not any("Figure 1.3" in text for text in blocks(page, BlockKind.PARAGRAPH))
