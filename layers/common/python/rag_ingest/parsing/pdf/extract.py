"""PDF checks and text extraction (pypdf, plain mode).

Cheap checks run before any parsing, in this order: size, ``%PDF-`` magic bytes, then (after
opening) encryption and page count. :func:`validate_pdf_header` holds the first two so a
Validate stage can run them on a ranged GET of the object's first bytes plus its size.

Empty versus no text layer (both mean "nothing to index"):

- ``EMPTY_DOCUMENT``: the PDF has zero pages, or none of its pages draws anything (no text,
  image, shading or path painting operator in any content stream): there is nothing to read.
- ``NO_TEXT_LAYER``: at least one page draws something, but no page yields text, even by OCR
  (or OCR is off): a drawing, or a scan OCR could not read.

Pages without a text layer (:mod:`rag_ingest.parsing.ocr.engine`): a page whose text layer holds fewer than
``MIN_TEXT_LAYER_CHARS`` letters and digits but which draws an image (an image or form XObject,
or an inline image) *needs OCR*. With an :class:`~rag_ingest.parsing.ocr.engine.PageOcr` such pages are
rasterised and read by its engine (at most ``max_pages`` of them per document: the rest are
failed pages, with the reason in ``failure_reasons``); each page records how its text was
obtained (``PageText.source``) and, for OCR, the engine's mean confidence. Without one they
are failed pages ("no text layer, OCR off"), never silently empty. An engine that cannot work
where it runs (``OcrUnavailableError``, e.g. Textract not offered in the region) fails its first
page with that reason, and the range's other pages needing OCR with the same reason, unrasterised.

Cleanup (:func:`clean_pages`) works on the whole document, because two of its rules need
evidence from every page:

- characters: ligatures (U+FB00-FB06) become letters; control and invisible format characters
  go; runs of horizontal whitespace become one space; lines are stripped.
- running headers and footers: a line among the first or last ``RUNNING_LINE_ZONE`` lines of a
  page whose *signature* (case-folded, digits and lone roman numerals masked) recurs in the same
  zone on at least half of the pages (and at least 3), or, when it carries a number, on a page at
  most ``RUNNING_LINE_NEIGHBOURHOOD`` pages away (chapter headers change every few pages; odd
  and even pages alternate). Page numbers are the commonest case. Only page numbers are removed
  by default (``SHIPPED_CLEANUP_RULES``): removing the other running lines did not help retrieval
  on the eval's test split (README, "Retrieval quality").
- line-end hyphenation: ``exam-\\nple`` becomes ``example``, unless the document spells the word
  with a hyphen more often than without, or the break follows a capitalised word and both halves
  are dictionary words while the joined form is not (``Unicode-\\ncapable``). A capital after the
  break (``Anglo-\\nSaxon``) keeps its hyphen.

Text is extracted in pypdf's plain mode (content-stream order), which keeps the columns of a
two-column page apart, left column first; layout mode would interleave them line by line.

Tables (:mod:`rag_ingest.parsing.pdf.tables`): a page's ruled tables, and the tables an OCR engine
found, replace the loose lines of their cells in that text as TABLE blocks of the page (rows under
their header); cleanup (:func:`clean_page_texts`) keeps their rows whole, and a table continued on
the next page is joined to its first part (:func:`join_continued_tables`, with the cleanup when the
page ranges are joined). ``tables=False`` is the ablation's switch.

Budgets (:class:`ParseBudget`): a hostile PDF must cost seconds, never the function's timeout.
Each page gets a time budget (enforced by an interval timer that interrupts the extraction, in
the main thread, as a Lambda handler runs; elsewhere checked after the page), a budget of
decoded content-stream bytes and of extracted characters; pypdf's own decompression limits
(flate bombs) count as the size budget. A page over budget is a failed page (listed in
``failed_pages``), and the document has a total time and text budget. ``PDF_TOO_COMPLEX`` is
the code when no page could be read within budget, or a document budget ran out. Every text pass of the
cleanup is linear in the text's length.
"""

from __future__ import annotations

import io
import math
import re
import signal
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import groupby, pairwise
from typing import TypeVar

from pypdf import PageObject, PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError, PdfReadError
from pypdf.generic import ArrayObject, StreamObject

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import BlockKind, PageLayout, PageText, ParsedDocument, ParsedRange, TextBlock, TextSource
from rag_ingest.core.tokens import is_vocabulary_word
from rag_ingest.parsing.blocks import TABLE_CAPTION
from rag_ingest.parsing.ocr.engine import (
    MIN_TEXT_LAYER_CHARS,
    OcrPageError,
    OcrUnavailableError,
    PageOcr,
    render_page_png,
)
from rag_ingest.parsing.pdf.fonts import fonts_read_once
from rag_ingest.parsing.pdf.layout import pack_layout, text_layer_layouts
from rag_ingest.parsing.pdf.tables import (
    CONTINUED_MARK,
    TableRows,
    continues_table,
    find_page_tables,
    place_tables,
    table_rows,
)

PDF_MAGIC = b"%PDF-"
#: Acrobat accepts the header anywhere in the first 1024 bytes (some producers prepend junk).
PDF_MAGIC_WINDOW_BYTES = 1024

