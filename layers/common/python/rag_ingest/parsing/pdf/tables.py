"""Tables in PDF pages: found in the text layer, placed into the page's text as TABLE blocks.

:func:`find_page_tables` runs pdfplumber's finder ("lines" strategy, and the horizontal rules of
:mod:`rag_ingest.parsing.pdf.rule_tables`) only on pages that pass a cheap pdfium pre-check
(:func:`candidate_pages`), within each page's time budget, and keeps a grid only when it reads as a
table (:func:`keep_table`). :func:`place_tables` replaces the run of lines holding a table's words
with its rows under its header row (an OCR engine's tables are placed the same way); a table not
found together in the text is left as the text has it. :func:`continues_table` tells whether a
page's first table goes on with the previous page's last. The rules: docs/formats.md, "Tables in PDFs".
"""

from __future__ import annotations

import io
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import BlockKind, TextBlock
from rag_ingest.parsing.blocks import TABLE_CAPTION, table_text
from rag_ingest.parsing.pdf.rule_tables import overlaps_any, rows_between_rules, rule_groups

#: A table: rows of cells, the first row its header.
TableRows = list[list[str]]

#: The pre-check: a grid has at least this many crossing ruling edges in each direction.
MIN_RULING_EDGES = 3
#: A segment at least ``_MIN_RULE_LENGTH`` points long is a ruling edge; two edges cross when they
#: meet within ``_RULE_THICKNESS``. Paths of more segments than ``_MAX_PATH_SEGMENTS`` are drawings.
_RULE_THICKNESS = 3.0
_MIN_RULE_LENGTH = 8.0
_MAX_PATH_SEGMENTS = 2000
_MAX_CROSSING_TESTS = 250_000
#: _cell_text_only: a character over this times the region's median size is not a cell's.
MAX_CHAR_SIZE_OF_MEDIAN = 3.0
#: _slanted: a character turned by more than about 6° from the axes (tan 6° ≈ 0.1).
_SLANT_SHARE = 0.1
#: keep_table: share of the grid's cells that must exist (not covered by a merged cell) and, of
#: those, hold text; the header row's share of filled cells; the longest cell, in lines.
MIN_CELL_SHARE = 0.6
MIN_FILLED_SHARE = 0.6
MIN_HEADER_FILLED = 0.5
MAX_CELL_LINES = 8
MIN_FULL_ROW_SHARE = 0.5
#: place_tables: a line belongs to the table when this share of its words are the table's; the
#: lines found must hold this share of the table's words.
LINE_MATCH_SHARE = 0.6
TABLE_MATCH_SHARE = 0.6
_WORD = re.compile(r"\w+")
_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl"})


@dataclass(frozen=True)
class PdfTable:
    """A table found on a page: its rows (the first is the header), the top of its box, and the x of
    its column edges as fractions of the page's width (see ``TextBlock.columns``)."""

    rows: TableRows
    top: float = 0.0
    columns: tuple[float, ...] = ()


def ruled_page(page: Any) -> bool:
    """Whether a pdfium page (``pypdfium2.PdfPage``) draws a grid: ruling edges (straight horizontal
    and vertical segments of its paths, a rectangle's four sides included) that cross one another
    into a connected set with horizontal edges at three heights and vertical ones at three places at
    least, the fewest that make two rows of two cells. A framed box, stacked boxes (one column),
    separate boxes or a rule under a heading is no grid."""
    return _grid(*_ruling_edges(page))


def _rule_bounded(
    horizontal: list[tuple[float, float, float]], vertical: list[tuple[float, float, float]], height: float
) -> bool:
    """Whether a pdfium page's ruling edges hold a rule group (a table with horizontal rules only)."""
    # pdfium's page space is bottom-up; rule_tables' is top-down (pdfplumber's).
    top_down_horizontal = [(height - y, x0, x1) for y, x0, x1 in horizontal]
    top_down_vertical = [(x, height - y1, height - y0) for x, y0, y1 in vertical]
    return bool(rule_groups(top_down_horizontal, top_down_vertical))


