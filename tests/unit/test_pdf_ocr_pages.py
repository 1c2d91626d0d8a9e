"""Which pages parse_pdf sends to OCR (text layer vs image-only vs mixed), the OCR page cap, and
per-page OCR failures, on PDFs generated here, with a scripted engine (the real engines:
tests/integration/test_ocr_engines.py)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw
from rag_ingest.core.errors import ErrorCode, PermanentError, TransientError
from rag_ingest.core.parsed import ParsedDocument, TextSource
from rag_ingest.parsing.ocr.engine import OcrPageError, OcrResult, OcrUnavailableError, PageOcr
from rag_ingest.parsing.pdf.extract import parse_pdf

pytestmark = pytest.mark.unit
LIMITS = {"max_bytes": 10 * 1024 * 1024, "max_pages": 100}
TEXT = "The lighthouse keeper trimmed the wick at dusk and logged every passing ship in the ledger."


class ScriptedEngine:
    """Answers each recognize() with the next item: a text, or an exception to raise."""

    name = "scripted"

    def __init__(self, answers: Sequence[str | Exception]) -> None:
        self._answers = list(answers)
        self.images: list[bytes] = []

    def recognize(self, png: bytes) -> OcrResult:
        self.images.append(png)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return OcrResult(text=answer, confidence=0.9)


def scan_image() -> Image.Image:
    image = Image.new("L", (400, 300), 255)
    ImageDraw.Draw(image).text((20, 20), "a scanned page", fill=0)
    return image


def make_pdf(kinds: Sequence[str]) -> bytes:
    """One page per kind: "text" (a text layer), "scan" (one image, no text), "vector" (shapes only),
    "blank", "stamped-scan" (an image plus a scanner's short stamp in a text layer)."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for kind in kinds:
        pdf.add_page()
        if kind == "text":
            pdf.multi_cell(0, 6, TEXT)
        elif kind in ("scan", "stamped-scan"):
            buffer = io.BytesIO()
            scan_image().save(buffer, format="PNG")
            pdf.image(buffer, x=10, y=10, w=190)
            if kind == "stamped-scan":
                pdf.set_xy(10, 280)
                pdf.cell(0, 5, "p. 7")
        elif kind == "vector":
            pdf.rect(20, 20, 100, 50, style="F")
    return bytes(pdf.output())


def parse(data: bytes, engine: ScriptedEngine | None = None, max_ocr_pages: int = 50) -> ParsedDocument:
    ocr = PageOcr(engine, max_pages=max_ocr_pages) if engine is not None else None
    return parse_pdf(data, **LIMITS, ocr=ocr)


def test_text_layer_pages_are_not_ocrd() -> None:
    engine = ScriptedEngine([])
    parsed = parse(make_pdf(["text", "text"]), engine)
    assert engine.images == []
    assert [page.source for page in parsed.pages] == [TextSource.TEXT_LAYER] * 2
    assert all(page.ocr_confidence is None for page in parsed.pages)
    assert parsed.ocr_pages == 0


def test_an_image_only_document_is_ocrd_page_by_page() -> None:
    engine = ScriptedEngine(["first scanned page", "second scanned page"])
    parsed = parse(make_pdf(["scan", "scan"]), engine)
    assert [page.text for page in parsed.pages] == ["first scanned page", "second scanned page"]
    assert [page.source for page in parsed.pages] == [TextSource.OCR] * 2
    assert [page.ocr_confidence for page in parsed.pages] == [0.9, 0.9]
    assert parsed.ocr_pages == 2 and parsed.failed_pages == []
    assert all(image.startswith(b"\x89PNG") for image in engine.images)


def test_a_mixed_document_ocrs_only_its_scanned_pages() -> None:
    engine = ScriptedEngine(["the scanned middle page"])
    parsed = parse(make_pdf(["text", "scan", "text"]), engine)
    assert len(engine.images) == 1
    assert [page.source for page in parsed.pages] == [TextSource.TEXT_LAYER, TextSource.OCR, TextSource.TEXT_LAYER]
    assert parsed.pages[1].text == "the scanned middle page"
    assert "lighthouse keeper" in parsed.pages[0].text


def test_a_scan_with_a_stray_stamp_in_its_text_layer_still_needs_ocr() -> None:
    engine = ScriptedEngine(["the page under the stamp"])
    parsed = parse(make_pdf(["text", "stamped-scan"]), engine)
    assert parsed.pages[1].source is TextSource.OCR
    assert parsed.pages[1].text == "the page under the stamp"


def test_vector_and_blank_pages_are_not_ocrd() -> None:
    engine = ScriptedEngine([])
    parsed = parse(make_pdf(["text", "vector", "blank"]), engine)
    assert engine.images == [] and parsed.failed_pages == []


def test_without_an_engine_a_scanned_page_of_a_mixed_document_is_a_failed_page_not_silently_empty() -> None:
    parsed = parse(make_pdf(["text", "scan"]))
    assert parsed.failed_pages == [2]
    assert parsed.failure_reasons == {2: "no text layer (OCR is off)"}


def test_without_an_engine_an_image_only_document_is_no_text_layer() -> None:
    with pytest.raises(PermanentError) as caught:
        parse(make_pdf(["scan", "scan"]))
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER
    assert "2 pages" in caught.value.detail and "OCR is off" in caught.value.detail


def test_pages_over_the_ocr_cap_are_failed_pages_with_the_reason() -> None:
    engine = ScriptedEngine(["page one", "page two"])
    parsed = parse(make_pdf(["scan", "scan", "scan", "text"]), engine, max_ocr_pages=2)
    assert len(engine.images) == 2
    assert [page.text for page in parsed.pages[:3]] == ["page one", "page two", ""]
    assert parsed.failed_pages == [3]
    assert "over the OCR limit of 2 pages" in parsed.failure_reasons[3]
    assert parsed.ocr_pages == 2


def test_a_page_the_engine_cannot_read_is_a_failed_page_and_the_rest_are_kept() -> None:
    engine = ScriptedEngine([OcrPageError("BadDocumentException: unsupported image"), "page two"])
    parsed = parse(make_pdf(["scan", "scan"]), engine)
    assert parsed.failed_pages == [1]
    assert "BadDocumentException" in parsed.failure_reasons[1]
    assert parsed.pages[1].text == "page two"


def test_an_unavailable_engine_fails_every_scanned_page_with_its_reason_rasterising_only_one() -> None:
    reason = "OCR unavailable: Amazon Textract is not offered in region xx-test-1"
    engine = ScriptedEngine([OcrUnavailableError(reason)])  # a second call would find no answer
    parsed = parse(make_pdf(["scan", "text", "scan", "scan"]), engine, max_ocr_pages=2)
    assert len(engine.images) == 1
    assert parsed.failed_pages == [1, 3, 4]
    assert parsed.failure_reasons == {1: reason, 3: reason, 4: reason}  # the cap's reason gives way to it
    assert "lighthouse keeper" in parsed.pages[1].text


def test_an_image_only_document_ocr_reads_nothing_on_is_no_text_layer() -> None:
    with pytest.raises(PermanentError) as caught:
        parse(make_pdf(["scan"]), ScriptedEngine([""]))
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER


def test_a_throttled_engine_fails_the_attempt_transiently() -> None:
    with pytest.raises(TransientError):
        parse(make_pdf(["scan"]), ScriptedEngine([TransientError("textract: ThrottlingException")]))


def test_the_artifact_round_trips_sources_confidences_and_reasons() -> None:
    parsed = parse(make_pdf(["scan", "scan"]), ScriptedEngine(["read", OcrPageError("damaged")]))
    again = ParsedDocument.model_validate_json(parsed.model_dump_json())
    assert again == parsed
    assert again.failure_reasons == {2: "OCR failed: damaged"}


@pytest.mark.parametrize("angle", [90, 180, 270])
def test_a_text_layer_drawn_rotated_is_read_in_its_own_orientation_without_ocr(angle: int) -> None:
    """pypdf extracts text drawn at 0/90/180/270 degrees (its default orientations): no OCR needed."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    with pdf.rotation(angle, x=105, y=148):
        pdf.set_xy(60, 140)
        pdf.cell(0, 8, TEXT[:60])
    engine = ScriptedEngine([])
    parsed = parse(bytes(pdf.output()), engine)
    assert parsed.pages[0].text == TEXT[:60].strip()
    assert parsed.pages[0].source is TextSource.TEXT_LAYER and engine.images == []


def test_the_parse_stage_records_ocr_pages_and_failed_pages_in_the_status() -> None:
    from datetime import UTC, datetime

    from rag_ingest.core.job import DocumentJob
    from rag_ingest.core.tokens import count_tokens
    from rag_ingest.ingest.pipeline import Pipeline, StageDependencies

    from tests.support.fakes import CountingEmbedder, InMemoryChunkIndex, InMemoryDocuments, InMemoryObjects
    from tests.unit.test_pipeline_stages_fast import BUCKET, ENV

    documents, objects = InMemoryDocuments(), InMemoryObjects()
    pipeline = Pipeline(
        StageDependencies(
            env=ENV.model_copy(update={"max_ocr_pages": 1}),
            status=documents,
            objects=objects,
            vector_store=InMemoryChunkIndex,
            embedder=CountingEmbedder,
            count_tokens=count_tokens,
            ocr_engine=ScriptedEngine(["the scanned page, read"]),
        )
    )
    data = make_pdf(["text", "scan", "scan"])
    ref = objects.upload(BUCKET, "raw/acme/doc-1/a.pdf", "v1", data)
    documents.mark_queued(
        document_id="doc-1", tenant_id="acme", ref=ref, event_time=datetime.now(UTC).isoformat(), size_bytes=len(data)
    )
    job = DocumentJob(document_id="doc-1", tenant_id="acme", bucket=BUCKET, key=ref.key, version="v1")
    job = pipeline.parse(pipeline.validate(job))
    record = documents.get("doc-1")
    assert record is not None
    assert (record.ocr_pages, record.failed_pages, job.failed_pages) == (1, [3], [3])
