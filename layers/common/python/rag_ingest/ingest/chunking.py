"""Token-aware chunking of page texts into overlapping passages, each with its provenance.

:func:`chunk_pages` cuts the *document text* (the pages joined by ``PAGE_SEPARATOR``) into units
(headings, sentences, table rows, figure lines; pieces of anything longer than a chunk) and packs
them greedily up to ``target_tokens``, ending early before a heading, a table or a paragraph that
would not fit, the next chunk repeating up to ``overlap_tokens`` of whole units. A figure is a chunk
of its own (nothing else in it), split only if longer than a chunk. A chunk's ``text``
is ``document_text[char_start:char_end]`` (inside a table, its header row first), with its pages,
``heading_path``, and for structured formats ``anchor`` and ``paragraph_index``. Deterministic.
The rules: docs/chunking.md.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from rag_ingest.core.parsed import BlockKind, Chunk, PageText, TextBlock, section_paragraphs
from rag_ingest.parsing.blocks import TABLE_CAPTION
from rag_ingest.parsing.headings import Heading, detect_headings

PAGE_SEPARATOR = "\n\n"
#: A chunk this full (fraction of the target) ends early rather than split the next paragraph.
PARAGRAPH_BREAK_MIN_FILL = 0.5
#: A chunk this full ends before a heading, so a section starts its own chunk; below it, a short
#: section shares a chunk with the next rather than making a tiny one.
HEADING_BREAK_MIN_FILL = 0.2

_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# Terminal punctuation, optional closing quotes or brackets, then whitespace or the end. It starts
# only where a run of punctuation starts: linear on a dot leader of any length, never quadratic.
_SENTENCE_END = re.compile(r"(?<![.!?\u2026])[.!?\u2026]+[\"'\u2019\u201d)\]]*(?=\s|$)")
_WORD = re.compile(r"\S+")
# The widest piece _split_word considers, per token of the limit (English averages 4 to 5).
_MAX_CHARS_PER_TOKEN = 16
# Words whose trailing period does not end a sentence ("Dr. Smith"); compared lower-cased.
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "e.g", "i.e", "cf", "fig", "approx"}
)


@dataclass(frozen=True)
class _Unit:
    """A span of the document text that is never split further: a heading, a sentence or a piece of one."""

    start: int
    end: int
    tokens: int
    starts_paragraph: bool
    is_heading: bool = False
    heading_path: tuple[str, ...] = ()
    anchor: str | None = None  # the innermost heading's anchor (structured formats)
    # A table row after the header row: the header's (start, end), repeated at the top of a chunk
    # that starts at this row.
    table_header: tuple[int, int] | None = None
    # A table's first unit (its caption, else its header row) or the first unit after a table: a
    # chunk HEADING_BREAK_MIN_FILL full ends before it, and the next chunk takes no overlap.
    table_bound: bool = False
    #: A figure's line: the number of its FIGURE block in the document (``_figure_spans``).
    figure: int | None = None


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

    count_tokens = _bounded_by_length(count_tokens)
    text = document_text(pages)
    page_starts, page_numbers = _page_offsets(pages)
    # A structured format states its headings and paragraphs; a PDF's headings are found in its
    # text (a PDF page's only blocks are its tables and figures, rag_ingest.parsing.pdf).
    structured = any(block.kind in (BlockKind.HEADING, BlockKind.PARAGRAPH) for page in pages for block in page.blocks)
    tables = _table_spans(pages, page_starts)
    figures = _figure_spans(pages, page_starts)
    headings = _headings(pages, page_starts, text, tables, structured=structured)
    if figures and not structured:  # a caption inside a figure's passage is not the document's heading
        headings = [h for h in headings if not any(start <= h.start < end for start, end in figures)]
    paragraph_starts, paragraph_numbers = _paragraph_numbers(pages, page_starts) if structured else ([], [])
    units = _units(text, page_starts, headings, tables, figures, count_tokens=count_tokens, limit=target_tokens)
    figure_blocks = list(figures.values())
    paragraph_tokens = _paragraph_tokens_from(units)

    chunks: list[Chunk] = []
    first = 0
    first_new = 0  # units before this index were already in the previous chunk (overlap)
    while first < len(units):
        # A chunk that starts inside a table repeats its header row first (when both fit).
        header = units[first].table_header
        header_tokens = count_tokens(text[header[0] : header[1]]) if header else 0
        if header and header_tokens + units[first].tokens > target_tokens:
            header, header_tokens = None, 0
        end = _chunk_end(units, first, first_new, header_tokens, paragraph_tokens, target_tokens)
        # Every unit fits the target on its own, so the chunk holds at least one new unit.
        char_start, char_end = units[first].start, units[end - 1].end
        chunk_text = text[char_start:char_end]
        if header:
            chunk_text = f"{text[header[0] : header[1]]}\n{chunk_text}"
        body = _body_unit(units[first:end])
        paragraph_index = None
        if paragraph_starts and not body.is_heading:
            paragraph_index = paragraph_numbers[max(0, bisect_right(paragraph_starts, body.start) - 1)]
        figure = figure_blocks[body.figure].figure if body.figure is not None else None
        chunks.append(
            Chunk(
                chunk_index=len(chunks),
                text=chunk_text,
                page_start=page_numbers[bisect_right(page_starts, char_start) - 1],
                page_end=page_numbers[bisect_right(page_starts, char_end - 1) - 1],
                char_start=char_start,
                char_end=char_end,
                token_count=count_tokens(chunk_text),
                heading_path=list(body.heading_path),
                anchor=body.anchor,
                paragraph_index=paragraph_index,
                figure_sources=figure.sources if figure is not None else None,
                boxes=[figure.box] if figure is not None and figure.box is not None else [],
            )
        )
        if end >= len(units):
            break
        first = _overlap_start(units, first, end, overlap_tokens=overlap_tokens, target_tokens=target_tokens)
        first_new = end
    return chunks


def _headings(
    pages: Sequence[PageText],
    page_starts: list[int],
    text: str,
    tables: dict[tuple[int, int], bool],
    *,
    structured: bool,
) -> list[Heading]:
    """The headings the structured pages state, else those found in the text, less any inside a
    table or between a table and its continuation."""
    headings = _stated_headings(pages, page_starts, text) if structured else detect_headings(text)
    if tables and not structured:  # a table's row (a one-cell section label) is not a heading
        headings = [h for h in headings if not any(start <= h.start < end for start, end in tables)]
    # A running line between a table and its continuation on the next page is not a heading either.
    gaps = _continuation_gaps(tables)
    return [h for h in headings if not any(start <= h.start < end for start, end in gaps)]


def _chunk_end(
    units: Sequence[_Unit],
    first: int,
    first_new: int,
    total: int,
    paragraph_tokens: Sequence[int],
    target_tokens: int,
) -> int:
    """Where the chunk that starts at unit ``first`` (and already holds ``total`` tokens, a repeated
    header row) ends: packed greedily to the target, ending early before a heading, a table or a
    paragraph that would not fit, and never on a heading."""
    end = first
    while end < len(units):
        unit = units[end]
        if total + unit.tokens > target_tokens:
            break
        if end > first and unit.figure != units[end - 1].figure:
            break  # a figure is a passage of its own: the chunk ends at its borders
        if (
            (unit.is_heading or unit.table_bound)
            and not _heads_figure(units, end)
            and end > first_new
            and total >= target_tokens * HEADING_BREAK_MIN_FILL
            and not all(units[index].is_heading for index in range(first, end))
        ):
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
    # A heading belongs with the text after it: never end a chunk on one (if it has other units),
    # unless a figure follows it (the figure's passage holds nothing else: the heading stays here).
    while end < len(units) and end - 1 > first_new and units[end - 1].is_heading and units[end].figure is None:
        end -= 1
    return end


def _heads_figure(units: Sequence[_Unit], index: int) -> bool:
    """Whether the headings from ``index`` on are followed by a figure (a section that opens with
    one): they end the chunk before the figure rather than stand alone."""
    while index < len(units) and units[index].is_heading:
        index += 1
    return index < len(units) and units[index].figure is not None


def _bounded_by_length(count_tokens: Callable[[str], int]) -> Callable[[str], int]:
    """Count at least one token per ``_MAX_CHARS_PER_TOKEN`` characters. WordPiece reads a word
    over 100 characters as one [UNK]: without this bound a 300,000-letter word is a one-token
    chunk that no embedding API accepts (Titan takes 50,000 characters)."""

    def count(text: str) -> int:
        return max(count_tokens(text), -(-len(text) // _MAX_CHARS_PER_TOKEN))

    return count


def _body_unit(units: Sequence[_Unit]) -> _Unit:
    """The chunk's first text (not a title that merely precedes it): its headings are the chunk's."""
    return next((unit for unit in units if not unit.is_heading), units[0])


def _stated_headings(pages: Sequence[PageText], page_starts: list[int], text: str) -> list[Heading]:
    """The heading blocks of structured pages, as offsets into the document text."""
    headings = []
    for page, page_start in zip(pages, page_starts, strict=True):
        for block in page.blocks:
            if block.kind is BlockKind.HEADING:
                start, end = page_start + block.start, page_start + block.end
                headings.append(Heading(start, end, max(1, block.level), text[start:end], False, block.anchor))
    return headings


def _paragraph_numbers(pages: Sequence[PageText], page_starts: list[int]) -> tuple[list[int], list[int]]:
    """(start offsets of the non-heading blocks, their 1-based number inside their section): a
    chunk's ``paragraph_index`` is that of the block its first text is in."""
    page_start_of = {id(page): start for page, start in zip(pages, page_starts, strict=True)}
    numbered = [
        (page_start_of[id(page)] + block.start, number)
        for page, block, _section, number in section_paragraphs(pages)
        if number is not None
    ]
    return [start for start, _ in numbered], [number for _, number in numbered]


