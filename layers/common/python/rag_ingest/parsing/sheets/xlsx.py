"""Excel workbooks (openpyxl in read-only mode): one page per sheet, in the workbook's order.

A sheet is a section headed by its name, laid out by ``grid``; a cell reads as Excel last saved
it (a formula's cached value, none when the file was never calculated), numbers and dates written
plainly. Hidden sheets are read only with ``limits.read_hidden_sheets``. Before openpyxl opens
the workbook, every sheet's XML (hidden ones too) is scanned for its rows, cells and merged
ranges (read-only openpyxl does not report merges): a workbook over the limits is refused unparsed.
Charts, images, comments and defined names are not read. May import rag_ingest.core and parsing.
"""

from __future__ import annotations

import io
import re
import warnings
import zipfile
from datetime import date, datetime, time, timedelta
from typing import Any

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.parsing.blocks import FormatLimits, PageBuilder, StructuredDocument
from rag_ingest.parsing.office.ooxml import checked_package, read_part
from rag_ingest.parsing.sheets.grid import Sheet, SheetBudget, add_sheet, cell_text

_PREFIX = rb"<(?:[A-Za-z_][\w.-]*:)?"
_ROW_TAG = re.compile(_PREFIX + rb"row[\s/>]")
_CELL_TAG = re.compile(_PREFIX + rb"c[\s/>]")
_STRING_TAG = re.compile(_PREFIX + rb"si[\s/>]")
_MERGE_TAG = re.compile(_PREFIX + rb"mergeCell\s[^>]*?\bref=\"([A-Za-z]{1,3})(\d{1,7})(?::([A-Za-z]{1,3})(\d{1,7}))?\"")
_SCAN_CHUNK = 1024 * 1024
#: An unfinished tag carried from one chunk of a part to the next is never longer than this.
_TAIL_BYTES = 4096
_HIDDEN = frozenset({"hidden", "veryHidden"})


def read_xlsx(data: bytes, limits: FormatLimits) -> StructuredDocument:
    import openpyxl

    package = checked_package(data, limits)
    _check_shared_strings(package, limits)
    # Before openpyxl opens the workbook: it reads a sheet whole to find its size when the sheet
    # does not state one.
    scanned = _Scanned()
    merges = {part: scanned.sheet(package, part, limits) for part in _worksheet_parts(package)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # openpyxl warns of every extension it does not read
        return _read_workbook(openpyxl, data, merges, limits)


def _read_workbook(
    openpyxl: Any, data: bytes, merges: dict[str, list[tuple[int, int, int, int]]], limits: FormatLimits
) -> StructuredDocument:
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises KeyError, ValueError, XML errors...: all a broken file
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the workbook cannot be opened: {exc}") from None
    try:
        worksheets = list(workbook.worksheets)
        shown = [sheet for sheet in worksheets if limits.read_hidden_sheets or sheet.sheet_state not in _HIDDEN]
        if len(shown) > limits.max_pages:
            raise PermanentError(
                ErrorCode.TOO_MANY_PAGES, f"{len(shown)} sheets exceeds the limit of {limits.max_pages} pages"
            )
        budget = SheetBudget(limits)
        anchors: set[str] = set()
        pages = []
        for number, worksheet in enumerate(shown, start=1):
            builder = PageBuilder(page_number=number, used_anchors=anchors)
            # openpyxl's name of the sheet's part (read-only mode has no public one): pinned, tested.
            part = worksheet._worksheet_path
            if part not in merges:
                raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"sheet {worksheet.title!r} is not a declared part")
            add_sheet(builder, _read_sheet(worksheet, merges[part], budget), limits)
            pages.append(builder.page())
        title = _title(workbook)
    finally:
        workbook.close()
    if not any(page.text for page in pages) and len(shown) < len(worksheets):
        raise PermanentError(
            ErrorCode.EMPTY_DOCUMENT,
            "the workbook's only cells are in hidden sheets, which are not indexed (parsing.indexHiddenSheets)",
        )
    return StructuredDocument(pages=pages, title=title)


def _read_sheet(worksheet: Any, merges: list[tuple[int, int, int, int]], budget: SheetBudget) -> Sheet:
    sheet = Sheet(name=worksheet.title, merges=merges)
    # A dimension the file states may be wrong: unset, rows are not padded to it.
    worksheet.reset_dimensions()
    try:
        for number, row in enumerate(worksheet.iter_rows(min_row=1, min_col=1), start=1):
            cells = [
                cell_text(_value_text(cell.value, cell.number_format)) if cell.value is not None else "" for cell in row
            ]
            if not any(cells):
                continue
            budget.take_row(cells, worksheet.title, number)
            sheet.rows.append((number, cells))
    except PermanentError:
        raise
    except Exception as exc:  # a sheet openpyxl cannot parse
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"sheet {worksheet.title!r} cannot be read: {exc}") from None
    return sheet


