"""An image uploaded as a document (PNG, JPEG, multi-page TIFF), read by OCR into pages with words.

One page per image, or per TIFF page: :func:`tiff_pages` makes each page a TIFF of its own by
pointing the header at that page's directory and ending the chain there (the synchronous Textract
calls read one page: https://docs.aws.amazon.com/textract/latest/dg/sync.html). Every page is read
by the configured ``PageOcr`` (its page cap applies) into text, a layout (for the passages'
rectangles) and tables, as a scanned PDF page is. Bounds: the pages (TOO_MANY_PAGES) and the pixels
of a page (DOCUMENT_TOO_COMPLEX); a file that is not what its signature says is CORRUPT_DOCUMENT.
No text anywhere is NO_TEXT_LAYER (at the join). Imports ``rag_ingest.core`` and ``rag_ingest.parsing``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import DocumentFormat, PageText, ParsedRange, TextSource
from rag_ingest.parsing.figures import image_size
from rag_ingest.parsing.ocr.engine import OcrPageError, OcrUnavailableError, PageOcr
from rag_ingest.parsing.pdf.layout import pack_layout
from rag_ingest.parsing.pdf.tables import place_tables

#: A page image over this many pixels is refused before any engine decodes it (a decompression bomb:
#: a 40-megapixel page is a 600-dpi A2 scan; Tesseract holds about a byte a pixel in grey).
MAX_IMAGE_PIXELS = 40_000_000
#: Textract reads images of at most 10,000 px a side
#: (https://docs.aws.amazon.com/textract/latest/dg/limits-document.html): the same bound everywhere.
MAX_IMAGE_SIDE_PX = 10_000
_TIFF_HEADERS = {b"II*\x00": "<", b"MM\x00*": ">"}


def read_image_document(
    data: bytes, document_format: DocumentFormat, *, max_pages: int, ocr: PageOcr | None
) -> ParsedRange:
    """The pages of an image document, read by ``ocr`` (None: OCR is off, and every page is a
    failed page, so the document is NO_TEXT_LAYER at the join). Raises ``PermanentError``
    TOO_MANY_PAGES, DOCUMENT_TOO_COMPLEX or CORRUPT_DOCUMENT; the engine's ``TransientError``
    propagates (the stage is retried)."""
    directories = tiff_pages(data, max_pages=max_pages) if document_format is DocumentFormat.TIFF else []

    def images() -> Iterator[bytes]:  # one page's copy in memory at a time
        yield from (tiff_page(data, directory) for directory in directories) if directories else [data]

    page_count = max(1, len(directories))
    for number, image in enumerate(images(), start=1):
        size = image_size(image)
        if size is None or min(size) <= 0:
            raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"page {number}: no image size in its header")
        if size[0] * size[1] > MAX_IMAGE_PIXELS or max(size) > MAX_IMAGE_SIDE_PX:
            raise PermanentError(
                ErrorCode.DOCUMENT_TOO_COMPLEX,
                f"page {number} is {size[0]}x{size[1]} pixels, over the limits of {MAX_IMAGE_PIXELS:,} pixels "
                f"and {MAX_IMAGE_SIDE_PX:,} px a side",
            )
    pages: list[PageText] = []
    reasons: dict[int, str] = {}
    unavailable: str | None = None
    for number, image in enumerate(images(), start=1):
        reason = unavailable
        if ocr is None:
            reason = "an image has no text layer (OCR is off)"
        elif reason is None and number > ocr.max_pages:
            reason = f"over the OCR limit of {ocr.max_pages} pages per document"
        if reason is None and ocr is not None:
            try:
                result = ocr.engine.recognize(image)
            except OcrUnavailableError as error:
                unavailable = reason = str(error)
            except OcrPageError as error:
                reason = f"OCR failed: {error}"
            else:
                text, blocks = place_tables(result.text, result.tables) if result.tables else (result.text, [])
                pages.append(
                    PageText(
                        page_number=number,
                        text=text,
                        blocks=blocks,
                        source=TextSource.OCR,
                        ocr_confidence=result.confidence,
                        layout=pack_layout(result.words),
                    )
                )
                continue
        logger.warning("page %d: %s", number, reason)
        reasons[number] = reason or "not read"
        pages.append(PageText(page_number=number, text="", source=TextSource.OCR))
    return ParsedRange(
        document_format=document_format,
        page_count=page_count,
        first_page=1,
        last_page=page_count,
        pages=pages,
        failed_pages=sorted(reasons),
        failure_reasons=reasons,
        ocr_requested=page_count,
        ocr_on=ocr is not None,
        draws_marks=True,  # an image draws something: no text in it is NO_TEXT_LAYER, not EMPTY_DOCUMENT
    )


def tiff_pages(data: bytes, *, max_pages: int) -> list[int]:
    """The offsets of a TIFF's page directories, in order (:func:`tiff_page` makes each a TIFF of
    its own). Raises ``PermanentError`` CORRUPT_DOCUMENT (a broken or looping chain, a BigTIFF) or
    TOO_MANY_PAGES over ``max_pages``."""
    order = _TIFF_HEADERS.get(data[:4])
    if order is None:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, "not a classic TIFF (BigTIFF is not read)")
    offsets: list[int] = []
    offset = _read(data, order + "I", 4)
    while offset:
        if offset in offsets or offset + 2 > len(data):
            raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, "the TIFF's page chain is broken or loops")
        offsets.append(offset)
        if len(offsets) > max_pages:
            raise PermanentError(ErrorCode.TOO_MANY_PAGES, f"the TIFF has more than {max_pages} pages")
        entries = _read(data, order + "H", offset)
        offset = _read(data, order + "I", offset + 2 + 12 * entries)
    if not offsets:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, "the TIFF has no page")
    return offsets


def tiff_page(data: bytes, directory: int) -> bytes:
    """The TIFF page whose directory is at ``directory`` as a TIFF of its own: the same bytes, the
    header pointing at that directory and its next-page pointer set to 0 (strips and tiles stay
    where they were), so a reader of one page (Textract's synchronous calls) reads that page."""
    order = _TIFF_HEADERS[data[:4]]
    page = bytearray(data)
    page[4:8] = struct.pack(order + "I", directory)
    next_pointer = directory + 2 + 12 * _read(data, order + "H", directory)
    page[next_pointer : next_pointer + 4] = bytes(4)
    return bytes(page)


def _read(data: bytes, layout: str, at: int) -> int:
    size = struct.calcsize(layout)
    if at < 0 or at + size > len(data):
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the TIFF points past its end (offset {at})")
    return int(struct.unpack_from(layout, data, at)[0])
