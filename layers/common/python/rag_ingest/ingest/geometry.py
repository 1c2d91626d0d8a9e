"""Where a passage stands on its PDF pages: word rectangles at Parse, passage rectangles at Chunk.

Parse records each PDF page's words with their rectangles (:class:`PageLayout`), from the source
that gave the page its text:
- a text layer: pdfium's character boxes (``pypdfium2``, already in the layer for rasterising),
  joined into words (:func:`text_layer_layouts`);
- an OCR'd page: the engine's own word boxes (Tesseract's TSV, Textract's ``WORD`` geometry,
  RapidOCR's line boxes shared out over their words), carried by ``OcrResult.words``.

The page text the chunker sees is pypdf's (cleaned: ligatures, hyphenation, running lines
dropped), not pdfium's, so words are matched, not indexed: :func:`passage_boxes` aligns each page's
text with its layout word by word (``difflib``, on case-folded NFKC word tokens, then the words
left over by nearness: :func:`align_page`), then gives every chunk the rectangles of the words
inside its offsets, merged into one rectangle per line. A word pypdf and pdfium split differently
(a hyphenated line end) has no rectangle; the passage's other words keep theirs.

Rectangles are fractions of the page *as displayed* (``/Rotate`` applied), origin top-left:
Textract's convention (https://docs.aws.amazon.com/textract/latest/APIReference/API_BoundingBox.html),
so a viewer multiplies them by the rendered page's size.
"""

from __future__ import annotations

import base64
import math
import re
import struct
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from difflib import SequenceMatcher
from typing import NamedTuple

from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import Chunk, PageLayout, PageText, PassageBox
from rag_ingest.ingest.chunking import PAGE_SEPARATOR
from rag_ingest.ingest.ocr import PlacedWord

_UNIT = 65535  # a packed coordinate's scale: 1.0 of the page
_WORD_RUN = re.compile(r"\S+")
_TOKEN = re.compile(r"\w+")
#: A page with more characters than this in pdfium's text layer gets no layout (a pathological
#: page would otherwise cost a ctypes call per character); its passages have no rectangles.
MAX_LAYOUT_CHARS = 200_000
#: How far (in words) from the in-order matches around it a left-over token may find its word.
_REORDER_WINDOW = 60
#: Words of one line: their vertical extents overlap by at least this share of the smaller one.
_SAME_LINE_OVERLAP = 0.5


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


# -- Parse: the text layer's words ---------------------------------------------------------------
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


# -- Chunk: a passage's rectangles -----------------------------------------------------------------
class _Aligned(NamedTuple):
    """A token of the page text (``start``..``end``) matched to the layout word at ``word``."""

    start: int
    end: int
    word: int


def align_page(text: str, words: Sequence[PlacedWord]) -> list[_Aligned]:
    """The page text's word tokens that match a layout word, in text order.

    First in order (``difflib``'s longest matching blocks); then each token left over is matched to
    the nearest layout word of the same token between the matches around it (give or take
    ``_REORDER_WINDOW`` words). That second pass is for text the page draws in another order than
    the text reads: a table's rows (whose merged cells the text repeats in every row they span,
    all of them pointing at the one drawn cell), a caption placed before its table."""
    text_tokens = [(match.start(), match.end(), _normal(match.group())) for match in _TOKEN.finditer(text)]
    word_tokens = [(index, _normal(token)) for index, word in enumerate(words) for token in _TOKEN.findall(word.text)]
    matcher = SequenceMatcher(None, [t[2] for t in text_tokens], [t[1] for t in word_tokens], autojunk=False)
    matched: dict[int, int] = {}  # text token -> word token
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            matched[block.a + offset] = block.b + offset
    where: dict[str, list[int]] = {}
    for position, (_index, token) in enumerate(word_tokens):
        where.setdefault(token, []).append(position)
    in_order = sorted(matched)
    for number, (_start, _end, token) in enumerate(text_tokens):
        if number in matched or token not in where:
            continue
        slot = bisect_left(in_order, number)
        before = matched[in_order[slot - 1]] if slot > 0 else 0
        after = matched[in_order[slot]] if slot < len(in_order) else len(word_tokens) - 1
        low, high = min(before, after) - _REORDER_WINDOW, max(before, after) + _REORDER_WINDOW
        middle = (before + after) / 2
        candidates = [position for position in where[token] if low <= position <= high]
        if candidates:
            matched[number] = min(candidates, key=lambda position: abs(position - middle))
    return [
        _Aligned(text_tokens[number][0], text_tokens[number][1], word_tokens[matched[number]][0])
        for number in sorted(matched)
    ]