def _grid(horizontal: list[tuple[float, float, float]], vertical: list[tuple[float, float, float]]) -> bool:
    if len(horizontal) < MIN_RULING_EDGES or len(vertical) < MIN_RULING_EDGES:
        return False
    if len(horizontal) * len(vertical) > _MAX_CROSSING_TESTS:
        return True  # a dense drawing: pdfplumber decides, within the page's time budget
    parent = list(range(len(horizontal) + len(vertical)))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    tolerance = _RULE_THICKNESS
    for h, (y, x0, x1) in enumerate(horizontal):
        for v, (x, y0, y1) in enumerate(vertical, start=len(horizontal)):
            if x0 - tolerance <= x <= x1 + tolerance and y0 - tolerance <= y <= y1 + tolerance:
                parent[root(h)] = root(v)
    # Per connected set: the distinct heights of its horizontal edges and places of its vertical ones
    # (stacked boxes share two vertical places: one column, no table).
    places: dict[int, tuple[set[int], set[int]]] = {}
    for node, (position, _low, _high) in enumerate([*horizontal, *vertical]):
        places.setdefault(root(node), (set(), set()))[node >= len(horizontal)].add(round(position / tolerance))
    return any(len(ys) >= MIN_RULING_EDGES and len(xs) >= MIN_RULING_EDGES for ys, xs in places.values())


def _ruling_edges(page: Any) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """The page's horizontal edges (y, x0, x1) and vertical edges (x, y0, y1): straight segments of
    its path objects at least ``_MIN_RULE_LENGTH`` long, in page space."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    horizontal: list[tuple[float, float, float]] = []
    vertical: list[tuple[float, float, float]] = []

    def add(a: tuple[float, float], b: tuple[float, float]) -> None:
        (ax, ay), (bx, by) = a, b
        if abs(ay - by) < 1 and abs(ax - bx) >= _MIN_RULE_LENGTH:
            horizontal.append(((ay + by) / 2, min(ax, bx), max(ax, bx)))
        elif abs(ax - bx) < 1 and abs(ay - by) >= _MIN_RULE_LENGTH:
            vertical.append(((ax + bx) / 2, min(ay, by), max(ay, by)))

    x, y = ctypes.c_float(), ctypes.c_float()
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_PATH], max_depth=3):
        count = pdfium_c.FPDFPath_CountSegments(obj.raw)
        if count > _MAX_PATH_SEGMENTS:
            continue  # a drawing (a map, a plot), not a table's rules
        matrix = obj.get_matrix()
        start = previous = None
        for index in range(count):
            segment = pdfium_c.FPDFPath_GetPathSegment(obj.raw, index)
            if not pdfium_c.FPDFPathSegment_GetPoint(segment, ctypes.byref(x), ctypes.byref(y)):
                continue
            point = matrix.on_point(x.value, y.value)
            kind = pdfium_c.FPDFPathSegment_GetType(segment)
            if kind == pdfium_c.FPDF_SEGMENT_MOVETO:
                start = point
            elif kind == pdfium_c.FPDF_SEGMENT_LINETO and previous is not None:
                add(previous, point)
            previous = point
            if pdfium_c.FPDFPathSegment_GetClose(segment) and start is not None:
                add(point, start)
                previous = start
    return horizontal, vertical


def candidate_pages(data: bytes, page_numbers: Sequence[int]) -> list[int]:
    """The pages (1-based) among ``page_numbers`` that draw a grid (:func:`ruled_page`) or a rule group
    (:mod:`rule_tables`), from one read of each page's ruling edges."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(data)
    try:
        found = []
        for number in page_numbers:
            page = document[number - 1]
            try:
                horizontal, vertical = _ruling_edges(page)
                if _grid(horizontal, vertical) or _rule_bounded(horizontal, vertical, float(page.get_height())):
                    found.append(number)
            finally:
                page.close()
        return found
    finally:
        document.close()


