"""The text inside a document's images (a DOCX's or PPTX's pictures, an HTML or Markdown ``data:``
image), read by the engine that reads PDF pages: an ``ImageReader`` (``parsing.figures``) over an
``OcrEngine``. PNG and JPEG only (``parsing.found_figures`` hands over nothing else). A reading the
engine is unsure of (a photograph read as stray letters) is no reading. Imports
``rag_ingest.core`` and ``rag_ingest.parsing``; docs/ocr.md, "Text inside figures".
"""

from __future__ import annotations

from rag_ingest.core.logs import logger
from rag_ingest.parsing.figures import ImageReading
from rag_ingest.parsing.ocr.engine import OcrEngine, OcrPageError

#: Below this mean confidence (0..1) an image's OCR is noise: a photograph, a drawing without words.
MIN_FIGURE_OCR_CONFIDENCE = 0.6


class OcrImageReader:
    """Reads the text in an image with ``engine``; an image the engine refuses reads as nothing
    (a throttled engine's ``TransientError`` goes up: the stage is retried)."""

    def __init__(self, engine: OcrEngine, *, min_confidence: float = MIN_FIGURE_OCR_CONFIDENCE) -> None:
        self._engine = engine
        self._min_confidence = min_confidence

    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        try:
            result = self._engine.recognize(image)
        except OcrPageError as error:
            logger.info("a figure's image not read", extra={"engine": self._engine.name, "reason": str(error)})
            return ImageReading()
        if result.confidence < self._min_confidence:
            return ImageReading()
        return ImageReading(ocr_text=result.text)
