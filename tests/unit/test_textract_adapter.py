"""The Textract OCR engine against botocore's Stubber with DetectDocumentText's recorded response
shape (moto does not emulate Textract's results): lines and confidence, throttling as
TransientError, an unreadable image as a per-page failure, and parse_pdf with it; in a region
Textract does not serve (botocore's endpoint data), pages fail without a network call."""

from __future__ import annotations

import io
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from fpdf import FPDF
from PIL import Image
from rag_ingest.adapters import textract as textract_module
from rag_ingest.adapters.textract import TextractEngine
from rag_ingest.core.errors import ErrorCode, PermanentError, TransientError
from rag_ingest.core.parsed import TextSource
from rag_ingest.parsing.ocr.engine import OcrPageError, OcrUnavailableError, PageOcr
from rag_ingest.parsing.pdf.extract import parse_pdf

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


# -- regions Textract does not serve (botocore's endpoint data, offline) ---------------------------
def _regions(service: str, partition: str = "aws") -> list[str]:
    return boto3.session.Session().get_available_regions(service, partition_name=partition)


#: A commercial region with S3 but without Textract, read from the botocore in use (not guessed).
UNSERVED_REGION = sorted(set(_regions("s3")) - set(_regions("textract")))[0]
SERVED_REGION = "us-east-1"


def textract_client(region: str, **kwargs: Any) -> Any:
    return boto3.client("textract", region_name=region, aws_access_key_id="x", aws_secret_access_key="x", **kwargs)


def test_the_regions_are_read_from_botocore_data() -> None:
    assert SERVED_REGION in _regions("textract")
    assert UNSERVED_REGION in _regions("s3") and UNSERVED_REGION not in _regions("textract")


def test_in_a_region_without_textract_a_page_fails_without_a_network_call(monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(textract_module.logger, "warning", lambda message, **_: warnings.append(message))
    client = textract_client(UNSERVED_REGION)
    stub = Stubber(client)  # no response queued: any call would fail the test
    engine = TextractEngine(client, environ={})
    assert len(warnings) == 1  # once, at construction (cold start)
    with stub:
        for _ in range(3):
            with pytest.raises(OcrUnavailableError) as caught:
                engine.recognize(PNG)
            assert isinstance(caught.value, OcrPageError) and not isinstance(caught.value, TransientError)
    assert str(caught.value) == f"OCR unavailable: Amazon Textract is not offered in region {UNSERVED_REGION}"
    assert len(warnings) == 1  # not per page
    stub.assert_no_pending_responses()


def test_in_a_served_region_the_client_is_called() -> None:
    client = textract_client(SERVED_REGION)
    engine = TextractEngine(client, environ={})
    assert engine.unavailable_reason is None
    with Stubber(client) as stub:
        stub.add_response("detect_document_text", RECORDED_RESPONSE, {"Document": {"Bytes": PNG}})
        assert "Keepers" in engine.recognize(PNG).text
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    "environ",
    [
        {"AWS_ENDPOINT_URL_TEXTRACT": "http://127.0.0.1:4566"},
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"},
    ],
)
def test_a_configured_endpoint_skips_the_region_check(environ: dict[str, str]) -> None:
    client = textract_client(UNSERVED_REGION)
    engine = TextractEngine(client, environ=environ)
    assert engine.unavailable_reason is None
    with Stubber(client) as stub:
        stub.add_response("detect_document_text", RECORDED_RESPONSE)
        assert "Keepers" in engine.recognize(PNG).text


def test_ignored_configured_endpoints_do_not_skip_the_region_check() -> None:
    environ = {"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}
    engine = TextractEngine(textract_client(UNSERVED_REGION), environ=environ)
    assert engine.unavailable_reason is not None


def test_a_client_built_for_another_endpoint_skips_the_region_check() -> None:
    engine = TextractEngine(textract_client(UNSERVED_REGION, endpoint_url="http://127.0.0.1:4566"), environ={})
    assert engine.unavailable_reason is None


def test_fips_and_dualstack_endpoints_are_still_checked() -> None:
    from botocore.config import Config

    for config in (Config(use_fips_endpoint=True), Config(use_dualstack_endpoint=True)):
        served = TextractEngine(textract_client(SERVED_REGION, config=config), environ={})
        assert served.unavailable_reason is None
    unserved = TextractEngine(textract_client(UNSERVED_REGION, config=Config(use_dualstack_endpoint=True)), environ={})
    assert unserved.unavailable_reason is not None


def test_the_region_check_uses_the_clients_partition() -> None:
    session = boto3.session.Session()
    checked = 0
    for partition in session.get_available_partitions():
        served = set(_regions("textract", partition))
        for region in sorted(served)[:1]:
            assert TextractEngine(textract_client(region), environ={}).unavailable_reason is None, region
            checked += 1
        for region in sorted(set(_regions("s3", partition)) - served)[:1]:
            assert TextractEngine(textract_client(region), environ={}).unavailable_reason is not None, region
            checked += 1
    assert checked >= 3  # at least aws (both ways) and one other partition


def test_an_image_only_document_in_a_region_without_textract_is_no_text_layer_not_transient() -> None:
    """As when every OCR page fails today: nothing to index is NO_TEXT_LAYER, a permanent verdict."""
    client = textract_client(UNSERVED_REGION)
    with Stubber(client), pytest.raises(PermanentError) as caught:
        parse_pdf(scanned_pdf(3), max_bytes=1 << 24, max_pages=10, ocr=PageOcr(TextractEngine(client, environ={})))
    assert caught.value.code is ErrorCode.NO_TEXT_LAYER
    assert "3 need OCR: 0 read by OCR, 3 failed" in caught.value.detail
