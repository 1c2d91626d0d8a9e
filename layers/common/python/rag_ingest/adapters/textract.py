"""Amazon Textract as the OCR engine in AWS (``OCR_ENGINE=textract``), behind ``OcrEngine``.

:class:`TextractEngine` sends each page image Parse rasterised to ``DetectDocumentText`` (or
``AnalyzeDocument`` with TABLES, ``tables=True``), synchronously. Throttling, 5xx and connection
errors are ``TransientError`` (the stage is retried); an image Textract refuses is ``OcrPageError``
(that page fails, not the document); anything else (access denied) propagates. Built for a region
Textract does not serve (botocore's endpoint data, read offline at cold start, unless an endpoint is
configured), the engine is unavailable: ``recognize`` raises ``OcrUnavailableError`` without a
network call. Why synchronous and per page, the region check's choices, tables: docs/ocr.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import boto3
import botocore

from rag_ingest.adapters import aws
from rag_ingest.core.logs import logger
from rag_ingest.parsing.ocr.engine import OcrPageError, OcrResult, OcrUnavailableError, PlacedWord

SERVICE = "textract"

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


def endpoint_overridden(client: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``client`` talks to an endpoint someone configured rather than AWS's own for its
    region (then botocore's region list says nothing about it)."""
    environ = os.environ if environ is None else environ
    ignore_configured = environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() == "true"
    if not ignore_configured and (environ.get("AWS_ENDPOINT_URL_TEXTRACT") or environ.get("AWS_ENDPOINT_URL")):
        return True
    host = urlparse(str(client.meta.endpoint_url)).hostname or ""
    region = str(client.meta.region_name)
    return not host.startswith((f"{SERVICE}.{region}.", f"{SERVICE}-fips.{region}."))


def unavailable_reason(client: Any, environ: Mapping[str, str] | None = None) -> str | None:
    """Why Textract cannot be used through ``client``, or None when it can (or cannot be told
    offline: a configured endpoint). Reads botocore's bundled endpoint data; no network call."""
    if endpoint_overridden(client, environ):
        return None
    region = str(client.meta.region_name)
    partition = str(getattr(client.meta, "partition", "aws") or "aws")
    if region in boto3.session.Session().get_available_regions(SERVICE, partition_name=partition):
        return None
    return f"OCR unavailable: Amazon Textract is not offered in region {region}"


class TextractEngine:
    """One ``DetectDocumentText`` call per page image (PNG bytes, at most 10 MB).

    Made at cold start: in a region Textract does not serve (botocore's endpoint data) it is an
    *unavailable* engine whose ``recognize`` raises ``OcrUnavailableError`` without a network call.
    """

    name = "textract"

    def __init__(
        self, client: Any | None = None, *, environ: Mapping[str, str] | None = None, tables: bool = False
    ) -> None:
        self._client = client if client is not None else aws.client(SERVICE)
        self._tables = tables
        self.unavailable_reason = unavailable_reason(self._client, environ)
        if self.unavailable_reason is not None:
            logger.warning(
                "Amazon Textract is not offered in this region: pages without a text layer will be failed pages",
                extra={
                    "region": self._client.meta.region_name,
                    "botocore_version": botocore.__version__,
                    "reason": self.unavailable_reason,
                },
            )

    def recognize(self, png: bytes) -> OcrResult:
        if self.unavailable_reason is not None:
            raise OcrUnavailableError(self.unavailable_reason)
        with aws.translated("textract", expect=PAGE_FAILURE_CODES, catch=Exception, transient=_is_transient) as refusal:
            if self._tables:
                # The LINE blocks DetectDocumentText returns, plus TABLE, CELL and MERGED_CELL blocks, at
                # ten times the price per page (docs/ocr.md, "Tables in scanned pages").
                response = self._client.analyze_document(Document={"Bytes": png}, FeatureTypes=["TABLES"])
            else:
                response = self._client.detect_document_text(Document={"Bytes": png})
        if refusal.refused:
            raise OcrPageError(f"textract {refusal.code}: {aws.error_message(refusal.error)}") from refusal.error
        return textract_result(response)


