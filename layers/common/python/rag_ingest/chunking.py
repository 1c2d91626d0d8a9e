"""Token-aware chunking of page texts into overlapping passages.

Offsets. A chunk's ``char_start``/``char_end`` index into the *document text*: the page texts
in the order given, joined with ``PAGE_SEPARATOR`` (see :func:`document_text`). Every chunk's
``text`` is exactly ``document_text(pages)[char_start:char_end]``, so a consumer can map a hit
back to the document (and, with ``page_start``/``page_end``, to its pages).

Method. The text is cut into units: sentences inside paragraphs (a paragraph is text between
blank lines; a page boundary always ends a paragraph). A sentence longer than the target is
cut on word boundaries, and a word longer than the target on character boundaries, so no text
is dropped. Units are packed greedily up to ``target_tokens``; when a chunk is at least half
full and the next paragraph would not fit, the chunk ends at the paragraph boundary. The next
chunk repeats the trailing whole units of the previous one, up to ``overlap_tokens``.

Token counts come from ``count_tokens``. Packing adds up per-unit counts, which is exact for
the WordPiece tokenizer (it splits on whitespace first); each chunk's ``token_count`` is counted
again on its final text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag_ingest.models import Chunk, PageText

PAGE_SEPARATOR = "\n\n"
#: A chunk this full (fraction of the target) ends early rather than split the next paragraph.
PARAGRAPH_BREAK_MIN_FILL = 0.5

_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# Terminal punctuation, optional closing quotes or brackets, then whitespace or the end.
_SENTENCE_END = re.compile(r"[.!?\u2026]+[\"'\u2019\u201d)\]]*(?=\s|$)")
_WORD = re.compile(r"\S+")
# Words whose trailing period does not end a sentence ("Dr. Smith"); compared lower-cased.
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "e.g", "i.e", "cf", "fig", "approx"}
)


@dataclass(frozen=True)
class _Unit:
    """A span of the document text that is never split further: a sentence or a piece of one."""

    start: int
    end: int
    tokens: int
    starts_paragraph: bool


def document_text(pages: Sequence[PageText]) -> str:
    """The text chunk offsets refer to: page texts in the given order, joined by ``PAGE_SEPARATOR``."""
    return PAGE_SEPARATOR.join(page.text for page in pages)


def chunk_pages(
    pages: list[PageText],
    *,
    count_tokens: Callable[[str], int],
    target_tokens: int = 300,
    overlap_tokens: int = 60,
) -> list[Chunk]:
    """Split the pages into chunks of at most about ``target_tokens`` tokens, overlapping by up to
    ``overlap_tokens``. Deterministic: the same pages and parameters give the same chunks."""
    if target_tokens < 1:
        raise ValueError(f"target_tokens must be at least 1, got {target_tokens}")
    if not 0 <= overlap_tokens < target_tokens:
        raise ValueError(f"overlap_tokens must be in [0, target_tokens), got {overlap_tokens}")

    text = document_text(pages)
    page_starts, page_numbers = _page_offsets(pages)
    units = _units(text, page_starts, count_tokens=count_tokens, limit=target_tokens)
    paragraph_tokens = _paragraph_tokens_from(units)

    chunks: list[Chunk] = []
    first = 0
    first_new = 0  # units before this index were already in the previous chunk (overlap)
    while first < len(units):
        end = first
        total = 0
        while end < len(units):
            unit = units[end]
            if total + unit.tokens > target_tokens:
                break
            if (
                end > first_new
                and unit.starts_paragraph
                and total >= target_tokens * PARAGRAPH_BREAK_MIN_FILL
                and paragraph_tokens[end] > target_tokens - total
            ):
                break
            total += unit.tokens
            end += 1
        # Every unit fits the target on its own, so the chunk holds at least one new unit.
        char_start, char_end = units[first].start, units[end - 1].end
        chunk_text = text[char_start:char_end]
        chunks.append(
            Chunk(
                chunk_index=len(chunks),
                text=chunk_text,
                page_start=page_numbers[bisect_right(page_starts, char_start) - 1],
                page_end=page_numbers[bisect_right(page_starts, char_end - 1) - 1],
                char_start=char_start,
                char_end=char_end,
                token_count=count_tokens(chunk_text),
            )
        )
        if end >= len(units):
            break
        first = _overlap_start(units, first, end, overlap_tokens=overlap_tokens, target_tokens=target_tokens)
        first_new = end
    return chunks


def _overlap_start(units: list[_Unit], first: int, end: int, *, overlap_tokens: int, target_tokens: int) -> int:
    """First unit of the next chunk: trailing whole units of this chunk, within the overlap budget,
    leaving room for the next new unit and always moving past this chunk's first unit."""
    start = end
    overlap = 0
    next_tokens = units[end].tokens
    while start - 1 > first:
        candidate = overlap + units[start - 1].tokens
        if candidate > overlap_tokens or candidate + next_tokens > target_tokens:
            break
        overlap = candidate
        start -= 1
    return start