def _overlap_start(units: list[_Unit], first: int, end: int, *, overlap_tokens: int, target_tokens: int) -> int:
    """First unit of the next chunk: trailing whole units of this chunk, within the overlap budget,
    leaving room for the next new unit and always moving past this chunk's first unit."""
    start = end
    overlap = 0
    next_tokens = units[end].tokens
    bound = units[end].is_heading or units[end].table_bound
    if bound or units[end].figure is not None or units[end - 1].figure is not None:
        return start  # the next chunk opens a section, a table or a figure, or follows one: no overlap
    while start - 1 > first:
        candidate = overlap + units[start - 1].tokens
        if candidate > overlap_tokens or candidate + next_tokens > target_tokens:
            break
        overlap = candidate
        start -= 1
        if units[start].is_heading:
            break  # the section's own heading is the furthest the overlap reaches
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


def _table_spans(pages: Sequence[PageText], page_starts: list[int]) -> dict[tuple[int, int], bool]:
    """The (start, end) of every table block, as offsets into the document text, and whether it
    continues the previous page's table (``TextBlock.continues``)."""
    return {
        (page_start + block.start, page_start + block.end): block.continues
        for page, page_start in zip(pages, page_starts, strict=True)
        for block in page.blocks
        if block.kind is BlockKind.TABLE
    }