def find_page_tables(
    data: bytes,
    texts: Mapping[int, str],
    within_budget: Callable[[Callable[[], list[PdfTable]]], list[PdfTable]],
    deadline: float,
) -> dict[int, tuple[str, list[TextBlock]]]:
    """For each page of ``texts`` (page number -> its extracted text) holding a table: its text with
    the tables placed (:func:`place_tables`) and their blocks. Finding a page's tables runs inside
    ``within_budget`` (the page's time budget); a page over it, or past ``deadline`` (monotonic),
    or one pdfplumber cannot read, keeps its text as extracted. Never raises for a page."""
    placed: dict[int, tuple[str, list[TextBlock]]] = {}
    if not texts:
        return placed
    try:
        candidates = candidate_pages(data, sorted(texts))
    except Exception as error:  # pdfium cannot open what pypdf did: no tables, the text stands
        logger.warning("table pre-check failed: %r", error)
        return placed
    finder = TableFinder(data)
    try:
        for number in candidates:
            if time.monotonic() > deadline:
                break
            try:
                found = within_budget(partial(finder.tables, number))
            except Exception as error:  # over the page budget, or a page pdfminer cannot read
                logger.warning("page %d: tables not read: %r", number, error)
                continue
            if found:
                text, blocks = place_tables(
                    texts[number], [table.rows for table in found], [table.columns for table in found]
                )
                if blocks:
                    placed[number] = (text, blocks)
    finally:
        finder.close()
    return placed