def _value_text(value: Any, number_format: str | None) -> str:
    """A cell's value as a person reads it: TRUE/FALSE, 42 (not 42.0), 12.5% where the format is a
    percentage, 0.3 (not 0.30000000000000004), dates in ISO form."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        if number_format and "%" in number_format:
            return _number(value * 100) + "%"
        return _number(value)
    if isinstance(value, datetime):
        if value.time() == time(0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds" if value.second else "minutes")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return str(value)


def _number(value: float) -> str:
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    return format(value, ".15g")


def _title(workbook: Any) -> str | None:
    try:
        return (workbook.properties.title or "").strip() or None
    except Exception:  # a broken docProps/core.xml costs only the title
        return None


class _Scanned:
    """The rows and cells scanned so far across the workbook's sheets (elements written, empty
    formatted ones included)."""

    def __init__(self) -> None:
        self.rows = 0
        self.cells = 0

    def sheet(self, package: zipfile.ZipFile, part: str, limits: FormatLimits) -> list[tuple[int, int, int, int]]:
        """A sheet part's merged ranges, once its rows and cells (added to those of the parts before
        it) are within the limits; the scan stops at the first bound passed."""
        merges: list[tuple[int, int, int, int]] = []
        for chunk in _chunks(package, part):
            self.rows += len(_ROW_TAG.findall(chunk))
            self.cells += len(_CELL_TAG.findall(chunk))
            if self.rows > limits.max_sheet_rows:
                raise PermanentError(
                    ErrorCode.TOO_MANY_ROWS, f"the workbook has more than {limits.max_sheet_rows:,} rows, the limit"
                )
            if self.cells > limits.max_sheet_cells:
                raise PermanentError(
                    ErrorCode.TOO_MANY_CELLS, f"the workbook has more than {limits.max_sheet_cells:,} cells, the limit"
                )
            for first_column, first_row, last_column, last_row in _MERGE_TAG.findall(chunk):
                start = (int(first_row), _column_number(first_column.decode()))
                end = (int(last_row), _column_number(last_column.decode())) if last_row else start
                merges.append((start[0], start[1], end[0], end[1]))
            if len(merges) > limits.max_sheet_cells:
                raise PermanentError(ErrorCode.TOO_MANY_CELLS, "more merged ranges than the cell limit")
        return merges


_OVERRIDE = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?Override\s[^>]*>")
_PART_NAME = re.compile(rb'\bPartName="/?([^"]+)"')
_WORKSHEET_TYPE = b'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"'


def _worksheet_parts(package: zipfile.ZipFile) -> list[str]:
    """The package's worksheet parts, as ``[Content_Types].xml`` declares them (hidden sheets too)."""
    content_types = read_part(package, "[Content_Types].xml", 4 * 1024 * 1024)
    parts = []
    for override in _OVERRIDE.findall(content_types):
        name = _PART_NAME.search(override)
        if name and _WORKSHEET_TYPE in override:
            parts.append(name.group(1).decode("utf-8", errors="replace"))
    return parts


def _check_shared_strings(package: zipfile.ZipFile, limits: FormatLimits) -> None:
    """The workbook's shared strings (which openpyxl reads whole, even in read-only mode) are
    no more than the cell limit."""
    for name in package.namelist():
        if not name.lower().endswith("sharedstrings.xml"):
            continue
        strings = 0
        for chunk in _chunks(package, name):
            strings += len(_STRING_TAG.findall(chunk))
            if strings > limits.max_sheet_cells:
                raise PermanentError(
                    ErrorCode.TOO_MANY_CELLS,
                    f"the workbook holds more than {limits.max_sheet_cells:,} strings, over the cell limit",
                )


def _chunks(package: zipfile.ZipFile, part: str) -> Any:
    """A part's bytes in chunks that each end after a ``>``, so no tag is cut between two."""
    tail = b""
    try:
        with package.open(part) as stream:
            while block := stream.read(_SCAN_CHUNK):
                buffer = tail + block
                cut = buffer.rfind(b">") + 1
                tail = buffer[cut:][-_TAIL_BYTES:]
                if cut:
                    yield buffer[:cut]
    except KeyError:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the workbook names a missing part {part}") from None
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"{part} cannot be decompressed: {exc}") from None


def _column_number(letters: str) -> int:
    number = 0
    for letter in letters.upper():
        number = number * 26 + ord(letter) - ord("A") + 1
    return number