def _figure_spans(pages: Sequence[PageText], page_starts: list[int]) -> dict[tuple[int, int], TextBlock]:
    """The (start, end) of every FIGURE block, as offsets into the document text, in order."""
    return {
        (page_start + block.start, page_start + block.end): block
        for page, page_start in zip(pages, page_starts, strict=True)
        for block in page.blocks
        if block.kind is BlockKind.FIGURE and block.end > block.start
    }


def _figure_units(
    text: str,
    start: int,
    end: int,
    number: int,
    path: Sequence[Heading],
    count_tokens: Callable[[str], int],
    limit: int,
) -> list[_Unit]:
    """A figure's lines (caption, alt text, OCR text, description), one unit each (pieces of one
    longer than ``limit``), all marked as figure ``number``."""
    units: list[_Unit] = []
    for match in re.finditer(r"[^\n]+", text[start:end]):
        line_start, line_end = _strip_span(text, start + match.start(), start + match.end())
        if line_end <= line_start:
            continue
        tokens = count_tokens(text[line_start:line_end])
        pieces = [(line_start, line_end, tokens)]
        if tokens > limit:
            pieces = _split_oversized(text, line_start, line_end, count_tokens, limit)
        titles, anchor = _titles(path), _anchor(path)
        for piece_start, piece_end, piece_tokens in pieces:
            units.append(_Unit(piece_start, piece_end, piece_tokens, not units, False, titles, anchor, figure=number))
    return units


def _continuation_gaps(tables: dict[tuple[int, int], bool]) -> list[tuple[int, int]]:
    """Between each table and its continuation: (the end of the first part, the start of the next)."""
    spans = sorted(tables)
    return [(before[1], after[0]) for before, after in pairwise(spans) if tables[after]]


