"""The stages over in-memory fakes with figures and images: a PDF's figure becomes a chunk of its own
with its sources and rectangle, the record counts figures (GET /documents/{id}'s view too), and a PNG
upload is read by the OCR engine into a page cited by its words' rectangles."""

from __future__ import annotations

import io

import pytest
from PIL import Image
from rag_ingest.core.parsed import DocumentFormat, FigureCounts, FigureSource
from rag_ingest.documents.schemas import DocumentView
from rag_ingest.parsing.figures import ImageReading
from rag_ingest.parsing.ocr.engine import OcrResult, PlacedWord

from tests.unit.test_pdf_figures import figure_pdf
from tests.unit.test_pipeline_stages_fast import World, build_world

pytestmark = pytest.mark.unit


class Reader:
    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        return ImageReading(ocr_text="GAUGE 7")


class Engine:
    name = "scripted"

    def recognize(self, png: bytes) -> OcrResult:
        words = tuple(
            PlacedWord(word, 0.1 + 0.1 * n, 0.4, 0.18 + 0.1 * n, 0.45)
            for n, word in enumerate(["Harbour", "dues", "are", "paid", "before", "the", "ship", "leaves"])
        )
        return OcrResult(text="Harbour dues are paid before the ship leaves.", confidence=0.9, words=words)


def test_a_pdf_figure_is_a_chunk_of_its_own_and_the_record_counts_figures() -> None:
    world: World = build_world(image_reader=lambda share: Reader())
    job = world.through_chunk(world.upload(figure_pdf(pages=3, logo=True)))

    chunks = world.pipeline._load_chunks(job)
    [figure] = [chunk for chunk in chunks if chunk.figure_sources is not None]
    assert figure.text == "Figure 1: River level at the gauge, 2024\nText in the image: GAUGE 7"
    assert figure.figure_sources == [FigureSource.CAPTION, FigureSource.OCR]
    assert [box.page for box in figure.boxes] == [1] and figure.page_start == 1
    record = world.documents.get(job.document_id)
    assert record is not None
    assert record.figures == FigureCounts(indexed=1, skipped_repeated=3)
    assert DocumentView.of(record).figures == FigureCounts(indexed=1, skipped_repeated=3)


def test_without_an_image_reader_a_figure_is_its_caption() -> None:
    world = build_world()
    job = world.through_chunk(world.upload(figure_pdf()))

    [figure] = [chunk for chunk in world.pipeline._load_chunks(job) if chunk.figure_sources is not None]
    assert figure.text == "Figure 1: River level at the gauge, 2024"
    assert figure.figure_sources == [FigureSource.CAPTION]


def test_a_png_upload_is_read_by_ocr_and_cited_by_its_words() -> None:
    buffer = io.BytesIO()
    Image.new("L", (800, 400), 255).save(buffer, format="PNG")
    world = build_world(ocr_engine=Engine())

    job = world.through_chunk(world.upload(buffer.getvalue(), filename="dues.png"))

    assert job.document_format is DocumentFormat.PNG and job.page_count == 1
    [chunk] = world.pipeline._load_chunks(job)
    assert chunk.text == "Harbour dues are paid before the ship leaves."
    assert chunk.document_format is DocumentFormat.PNG
    assert [(box.page, box.x0, box.y0) for box in chunk.boxes] == [(1, 0.1, 0.4)]
    record = world.documents.get(job.document_id)
    assert record is not None and record.ocr_pages == 1
