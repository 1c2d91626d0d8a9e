"""The OCR port: what Parse hands an engine (a PDF page rasterised to PNG) and what comes back.

:func:`render_page_png` rasterises a page that needs OCR with pdfium, upright, at ``OCR_DPI``; an
:class:`OcrEngine` returns an :class:`OcrResult` (text, confidence, words with their rectangles,
tables) or raises ``OcrPageError`` for a page it cannot read (a failed page), ``OcrUnavailableError``
when it cannot work where it runs (decided at cold start, with no network call), ``TransientError``
when throttled (the stage is retried). :class:`PageOcr` is how Parse uses one (engine, page cap,
resolution). Engines: ``ocr.local`` offline, ``rag_ingest.adapters.textract`` in AWS, chosen by
``OCR_ENGINE``. Which pages, and the failures: docs/ocr.md.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from rag_ingest.core.settings import DEFAULT_MAX_OCR_PAGES, OCR_DPI

#: A page with fewer letters and digits than this in its text layer has no usable text layer
#: (a scan often carries a stray page number or a scanner's stamp).
MIN_TEXT_LAYER_CHARS = 16


class PlacedWord(NamedTuple):
    """A word and its rectangle on the displayed page (fractions, origin top-left)."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class OcrResult:
    """What an engine read on one page image: its text (lines in reading order) and the mean
    confidence of its lines, 0..1 (0 when nothing was read)."""

    text: str
    confidence: float
    #: The words read, with their rectangles on the image (fractions, origin top-left), when the
    #: engine gives them: the page's layout, for the passages' rectangles (rag_ingest.parsing.pdf.layout).
    words: tuple[PlacedWord, ...] = ()
    #: Tables the engine found (Textract's TABLES): rows of cells, the header row first, each
    #: table's words also in ``text`` (parse places them there, as for the text layer's tables).
    tables: tuple[list[list[str]], ...] = ()


class OcrPageError(Exception):
    """The engine cannot read this page image (unsupported or damaged): a per-page failure."""


class OcrUnavailableError(OcrPageError):
    """The engine cannot read any page in this deployment (e.g. Amazon Textract is not offered in
    the function's region): every page that needs OCR is a failed page with this message as its
    reason. Raised without calling any service, so nothing is retried; Parse stops rasterising
    pages for an engine once it has raised it."""


class OcrEngine(Protocol):
    """Reads the text on one image: a rasterised PDF page (PNG), or a figure's image inside a
    document (PNG or JPEG, ``ocr.images``): Tesseract and Textract read both."""

    @property
    def name(self) -> str: ...

    def recognize(self, png: bytes) -> OcrResult: ...


@dataclass(frozen=True)
class PageOcr:
    """How Parse reads pages without a text layer: the engine, at most ``max_pages`` pages per
    document (the rest are failed pages), rasterised at ``dpi``."""

    engine: OcrEngine
    max_pages: int = DEFAULT_MAX_OCR_PAGES
    dpi: int = OCR_DPI


def render_page_png(pdf: bytes, page_index: int, dpi: int = OCR_DPI) -> bytes:
    """The page (0-based ``page_index``) of ``pdf`` rendered in 8-bit greyscale at ``dpi``, as PNG.

    pdfium applies the page's ``/Rotate``, so the image is upright as a reader sees it.
    """
    import pypdfium2 as pdfium  # only pages that need OCR pay for loading pdfium

    document = pdfium.PdfDocument(pdf)
    try:
        page = document[page_index]
        try:
            bitmap = page.render(scale=dpi / 72, grayscale=True)
            if bitmap.n_channels != 1:  # pragma: no cover - pdfium renders greyscale as one channel
                raise ValueError(f"expected a greyscale bitmap, got {bitmap.mode}")
            return grey_png(memoryview(bitmap.buffer).cast("B"), bitmap.width, bitmap.height, bitmap.stride)
        finally:
            page.close()
    finally:
        document.close()


def grey_png(pixels: memoryview | bytes, width: int, height: int, stride: int) -> bytes:
    """An 8-bit greyscale PNG of ``height`` rows of ``width`` pixels, ``stride`` bytes apart.

    Written here (zlib and the PNG chunk layout) so the Lambda layer needs no imaging library:
    Pillow's current wheels do not cover the layer's platform.
    """
    rows = b"".join(b"\x00" + bytes(pixels[row * stride : row * stride + width]) for row in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit, greyscale, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 3)) + chunk(b"IEND", b"")