_LIGATURES = {
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
}
_LIGATURE_TABLE = str.maketrans(_LIGATURES)
# Control characters (Unicode category Cc) that are not whitespace, plus invisible format
# characters that split words for the tokenizer: soft hyphen, zero-width space, word joiner, BOM.
# Whitespace controls (tab, form feed, ...) are left to the whitespace collapsing below.
_INVISIBLE_CHARS = re.compile(
    "["
    + "".join(re.escape(chr(code)) for code in [*range(0x20), *range(0x7F, 0xA0)] if not chr(code).isspace())
    + "\u00ad\u200b\u2060\ufeff]"
)
# Hyphen at a line end between two words (after whitespace is normalised): a candidate broken word.
# The look-behind lets a match start only where a run of letters starts: without it the engine
# re-scans a run from each of its letters, quadratic on a long one (300,000 letters: ~17 minutes).
_LINE_END_HYPHEN = re.compile(r"(?<![^\W\d_])([^\W\d_]+)-\n([^\W\d_]+)")
# A hyphenated compound written on one line ("right-to-left"): evidence the hyphen is real.
_INLINE_HYPHENATED = re.compile(r"(?<![\w-])[^\W\d_]+(?:-[^\W\d_]+)+(?![\w-])")
_LETTERS = re.compile(r"[^\W\d_]+")
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{3,}")

#: Lines at the top and at the bottom of a page that may be a running header or footer.
RUNNING_LINE_ZONE = 3
#: A line recurring in its zone on this share of the pages (and on at least 3) is running text.
RUNNING_LINE_MIN_SHARE = 0.5
RUNNING_LINE_MIN_PAGES = 3
#: A line with a number (page, chapter) recurring this close is running text too.
RUNNING_LINE_NEIGHBOURHOOD = 2
_DIGITS = re.compile(r"\d+")
_LONE_ROMAN_NUMERAL = re.compile(r"^[ivxlcdm]+$")
# A bare page number, perhaps decorated: "7", "- 7 -", "Page 7", "7 of 30", "7/30".
_PAGE_NUMBER_SIGNATURE = re.compile(r"^(page)?\W*#\W*((of|/)\W*#)?\W*$")
# Zone index for bare page numbers: they count together whether printed at the top or the bottom.
_PAGE_NUMBER_ZONE = 2
# The pattern above backtracks quadratically on a long run of punctuation; a page number is short.
_PAGE_NUMBER_MAX_CHARS = 40

# Content-stream operators that put marks on a page: text showing, images (XObjects, inline),
# shadings, and path painting. A page without any of them is blank to a reader.
_MARKING_OPERATORS = frozenset(
    {b"Tj", b"TJ", b"'", b'"', b"Do", b"BI", b"INLINE IMAGE", b"sh"}
    | {b"f", b"F", b"f*", b"S", b"s", b"B", b"B*", b"b", b"b*"}
)
# Operators that draw an XObject (an image, or a form that may hold one) or an inline image.
_IMAGE_OPERATORS = frozenset({b"Do", b"BI", b"INLINE IMAGE"})
_ALPHANUMERIC = re.compile(r"[^\W_]")


_T = TypeVar("_T")


@dataclass(frozen=True)
class ParseBudget:
    """What one PDF may cost the parser (the defaults fit in the Parse function's timeout many times).

    A real page holds well under 20,000 characters and a few hundred KB of content stream; a
    scanned or vector-heavy page more, but extracts in well under a second.
    """

    page_seconds: float = 10.0
    page_content_bytes: int = 32 * 1024 * 1024
    page_text_chars: int = 500_000
    document_seconds: float = 180.0
    # A dense 500-page book is ~3 M characters; more text than this would make Chunk the victim.
    document_text_chars: int = 5_000_000


DEFAULT_BUDGET = ParseBudget()


class _PageOverBudget(BaseException):
    """Raised by the interval timer inside pypdf. A BaseException, so pypdf's many
    ``except Exception`` handlers cannot swallow it and carry on."""


class _BudgetExceeded(Exception):
    """A page went over one of its budgets (time, content bytes, characters)."""


