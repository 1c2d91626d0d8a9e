"""Image readers behind ``figures.ImageReader``: the OCR engine already configured for pages, and
that engine with a vision model's description (AWS, when switched on).

:class:`OcrImageReader` reads the text inside a figure with an ``OcrEngine`` (Tesseract offline,
Textract in AWS), keeping only a confident reading; :class:`DescribingReader` adds a
:class:`Describer`'s description (``rag_ingest.adapters.vision``). Imports ``rag_ingest.core`` and
``rag_ingest.parsing`` only. The rules: docs/formats.md, "Figures".
"""

from __future__ import annotations

import re
from typing import Protocol

from rag_ingest.core.logs import logger
from rag_ingest.parsing.figures import ImageReader, ImageReading
from rag_ingest.parsing.ocr.engine import OcrEngine, OcrPageError

#: A figure's OCR reading below this mean confidence (0..1) is noise (a photograph's texture), not text.
MIN_FIGURE_OCR_CONFIDENCE = 0.55
_LETTERS = re.compile(r"[^\W\d_]{2,}|\d+")


class OcrImageReader:
    """The text inside an image, read by ``engine``: an empty reading when the engine cannot read
    the image or reads it with too little confidence. The engine's ``TransientError`` propagates."""

    def __init__(self, engine: OcrEngine, *, min_confidence: float = MIN_FIGURE_OCR_CONFIDENCE) -> None:
        self._engine = engine
        self._min_confidence = min_confidence

    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        try:
            result = self._engine.recognize(image)
        except OcrPageError as error:
            logger.warning("figure not read by OCR: %s", error)
            return ImageReading()
        if result.confidence < self._min_confidence:
            return ImageReading()
        # Lines without a word or a number are a drawing's strokes read as punctuation.
        lines = [line.strip() for line in result.text.splitlines() if _LETTERS.search(line)]
        return ImageReading(ocr_text="\n".join(lines))


class Describer(Protocol):
    """Describes an image in words (a vision model); ``context`` is its caption, for the prompt."""

    def describe(self, image: bytes, *, context: str = "") -> str: ...


class DescribingReader:
    """``ocr``'s reading plus ``describer``'s description, for at most ``max_described`` images
    (the rest get the OCR reading only, counted in ``over_cap``)."""

    def __init__(self, ocr: ImageReader, describer: Describer, *, max_described: int) -> None:
        self._ocr = ocr
        self._describer = describer
        self._max_described = max_described
        self.described = 0
        self.over_cap = 0

    def read(self, image: bytes, *, context: str = "") -> ImageReading:
        reading = self._ocr.read(image, context=context)
        if self.described >= self._max_described:
            self.over_cap += 1
            return reading
        self.described += 1
        description = self._describer.describe(image, context=context)
        return ImageReading(ocr_text=reading.ocr_text, description=description)
