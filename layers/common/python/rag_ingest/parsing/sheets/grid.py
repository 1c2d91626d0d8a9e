"""A sheet laid out as blocks of a page: what the spreadsheet readers (``xlsx``, ``delimited``) share.

A reader gives a :class:`Sheet` (its non-empty rows with their row numbers, and its merged ranges)
and :func:`add_sheet` lays it out (docs/formats.md, "Spreadsheets"): a heading with the sheet's
name; the rows above the header row as a paragraph; the table, header row first (column letters
when no row is one); the short rows of labels after it as a paragraph. Empty columns are dropped,
and every block records the cells its lines come from (``SheetCells``). :class:`SheetBudget`
holds a workbook or a CSV to its rows, cells and characters. May import rag_ingest.core and
rag_ingest.parsing.blocks.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from rag_ingest.core.cell_refs import cell_range, column_letter
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import BlockKind, SheetCells
from rag_ingest.parsing.blocks import FormatLimits, PageBuilder, clean_block_text

#: A cell that holds a value, not a label: a number (a sign, a currency, separators, an exponent, a
#: percent sign), a date or a time as the readers write them, or TRUE/FALSE.
_VALUE = re.compile(
    r"[-+]?[$\u20ac\u00a3\u00a5]?\d[\d,.]*(?:[eE][-+]?\d+)?%?"
    r"|\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2})?|TRUE|FALSE",
    re.IGNORECASE,
)
#: The header row is looked for among this many rows from the first wide one.
HEADER_SEARCH_ROWS = 10
#: A table's grid (its rows by its columns, empty cells included) beyond this many times the cell
#: limit is refused: sparse cells spread over many columns would make a huge text of empty cells.
GRID_FACTOR = 4


def cell_text(value: str) -> str:
    """A cell's text as a table line holds it: one line, whitespace one space (``table_text``'s rule)."""
    if value.isascii() and value.isprintable() and "  " not in value and value == value.strip():
        return value  # already so (most cells): the full cleaning costs a million cells seconds
    return " ".join(clean_block_text(value).split())


def is_value(text: str) -> bool:
    return bool(_VALUE.fullmatch(text))


@dataclass
class Sheet:
    """A sheet's cells as read: ``rows`` are its non-empty rows, each (row number, the cell texts
    from column A on, as :func:`cell_text` gives them); ``merges`` its merged ranges, each
    (first row, first column, last row, last column), 1-based."""

    name: str | None
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    merges: list[tuple[int, int, int, int]] = field(default_factory=list)


class SheetBudget:
    """Counts a document's rows, cells and characters as they are read, and refuses the first one
    over its limit: TOO_MANY_ROWS, TOO_MANY_CELLS, CELL_TOO_LARGE, DOCUMENT_TOO_COMPLEX (characters)."""

    def __init__(self, limits: FormatLimits) -> None:
        self._limits = limits
        self.rows = 0
        self.cells = 0
        self.chars = 0

    def take_row(self, cells: list[str], sheet: str | None, row: int) -> None:
        """One non-empty row (``row`` of ``sheet``) of these cells."""
        for column, text in enumerate(cells, start=1):
            if len(text) > self._limits.max_cell_chars:
                raise PermanentError(
                    ErrorCode.CELL_TOO_LARGE,
                    f"cell {cell_range(sheet, column, column, row, row)} holds {len(text):,} characters, "
                    f"over the limit of {self._limits.max_cell_chars:,}",
                )
        self.rows += 1
        if self.rows > self._limits.max_sheet_rows:
            raise PermanentError(
                ErrorCode.TOO_MANY_ROWS, f"more than {self._limits.max_sheet_rows:,} rows with cells, the limit"
            )
        for text in cells:
            if text:
                self.cells += 1
                self.chars += len(text)
        if self.cells > self._limits.max_sheet_cells:
            raise PermanentError(
                ErrorCode.TOO_MANY_CELLS, f"more than {self._limits.max_sheet_cells:,} cells with values, the limit"
            )
        if self.chars > self._limits.max_text_chars:
            raise PermanentError(
                ErrorCode.DOCUMENT_TOO_COMPLEX,
                f"more than {self._limits.max_text_chars:,} characters in the cells, the limit",
            )


def add_sheet(builder: PageBuilder, sheet: Sheet, limits: FormatLimits) -> None:
    """The sheet's blocks on ``builder``'s page (nothing for a sheet without cells)."""
    rows = [(number, _trimmed(cells)) for number, cells in sheet.rows]
    rows = [(number, cells) for number, cells in rows if cells]
    if not rows:
        return
    if sheet.name is not None:
        builder.add(BlockKind.HEADING, sheet.name, level=1)
    start, has_header = _table_start(rows)
    end = _table_end(rows, start)
    _add_lines(builder, sheet.name, rows[:start])
    _add_table(builder, sheet, rows[start:end], has_header, limits)
    _add_lines(builder, sheet.name, rows[end:])


def _trimmed(cells: list[str]) -> list[str]:
    end = len(cells)
    while end and not cells[end - 1]:
        end -= 1
    return cells[:end]


def _fill(cells: list[str]) -> int:
    return sum(1 for text in cells if text)


def _wide(rows: list[tuple[int, list[str]]]) -> int:
    """How many cells make a row wide enough to be the table's: half the fullest row's, at least 2
    (1 in a sheet of one column)."""
    widest = max(_fill(cells) for _number, cells in rows)
    return max(2, -(-widest // 2)) if widest > 1 else 1


def _table_start(rows: list[tuple[int, list[str]]]) -> tuple[int, bool]:
    """(the index of the table's first row, whether that row is its header).

    The header is the fullest wide row of labels (no value) among the first rows, before the first
    wide row holding a value (rows of titles and notes above a table are shorter, or come earlier
    on a tie). When the first wide row already holds a value it is the header if it has a label
    (``Region | 2023 | 2024``); a row of values only starts a table without a header."""
    wide = _wide(rows)
    fills = [_fill(cells) for _number, cells in rows]
    first_wide = next(index for index, fill in enumerate(fills) if fill >= wide)
    first_valued = next(
        (
            index
            for index in range(first_wide, len(rows))
            if fills[index] >= wide and any(is_value(text) for text in rows[index][1] if text)
        ),
        len(rows),
    )
    candidates = [
        index for index in range(first_wide, min(first_valued, first_wide + HEADER_SEARCH_ROWS)) if fills[index] >= wide
    ]
    if candidates:
        return max(candidates, key=lambda index: (fills[index], -index)), True
    labels = any(text and not is_value(text) for text in rows[first_wide][1])
    return first_wide, labels


def _table_end(rows: list[tuple[int, list[str]]], start: int) -> int:
    """After the table's last row that is wide or holds a value: the short rows of labels after
    it are notes (a source, a comment), read as a paragraph."""
    wide = _wide(rows)
    last = max(
        (
            index
            for index in range(start, len(rows))
            if _fill(rows[index][1]) >= wide or any(text and is_value(text) for text in rows[index][1])
        ),
        default=start,
    )
    return last + 1


def _add_lines(builder: PageBuilder, sheet: str | None, rows: list[tuple[int, list[str]]]) -> None:
    """Rows outside the table (titles above it, notes below it) as one paragraph, a line per row."""
    if not rows:
        return
    columns = [index for _number, cells in rows for index, text in enumerate(cells) if text]
    cited = SheetCells(
        sheet=sheet, first_column=min(columns) + 1, last_column=max(columns) + 1, rows=[number for number, _ in rows]
    )
    lines = (" ".join(text for text in cells if text) for _number, cells in rows)
    _add_block(builder, BlockKind.PARAGRAPH, "\n".join(lines), cited)


def _add_table(
    builder: PageBuilder, sheet: Sheet, rows: list[tuple[int, list[str]]], has_header: bool, limits: FormatLimits
) -> None:
    """The table's rows under its header (column letters when it has none); a covered cell of a
    merged range holds its range's value, and a row that is one merged range across the table (a
    label) is one cell."""
    width = max(len(cells) for _number, cells in rows)
    if len(rows) * width > GRID_FACTOR * limits.max_sheet_cells:
        raise PermanentError(
            ErrorCode.TOO_MANY_CELLS,
            f"a table of {len(rows)} rows by {width} columns exceeds the limit of "
            f"{GRID_FACTOR * limits.max_sheet_cells} cells, empty ones included",
        )
    grid = {number: [*cells, *([""] * (width - len(cells)))] for number, cells in rows}
    labels = _apply_merges(grid, sheet.merges, width, limits)
    kept = [column for column in range(width) if any(cells[column] for cells in grid.values())]
    lines: list[list[str]] = []
    numbers: list[int] = []
    if not has_header:
        lines.append([column_letter(column + 1) for column in kept])
        numbers.append(0)
    for number, _cells in rows:
        cells = grid[number]
        lines.append([cells[kept[0]]] if number in labels else [cells[column] for column in kept])
        numbers.append(number)
    cited = SheetCells(sheet=sheet.name, first_column=kept[0] + 1, last_column=kept[-1] + 1, rows=numbers)
    _add_block(builder, BlockKind.TABLE, "\n".join(" | ".join(line) for line in lines), cited)


def _apply_merges(
    grid: dict[int, list[str]], merges: list[tuple[int, int, int, int]], width: int, limits: FormatLimits
) -> set[int]:
    """Fills each merged range's covered cells with its first cell's text, within the table's rows
    and columns; returns the rows that one merged range spans across all the table's used columns
    (a label row). Overlapping ranges (a broken or hostile file) are bounded like the grid."""
    used = [column for column in range(width) if any(cells[column] for cells in grid.values())]
    numbers = sorted(grid)
    labels: set[int] = set()
    filled = 0
    for first_row, first_column, last_row, last_column in merges:
        origin = grid.get(first_row)
        if origin is None or first_column > width or not origin[first_column - 1]:
            continue
        text = origin[first_column - 1]
        across = len(used) > 1 and first_column - 1 <= used[0] and last_column - 1 >= used[-1]
        covered = numbers[bisect_left(numbers, first_row) : bisect_right(numbers, last_row)]
        columns = range(first_column - 1, min(last_column, width))
        filled += len(covered) * len(columns)
        if filled > GRID_FACTOR * limits.max_sheet_cells:
            raise PermanentError(ErrorCode.TOO_MANY_CELLS, "merged ranges cover more cells than the limit")
        for number in covered:
            if across:
                labels.add(number)
            for column in columns:
                grid[number][column] = text
    return labels


def _add_block(builder: PageBuilder, kind: BlockKind, text: str, cells: SheetCells) -> None:
    """A block with the cells it comes from (``PageBuilder.add`` cleans its text: a line per row stays)."""
    builder.add(kind, text, cells=cells)