def _table_units(
    text: str,
    start: int,
    end: int,
    titles: tuple[str, ...],
    anchor: str | None,
    count_tokens: Callable[[str], int],
    limit: int,
    header: tuple[int, int] | None = None,
) -> list[_Unit]:
    """A table's rows, one unit each (the first is the header row): a chunk ends between rows, never
    inside one (unless a row alone is longer than a chunk), and a chunk that starts after the header
    row repeats it. ``header``: the table continues one whose header row stands there (on the
    previous page): every row is a body row under it."""
    units: list[_Unit] = []
    rows = [(match.start(), match.end()) for match in re.finditer(r"[^\n]+", text[start:end])]
    continued = header is not None
    if header is None and rows:
        header = (start + rows[0][0], start + rows[0][1])
    for index, (row_start, row_end) in enumerate(rows):
        absolute = (start + row_start, start + row_end)
        tokens = count_tokens(text[absolute[0] : absolute[1]])
        pieces = [(*absolute, tokens)] if tokens <= limit else _split_oversized(text, *absolute, count_tokens, limit)
        for piece_start, piece_end, piece_tokens in pieces:
            units.append(
                _Unit(
                    piece_start,
                    piece_end,
                    piece_tokens,
                    starts_paragraph=index == 0 and piece_start == absolute[0] and not continued,
                    heading_path=titles,
                    anchor=anchor,
                    table_header=header if index > 0 or continued else None,
                )
            )
    return units


def _units(
    text: str,
    page_starts: list[int],
    headings: Sequence[Heading],
    tables: dict[tuple[int, int], bool],
    figures: dict[tuple[int, int], TextBlock],
    *,
    count_tokens: Callable[[str], int],
    limit: int,
) -> list[_Unit]:
    units: list[_Unit] = []
    if not page_starts:
        return units
    heading_at = {heading.start: heading for heading in headings}
    figure_number = {span: number for number, span in enumerate(figures)}
    # A figure's borders cut paragraphs as a heading's do: its passage is its block's text exactly.
    heading_bounds = sorted(
        {heading.start for heading in headings}
        | {heading.end for heading in headings}
        | {offset for span in figures for offset in span}
    )
    path: list[Heading] = []
    after_table = -1  # len(units) right after the last table's rows
    last_table: tuple[tuple[int, int], tuple[str, ...], str | None] | None = None  # its header, titles, anchor
    page_bounds = [*page_starts[1:], len(text) + len(PAGE_SEPARATOR)]
    for page_start, next_page_start in zip(page_starts, page_bounds, strict=True):
        page_end = next_page_start - len(PAGE_SEPARATOR)
        for paragraph_start, paragraph_end in _paragraph_spans(text, page_start, page_end, heading_bounds):
            heading = heading_at.get(paragraph_start)
            if heading is not None and heading.end == paragraph_end:
                path = [*(outer for outer in path if outer.level < heading.level), heading]
                tokens = count_tokens(text[paragraph_start:paragraph_end])
                if tokens <= limit:  # a heading longer than a chunk is cut like a sentence below
                    units.append(
                        _Unit(paragraph_start, paragraph_end, tokens, True, True, _titles(path), _anchor(path))
                    )
                    continue
            if (paragraph_start, paragraph_end) in figure_number:
                number = figure_number[(paragraph_start, paragraph_end)]
                units.extend(_figure_units(text, paragraph_start, paragraph_end, number, path, count_tokens, limit))
                continue
            if tables.get((paragraph_start, paragraph_end)) and last_table is not None:
                # The rest of the previous page's table: its rows, and the running lines between the
                # two parts, read under the first part's header, with no break or bound between.
                header, titles, anchor = last_table
                for index in range(after_table, len(units)):
                    if units[index].figure is not None:
                        continue  # a figure of the first part's page stays a passage of its own
                    units[index] = replace(units[index], starts_paragraph=False, table_bound=False, table_header=header)
                units.extend(
                    _table_units(
                        text, paragraph_start, paragraph_end, titles, anchor, count_tokens, limit, header=header
                    )
                )
                after_table = len(units)
                continue
            if (paragraph_start, paragraph_end) in tables:
                table = _table_units(
                    text, paragraph_start, paragraph_end, _titles(path), _anchor(path), count_tokens, limit
                )
                first_row = re.search(r"[^\n]+", text[paragraph_start:paragraph_end])
                if first_row is not None:
                    last_table = (
                        (paragraph_start + first_row.start(), paragraph_start + first_row.end()),
                        _titles(path),
                        _anchor(path),
                    )
                _bound_table(text, units, table)
                units.extend(table)
                after_table = len(units)
                continue
            follows_table = after_table == len(units) and bool(units)
            units.extend(
                _sentence_units(text, paragraph_start, paragraph_end, path, count_tokens, limit, bound=follows_table)
            )
    return units


