"""Where a passage stands on its PDF pages: each chunk's rectangles, from its pages' words (Chunk).

The page text the chunker sees is pypdf's, cleaned (ligatures, hyphenation, running lines
dropped), not the text the page's layout was read from (pdfium's, or an OCR engine's), so words
are matched, not indexed: :func:`align_page` aligns a page's text with its layout word by word
(``difflib`` on case-folded NFKC tokens, then the left-over tokens by nearness), and
:func:`passage_boxes` gives every chunk the rectangles of the words inside its offsets, merged
into one rectangle per line (a figure's passage keeps its figure's rectangle). A word the two
sources split differently has no rectangle.
Rectangles are in the layout's frame (rag_ingest.parsing.pdf.layout).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import NamedTuple

from rag_ingest.core.parsed import Chunk, PageText, PassageBox
from rag_ingest.ingest.chunking import PAGE_SEPARATOR
from rag_ingest.parsing.ocr.engine import PlacedWord
from rag_ingest.parsing.pdf.layout import unpack_layout

_TOKEN = re.compile(r"\w+")
#: How far (in words) from the in-order matches around it a left-over token may find its word.
_REORDER_WINDOW = 60
#: Words of one line: their vertical extents overlap by at least this share of the smaller one.
_SAME_LINE_OVERLAP = 0.5


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
        if chunk.figure_sources is not None:
            placed.append(chunk)  # a figure's rectangle is its own (the chunker's), not its words'
            continue
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