@contextmanager
def _interrupt_after(seconds: float) -> Iterator[None]:
    """Raise ``_PageOverBudget`` in this thread after ``seconds``, if it is the main thread (only
    there can a signal interrupt it); elsewhere do nothing (the caller checks the clock after).

    The previous SIGALRM handler and timer (e.g. pytest-timeout's) are restored, the latter
    less the time spent here.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise _PageOverBudget

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay > 0:
            remaining = max(previous_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_interval)


def _within_budget(seconds: float, work: Callable[[], _T]) -> _T:
    """``work()``, or ``_BudgetExceeded`` when it takes longer than ``seconds`` (or hits pypdf's limits)."""
    started = time.monotonic()
    try:
        with _interrupt_after(seconds):
            result = work()
    except _PageOverBudget:
        raise _BudgetExceeded(f"took more than {seconds:g} s") from None
    except LimitReachedError as error:
        raise _BudgetExceeded(f"pypdf limit: {error}") from error
    except RecursionError as error:
        raise _BudgetExceeded("nested too deeply") from error
    if time.monotonic() - started > seconds:
        raise _BudgetExceeded(f"took more than {seconds:g} s")
    return result


def validate_pdf_header(head: bytes, size: int, *, max_bytes: int) -> None:
    """Check the object's size and its first bytes (at least the first 1024 when available).

    Raises ``PermanentError`` EMPTY_FILE, FILE_TOO_LARGE or UNSUPPORTED_TYPE. The file name is
    not looked at: only the ``%PDF-`` signature counts.
    """
    if size == 0:
        raise PermanentError(ErrorCode.EMPTY_FILE, "the file is empty (0 bytes)")
    if size > max_bytes:
        raise PermanentError(ErrorCode.FILE_TOO_LARGE, f"{size} bytes exceeds the limit of {max_bytes} bytes")
    if PDF_MAGIC not in head[:PDF_MAGIC_WINDOW_BYTES]:
        raise PermanentError(
            ErrorCode.UNSUPPORTED_TYPE,
            f"no %PDF- signature in the first {PDF_MAGIC_WINDOW_BYTES} bytes: not a PDF file",
        )


def clean_page_text(text: str) -> str:
    """Clean one page on its own: :func:`clean_pages` without the rules that compare pages."""
    return clean_pages([text])[0]


@dataclass(frozen=True)
class CleanupRules:
    """Which cleanup rules :func:`clean_pages` applies; the evaluation's ablation switches them
    one at a time (``python -m eval.ablation``)."""

    ligatures: bool = True
    invisible_chars: bool = True
    whitespace: bool = True
    running_headers: bool = True  # running header and footer lines other than page numbers
    page_numbers: bool = True
    dehyphenation: bool = True


ALL_CLEANUP_RULES = CleanupRules()
#: What parsing applies. Running-header removal is off: on the eval's test split it did not help
#: (hybrid MRR 0.917 without it against 0.915, k-NN 0.852 against 0.833), the headers are often the
#: only place a chunk names its chapter, and it emptied documents whose every page is one line.
SHIPPED_CLEANUP_RULES = CleanupRules(running_headers=False)


def clean_pages(texts: Sequence[str], rules: CleanupRules = SHIPPED_CLEANUP_RULES) -> list[str]:
    """Normalise the extracted text of a document's pages (see the module docstring).

    Line breaks are kept (a paragraph break stays one blank line); runs of other whitespace
    become one space. Returns one text per page, in order; an empty page stays empty.
    """
    pages = [PageText(page_number=number, text=text) for number, text in enumerate(texts, start=1)]
    return [page.text for page in clean_page_texts(pages, rules)]


def clean_page_texts(pages: Sequence[PageText], rules: CleanupRules = SHIPPED_CLEANUP_RULES) -> list[PageText]:
    """:func:`clean_pages` on pages that may hold TABLE blocks (``rag_ingest.parsing.pdf.tables``).

    A table's lines get the character rules only: they are never dropped as running lines nor
    joined by dehyphenation (a row is not a wrapped line), and each table stays a paragraph of its
    own, its block's offsets moved to where the cleaned text has it. Without tables, the same
    text as :func:`clean_pages`.
    """
    pages_lines: list[list[str]] = []
    pages_tables: list[list[int | None]] = []  # per line: the index of the table it belongs to
    for page in pages:
        lines, owners = [], []
        for table, segment in _segments(page):
            segment_lines = _normalise_characters(segment, rules).split("\n")
            if table is not None:
                segment_lines = [line for line in segment_lines if line]
            lines.extend(segment_lines)
            owners.extend([table] * len(segment_lines))
        pages_lines.append(lines)
        pages_tables.append(owners)
    protected = [{index for index, owner in enumerate(owners) if owner is not None} for owners in pages_tables]
    dropped = _running_line_indices(pages_lines, rules, protected)
    hyphenation = _HyphenationEvidence(
        [
            "\n".join(line for index, line in enumerate(lines) if index not in gone)
            for lines, gone in zip(pages_lines, dropped, strict=True)
        ]
    )
    cleaned = []
    for page, lines, owners, gone in zip(pages, pages_lines, pages_tables, dropped, strict=True):
        tables = sorted((block for block in page.blocks if block.kind is BlockKind.TABLE), key=lambda b: b.start)
        parts: list[str] = []
        blocks: list[TextBlock] = []
        offset = 0
        kept = [pair for index, pair in enumerate(zip(lines, owners, strict=True)) if index not in gone]
        for owner, group in groupby(kept, key=lambda item: item[1]):
            text = "\n".join(line for line, _owner in group)
            if owner is None:
                if rules.dehyphenation:
                    text = _LINE_END_HYPHEN.sub(hyphenation.resolve, text)
                text = _BLANK_LINES.sub("\n\n", text).strip()
            if not text:
                continue
            if parts:
                offset += 2  # the blank line before this part
            if owner is not None:
                blocks.append(tables[owner].model_copy(update={"start": offset, "end": offset + len(text)}))
            parts.append(text)
            offset += len(text)
        cleaned.append(page.model_copy(update={"text": "\n\n".join(parts), "blocks": blocks}))
    return cleaned


def join_continued_tables(pages: Sequence[PageText]) -> list[PageText]:
    """``pages`` (cleaned, in order) with each table continued from the previous page marked as such
    (``TextBlock.continues``: the chunker reads its rows under the first table's header) and its
    repeated header row, if any, dropped from its page's text.

    A page's first table continues the previous page's last table when the pages follow each other,
    nothing but running lines stand between the two tables (after the first on its page: the table
    reaches the bottom of its page's text; before the second: it starts at the top of its page's),
    and the tables agree (:func:`rag_ingest.parsing.pdf.tables.continues_table`: the same columns
    at the same places, and a first row that repeats the header or is more of the body). A running
    line is a line among the first or last ``RUNNING_LINE_ZONE`` lines of its page whose signature
    (numbers masked) recurs in that zone on another page, or a line saying the table goes on
    ("(continued)"); a caption of its own ("Table 4: ..."), a heading or a sentence is not, and keeps
    the two tables apart. Each page keeps its own text and words, so pages and rectangles stay exact."""
    result = list(pages)
    if len(result) < 2 or not any(block.kind is BlockKind.TABLE for page in result for block in page.blocks):
        return result
    zones = _zone_signatures(result)
    chain_headers: dict[int, list[str]] = {}  # page index -> the header row its continued table reads under
    for index in range(len(result) - 1):
        page, following = result[index], result[index + 1]
        if following.page_number != page.page_number + 1:
            continue
        tables = [block for block in page.blocks if block.kind is BlockKind.TABLE]
        next_tables = [block for block in following.blocks if block.kind is BlockKind.TABLE]
        if not tables or not next_tables:
            continue
        first, second = tables[-1], next_tables[0]
        if not (
            _only_running_lines(page.text[first.end :], zones, 1, index)
            and _only_running_lines(following.text[: second.start], zones, 0, index + 1)
        ):
            continue
        first_rows = table_rows(page.text[first.start : first.end])
        if first.continues and index in chain_headers:  # a table over three pages or more
            first_rows = [chain_headers[index], *first_rows]
        second_rows = table_rows(following.text[second.start : second.end])
        verdict = continues_table(first_rows, first.columns, second_rows, second.columns)
        if verdict is None or (verdict and len(second_rows) < 2):
            continue
        chain_headers[index + 1] = first_rows[0]
        result[index + 1] = _continued(following, second, drop_first_row=verdict)
    return result


def _zone_signatures(pages: Sequence[PageText]) -> dict[tuple[int, str], set[int]]:
    """(zone, line signature) -> the indices of the pages holding such a line outside their tables
    among their first (zone 0) or last (zone 1) ``RUNNING_LINE_ZONE`` lines."""
    found: defaultdict[tuple[int, str], set[int]] = defaultdict(set)
    for index, page in enumerate(pages):
        lines = [line.strip() for table, segment in _segments(page) if table is None for line in segment.split("\n")]
        for zone, indices in enumerate(_zone_indices(lines)):
            for line_index in indices:
                found[(zone, _line_signature(lines[line_index]))].add(index)
    return found


def _only_running_lines(text: str, zones: Mapping[tuple[int, str], set[int]], zone: int, index: int) -> bool:
    """Whether every line of ``text`` (at the bottom, zone 1, or the top, zone 0, of page ``index``)
    is a running line: its signature in that zone on another page too, or a "continued" mark."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if len(lines) > RUNNING_LINE_ZONE:
        return False
    for line in lines:
        if CONTINUED_MARK.search(line):
            continue
        if TABLE_CAPTION.match(line) or not zones.get((zone, _line_signature(line)), set()) - {index}:
            return False
    return True


def _continued(page: PageText, block: TextBlock, *, drop_first_row: bool) -> PageText:
    """``page`` with ``block`` (a TABLE block) marked as continuing the previous page's table, its
    first row (a repeated header) cut out of the text when ``drop_first_row``."""
    removed = 0
    if drop_first_row:
        row_end = page.text.index("\n", block.start, block.end)
        removed = row_end + 1 - block.start
    text = page.text[: block.start] + page.text[block.start + removed :]
    blocks = [
        other.model_copy(update={"end": other.end - removed, "continues": True})
        if other is block
        else other.model_copy(update={"start": other.start - removed, "end": other.end - removed})
        if other.start >= block.end
        else other
        for other in page.blocks
    ]
    return page.model_copy(update={"text": text, "blocks": blocks})


def _segments(page: PageText) -> list[tuple[int | None, str]]:
    """The page's text cut at its TABLE blocks: (None, text) between tables, (k, table text) for the k-th."""
    tables = sorted((block.start, block.end) for block in page.blocks if block.kind is BlockKind.TABLE)
    segments: list[tuple[int | None, str]] = []
    cursor = 0
    for number, (start, end) in enumerate(tables):
        segments.append((None, page.text[cursor:start]))
        segments.append((number, page.text[start:end]))
        cursor = end
    segments.append((None, page.text[cursor:]))
    return segments


def _normalise_characters(text: str, rules: CleanupRules = SHIPPED_CLEANUP_RULES) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if rules.ligatures:
        text = text.translate(_LIGATURE_TABLE)
    if rules.invisible_chars:
        text = _INVISIBLE_CHARS.sub("", text)
    if rules.whitespace:
        text = _HORIZONTAL_SPACE.sub(" ", text)
    return "\n".join(line.strip() for line in text.split("\n"))


def _line_signature(line: str) -> str:
    """What a running header keeps from page to page: case-folded, numbers masked."""
    folded = line.casefold()
    if _LONE_ROMAN_NUMERAL.fullmatch(folded):
        return "#"  # front-matter page numbers: i, ii, iv, ...
    return _DIGITS.sub("#", folded)


def _zone_indices(lines: list[str]) -> tuple[list[int], list[int]]:
    """Indices of the first and of the last ``RUNNING_LINE_ZONE`` non-empty lines."""
    filled = [index for index, line in enumerate(lines) if line]
    return filled[:RUNNING_LINE_ZONE], filled[-RUNNING_LINE_ZONE:]


def _zone_key(zone: int, signature: str) -> tuple[int, str]:
    page_number = len(signature) <= _PAGE_NUMBER_MAX_CHARS and _PAGE_NUMBER_SIGNATURE.fullmatch(signature)
    return (_PAGE_NUMBER_ZONE if page_number else zone, signature)


def _drop_running_lines(pages_lines: list[list[str]], rules: CleanupRules = SHIPPED_CLEANUP_RULES) -> list[list[str]]:
    """Remove running headers and footers (page numbers included) from every page."""
    dropped = _running_line_indices(pages_lines, rules)
    return [
        [line for index, line in enumerate(lines) if index not in gone]
        for lines, gone in zip(pages_lines, dropped, strict=True)
    ]


def _running_line_indices(
    pages_lines: list[list[str]],
    rules: CleanupRules = SHIPPED_CLEANUP_RULES,
    protected: Sequence[set[int]] | None = None,
) -> list[set[int]]:
    """For each page, the indices of its running header and footer lines (page numbers included).
    ``protected`` lines (a table's rows) are neither counted nor dropped."""
    if protected is not None:
        pages_lines = [
            ["" if index in keep else line for index, line in enumerate(lines)]
            for lines, keep in zip(pages_lines, protected, strict=True)
        ]
    pages_with_text = sum(1 for lines in pages_lines if any(lines))
    if pages_with_text < 2:
        return [set() for _ in pages_lines]
    min_pages = max(RUNNING_LINE_MIN_PAGES, math.ceil(RUNNING_LINE_MIN_SHARE * pages_with_text))
    zones = [_zone_indices(lines) for lines in pages_lines]
    # (zone, signature) -> the pages on which it occurs in that zone
    occurrences: defaultdict[tuple[int, str], set[int]] = defaultdict(set)
    for page_index, (lines, page_zones) in enumerate(zip(pages_lines, zones, strict=True)):
        for zone, indices in enumerate(page_zones):
            for index in indices:
                occurrences[_zone_key(zone, _line_signature(lines[index]))].add(page_index)

    def running(zone: int, signature: str, page_index: int) -> bool:
        if sum(ch.isalpha() for ch in signature) < 3 and "#" not in signature:
            return False  # too little to tell a header from a stray symbol
        key = _zone_key(zone, signature)
        if not (rules.page_numbers if key[0] == _PAGE_NUMBER_ZONE else rules.running_headers):
            return False
        pages = occurrences[key]
        if len(pages) >= (RUNNING_LINE_MIN_PAGES if key[0] == _PAGE_NUMBER_ZONE else min_pages):
            return True
        return "#" in signature and any(
            other != page_index and abs(other - page_index) <= RUNNING_LINE_NEIGHBOURHOOD for other in pages
        )

    return [
        {
            index
            for zone, indices in enumerate(page_zones)
            for index in indices
            if running(zone, _line_signature(lines[index]), page_index)
        }
        for page_index, (lines, page_zones) in enumerate(zip(pages_lines, zones, strict=True))
    ]


class _HyphenationEvidence:
    """Decides, for each ``word-\\nword`` at a line end, whether the hyphen is layout or spelling."""

    def __init__(self, pages: Sequence[str]) -> None:
        self._words = Counter(word.casefold() for page in pages for word in _LETTERS.findall(page))
        # "right-to-left" is evidence for "right-to" and "to-left" too.
        self._compounds: Counter[str] = Counter()
        for page in pages:
            for compound in _INLINE_HYPHENATED.findall(page):
                parts = compound.casefold().split("-")
                self._compounds.update(f"{a}-{b}" for a, b in pairwise(parts))

    def resolve(self, match: re.Match[str]) -> str:
        before, after = match.group(1), match.group(2)
        if not after[0].islower():
            return match.group(0)  # "Anglo-\nSaxon": a capital after the break is a real compound
        joined = (before + after).casefold()
        hyphenated = f"{before}-{after}".casefold()
        if self._compounds[hyphenated] > self._words[joined]:
            return match.group(0)  # the document writes it with a hyphen elsewhere
        if self._words[joined]:
            return before + after
        if (
            before[0].isupper()
            and min(len(before), len(after)) >= 3
            and is_vocabulary_word(before)
            and is_vocabulary_word(after)
            and not is_vocabulary_word(joined)
        ):
            return match.group(0)  # "Unicode-\ncapable": two words, not one broken word
        return before + after


def parse_pdf(
    data: bytes,
    *,
    max_bytes: int,
    max_pages: int,
    clean: bool = True,
    budget: ParseBudget = DEFAULT_BUDGET,
    ocr: PageOcr | None = None,
    tables: bool = True,
) -> ParsedDocument:
    """Extract the text of every page of the PDF in ``data``, cleaned by :func:`clean_pages`
    (``clean=False`` keeps pypdf's raw text: for baselines and benchmarks). Pages that need OCR
    are read by ``ocr`` (see the module docstring). ``tables``: tables become TABLE blocks
    (:mod:`rag_ingest.parsing.pdf.tables`); off, their cells stay loose lines (the ablation's switch).

    Raises ``PermanentError`` with FILE_TOO_LARGE, UNSUPPORTED_TYPE, CORRUPT_PDF, ENCRYPTED_PDF,
    TOO_MANY_PAGES, PDF_TOO_COMPLEX, EMPTY_DOCUMENT or NO_TEXT_LAYER. A page whose extraction
    fails or goes over ``budget`` is listed in ``failed_pages`` (1-based) and kept with empty text;
    if every page fails, the PDF is corrupt (or too complex, when a budget failed a page). The
    OCR engine's ``TransientError`` (throttling) propagates: the stage is retried.

    The whole document is one page range: :func:`parse_page_range` then :func:`join_page_ranges`,
    as the workflow's Parse Map and Chunk do range by range.
    """
    whole = parse_page_range(
        data,
        first_page=1,
        last_page=None,
        max_bytes=max_bytes,
        max_pages=max_pages,
        budget=budget,
        ocr=ocr,
        tables=tables,
    )
    return join_page_ranges([whole], clean=clean)


def count_pdf_pages(data: bytes, *, max_bytes: int, max_pages: int) -> int:
    """The PDF's page count, read from its page tree only (no page is parsed).

    Raises ``PermanentError`` as :func:`validate_pdf_header` does, CORRUPT_PDF or ENCRYPTED_PDF
    when the PDF cannot be opened, and TOO_MANY_PAGES over ``max_pages``.
    """
    validate_pdf_header(data[:PDF_MAGIC_WINDOW_BYTES], len(data), max_bytes=max_bytes)
    page_count = _count_pages(_open_reader(data))
    if page_count > max_pages:
        raise PermanentError(ErrorCode.TOO_MANY_PAGES, f"{page_count} pages exceeds the limit of {max_pages} pages")
    return page_count


def parse_page_range(
    data: bytes,
    *,
    first_page: int,
    last_page: int | None,
    max_bytes: int,
    max_pages: int,
    budget: ParseBudget = DEFAULT_BUDGET,
    ocr: PageOcr | None = None,
    ocr_page_cap: int | None = None,
    tables: bool = True,
) -> ParsedRange:
    """The raw (not yet cleaned) text of pages ``first_page``..``last_page`` (1-based, inclusive;
    ``None``: to the last page) of the PDF in ``data``.

    Only the range's pages are parsed (pypdf resolves objects lazily), so the memory is the range's,
    not the document's. The page and document budgets apply to the range (each range is one Parse
    task with its own timeout). ``ocr_page_cap`` is how many of the range's pages may be OCR'd
    (its share of ``ocr.max_pages``, the document's cap; default: all of it). Document-level
    verdicts (every page failed, no text at all) need every range: :func:`join_page_ranges`.
    ``tables``: find tables and make them TABLE blocks of their pages (see :func:`parse_pdf`).
    """
    validate_pdf_header(data[:PDF_MAGIC_WINDOW_BYTES], len(data), max_bytes=max_bytes)
    reader = _open_reader(data)
    page_count = _count_pages(reader)
    if page_count > max_pages:
        raise PermanentError(ErrorCode.TOO_MANY_PAGES, f"{page_count} pages exceeds the limit of {max_pages} pages")
    if page_count == 0:
        raise PermanentError(ErrorCode.EMPTY_DOCUMENT, "the PDF has no pages")
    last = page_count if last_page is None else min(last_page, page_count)
    if not 1 <= first_page <= last:
        raise ValueError(f"page range {first_page}-{last_page} is outside the document's {page_count} pages")

    raw_texts: list[str] = []
    failed_pages: list[int] = []
    over_budget: list[str] = []  # why each over-budget page failed
    deadline = time.monotonic() + budget.document_seconds
    text_chars = 0
    # pypdf would read each shared font again on every page (pdf_fonts).
    with fonts_read_once():
        for page_number in range(first_page, last + 1):
            if time.monotonic() > deadline:
                raise PermanentError(
                    ErrorCode.PDF_TOO_COMPLEX,
                    f"text extraction took more than {budget.document_seconds:g} s before page {page_number} "
                    f"of {page_count}",
                )
            try:
                page = reader.pages[page_number - 1]
                raw_text = _within_budget(budget.page_seconds, partial(_extract_page, page, budget))
                if not raw_text.strip() and _content_undecodable(page, budget.page_content_bytes):
                    # pypdf logs a broken stream and reads it as empty: a failure all the same.
                    logger.warning("page %d: content stream cannot be decoded", page_number)
                    failed_pages.append(page_number)
            except _BudgetExceeded as error:
                logger.warning("page %d: over the page budget: %s", page_number, error)
                failed_pages.append(page_number)
                over_budget.append(f"page {page_number} {error}")
                raw_text = ""
            except Exception as error:  # pypdf raises many kinds on one bad page; keep the others
                logger.warning("page %d: text extraction failed: %r", page_number, error)
                failed_pages.append(page_number)
                raw_text = ""
            raw_texts.append(raw_text)
            text_chars += len(raw_text)
            if text_chars > budget.document_text_chars:
                raise PermanentError(
                    ErrorCode.PDF_TOO_COMPLEX,
                    f"more than {budget.document_text_chars} characters of text by page {page_number} of {page_count}",
                )
    extraction_failures = len(failed_pages)
    needs_ocr = [
        number
        for number, raw_text in enumerate(raw_texts, start=first_page)
        if number not in failed_pages
        and len(_ALPHANUMERIC.findall(raw_text)) < MIN_TEXT_LAYER_CHARS
        and _draws_image(reader.pages[number - 1], budget)
    ]
    sources: dict[int, TextSource] = {}
    confidences: dict[int, float] = {}
    layouts: dict[int, PageLayout] = {}
    failure_reasons: dict[int, str] = {}
    cap = ocr.max_pages if ocr is not None and ocr_page_cap is None else (ocr_page_cap or 0)
    unavailable: str | None = None  # the engine said it cannot read any page here: stop rasterising
    ocr_tables: dict[int, list[TableRows]] = {}  # tables the OCR engine found (Textract's TABLES)
    for position, page_number in enumerate(needs_ocr):
        if ocr is None:
            failure_reasons[page_number] = "no text layer (OCR is off)"
        elif unavailable is not None:
            failure_reasons[page_number] = unavailable
        elif position >= cap:
            failure_reasons[page_number] = (
                f"no text layer, over the OCR limit of {ocr.max_pages} pages per document"
                + (f" ({cap} of them for pages {first_page}-{last})" if cap != ocr.max_pages else "")
            )
        else:
            try:
                result = ocr.engine.recognize(render_page_png(data, page_number - 1, ocr.dpi))
            except OcrUnavailableError as error:
                unavailable = failure_reasons[page_number] = str(error)
            except OcrPageError as error:
                failure_reasons[page_number] = f"OCR failed: {error}"
            else:
                raw_texts[page_number - first_page] = result.text
                if tables and result.tables:
                    ocr_tables[page_number] = list(result.tables)
                sources[page_number] = TextSource.OCR
                confidences[page_number] = result.confidence
                if (layout := pack_layout(result.words)) is not None:
                    layouts[page_number] = layout
                continue
        logger.warning("page %d: %s", page_number, failure_reasons[page_number])
        raw_texts[page_number - first_page] = ""

    # Where each word stands, for the passages' rectangles (geometry.py): the text layer's pages
    # from pdfium's character boxes (the OCR'd pages have their engine's words already).
    layouts |= text_layer_layouts(
        data,
        [
            number
            for number, text in enumerate(raw_texts, start=first_page)
            if number not in sources and number not in failed_pages and text.strip()
        ],
    )
    table_blocks: dict[int, list[TextBlock]] = {}
    if tables:
        text_layer = {
            number: text
            for number, text in enumerate(raw_texts, start=first_page)
            if number not in sources and number not in failed_pages and text.strip()
        }
        placed = find_page_tables(data, text_layer, partial(_within_budget, budget.page_seconds), deadline)
        for number, rows in ocr_tables.items():
            placed[number] = place_tables(raw_texts[number - first_page], rows)
        for number, (text, blocks) in placed.items():
            raw_texts[number - first_page] = text
            table_blocks[number] = blocks
    pages = [
        PageText(
            page_number=number,
            text=text,
            source=sources.get(number, TextSource.TEXT_LAYER),
            ocr_confidence=confidences.get(number),
            layout=layouts.get(number),
            blocks=table_blocks.get(number, []),
        )
        for number, text in enumerate(raw_texts, start=first_page)
    ]
    # Whether anything is drawn decides NO_TEXT_LAYER against EMPTY_DOCUMENT at the join. A page
    # with text draws text; only a range without any text pays for reading its content streams.
    draws_marks = any(text.strip() for text in raw_texts) or _any_page_has_marks(
        (reader.pages[number - 1] for number in range(first_page, last + 1)), budget
    )
    return ParsedRange(
        page_count=page_count,
        first_page=first_page,
        last_page=last,
        pages=pages,
        failed_pages=sorted({*failed_pages, *failure_reasons}),
        failure_reasons=failure_reasons,
        extraction_failures=extraction_failures,
        over_budget=over_budget,
        ocr_requested=len(needs_ocr),
        ocr_on=ocr is not None,
        draws_marks=draws_marks,
        metadata_title=_metadata_title(reader) if first_page == 1 else None,
    )


def join_page_ranges(ranges: Sequence[ParsedRange], *, clean: bool = True) -> ParsedDocument:
    """The document from its parsed page ranges (in any order; together they must cover every
    page once): the pages in order, cleaned as one document by :func:`clean_pages` (running lines
    and hyphenation need every page), and the document-level verdicts of :func:`parse_pdf`.

    Raises ``PermanentError`` PDF_TOO_COMPLEX or CORRUPT_PDF when no page could be extracted,
    NO_TEXT_LAYER or EMPTY_DOCUMENT when no page has text.
    """
    if not ranges:
        raise ValueError("no page ranges to join")
    ordered = sorted(ranges, key=lambda parsed: parsed.first_page)
    page_count = ordered[0].page_count
    pages = [page for parsed in ordered for page in parsed.pages]
    if [page.page_number for page in pages] != list(range(1, page_count + 1)):
        raise ValueError(f"the page ranges do not cover the document's {page_count} pages exactly once")
    failed_pages = sorted(number for parsed in ordered for number in parsed.failed_pages)
    failure_reasons = {number: reason for parsed in ordered for number, reason in parsed.failure_reasons.items()}
    over_budget = [reason for parsed in ordered for reason in parsed.over_budget]
    if clean:
        pages = join_continued_tables(clean_page_texts(pages))

    if sum(parsed.extraction_failures for parsed in ordered) == page_count:
        if over_budget:
            raise PermanentError(
                ErrorCode.PDF_TOO_COMPLEX,
                f"no page could be read within the parser's budget: {'; '.join(over_budget[:3])}"
                + (f" (and {len(over_budget) - 3} more)" if len(over_budget) > 3 else ""),
            )
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"text extraction failed on all {page_count} pages")
    if not any(page.text.strip() for page in pages):
        if any(parsed.draws_marks for parsed in ordered):
            ocr_pages = sum(1 for page in pages if page.source is TextSource.OCR)
            needs_ocr = sum(parsed.ocr_requested for parsed in ordered)
            ocr_on = all(parsed.ocr_on for parsed in ordered)
            how = f"{ocr_pages} read by OCR, {len(failure_reasons)} failed" if ocr_on else "OCR is off"
            raise PermanentError(
                ErrorCode.NO_TEXT_LAYER,
                f"none of the {page_count} pages has extractable text (scanned or drawn; {needs_ocr} need OCR: {how})",
            )
        raise PermanentError(ErrorCode.EMPTY_DOCUMENT, f"all {page_count} pages are blank")
    return ParsedDocument(
        page_count=page_count,
        pages=pages,
        failed_pages=failed_pages,
        failure_reasons=failure_reasons,
        metadata_title=ordered[0].metadata_title,
    )


