"""Delimited text (CSV, TSV, semicolon- or pipe-separated values): one page, the file as one table.

:func:`delimiter_of` tells delimited text from other text by its start (``formats.text_format``
asks it): a tab, comma, semicolon or pipe that splits the records of its start into a table of two
or more columns (``_regular_width``), in a sample that does not read as prose. :func:`read_delimited` decodes the
whole file (``blocks.decode_text``), reads its records with that delimiter (quotes as Excel writes
them) and lays them out as a sheet without a name (``grid``). A record is a row: its number is
the row Excel shows for it. May import rag_ingest.core and rag_ingest.parsing.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.parsing.blocks import SNIFF_BYTES, FormatLimits, PageBuilder, StructuredDocument, decode_text
from rag_ingest.parsing.sheets.grid import Sheet, SheetBudget, add_sheet, cell_text

#: Tried in this order; on a tie the first wins (a tab is never prose's).
DELIMITERS = ("\t", ",", ";", "|")
#: Records of the start of a file that decide whether it is delimited.
SNIFF_RECORDS = 200
#: Nearly every record has the common number of fields (a short last line, a note) in a sample of
#: at least ``_RAGGED_SAMPLE`` records; a shorter sample must be regular throughout.
_REGULAR_SHARE = 0.9
_RAGGED_SAMPLE = 10


def delimiter_of(text: str, *, partial: bool) -> str | None:
    """The delimiter of delimited text (``text``: a file's start, ``partial`` when cut), else None."""
    best: tuple[int, str] | None = None
    for delimiter in DELIMITERS:
        records = _sample_records(text[:SNIFF_BYTES], delimiter, partial=partial or len(text) > SNIFF_BYTES)
        width = _regular_width(records)
        if width < 2 or _reads_as_prose(records, delimiter):
            continue
        if best is None or width > best[0]:
            best = (width, delimiter)
    return best[1] if best else None


def read_delimited(data: bytes, limits: FormatLimits) -> StructuredDocument:
    text = decode_text(data)
    delimiter = delimiter_of(text, partial=False)
    if delimiter is None:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, "the text has no delimiter that splits its records evenly")
    budget = SheetBudget(limits)
    sheet = Sheet(name=None)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"', doublequote=True)
    try:
        for number, record in enumerate(reader, start=1):
            cells = [cell_text(field) for field in record]
            if not any(cells):
                continue
            budget.take_row(cells, None, number)
            sheet.rows.append((number, cells))
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):  # the csv module's own bound (131,072 characters)
            raise PermanentError(
                ErrorCode.CELL_TOO_LARGE, f"a field is over the limit of {limits.max_cell_chars} characters"
            ) from None
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the delimited text cannot be read: {exc}") from None
    builder = PageBuilder(page_number=1, used_anchors=set())
    add_sheet(builder, sheet, limits)
    return StructuredDocument(pages=[builder.page()])


def _sample_records(sample: str, delimiter: str, *, partial: bool) -> list[list[str]]:
    """The sample's non-empty records, at most ``SNIFF_RECORDS``. A cut last record is dropped,
    unless it is the only one after the header (a record longer than the sample): cut, it has at
    most its real number of fields, and it is kept when it has two or more."""
    records: list[list[str]] = []
    reader = csv.reader(io.StringIO(sample, newline=""), delimiter=delimiter, quotechar='"', doublequote=True)
    try:
        for record in reader:
            if any(field.strip() for field in record):
                records.append(record)
            if len(records) > SNIFF_RECORDS:
                return records[:SNIFF_RECORDS]
    except csv.Error:
        return []
    if not partial or not records:
        return records
    cut = records.pop()
    if len(records) == 1 and 2 <= len(cut) <= len(records[0]):
        records.append([*cut, *([""] * (len(records[0]) - len(cut)))])
    return records


def _regular_width(records: list[list[str]]) -> int:
    """The number of fields of the records' table, 0 when they are not one: every record has as
    many as the first (its header) or nearly every one the same number; or the header has the most,
    three or more, and every other record at least two (trailing fields left out, as R and many
    exporters write optional columns)."""
    if len(records) < 2:
        return 0
    widths = [len(record) for record in records]
    width, count = Counter(widths).most_common(1)[0]
    if count == len(records) or (len(records) >= _RAGGED_SAMPLE and count >= _REGULAR_SHARE * len(records)):
        return width
    header = widths[0]
    return header if header >= 3 and all(2 <= other <= header for other in widths[1:]) else 0


def _reads_as_prose(records: list[list[str]], delimiter: str) -> bool:
    """Whether evenly split text is prose or indented text after all: most fields after a comma or
    semicolon start with a space, as in a sentence ("one, two"); or every record's first field is
    empty (lines indented by a tab)."""
    if all(not record[0].strip() for record in records):
        return True
    if delimiter not in ",;":
        return False
    following = [field for record in records for field in record[1:] if field]
    return bool(following) and sum(field.startswith(" ") for field in following) > len(following) / 2