def _sentence_units(
    text: str,
    start: int,
    end: int,
    path: Sequence[Heading],
    count_tokens: Callable[[str], int],
    limit: int,
    *,
    bound: bool,
) -> list[_Unit]:
    """A paragraph's sentences, one unit each (pieces of one longer than ``limit``): the first
    starts the paragraph and, when ``bound``, is the first unit after a table."""
    units: list[_Unit] = []
    titles, anchor = _titles(path), _anchor(path)
    for sentence_start, sentence_end in _sentence_spans(text, start, end):
        tokens = count_tokens(text[sentence_start:sentence_end])
        if tokens <= limit:
            pieces = [(sentence_start, sentence_end, tokens)]
        else:
            pieces = _split_oversized(text, sentence_start, sentence_end, count_tokens, limit)
        for piece_start, piece_end, piece_tokens in pieces:
            first = not units
            units.append(
                _Unit(piece_start, piece_end, piece_tokens, first, False, titles, anchor, table_bound=bound and first)
            )
    return units


def _bound_table(text: str, units: list[_Unit], table: list[_Unit]) -> None:
    """Mark where a table starts (its caption, the paragraph just before it, else its first row):
    a chunk ends before it once full enough, and the next chunk takes no overlap."""
    caption = _caption_unit(text, units)
    if caption is not None:
        units[caption] = replace(units[caption], table_bound=True)
    elif table:
        table[0] = replace(table[0], table_bound=True)


def _caption_unit(text: str, units: list[_Unit]) -> int | None:
    """The index of the first unit of the paragraph just before a table when it is the table's
    caption ("Table 3: ..."), else None."""
    index = len(units) - 1
    while index >= 0 and not units[index].starts_paragraph:
        index -= 1
    if index < 0 or units[index].is_heading or units[index].table_header is not None:
        return None
    return index if TABLE_CAPTION.match(text, units[index].start) else None


def _titles(path: Sequence[Heading]) -> tuple[str, ...]:
    return tuple(heading.title for heading in path)


def _anchor(path: Sequence[Heading]) -> str | None:
    return path[-1].anchor if path else None


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


def _paragraph_spans(text: str, start: int, end: int, boundaries: Sequence[int] = ()) -> list[tuple[int, int]]:
    """Paragraphs between ``start`` and ``end``: split at blank lines and at each offset in
    ``boundaries`` (sorted; the starts and ends of heading lines)."""
    cuts = [(match.start(), match.end()) for match in _PARAGRAPH_BREAK.finditer(text, start, end)]
    first = bisect_right(boundaries, start)
    cuts.extend((offset, offset) for offset in boundaries[first:] if offset < end)
    cuts.sort()
    spans: list[tuple[int, int]] = []
    cursor = start
    for cut_start, cut_end in cuts:
        if cut_start < cursor:
            continue
        spans.append(_strip_span(text, cursor, cut_start))
        cursor = cut_end
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
        # The largest prefix within the limit (one character always fits), searched near the answer
        # only: a linear cost on a long run (docs/chunking.md, "Method").
        cap = min(end, start + limit * _MAX_CHARS_PER_TOKEN)
        low, width = start + 1, limit
        probe = min(cap, start + width)
        while probe > low and count_tokens(text[start:probe]) <= limit:
            low = probe
            width *= 2
            probe = min(cap, start + width)
        high = probe - 1 if probe > low else low
        if low < high and count_tokens(text[start : low + 1]) > limit:
            high = low  # a token per character (a run of punctuation): the limit is exactly here
        while low < high:
            middle = (low + high + 1) // 2
            if count_tokens(text[start:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        pieces.append((start, low, count_tokens(text[start:low])))
        start = low
    return pieces