def _draws_image(page: PageObject, budget: ParseBudget) -> bool:
    """True when the page's content stream draws an XObject (image or form) or an inline image."""
    try:
        contents = page.get_contents()
        if contents is None:
            return False
        operations = _within_budget(budget.page_seconds, partial(getattr, contents, "operations"))
    except Exception:  # unparsable: it stays a page without text, as before OCR
        return False
    return any(operator in _IMAGE_OPERATORS for _operands, operator in operations)


def _metadata_title(reader: PdfReader) -> str | None:
    """The document information dictionary's /Title, or None when absent or unreadable."""
    try:
        title = reader.metadata.title if reader.metadata is not None else None
    except Exception:  # a broken info dictionary must not fail a readable document
        return None
    return str(title) if title else None


def _extract_page(page: PageObject, budget: ParseBudget) -> str:
    """The page's text, or ``_BudgetExceeded`` when its content or its text is too large."""
    contents = page.get_contents()
    size = len(contents.get_data()) if contents is not None else 0
    if size > budget.page_content_bytes:
        raise _BudgetExceeded(f"{size} bytes of content stream (budget {budget.page_content_bytes})")
    text = page.extract_text(extraction_mode="plain")
    if len(text) > budget.page_text_chars:
        raise _BudgetExceeded(f"{len(text)} characters of text (budget {budget.page_text_chars})")
    return text