def _is_transient(error: BaseException) -> bool:
    """The AWS test, and Textract's own quota answers; connection errors and timeouts included."""
    return aws.error_code(error) in _TEXTRACT_TRANSIENT_CODES or aws.is_transient(error)


def textract_result(response: dict[str, Any]) -> OcrResult:
    """The LINE blocks in Textract's reading order, their mean confidence (0..1), the WORD blocks
    with their boxes, and the tables of an AnalyzeDocument response (:func:`textract_tables`).
    ``Geometry.BoundingBox`` is already in fractions of the image from its top-left corner
    (https://docs.aws.amazon.com/textract/latest/APIReference/API_BoundingBox.html), and the image
    is the page as displayed (pdfium renders it rotated)."""
    blocks = response.get("Blocks", [])
    lines = [block for block in blocks if block.get("BlockType") == "LINE"]
    text = "\n".join(str(block.get("Text", "")) for block in lines)
    confidences = [float(block.get("Confidence", 0.0)) / 100 for block in lines]
    confidence = sum(confidences) / len(confidences) if confidences else 0.0
    words = tuple(
        word for block in blocks if block.get("BlockType") == "WORD" and (word := _placed_word(block)) is not None
    )
    return OcrResult(
        text=text, confidence=round(min(confidence, 1.0), 4), words=words, tables=textract_tables(response)
    )


def _placed_word(block: Mapping[str, Any]) -> PlacedWord | None:
    box = block.get("Geometry", {}).get("BoundingBox")
    text = str(block.get("Text", "")).strip()
    if not box or not text:
        return None
    left, top = float(box.get("Left", 0.0)), float(box.get("Top", 0.0))
    return PlacedWord(text, left, top, left + float(box.get("Width", 0.0)), top + float(box.get("Height", 0.0)))


def _children(block: dict[str, Any], kind: str = "CHILD") -> list[str]:
    return [
        child
        for relation in block.get("Relationships", [])
        if relation.get("Type") == kind
        for child in relation.get("Ids", [])
    ]


def textract_tables(response: dict[str, Any]) -> tuple[list[list[str]], ...]:
    """Each TABLE block as rows of cell texts (row 1, Textract's first, is the header), in the
    response's order. A CELL's text is its WORD children's; a MERGED_CELL's text (its CELL
    children's, in order) fills every position it spans, so each row reads whole. Empty rows go."""
    blocks = {block["Id"]: block for block in response.get("Blocks", []) if "Id" in block}

    def words(cell: dict[str, Any]) -> str:
        return " ".join(
            str(blocks[child].get("Text", ""))
            for child in _children(cell)
            if child in blocks and blocks[child].get("BlockType") == "WORD"
        )

    tables: list[list[list[str]]] = []
    for table in (block for block in blocks.values() if block.get("BlockType") == "TABLE"):
        grid: dict[tuple[int, int], str] = {}
        for child in _children(table):
            cell = blocks.get(child)
            if cell is not None and cell.get("BlockType") == "CELL":
                grid[(int(cell.get("RowIndex", 1)), int(cell.get("ColumnIndex", 1)))] = words(cell)
        for child in _children(table, "MERGED_CELL"):
            merged = blocks.get(child)
            if merged is None:
                continue
            text = " ".join(words(blocks[cell]) for cell in _children(merged) if cell in blocks).strip()
            row, column = int(merged.get("RowIndex", 1)), int(merged.get("ColumnIndex", 1))
            for r in range(row, row + int(merged.get("RowSpan", 1))):
                for c in range(column, column + int(merged.get("ColumnSpan", 1))):
                    grid[(r, c)] = " ".join(text.split())
        if not grid:
            continue
        rows = max(r for r, _ in grid)
        columns = max(c for _, c in grid)
        cells = [[grid.get((r, c), "") for c in range(1, columns + 1)] for r in range(1, rows + 1)]
        tables.append([row for row in cells if any(cell.strip() for cell in row)])
    return tuple(table for table in tables if table)
