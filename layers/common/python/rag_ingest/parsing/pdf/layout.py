"""A PDF page's words and their rectangles (:class:`PageLayout`), recorded at Parse.

The words come from the source that gave the page its text: its text layer, from pdfium's
character boxes joined into words (:func:`text_layer_layouts`), or an OCR engine's word boxes
(``OcrResult.words``), packed by :func:`pack_layout`. Rectangles are fractions of the page *as
displayed* (``/Rotate`` applied), origin top-left: Textract's convention
(https://docs.aws.amazon.com/textract/latest/APIReference/API_BoundingBox.html). The passages'
rectangles are made from these at Chunk (rag_ingest.ingest.passage_boxes; docs/formats.md,
"Rectangles of a PDF passage").
"""

from __future__ import annotations

import base64
import math
import re
import struct
from collections.abc import Iterable, Sequence

from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import PageLayout
from rag_ingest.parsing.ocr.engine import PlacedWord

_UNIT = 65535  # a packed coordinate's scale: 1.0 of the page
_WORD_RUN = re.compile(r"\S+")
#: A page with more characters than this in pdfium's text layer gets no layout (a pathological
#: page would otherwise cost a ctypes call per character); its passages have no rectangles.
MAX_LAYOUT_CHARS = 200_000


def pack_layout(words: Iterable[PlacedWord]) -> PageLayout | None:
    """The compact form of a page's words (None when there is none)."""
    texts: list[str] = []
    packed = bytearray()
    for word in words:
        text = "".join(word.text.split())
        if not text:
            continue
        texts.append(text)
        packed += struct.pack("<4H", *(_packed(value) for value in (word.x0, word.y0, word.x1, word.y1)))
    if not texts:
        return None
    return PageLayout(words=" ".join(texts), boxes=base64.b64encode(bytes(packed)).decode("ascii"))


def unpack_layout(layout: PageLayout) -> list[PlacedWord]:
    texts = layout.words.split(" ")
    raw = base64.b64decode(layout.boxes)
    if len(raw) != 8 * len(texts):
        raise ValueError(f"a layout of {len(texts)} words has {len(raw)} bytes of boxes, not {8 * len(texts)}")
    return [
        PlacedWord(text, *(value / _UNIT for value in struct.unpack_from("<4H", raw, 8 * index)))
        for index, text in enumerate(texts)
    ]


def _packed(value: float) -> int:
    return round(min(max(value, 0.0), 1.0) * _UNIT)


def displayed(x0: float, y0: float, x1: float, y1: float, rotation: int) -> tuple[float, float, float, float]:
    """A rectangle of the unrotated page (fractions, origin top-left) on the page as displayed
    after a clockwise ``rotation`` of 0, 90, 180 or 270 degrees."""
    corners = [(x0, y0), (x1, y1)]
    match rotation % 360:
        case 90:
            corners = [(1 - y, x) for x, y in corners]
        case 180:
            corners = [(1 - x, 1 - y) for x, y in corners]
        case 270:
            corners = [(y, 1 - x) for x, y in corners]
    xs = [x for x, _y in corners]
    ys = [y for _x, y in corners]
    return min(xs), min(ys), max(xs), max(ys)


def text_layer_layouts(pdf: bytes, page_numbers: Sequence[int]) -> dict[int, PageLayout]:
    """The layout of each page in ``page_numbers`` (1-based) from pdfium's text layer. A page
    pdfium cannot read, or with no word, has none: its text stands, its passages have no
    rectangles. Never raises for the document's sake: a PDF pypdf read is not failed here."""
    if not page_numbers:
        return {}
    import pypdfium2 as pdfium  # loaded by Parse only

    layouts: dict[int, PageLayout] = {}
    try:
        document = pdfium.PdfDocument(pdf)
    except Exception as error:  # pdfium refuses what pypdf read: no rectangles, nothing else lost
        logger.warning("pdfium cannot open the PDF: its passages get no rectangles: %r", error)
        return {}
    try:
        for number in page_numbers:
            try:
                layout = _page_layout(document, number - 1)
            except Exception as error:  # one page's geometry; its text is pypdf's and stands
                logger.warning("page %d: no word rectangles: %r", number, error)
                continue
            if layout is not None:
                layouts[number] = layout
    finally:
        document.close()
    return layouts


def _character(code: int) -> str:
    """A code point pdfium reports as a string of one character (a surrogate half, or nothing: U+FFFD)."""
    return chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else "\ufffd"


def _page_layout(document: object, index: int) -> PageLayout | None:
    import pypdfium2.raw as pdfium_c

    page = document[index]  # type: ignore[index]
    try:
        # The media box clipped by the crop box, inherited entries resolved: what a viewer shows.
        left, bottom, right, top = page.get_bbox()
        width, height = right - left, top - bottom
        if width <= 0 or height <= 0:
            return None
        rotation = int(page.get_rotation())
        textpage = page.get_textpage()
        try:
            count = textpage.count_chars()
            if count <= 0 or count > MAX_LAYOUT_CHARS:
                return None
            # Character by character: get_text_range's string can be shorter than the page's character
            # count (pdfium drops some), and then its offsets no longer name character boxes.
            raw, unicode_of = textpage.raw, pdfium_c.FPDFText_GetUnicode
            text = "".join(_character(unicode_of(raw, index)) for index in range(count))
            words: list[PlacedWord] = []
            # pdfium's calls direct, one rectangle reused, one pass a word: Parse calls this per character.
            loose_box, rect = pdfium_c.FPDFText_GetLooseCharBox, pdfium_c.FS_RECTF()
            for run in _WORD_RUN.finditer(text):
                low_x = low_y = math.inf
                high_x = high_y = -math.inf
                for index in range(run.start(), run.end()):
                    if not loose_box(raw, index, rect):
                        raise ValueError(f"pdfium has no box for character {index}")
                    box_left, box_bottom, box_right, box_top = rect.left, rect.bottom, rect.right, rect.top
                    if box_right <= box_left or box_top <= box_bottom:
                        continue  # an empty box (a space-like glyph) does not widen the word
                    low_x, high_x = min(low_x, box_left), max(high_x, box_right)
                    low_y, high_y = min(low_y, box_bottom), max(high_y, box_top)
                if low_x == math.inf:
                    continue
                x0, x1 = (low_x - left) / width, (high_x - left) / width
                y0, y1 = (top - high_y) / height, (top - low_y) / height
                words.append(PlacedWord(run.group(), *displayed(x0, y0, x1, y1, rotation)))
            return pack_layout(words)
        finally:
            textpage.close()
    finally:
        page.close()