def _normal(token: str) -> str:
    return unicodedata.normalize("NFKC", token).casefold()


def passage_boxes(chunks: Sequence[Chunk], pages: Sequence[PageText]) -> list[Chunk]:
    """``chunks`` (of ``pages``, offsets into their document text) with their rectangles: one per
    line of matched words on each page the chunk covers. Pages without a layout add none."""
    page_starts: list[int] = []
    position = 0
    for page in pages:
        page_starts.append(position)
        position += len(page.text) + len(PAGE_SEPARATOR)
    by_number = {page.page_number: (page, start) for page, start in zip(pages, page_starts, strict=True)}
    aligned: dict[int, tuple[list[PlacedWord], list[_Aligned]]] = {}

    def page_alignment(number: int) -> tuple[list[PlacedWord], list[_Aligned]] | None:
        if number not in aligned:
            page = by_number[number][0]
            if page.layout is None:
                return None
            words = unpack_layout(page.layout)
            aligned[number] = (words, align_page(page.text, words))
        return aligned[number]

    placed: list[Chunk] = []
    for chunk in chunks:
        boxes: list[PassageBox] = []
        for number in range(chunk.page_start, chunk.page_end + 1):
            if number not in by_number:
                continue
            page, page_start = by_number[number]
            alignment = page_alignment(number)
            if alignment is None:
                continue
            words, tokens = alignment
            first, last = chunk.char_start - page_start, chunk.char_end - page_start
            inside = sorted({token.word for token in tokens if token.start >= first and token.end <= last})
            boxes.extend(line_boxes(number, [words[index] for index in inside]))
        placed.append(chunk.model_copy(update={"boxes": boxes}) if boxes else chunk)
    return placed


def line_boxes(page: int, words: Sequence[PlacedWord]) -> list[PassageBox]:
    """``words`` (in the source's order) merged into one rectangle per line: a word joins the line
    before it when their vertical extents overlap and it does not start left of the line's start."""
    lines: list[list[float]] = []
    for word in words:
        if lines:
            line = lines[-1]
            overlap = min(line[3], word.y1) - max(line[1], word.y0)
            smaller = min(line[3] - line[1], word.y1 - word.y0)
            if smaller > 0 and overlap >= _SAME_LINE_OVERLAP * smaller and word.x0 >= line[0] - 1e-3:
                line[:] = [min(line[0], word.x0), min(line[1], word.y0), max(line[2], word.x1), max(line[3], word.y1)]
                continue
        lines.append([word.x0, word.y0, word.x1, word.y1])
    return [
        PassageBox(page=page, x0=round(x0, 4), y0=round(y0, 4), x1=round(x1, 4), y1=round(y1, 4))
        for x0, y0, x1, y1 in lines
    ]


def coverage(chunks: Sequence[Chunk], pages: Mapping[int, PageText]) -> float:
    """The share of chunks of pages with a layout that got at least one rectangle (a measure for
    docs/formats.md; 1.0 when no chunk stands on such a page)."""
    eligible = [
        chunk
        for chunk in chunks
        if any(
            pages[number].layout is not None
            for number in range(chunk.page_start, chunk.page_end + 1)
            if number in pages
        )
    ]
    return sum(1 for chunk in eligible if chunk.boxes) / len(eligible) if eligible else 1.0
