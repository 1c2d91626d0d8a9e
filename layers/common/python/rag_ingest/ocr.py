"""OCR of pages without a text layer: the engine port, page rasterising, and the engines' choice.

A page *needs OCR* when its text layer yields (almost) no text but its content stream draws an
image (``pdf.parse_pdf`` decides, page by page: a mixed document OCRs only those pages). Such a
page is rasterised with pdfium (``pypdfium2``, which ships its own binary) at ``OCR_DPI`` and the
image (PNG) is handed to an :class:`OcrEngine`:

- ``local``: an offline engine on this machine (``rag_ingest.ocr_local``, Tesseract 5 through its
  command line; docs/ocr.md has the measurements that chose it);
- ``textract``: Amazon Textract's synchronous ``DetectDocumentText``, one call per page image
  (``rag_ingest.adapters.textract``; docs/ocr.md compares it with the asynchronous API).

The engine is chosen by the ``OCR_ENGINE`` environment variable (``rag_ingest.config.StagesEnv``),
validated at cold start. Engines raise ``OcrPageError`` for a page they cannot read (an image the
service rejects): that page is a failed page, not a failed document. Throttling and other
retryable service errors are ``TransientError`` (the stage is retried).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pypdfium2 is imported where a page is rasterised: parsing text PDFs never needs it
    from PIL.Image import Image

#: Resolution pages are rasterised at for OCR. 200 dpi gave the lowest character error rate per
#: second on the generated scans (docs/ocr.md): 150 loses small type, 300 costs twice the time.
OCR_DPI = 200
#: A page with fewer letters and digits than this in its text layer has no usable text layer
#: (a scan often carries a stray page number or a scanner's stamp).
MIN_TEXT_LAYER_CHARS = 16


@dataclass(frozen=True)
class OcrResult:
    """What an engine read on one page image: its text (lines in reading order) and the mean
    confidence of its lines, 0..1 (0 when nothing was read)."""

    text: str
    confidence: float


class OcrPageError(Exception):
    """The engine cannot read this page image (unsupported or damaged): a per-page failure."""


class OcrEngine(Protocol):
    """Reads the text on one page image (PNG bytes)."""

    @property
    def name(self) -> str: ...

    def recognize(self, png: bytes) -> OcrResult: ...


#: OCR'd pages per document unless configured (MAX_OCR_PAGES): OCR is the costliest step per page.
DEFAULT_MAX_OCR_PAGES = 50


@dataclass(frozen=True)
class PageOcr:
    """How Parse reads pages without a text layer: the engine, at most ``max_pages`` pages per
    document (the rest are failed pages), rasterised at ``dpi``."""

    engine: OcrEngine
    max_pages: int = DEFAULT_MAX_OCR_PAGES
    dpi: int = OCR_DPI


def render_page_png(pdf: bytes, page_index: int, dpi: int = OCR_DPI) -> bytes:
    """The page (0-based ``page_index``) of ``pdf`` rendered in greyscale at ``dpi``, as PNG.

    pdfium applies the page's ``/Rotate``, so the image is upright as a reader sees it.
    """
    return _png(render_page_image(pdf, page_index, dpi))


def render_page_image(pdf: bytes, page_index: int, dpi: int = OCR_DPI) -> Image:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(pdf)
    try:
        page = document[page_index]
        try:
            bitmap = page.render(scale=dpi / 72, grayscale=True)
            return bitmap.to_pil()
        finally:
            page.close()
    finally:
        document.close()


def _png(image: Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=1)  # fast: the engine decodes it at once
    return buffer.getvalue()
