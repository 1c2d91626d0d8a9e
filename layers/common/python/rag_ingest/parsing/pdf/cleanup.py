"""Document-wide cleanup of a PDF's extracted text: rules that need evidence from every page.

:func:`clean_page_texts` normalises characters, drops running lines (page numbers only, by
default: ``SHIPPED_CLEANUP_RULES``) and joins words hyphenated at a line end, keeping each TABLE
block's rows whole and its offsets right; :func:`join_continued_tables` marks a table continued
from the previous page. The same pages come out, in order; an empty page stays empty. Every pass
is linear in the text's length. The rules, their evidence and the ablation: docs/pdf.md, "Cleanup".
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby, pairwise

from rag_ingest.core.parsed import BlockKind, PageText, TextBlock
from rag_ingest.core.tokens import is_vocabulary_word
from rag_ingest.parsing.blocks import TABLE_CAPTION
from rag_ingest.parsing.pdf.tables import CONTINUED_MARK, continues_table, table_rows

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
# Control characters (Cc) other than whitespace (left to the collapsing below), and invisible
# characters that split words for the tokenizer: soft hyphen, zero-width space, word joiner, BOM.
_INVISIBLE_CHARS = re.compile(
    "["
    + "".join(re.escape(chr(code)) for code in [*range(0x20), *range(0x7F, 0xA0)] if not chr(code).isspace())
    + "\u00ad\u200b\u2060\ufeff]"
)
# A hyphen at a line end between two words: a candidate broken word. The look-behind starts a match
# only where a run of letters starts, or a long run is quadratic (docs/pdf.md, "Cleanup").
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
#: What parsing applies: running-header removal is off, it did not help retrieval (docs/pdf.md,
#: "Cleanup"; docs/retrieval.md, "Ablation").
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
