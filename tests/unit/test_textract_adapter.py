"""The Textract OCR engine against botocore's Stubber with DetectDocumentText's recorded response
shape (moto does not emulate Textract's results): lines and confidence, throttling as
TransientError, an unreadable image as a per-page failure, and parse_pdf with it."""

from __future__ import annotations

import io
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from fpdf import FPDF
from PIL import Image
from rag_ingest.adapters.textract import TextractEngine
from rag_ingest.errors import TransientError
from rag_ingest.models import TextSource
from rag_ingest.ocr import OcrPageError, PageOcr
from rag_ingest.pdf import parse_pdf

pytestmark = pytest.mark.unit
PNG = b"\x89PNG\r\n\x1a\n-a-page-image"


def block(block_type: str, text: str, confidence: float, index: int) -> dict[str, Any]:
    return {
        "BlockType": block_type,
        "Confidence": confidence,
        "Text": text,
        "Geometry": {
            "BoundingBox": {"Width": 0.8, "Height": 0.02, "Left": 0.1, "Top": 0.1 + 0.03 * index},
            "Polygon": [{"X": 0.1, "Y": 0.1}, {"X": 0.9, "Y": 0.1}, {"X": 0.9, "Y": 0.12}, {"X": 0.1, "Y": 0.12}],
        },
        "Id": f"block-{block_type}-{index}",
    }


#: A DetectDocumentText answer as Textract returns it: a PAGE block, LINE blocks in reading order
#: (each with its WORD children), confidences in percent.
RECORDED_RESPONSE: dict[str, Any] = {
    "DocumentMetadata": {"Pages": 1},
    "Blocks": [
        {
            "BlockType": "PAGE",
            "Id": "page-1",
            "Geometry": {"BoundingBox": {"Width": 1, "Height": 1, "Left": 0, "Top": 0}},
        },
        block("LINE", "Keepers logged every ship", 99.5, 0),
        block("WORD", "Keepers", 99.8, 1),
        block("WORD", "logged", 99.6, 2),
        block("LINE", "that passed the point.", 96.5, 3),
        block("WORD", "that", 99.1, 4),
    ],
    "DetectDocumentTextModelVersion": "1.0",
}


def stubbed() -> tuple[TextractEngine, Stubber]:
    client = boto3.client("textract", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return TextractEngine(client), Stubber(client)


def test_lines_in_reading_order_and_their_mean_confidence() -> None:
    engine, stub = stubbed()
    stub.add_response("detect_document_text", RECORDED_RESPONSE, {"Document": {"Bytes": PNG}})
    with stub:
        result = engine.recognize(PNG)
    assert result.text == "Keepers logged every ship\nthat passed the point."
    assert result.confidence == pytest.approx(0.98)
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    "code", ["ThrottlingException", "ProvisionedThroughputExceededException", "InternalServerError"]
)
def test_throttling_and_service_errors_are_transient(code: str) -> None:
    engine, stub = stubbed()
    stub.add_client_error("detect_document_text", service_error_code=code, http_status_code=400)
    with stub, pytest.raises(TransientError, match=code):
        engine.recognize(PNG)


@pytest.mark.parametrize("code", ["UnsupportedDocumentException", "BadDocumentException", "DocumentTooLargeException"])
def test_an_image_textract_cannot_read_is_a_page_failure(code: str) -> None:
    engine, stub = stubbed()
    stub.add_client_error("detect_document_text", service_error_code=code, service_message="cannot read")
    with stub, pytest.raises(OcrPageError, match=code):
        engine.recognize(PNG)


def test_access_denied_is_neither_transient_nor_a_page_failure() -> None:
    engine, stub = stubbed()
    stub.add_client_error("detect_document_text", service_error_code="AccessDeniedException", http_status_code=403)
    with stub, pytest.raises(Exception) as caught:
        engine.recognize(PNG)
    assert not isinstance(caught.value, TransientError | OcrPageError)


def scanned_pdf(pages: int) -> bytes:
    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        buffer = io.BytesIO()
        Image.new("L", (200, 200), 200).save(buffer, format="PNG")
        pdf.image(buffer, x=10, y=10, w=100)
    return bytes(pdf.output())


def test_parse_with_textract_keeps_the_readable_pages_and_fails_the_damaged_one() -> None:
    engine, stub = stubbed()
    stub.add_client_error("detect_document_text", service_error_code="BadDocumentException", service_message="bad")
    stub.add_response("detect_document_text", RECORDED_RESPONSE)
    with stub:
        parsed = parse_pdf(scanned_pdf(2), max_bytes=1 << 24, max_pages=10, ocr=PageOcr(engine))
    assert parsed.failed_pages == [1] and "BadDocumentException" in parsed.failure_reasons[1]
    assert parsed.pages[1].source is TextSource.OCR
    assert "Keepers logged every ship" in parsed.pages[1].text