def _open_reader(data: bytes) -> PdfReader:
    try:
        # Without a password pypdf already tries the empty one; decrypt("") below makes it explicit.
        reader = PdfReader(io.BytesIO(data), strict=False)
    except PdfReadError as error:  # also PdfStreamError, EmptyFileError
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable PDF: {error}") from error
    except NotImplementedError as error:
        # pypdf cannot open some security handlers (public-key /Adobe.PubSec, unknown /V).
        code = ErrorCode.ENCRYPTED_PDF if b"/Encrypt" in data else ErrorCode.CORRUPT_PDF
        raise PermanentError(code, f"unsupported PDF feature: {error}") from error
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as error:
        # pypdf's lenient parser surfaces some malformed structures as plain Python errors.
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable PDF: {error!r}") from error
    if reader.is_encrypted:
        _decrypt_with_empty_password(reader)
    return reader


def _decrypt_with_empty_password(reader: PdfReader) -> None:
    """Open a PDF that is encrypted with an empty user password (only an owner password set).

    Readers open such files without asking; so do we. Any other password is ENCRYPTED_PDF.
    A missing ``cryptography`` package (needed for AES) is a deployment fault, not the
    document's: DependencyError propagates.
    """
    try:
        result = reader.decrypt("")
    except DependencyError:
        raise
    except (PdfReadError, NotImplementedError, ValueError, KeyError) as error:
        raise PermanentError(ErrorCode.ENCRYPTED_PDF, f"encrypted PDF, cannot be opened: {error}") from error
    if result == PasswordType.NOT_DECRYPTED:
        raise PermanentError(ErrorCode.ENCRYPTED_PDF, "the PDF is encrypted with a user password")