def _page_offsets(pages: Sequence[PageText]) -> tuple[list[int], list[int]]:
    starts: list[int] = []
    numbers: list[int] = []
    offset = 0
    for page in pages:
        starts.append(offset)
        numbers.append(page.page_number)
        offset += len(page.text) + len(PAGE_SEPARATOR)
    return starts, numbers


def _units(text: str, page_starts: list[int], *, count_tokens: Callable[[str], int], limit: int) -> list[_Unit]:
    units: list[_Unit] = []
    if not page_starts:
        return units
    page_bounds = [*page_starts[1:], len(text) + len(PAGE_SEPARATOR)]
    for page_start, next_page_start in zip(page_starts, page_bounds, strict=True):
        page_end = next_page_start - len(PAGE_SEPARATOR)
        for paragraph_start, paragraph_end in _paragraph_spans(text, page_start, page_end):
            starts_paragraph = True
            for sentence_start, sentence_end in _sentence_spans(text, paragraph_start, paragraph_end):
                tokens = count_tokens(text[sentence_start:sentence_end])
                if tokens <= limit:
                    pieces = [(sentence_start, sentence_end, tokens)]
                else:
                    pieces = _split_oversized(text, sentence_start, sentence_end, count_tokens, limit)
                for piece_start, piece_end, piece_tokens in pieces:
                    units.append(_Unit(piece_start, piece_end, piece_tokens, starts_paragraph))
                    starts_paragraph = False
    return units


def _paragraph_tokens_from(units: list[_Unit]) -> list[int]:
    """For each unit that starts a paragraph: the tokens of that whole paragraph (else 0)."""
    totals = [0] * len(units)
    running = 0
    for index in range(len(units) - 1, -1, -1):
        running += units[index].tokens
        if units[index].starts_paragraph:
            totals[index] = running
            running = 0
    return totals


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _paragraph_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = start
    for match in _PARAGRAPH_BREAK.finditer(text, start, end):
        spans.append(_strip_span(text, cursor, match.start()))
        cursor = match.end()
    spans.append(_strip_span(text, cursor, end))
    return [(span_start, span_end) for span_start, span_end in spans if span_end > span_start]


def _sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if not _ends_sentence(text, match, end):
            continue
        spans.append(_strip_span(text, cursor, match.end()))
        cursor = match.end()
    spans.append(_strip_span(text, cursor, end))
    return [(span_start, span_end) for span_start, span_end in spans if span_end > span_start]


def _ends_sentence(text: str, match: re.Match[str], limit: int) -> bool:
    following = text[match.end() : min(limit, match.end() + 8)].lstrip()
    if following and following[0].islower():
        return False  # "e.g. the", "approx. five": the sentence goes on
    if match.group() != ".":
        return True
    word_start = text.rfind(" ", 0, match.start()) + 1
    word_start = max(word_start, text.rfind("\n", 0, match.start()) + 1)
    word = text[word_start : match.start()].lstrip("(\"'")
    if word.lower() in _ABBREVIATIONS:
        return False
    return not (len(word) == 1 and word.isupper())  # an initial, as in "J. Smith"


def _split_oversized(
    text: str, start: int, end: int, count_tokens: Callable[[str], int], limit: int
) -> list[tuple[int, int, int]]:
    """Cut an over-long sentence into pieces of at most ``limit`` tokens on word boundaries
    (characters for a single over-long word). Returns (start, end, tokens) spans."""
    atoms: list[tuple[int, int, int]] = []
    for word in _WORD.finditer(text, start, end):
        word_tokens = count_tokens(word.group())
        if word_tokens <= limit:
            atoms.append((word.start(), word.end(), word_tokens))
        else:
            atoms.extend(_split_word(text, word.start(), word.end(), count_tokens, limit))

    pieces: list[tuple[int, int, int]] = []
    first = 0
    while first < len(atoms):
        stop = first + 1
        total = atoms[first][2]
        while stop < len(atoms) and total + atoms[stop][2] <= limit:
            total += atoms[stop][2]
            stop += 1
        # Summed counts are exact for WordPiece; re-check for tokenizers that are not additive.
        piece_tokens = count_tokens(text[atoms[first][0] : atoms[stop - 1][1]])
        while piece_tokens > limit and stop - first > 1:
            stop -= 1
            piece_tokens = count_tokens(text[atoms[first][0] : atoms[stop - 1][1]])
        pieces.append((atoms[first][0], atoms[stop - 1][1], piece_tokens))
        first = stop
    return pieces


def _split_word(
    text: str, start: int, end: int, count_tokens: Callable[[str], int], limit: int
) -> list[tuple[int, int, int]]:
    """Cut one whitespace-free run (a URL, a hash, a table row without spaces) by characters."""
    pieces: list[tuple[int, int, int]] = []
    while start < end:
        # Largest prefix within the limit, by binary search; one character always fits.
        low, high = start + 1, end
        while low < high:
            middle = (low + high + 1) // 2
            if count_tokens(text[start:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        pieces.append((start, low, count_tokens(text[start:low])))
        start = low
    return pieces