class TableFinder:
    """pdfplumber over one PDF, opened on first use (only documents with a candidate page pay for
    pdfminer's parsing), closed by :meth:`close`."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pdf: Any = None

    def tables(self, page_number: int) -> list[PdfTable]:
        """The tables kept on the page (1-based), top to bottom."""
        if self._pdf is None:
            import pdfplumber

            self._pdf = pdfplumber.open(io.BytesIO(self._data))
        page = self._pdf.pages[page_number - 1]
        try:
            width = float(page.width) or 1.0
            readable = _cell_text_only(page)
            grids = readable.find_tables()
            found = [
                PdfTable(_filled_rows(table), float(table.bbox[1]), _column_edges(table, width)) for table in grids
            ]
            grid_boxes = [_box(table.bbox) for table in grids]
            found += _rule_bounded_tables(readable, grid_boxes, width)
        finally:
            page.close()  # pdfplumber caches a page's objects until closed
        return sorted((table for table in found if keep_table(table.rows)), key=lambda table: table.top)

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()
            self._pdf = None


def _box(bbox: Sequence[Any]) -> tuple[float, float, float, float]:
    return (float(bbox[0]), float(bbox[1]), float(bbox[2]), float(bbox[3]))


def _rule_bounded_tables(page: Any, grids: list[tuple[float, float, float, float]], width: float) -> list[PdfTable]:
    """The page's tables with horizontal rules only (:mod:`rule_tables`), apart from its grids
    (``page`` as :func:`_cell_text_only` leaves it)."""
    horizontal = [(float(edge["top"]), float(edge["x0"]), float(edge["x1"])) for edge in page.horizontal_edges]
    vertical = [(float(edge["x0"]), float(edge["top"]), float(edge["bottom"])) for edge in page.vertical_edges]
    left, top, right, bottom = (float(value) for value in page.bbox)
    tables: list[PdfTable] = []
    for group in rule_groups(horizontal, vertical):
        if overlaps_any(group, grids):
            continue
        x0, y0, x1, y1 = group.bbox
        region = page.crop((max(left, x0 - 2), max(top, y0), min(right, x1 + 2), min(bottom, y1)))
        words = [
            (float(w["x0"]), float(w["top"]), float(w["x1"]), float(w["bottom"]), str(w["text"]))
            for w in region.extract_words(x_tolerance=1.5)
        ]
        found = rows_between_rules(words, group)
        if found is not None:
            edges = tuple(round(edge / width, 4) for edge in found.column_edges)
            tables.append(PdfTable(found.rows, found.top, edges))
    return tables


def _cell_text_only(region: Any) -> Any:
    """A pdfplumber page or region without the characters no cell holds: ones set at a slant (a
    "DRAFT" or "CONFIDENTIAL" watermark across the page; text turned a quarter, as a narrow
    column's header, stays) and ones over ``MAX_CHAR_SIZE_OF_MEDIAN`` times the median size (the
    same watermark's box, a drawn bracket). Left in, such a character joins a cell's word ("in"
    read as "tin") and its box spans the columns' gutters."""
    sizes = [float(char["size"]) for char in region.chars]
    if not sizes:
        return region
    largest = MAX_CHAR_SIZE_OF_MEDIAN * statistics.median(sizes)
    return region.filter(
        lambda obj: obj.get("object_type") != "char" or (not _slanted(obj.get("matrix")) and obj["size"] <= largest)
    )


def _slanted(matrix: Any) -> bool:
    """Whether a character's text matrix turns it by an angle other than a multiple of 90°."""
    if not matrix or len(matrix) < 4:
        return False
    a, b = abs(float(matrix[0])), abs(float(matrix[1]))
    return min(a, b) > _SLANT_SHARE * max(a, b)


def _column_edges(table: Any, width: float) -> tuple[float, ...]:
    """The left edge of each of the table's columns and the right edge of the last, over ``width``."""
    boxes = [column.bbox for column in table.columns]
    if not boxes:
        return ()
    return tuple(round(float(edge) / width, 4) for edge in [*(box[0] for box in boxes), boxes[-1][2]])


def _filled_rows(table: Any) -> TableRows:
    """The table's cells as text, merged cells repeated over the rows and columns they span (a
    pdfplumber ``Table``: ``extract()`` has None where a merged cell covers a grid position)."""
    texts: list[list[str | None]] = table.extract()
    boxes = [row.cells for row in table.rows]
    columns = [column.bbox for column in table.columns]
    filled: TableRows = []
    for r, row in enumerate(texts):
        present = sum(cell is not None for cell in row)
        out: list[str] = []
        for c, cell in enumerate(row):
            if cell is not None:
                out.append(cell)
                continue
            if present < 2:
                continue  # a row that is one spanning cell: a label, kept once
            out.append(_spanning_text(texts, boxes, columns, r, c))
        filled.append(out)
    return filled


def _spanning_text(texts: list[list[str | None]], boxes: list[list[Any]], columns: list[Any], r: int, c: int) -> str:
    """The text of the merged cell covering grid position (r, c): the nearest cell to its left in
    the row, or above it in the column, whose box reaches over the position; "" when none."""
    centre_x = (columns[c][0] + columns[c][2]) / 2
    for left in range(c - 1, -1, -1):
        box = boxes[r][left] if left < len(boxes[r]) else None
        if box is not None:
            return (texts[r][left] or "") if box[2] >= centre_x else ""
    row_box = next((box for box in boxes[r] if box is not None), None)
    centre_y = (row_box[1] + row_box[3]) / 2 if row_box is not None else None
    for up in range(r - 1, -1, -1):
        box = boxes[up][c] if c < len(boxes[up]) else None
        if box is not None:
            return (texts[up][c] or "") if centre_y is None or box[3] >= centre_y else ""
    return ""


def keep_table(rows: TableRows) -> bool:
    """Whether a grid is a table worth indexing as one (see the module docstring)."""
    width = max((len(row) for row in rows), default=0)
    # TableRows of two or more filled cells: the header and at least one more, and most of the rows
    # (a row of one spanning cell is a section label; a box diagram is mostly such rows).
    full_rows = sum(1 for row in rows if sum(1 for cell in row if cell.strip()) >= 2)
    if width < 2 or full_rows < 2 or full_rows < MIN_FULL_ROW_SHARE * len(rows):
        return False
    cells = [cell for row in rows for cell in row]
    filled = [cell for cell in cells if cell.strip()]
    if len(cells) < MIN_CELL_SHARE * width * len(rows) or len(filled) < MIN_FILLED_SHARE * len(cells):
        return False
    if sum(1 for cell in rows[0] if cell.strip()) < MIN_HEADER_FILLED * len(rows[0]):
        return False
    return max(cell.count("\n") + 1 for cell in filled) <= MAX_CELL_LINES


def _words(text: str) -> list[str]:
    return _WORD.findall(text.translate(_LIGATURES).casefold())


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for line in text.split("\n"):
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def _matching_run(lines: list[str], table_words: Counter[str]) -> tuple[int, int] | None:
    """The first and last index of the run of lines that holds the table's words, or None."""
    total = sum(table_words.values())
    best: tuple[int, int, int] | None = None  # (matched words, first, last)
    first = None
    matched = 0
    left = Counter(table_words)
    for index, line in enumerate([*lines, "\0not a table line\0"]):
        words = _words(line) if index < len(lines) else ["\0"]
        hits = sum(1 for word in words if left[word] > 0)
        if words and hits >= LINE_MATCH_SHARE * len(words):
            if first is None:
                first, matched, left = index, 0, Counter(table_words)
            for word in words:
                if left[word] > 0:
                    left[word] -= 1
                    matched += 1
            last = index
        elif words:  # a line that is not the table's ends the run (blank lines do not)
            if first is not None and (best is None or matched > best[0]):
                best = (matched, first, last)
            first, matched, left = None, 0, Counter(table_words)
    if best is None or best[0] < TABLE_MATCH_SHARE * total:
        return None
    return best[1], best[2]


def place_tables(
    text: str, tables: Sequence[TableRows], columns: Sequence[Sequence[float]] = ()
) -> tuple[str, list[TextBlock]]:
    """``text`` with each table's run of lines replaced by the table (and the caption line next to
    it moved before it), and the TABLE blocks giving where each table now stands (with the table's
    column edges from ``columns``, parallel to ``tables``, when given).

    Tables whose words are not found together in the text are skipped. The text outside the
    replaced runs is unchanged; each table stands between blank lines (a paragraph of its own)."""
    lines = text.split("\n")
    # (first line, last line, caption, table text, column edges)
    replaced: list[tuple[int, int, str | None, str, list[float] | None]] = []
    taken: set[int] = set()
    for number, rows in enumerate(tables):
        edges = list(columns[number]) if number < len(columns) and columns[number] else None
        body = table_text(rows)
        words = Counter(_words(body))
        if not body or not words:
            continue
        masked = ["" if index in taken else line for index, line in enumerate(lines)]
        run = _matching_run(masked, words)
        if run is None:
            continue
        first, last = run
        caption = None
        for index in (*_nearby(lines, first, -1), *_nearby(lines, last, 1)):
            if index not in taken and TABLE_CAPTION.match(lines[index].strip()):
                caption = lines[index].strip()
                taken.add(index)
                if index == first - 1:
                    first = index
                elif index == last + 1:
                    last = index
                break
        taken.update(range(first, last + 1))
        replaced.append((first, last, caption, body, edges))

    if not replaced:
        return text, []
    replaced.sort(key=lambda item: item[:2])
    parts: list[str] = []
    blocks: list[TextBlock] = []
    cursor = 0
    offset = 0

    def emit(piece: str) -> None:
        nonlocal offset
        parts.append(piece)
        offset += len(piece)

    for first, last, caption, body, edges in replaced:
        before = "\n".join(line for index, line in enumerate(lines[cursor:first], start=cursor) if index not in taken)
        emit(before + "\n\n" if before.strip() else "\n\n" if parts else "")
        if caption:
            emit(caption + "\n\n")
        blocks.append(TextBlock(start=offset, end=offset + len(body), kind=BlockKind.TABLE, columns=edges))
        emit(body + "\n\n")
        cursor = last + 1
    emit("\n".join(line for index, line in enumerate(lines[cursor:], start=cursor) if index not in taken))
    return "".join(parts), blocks


def _nearby(lines: list[str], index: int, step: int) -> Iterator[int]:
    """The two non-empty lines next to ``index`` in direction ``step``."""
    seen = 0
    position = index + step
    while 0 <= position < len(lines) and seen < 2:
        if lines[position].strip():
            seen += 1
            yield position
        position += step


# -- a table continued on the next page ---------------------------------------------------------

#: continues_table: two tables' column edges match when each differs by at most this share of the
#: page's width (about 12 points on an A4 page: a ruling line's width and a column re-measured).
COLUMN_EDGE_TOLERANCE = 0.02
#: A body column is numeric when this share (and at least two) of its filled cells are numbers.
NUMERIC_COLUMN_SHARE = 0.8
#: A number as a cell holds it: signs, currency and comparison marks before; digits with separators,
#: ranges and ratios; a short unit after ("12.5 kg", "(3)", "$1,200", "45%", "2-4", "10x").
_NUMBER = re.compile(
    r"[(+\-\u2212\u2013$\u20ac\u00a3\u00a5#~<>=\u2264\u2265 ]*\d[\d .,:/%)\u2013\-x\u00d7]*[A-Za-z%\u00b0]{0,3}"
)
#: A line that says a table goes on ("Table 2 (continued)", "cont.", "contd").
CONTINUED_MARK = re.compile(r"\b(?:continued|cont\.|contd\b\.?)", re.IGNORECASE)


def table_rows(body: str) -> TableRows:
    """A TABLE block's text (:func:`rag_ingest.parsing.blocks.table_text`) back as rows of cells."""
    return [line.split(" | ") for line in body.split("\n") if line.strip()]


def _columns_of(rows: TableRows) -> int:
    """The table's number of columns: the commonest cell count of its rows of two cells or more (a
    row of one spanning cell is a section label)."""
    counts = Counter(len(row) for row in rows if len(row) >= 2)
    return counts.most_common(1)[0][0] if counts else max((len(row) for row in rows), default=0)


def _normal_row(row: Sequence[str]) -> tuple[str, ...]:
    return tuple(" ".join(cell.casefold().split()) for cell in row)


def _numeric(cell: str) -> bool:
    return _NUMBER.fullmatch(cell.strip()) is not None


def _opens_a_table(first_rows: TableRows, row: Sequence[str], width: int) -> bool:
    """Whether ``row`` reads as a header rather than as more of ``first_rows``' body: a word where
    a column of the body holds numbers only."""
    body = [r for r in first_rows[1:] if len(r) == width]
    for column in range(width):
        values = [r[column] for r in body if r[column].strip()]
        numbers = sum(1 for value in values if _numeric(value))
        cell = row[column].strip() if column < len(row) else ""
        if len(values) >= 2 and numbers >= NUMERIC_COLUMN_SHARE * len(values) and cell and not _numeric(cell):
            return True
    return False


def continues_table(
    first_rows: TableRows,
    first_columns: Sequence[float] | None,
    next_rows: TableRows,
    next_columns: Sequence[float] | None,
) -> bool | None:
    """Whether a page's first table (``next_rows``) goes on with the previous page's last table
    (``first_rows``), when nothing but running lines stand between them (the caller's check, see
    ``rag_ingest.parsing.pdf.cleanup.join_continued_tables``).

    None: another table. Otherwise the same table: True when its first row repeats the header row
    (the caller drops it), False when its first row is more of the body. The evidence: the same
    number of columns; the same column edges (within ``COLUMN_EDGE_TOLERANCE`` of the page's width)
    when both tables have them (a text layer's); and a first row that either repeats the header
    or does not read as a header of its own (a word over a column of numbers). Without the column
    edges (an OCR engine's tables) only a repeated header row joins them."""
    if not first_rows or not next_rows:
        return None
    width = _columns_of(first_rows)
    if width < 2 or _columns_of(next_rows) != width:
        return None
    measured = bool(first_columns) and bool(next_columns)
    if measured:
        assert first_columns is not None and next_columns is not None
        if len(first_columns) != len(next_columns) or any(
            abs(a - b) > COLUMN_EDGE_TOLERANCE for a, b in zip(first_columns, next_columns, strict=True)
        ):
            return None
    if _normal_row(next_rows[0]) == _normal_row(first_rows[0]):
        return True
    if not measured or _opens_a_table(first_rows, next_rows[0], width):
        return None
    return False