def _count_pages(reader: PdfReader) -> int:
    try:
        return len(reader.pages)
    except PdfReadError as error:
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable page tree: {error}") from error
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as error:
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable page tree: {error!r}") from error


def _content_undecodable(page: PageObject, max_output: int) -> bool:
    """True when a Flate-compressed content stream of the page is not valid zlib data.

    pypdf logs such a stream and reads it as empty, which would pass for a blank page. Only
    Flate (nearly every PDF's content filter) is checked; an empty but valid stream is fine.
    Decompression stops after ``max_output`` bytes (a flate bomb is not inflated here).
    """
    contents = page.get("/Contents")
    if contents is None:
        return False
    contents = contents.get_object()
    streams = [item.get_object() for item in contents] if isinstance(contents, ArrayObject) else [contents]
    for stream in streams:
        if not isinstance(stream, StreamObject):
            continue
        filters = stream.get("/Filter")
        first_filter = filters[0] if isinstance(filters, ArrayObject) and filters else filters
        if first_filter != "/FlateDecode":
            continue
        # pypdf has no public accessor for a stream's stored (still encoded) bytes; _data is that.
        if _flate_error(getattr(stream, "_data", b"") or b"", max_output):
            return True
    return False


def _flate_error(data: bytes, max_output: int) -> bool:
    """True when ``data`` is not valid zlib data, inflating at most ``max_output`` bytes, 64 KB at a time."""
    decompressor = zlib.decompressobj()
    pending, produced = data, 0
    try:
        while pending and produced <= max_output:
            produced += len(decompressor.decompress(pending, 65536))
            pending = decompressor.unconsumed_tail
    except zlib.error:
        return True
    return False


def _any_page_has_marks(pages: Iterable[PageObject], budget: ParseBudget) -> bool:
    """True when some page's content stream paints something (text, image, shading or path)."""
    for page in pages:
        try:
            contents = page.get_contents()
            if contents is None:
                continue
            operations = _within_budget(budget.page_seconds, partial(getattr, contents, "operations"))
        except Exception:  # an unparsable (or over-budget) content stream still stands for something drawn
            return True
        if any(operator in _MARKING_OPERATORS for _operands, operator in operations):
            return True
    return False
