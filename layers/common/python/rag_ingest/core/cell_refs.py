"""Cell references as a spreadsheet writes them: column letters, ``A1:F40``, ``'Q1 Budget'!A1:F40``.

Pure functions; imports nothing of the project. What a spreadsheet passage cites
(``Chunk.cell_range``) and the rendered view names.
"""

from __future__ import annotations

import re

#: A sheet name Excel writes without quotes: a word that cannot be read as a cell reference.
_PLAIN_SHEET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_LOOKS_LIKE_A_CELL = re.compile(r"(?:[A-Za-z]{1,3}\d+|[Rr]\d*[Cc]\d*)")


def column_letter(column: int) -> str:
    """The letters of a 1-based column: 1 is A, 27 is AA, 16384 is XFD."""
    if column < 1:
        raise ValueError(f"a column is numbered from 1, not {column}")
    letters = ""
    while column:
        column, remainder = divmod(column - 1, 26)
        letters = chr(ord("A") + remainder) + letters
    return letters


def cell_range(sheet: str | None, first_column: int, last_column: int, first_row: int, last_row: int) -> str:
    """The range as a formula names it: ``A1:F40`` (one cell: ``B7``), after ``sheet!`` when the
    cells are in a named sheet, the name quoted where Excel quotes it (``'Q1 Budget'!A1:F40``)."""
    start = f"{column_letter(first_column)}{first_row}"
    end = f"{column_letter(last_column)}{last_row}"
    reference = start if start == end else f"{start}:{end}"
    if sheet is None:
        return reference
    return f"{quoted_sheet_name(sheet)}!{reference}"


def quoted_sheet_name(sheet: str) -> str:
    """A sheet name as it stands before ``!``: quoted (an inner quote doubled) unless it is a plain word."""
    if _PLAIN_SHEET_NAME.fullmatch(sheet) and not _LOOKS_LIKE_A_CELL.fullmatch(sheet):
        return sheet
    return "'" + sheet.replace("'", "''") + "'"
