"""The words inside figures, read by the real Tesseract (``make ocr-tools``): a Word picture (PNG),
a slide picture (JPEG), an HTML ``data:`` image, through ``read_structured`` and through the Parse
and Chunk stages with the local OCR engine; a picture with no words in it reads as nothing."""

from __future__ import annotations

import base64
import io

import pytest
from rag_ingest.core.parsed import BlockKind, DocumentFormat, Figure
from rag_ingest.parsing.blocks import FormatLimits, StructuredDocument
from rag_ingest.parsing.formats import read_structured
from rag_ingest.parsing.image_reading import OcrImageReader
from rag_ingest.parsing.ocr.local import local_engine

from tests.support.figure_images import docx_with_picture, image_with_text
from tests.unit.test_pipeline_stages_fast import build_world

pytestmark = pytest.mark.integration
LIMITS = FormatLimits(max_pages=20)


@pytest.fixture(scope="module")
def reader() -> OcrImageReader:
    return OcrImageReader(local_engine())


def figures(document: StructuredDocument) -> list[Figure]:
    return [block.figure for page in document.pages for block in page.blocks if block.figure is not None]


def test_the_label_in_a_word_picture_is_read(reader: OcrImageReader) -> None:
    data = docx_with_picture(image_with_text("PUMP ROOM 7B"), caption="Figure 1: The pump room")
    document = read_structured(data, DocumentFormat.DOCX, LIMITS, reader)
    (figure,) = figures(document)
    assert figure.ocr_text == "PUMP ROOM 7B" and figure.caption == "Figure 1: The pump room"
    assert document.figures_ocr == 1


def test_the_label_in_a_jpeg_on_a_slide_is_read(reader: OcrImageReader) -> None:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    photo = image_with_text("GATE 14", image_format="JPEG")
    slide.shapes.add_picture(io.BytesIO(photo), Inches(1), Inches(1))
    buffer = io.BytesIO()
    deck.save(buffer)
    document = read_structured(buffer.getvalue(), DocumentFormat.PPTX, LIMITS, reader)
    (figure,) = figures(document)
    assert figure.ocr_text == "GATE 14"
    (page,) = document.pages
    assert [block.anchor for block in page.blocks if block.kind is BlockKind.HEADING] == ["slide-1"]


def test_a_data_image_in_html_is_read_and_a_picture_without_words_is_not(reader: OcrImageReader) -> None:
    from PIL import Image, ImageDraw

    blank = Image.new("L", (400, 300), 255)
    ImageDraw.Draw(blank).ellipse((50, 50, 350, 250), outline=0, width=6)  # a drawing, no words
    drawing = io.BytesIO()
    blank.save(drawing, "PNG")
    sign = base64.b64encode(image_with_text("EXIT 4")).decode()
    circle = base64.b64encode(drawing.getvalue()).decode()
    html = (
        f'<html><body><h1>Signs</h1><img src="data:image/png;base64,{sign}">'
        f'<img src="data:image/png;base64,{circle}"></body></html>'
    )
    document = read_structured(html.encode(), DocumentFormat.HTML, LIMITS, reader)
    assert [figure.ocr_text for figure in figures(document)] == ["EXIT 4"]
    assert document.figures_ocr == 2 and document.figures == 1


def test_parse_and_chunk_carry_a_figure_read_by_the_stage_engine() -> None:
    engine = local_engine()
    world = build_world(ocr_engine=engine, image_reader=lambda share: OcrImageReader(engine))
    data = docx_with_picture(image_with_text("VALVE V-12"), alt="Valve diagram")
    job = world.through_chunk(world.upload(data, filename="valves.docx"))
    chunks = world.objects.get_json(job.bucket, job.chunks_key or "")
    assert any("Text in the image: VALVE V-12" in chunk["text"] for chunk in chunks)
    assert any("Alt text: Valve diagram" in chunk["text"] for chunk in chunks)
