"""Spreadsheets: an XLSX (openpyxl, read-only) and delimited text read into sections of tables,
with the cells each passage cites; every hostile spreadsheet is a permanent code in seconds."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

import openpyxl
import pytest
from rag_ingest.core.cell_refs import cell_range, column_letter
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import BlockKind, DocumentFormat, PageText, TextBlock
from rag_ingest.ingest.cell_ranges import with_cell_ranges
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.formats import SNIFF_BYTES, FormatLimits, detect_format, read_structured
from rag_ingest.parsing.sheets.delimited import delimiter_of

from samples import documents, spreadsheets

pytestmark = pytest.mark.unit

LIMITS = FormatLimits(max_pages=500)
SECONDS = 20.0  # generous: "seconds", not the function's timeout (bench/hostile_formats.py measures)


def detect(data: bytes) -> DocumentFormat:
    return detect_format(data[:SNIFF_BYTES], size=len(data), max_bytes=200 * 1024 * 1024, read_all=lambda: data)


def read(data: bytes, limits: FormatLimits = LIMITS) -> list[PageText]:
    return read_structured(data, detect(data), limits).pages


def blocks(page: PageText) -> list[tuple[BlockKind, str]]:
    return [(block.kind, page.text[block.start : block.end]) for block in page.blocks]


def workbook_bytes(build: Callable[[openpyxl.Workbook], None]) -> bytes:
    workbook = openpyxl.Workbook()
    build(workbook)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


# -- XLSX -----------------------------------------------------------------------------------------
def test_a_workbook_is_a_section_per_sheet_with_its_title_table_and_notes() -> None:
    data = spreadsheets.budget_xlsx()
    assert detect(data) is DocumentFormat.XLSX
    document = read_structured(data, DocumentFormat.XLSX, LIMITS)
    assert document.title == "Harbour Budget 2026"
    budget, roster = document.pages  # the hidden sheet is not read
    assert [page.page_number for page in document.pages] == [1, 2]
    assert blocks(budget) == [
        (BlockKind.HEADING, "Budget"),
        (BlockKind.PARAGRAPH, "Port Ellery harbour budget, financial year 2026"),
        (
            BlockKind.TABLE,
            "Item | Category | Cost (EUR) | Share | Approved\n"
            "Dredging of the north basin | Maintenance | 182500 | 41.2% | 2026-01-14\n"
            "Crane 3 gearbox overhaul | Maintenance | 64250 | 14.5% | 2026-02-03\n"
            "Pilot boat fuel | Operations | 41800.5 | 9.4% | 2026-01-20\n"
            # A merged range across the table is a label row: one cell.
            "Capital projects (approved by the board in March)\n"
            "Solar canopy over berth 4 | Capital | 154000 | 34.9% | 2026-03-11\n"
            # The SUM formula reads as its cached value; empty cells stay in their columns.
            "Total | | 442550.5 | |",
        ),
        (BlockKind.PARAGRAPH, "Source: harbour master's office, figures in euros excluding VAT"),
    ]
    heading = budget.blocks[0]
    assert heading.level == 1 and heading.anchor == "budget"
    assert roster.blocks[0].anchor == "crew-roster"
    table = budget.blocks[2]
    assert table.cells is not None
    assert (table.cells.sheet, table.cells.first_column, table.cells.last_column) == ("Budget", 1, 5)
    assert table.cells.rows == [3, 4, 5, 6, 7, 8, 9]  # the empty row 2 is dropped; row numbers are the sheet's
    assert budget.blocks[3].cells is not None and budget.blocks[3].cells.rows == [11]


def test_hidden_sheets_are_read_only_when_the_setting_says_so() -> None:
    data = spreadsheets.budget_xlsx()
    pages = read(data, FormatLimits(max_pages=500, read_hidden_sheets=True))
    assert [page.text.split("\n")[0] for page in pages] == ["Budget", "Crew roster", "Old rates"]
    assert "Berthing 2019 | 3.1" in pages[2].text

    def only_hidden(workbook: openpyxl.Workbook) -> None:
        workbook.active["A1"] = None
        hidden = workbook.create_sheet("Lookups")
        hidden.append(["Code", "Meaning"])
        hidden.append(["B4", "Berth four"])
        hidden.sheet_state = "veryHidden"

    with pytest.raises(PermanentError) as caught:
        read(workbook_bytes(only_hidden))
    assert caught.value.code is ErrorCode.EMPTY_DOCUMENT and "hidden" in caught.value.detail


def test_merged_cells_fill_the_cells_they_cover_inside_a_table() -> None:
    def merged(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        sheet.title = "Berths"
        sheet.append(["Quay", "Berth", "Length (m)"])
        sheet.append(["North quay", "N1", 120])
        sheet.append([None, "N2", 95])
        sheet.append(["South quay", "S1", 140])
        sheet.merge_cells("A2:A3")  # a label down two rows: each row keeps its quay

    (page,) = read(workbook_bytes(merged))
    assert blocks(page)[1] == (
        BlockKind.TABLE,
        "Quay | Berth | Length (m)\nNorth quay | N1 | 120\nNorth quay | N2 | 95\nSouth quay | S1 | 140",
    )


def test_values_read_as_a_person_reads_them() -> None:
    import datetime

    def typed(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        sheet.append(["What", "Value"])
        sheet.append(["integer stored as a float", 42.0])
        sheet.append(["binary noise", 0.1 + 0.2])
        sheet.append(["boolean", True])
        sheet.append(["date and time", datetime.datetime(2026, 3, 2, 5, 41)])
        sheet.append(["time", datetime.time(18, 3)])
        sheet.append(["percentage", 0.125])
        sheet["B7"].number_format = "0.0%"
        sheet.append(["formula never calculated", "=B2*2"])  # openpyxl saves no cached value

    (page,) = read(workbook_bytes(typed))
    assert blocks(page)[1][1].split("\n")[1:] == [
        "integer stored as a float | 42",
        "binary noise | 0.3",
        "boolean | TRUE",
        "date and time | 2026-03-02 05:41",
        "time | 18:03:00",
        "percentage | 12.5%",
    ]
    # The formula's cell is empty: the label alone, after the table, reads as a note.
    assert blocks(page)[2] == (BlockKind.PARAGRAPH, "formula never calculated")


def test_a_table_of_values_only_gets_a_header_of_column_letters() -> None:
    def numbers(workbook: openpyxl.Workbook) -> None:
        for row in range(1, 4):
            workbook.active.append([None, row, row * 2.5, row * 10])

    (page,) = read(workbook_bytes(numbers))
    assert blocks(page)[1] == (BlockKind.TABLE, "B | C | D\n1 | 2.5 | 10\n2 | 5 | 20\n3 | 7.5 | 30")
    table = page.blocks[1]
    assert table.cells is not None and table.cells.rows == [0, 1, 2, 3]  # the made-up header is no sheet row
    assert (table.cells.first_column, table.cells.last_column) == (2, 4)


def test_the_header_is_the_fullest_row_of_labels_above_the_first_values() -> None:
    """readxl's deaths.xlsx (eval/formats): four rows of notes, one of them spread over five cells and
    one a merged range, above the header; notes below the table."""
    data = open("eval/formats/readxl-deaths.xlsx", "rb").read()  # noqa: SIM115
    arts = read(data)[0]
    kinds = blocks(arts)
    assert kinds[1] == (
        BlockKind.PARAGRAPH,
        "Lots of people\nsimply cannot resist writing some notes\nat the top of their spreadsheets\nor merging cells",
    )
    assert kinds[2][1].split("\n")[:2] == [
        "Name | Profession | Age | Has kids | Date of birth | Date of death",
        "David Bowie | musician | 69 | TRUE | 1947-01-08 | 2016-01-10",
    ]
    assert kinds[3] == (BlockKind.PARAGRAPH, "Some\nalso like to write stuff\nat the bottom,\ntoo!")


# -- CSV and other delimited text -----------------------------------------------------------------
@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_delimited_text_is_recognised_by_its_delimiter(delimiter: str) -> None:
    text = "\n".join(
        delimiter.join(cells)
        for cells in (["Port", "Berth", "Depth"], ["Port Ellery", "4", "11.5"], ["Kestrel Bay", "2", "7"])
    )
    data = (text + "\n").encode()
    assert delimiter_of(text, partial=False) == delimiter
    assert detect(data) is DocumentFormat.CSV
    (page,) = read(data)
    assert blocks(page) == [(BlockKind.TABLE, "Port | Berth | Depth\nPort Ellery | 4 | 11.5\nKestrel Bay | 2 | 7")]


def test_a_csv_reads_quoted_fields_and_counts_rows_as_a_spreadsheet_does() -> None:
    data = spreadsheets.TIDE_TABLE_CSV.encode()
    assert detect(data) is DocumentFormat.CSV
    (page,) = read(data)
    table = page.blocks[0]
    lines = page.text.split("\n")
    assert lines[1] == "2026-03-02 | Port Ellery | 05:41 | 4.2 | Spring tide, pilots double-booked"
    assert lines[3] == "2026-03-03 | Kestrel Bay | 06:20 | 3.1 | Dredger on the bar; keep to the west channel"
    assert table.cells is not None and table.cells.sheet is None
    assert table.cells.rows == [1, 2, 3, 4, 5, 6]  # the quoted line break is inside row 4


def test_a_csv_in_a_legacy_encoding_and_one_in_utf16_are_decoded() -> None:
    text = (
        "Ville;Quai;Tirant d'eau;Remarque\n"
        "Sète;Môle Saint-Louis;9,5;Accès réservé aux navires de pêche\n"
        "Caen;Bassin Saint-Pierre;6;Écluse ouverte deux heures avant la pleine mer\n"
        "Brest;Port de commerce;12;Pilotage obligatoire au-delà de 65 mètres\n"
        "Dieppe;Quai Henri IV;5,5;Réparations prévues en été\n"
    )
    for data in (text.encode("cp1252"), text.encode("utf-16")):
        assert detect(data) is DocumentFormat.CSV
        (page,) = read(data)
        assert "Sète | Môle Saint-Louis | 9,5" in page.text


def test_a_csv_without_a_header_gets_column_letters_and_rows_missing_trailing_fields_stay_rows() -> None:
    headerless = b"12,4.5,2026-03-02\n14,3.1,2026-03-03\n9,2.8,2026-03-04\n"
    (page,) = read(headerless)
    assert page.text.split("\n")[0] == "A | B | C"
    # As distro-info-data writes its releases: optional trailing columns left out.
    ragged = b"version,codename,created,release,eol\n10,Buster,2017-06-17,2019-07-06,2022-09-10\n"
    ragged += b"11,Bullseye,2019-07-06,2021-08-14\n,Sid,1993-08-16\n"
    assert detect(ragged) is DocumentFormat.CSV
    (page,) = read(ragged)
    assert page.text.split("\n")[-2:] == ["11 | Bullseye | 2019-07-06 | 2021-08-14 |", "| Sid | 1993-08-16 | |"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Prose with commas, evenly or not, is text.
        ("Hello, world.\nGoodbye, moon.\nSee you, soon.\n", DocumentFormat.TEXT),
        ("The lock keeper, who lives by the gate, opens it at dawn.\nBoats wait below.\n", DocumentFormat.TEXT),
        # Lines indented by a tab are not a table.
        ("Steps:\n\tfill the chamber\n\topen the gate\n", DocumentFormat.TEXT),
        # A Markdown pipe table stays Markdown.
        ("| Port | Berth |\n|---|---|\n| Ellery | 4 |\n", DocumentFormat.MARKDOWN),
        ("# Ports\n\nport,berth\nEllery,4\nKestrel,2\n", DocumentFormat.MARKDOWN),
        ("name,berth\nEllery,4\nKestrel,2\n", DocumentFormat.CSV),
    ],
)
def test_text_formats_stay_what_they_were(text: str, expected: DocumentFormat) -> None:
    assert detect(text.encode()) is expected


def test_a_csv_whose_second_record_is_longer_than_the_sample_is_still_a_csv() -> None:
    data = b'port,wind,sea\nEllery,"' + b"calm " * 6_000 + b'","' + b"slight " * 4_000 + b'"\nKestrel,strong,rough\n'
    assert detect(data) is DocumentFormat.CSV
    (page,) = read(data)
    assert page.text.endswith("Kestrel | strong | rough")


# -- citations ------------------------------------------------------------------------------------
def test_cell_references_are_written_as_a_spreadsheet_writes_them() -> None:
    assert [column_letter(n) for n in (1, 26, 27, 52, 703, 16384)] == ["A", "Z", "AA", "AZ", "AAA", "XFD"]
    assert cell_range("Budget", 1, 6, 12, 40) == "Budget!A12:F40"
    assert cell_range("Q1 Budget", 2, 2, 7, 7) == "'Q1 Budget'!B7"
    assert cell_range("Harbour's", 1, 2, 1, 3) == "'Harbour''s'!A1:B3"
    assert cell_range("A1", 1, 1, 1, 1) == "'A1'!A1"  # a name that reads as a cell is quoted
    assert cell_range(None, 3, 5, 2, 9) == "C2:E9"


def test_each_passage_cites_the_sheet_and_the_cells_of_its_own_rows() -> None:
    def long_table(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        sheet.title = "Q1 Budget"
        sheet.append(["Harbour costs by week"])
        sheet.append(["Week", "Item", "Cost"])
        for week in range(1, 121):
            sheet.append([week, f"Mooring inspection of pontoon {week}", week * 10])

    pages = read(workbook_bytes(long_table))
    chunks = with_cell_ranges(
        chunk_pages(pages, count_tokens=lambda text: len(text.split()), target_tokens=100, overlap_tokens=0), pages
    )
    assert len(chunks) > 3
    assert chunks[0].cell_range is not None and chunks[0].cell_range.startswith("'Q1 Budget'!A1:C")
    for chunk in chunks[1:]:
        assert chunk.text.startswith("Week | Item | Cost\n")  # the header repeated on every piece
        first_week = int(chunk.text.split("\n")[1].split(" | ")[0])
        last_week = int(chunk.text.split("\n")[-1].split(" | ")[0])
        # Week n is on row n + 2; the repeated header (row 2) is not the passage's own.
        assert chunk.cell_range == f"'Q1 Budget'!A{first_week + 2}:C{last_week + 2}"


def test_a_passage_over_two_sheets_names_a_range_in_each() -> None:
    pages = read(spreadsheets.budget_xlsx())
    chunks = with_cell_ranges(
        chunk_pages(pages, count_tokens=lambda text: len(text.split()), target_tokens=400, overlap_tokens=0), pages
    )
    # The note under the budget's table shares a chunk with the next sheet: a range in each sheet.
    assert [chunk.cell_range for chunk in chunks] == ["Budget!A1:E9", "Budget!A11, 'Crew roster'!A1:C4"]


def test_blocks_whose_lines_disagree_with_their_rows_are_left_uncited() -> None:
    page = PageText(page_number=1, text="a | b\nc | d", blocks=[TextBlock(start=0, end=11, kind=BlockKind.TABLE)])
    chunks = chunk_pages([page], count_tokens=lambda text: len(text.split()))
    assert with_cell_ranges(chunks, [page]) == chunks


# -- hostile spreadsheets: each a permanent code in seconds --------------------------------------
HOSTILE: dict[str, tuple[Callable[[], bytes], ErrorCode]] = {
    "zip-bomb-xlsx": (spreadsheets.zip_bomb_xlsx, ErrorCode.DOCUMENT_TOO_COMPLEX),
    "entity-expansion-xlsx": (spreadsheets.entity_expansion_xlsx, ErrorCode.UNSAFE_XML),
    "million-rows-xlsx": (spreadsheets.million_rows_xlsx, ErrorCode.TOO_MANY_ROWS),
    "10mb-cell-xlsx": (spreadsheets.huge_cell_xlsx, ErrorCode.CELL_TOO_LARGE),
    "million-rows-csv": (spreadsheets.million_rows_csv, ErrorCode.TOO_MANY_ROWS),
    "10mb-cell-csv": (spreadsheets.huge_cell_csv, ErrorCode.CELL_TOO_LARGE),
    "macro-enabled-xlsm": (spreadsheets.macro_enabled_xlsx, ErrorCode.MACRO_ENABLED_DOCUMENT),
    "legacy-xls": (spreadsheets.legacy_xls, ErrorCode.LEGACY_OFFICE_FORMAT),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_spreadsheets_end_with_a_permanent_code_in_seconds(name: str) -> None:
    make, code = HOSTILE[name]
    data = make()
    started = time.monotonic()
    with pytest.raises(PermanentError) as caught:
        read_structured(data, detect(data), LIMITS)
    elapsed = time.monotonic() - started
    assert caught.value.code is code, caught.value
    assert elapsed < SECONDS, f"{name}: {elapsed:.1f} s"


def test_refusals_name_the_spreadsheet_format() -> None:
    with pytest.raises(PermanentError, match=r"\.xlsm\): save it as \.xlsx"):
        detect(spreadsheets.macro_enabled_xlsx())
    with pytest.raises(PermanentError, match=r"legacy Excel file \(\.xls\): save it as \.xlsx"):
        detect(spreadsheets.legacy_xls())
    # A legacy file whose directory the first bytes do not hold is named from the whole file.
    late = documents.ole2_document() + b"\0" * SNIFF_BYTES + spreadsheets.legacy_xls()[512:]
    with pytest.raises(PermanentError, match=r"\(\.xls\)"):
        detect(late)
    with pytest.raises(PermanentError, match=r"\.doc, \.ppt or \.xls"):
        detect(documents.ole2_document())


@pytest.mark.parametrize(
    ("limits", "code"),
    [
        (FormatLimits(max_pages=500, max_sheet_rows=5), ErrorCode.TOO_MANY_ROWS),
        (FormatLimits(max_pages=500, max_sheet_cells=20), ErrorCode.TOO_MANY_CELLS),
        (FormatLimits(max_pages=500, max_cell_chars=40), ErrorCode.CELL_TOO_LARGE),
        (FormatLimits(max_pages=500, max_text_chars=200), ErrorCode.DOCUMENT_TOO_COMPLEX),
        (FormatLimits(max_pages=1), ErrorCode.TOO_MANY_PAGES),
    ],
)
def test_each_bound_has_its_own_code(limits: FormatLimits, code: ErrorCode) -> None:
    for data in (spreadsheets.budget_xlsx(), spreadsheets.TIDE_TABLE_CSV.encode()):
        if code is ErrorCode.TOO_MANY_PAGES and detect(data) is DocumentFormat.CSV:
            continue  # a CSV is one page
        with pytest.raises(PermanentError) as caught:
            read(data, limits)
        assert caught.value.code is code, (data[:20], caught.value)
