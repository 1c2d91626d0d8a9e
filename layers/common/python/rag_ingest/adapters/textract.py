"""Amazon Textract as the OCR engine in AWS (``OCR_ENGINE=textract``): synchronous
``DetectDocumentText`` on each page image the Parse function rasterised.

Why synchronous, per page (docs/ocr.md has the comparison): it OCRs only the pages without a
text layer (the asynchronous API reads the whole PDF, text pages included, at the same price per
page), it answers in about a second per page with no S3 round trip, no SNS topic and no task token
or polling loop in the state machine, and the OCR page cap bounds its time inside the Parse
function's timeout. The price per page is the same (DetectDocumentText, 0.0015 USD per page).

Errors: throttling, ``ProvisionedThroughputExceededException``, 5xx and connection errors are
``TransientError`` (Step Functions retries the stage with backoff; the pages artifact is written
only when every page is done). An image Textract refuses (``BadDocumentException``,
``UnsupportedDocumentException``, ``DocumentTooLargeException``, ``InvalidParameterException``)
is ``OcrPageError``: that page fails, not the document. Anything else (e.g. access denied)
propagates: it is the deployment's fault.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from rag_ingest.adapters import aws
from rag_ingest.ocr import OcrPageError, OcrResult

#: Textract's answers for an image it cannot read: a failure of that page only.
PAGE_FAILURE_CODES = frozenset(
    {
        "BadDocumentException",
        "UnsupportedDocumentException",
        "DocumentTooLargeException",
        "InvalidParameterException",
    }
)
#: Textract's per-account TPS quota answers, beyond the generic AWS throttling codes.
_TEXTRACT_TRANSIENT_CODES = frozenset({"ProvisionedThroughputExceededException", "LimitExceededException"})


class TextractEngine:
    """One ``DetectDocumentText`` call per page image (PNG bytes, at most 10 MB)."""

    name = "textract"

    def __init__(self, client: Any | None = None) -> None:
        self._client = client if client is not None else aws.client("textract")

    def recognize(self, png: bytes) -> OcrResult:
        try:
            response = self._client.detect_document_text(Document={"Bytes": png})
        except ClientError as error:
            code = aws.error_code(error)
            if code in PAGE_FAILURE_CODES:
                raise OcrPageError(f"textract {code}: {error.response.get('Error', {}).get('Message', '')}") from error
            if code in _TEXTRACT_TRANSIENT_CODES:
                raise aws.translate(error, "textract", transient=lambda _error: True) from error
            raise aws.translate(error, "textract") from error
        except Exception as error:  # connection errors, timeouts
            raise aws.translate(error, "textract") from error
        return textract_result(response)


def textract_result(response: dict[str, Any]) -> OcrResult:
    """The LINE blocks in Textract's reading order, and their mean confidence (0..1)."""
    lines = [block for block in response.get("Blocks", []) if block.get("BlockType") == "LINE"]
    text = "\n".join(str(block.get("Text", "")) for block in lines)
    confidences = [float(block.get("Confidence", 0.0)) / 100 for block in lines]
    confidence = sum(confidences) / len(confidences) if confidences else 0.0
    return OcrResult(text=text, confidence=round(min(confidence, 1.0), 4))
