"""Spreadsheets for the tests and the page: a real XLSX (written by openpyxl) and a CSV, and the
hostile ones of docs/formats.md, "Spreadsheets" (a zip bomb, entity expansion, a million rows, a
10 MB cell, macros, a legacy .xls), generated in memory.

openpyxl writes a formula without the value a spreadsheet program caches beside it: the sample's
one formula gets the cached value such a program saves, so the reader's cached-value rule is
exercised on a real package.

    .venv/bin/python -m samples.spreadsheets      # samples/formats/harbour-budget.xlsx, tide-table.csv
"""

from __future__ import annotations

import datetime
import io
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

XLSX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
FORMATS_DIR = Path(__file__).resolve().parent / "formats"

#: A CSV as an export writes it: a header, quoted fields with the delimiter and a line break inside.
TIDE_TABLE_CSV = """Date,Port,High water,Height (m),Note
2026-03-02,Port Ellery,05:41,4.2,"Spring tide, pilots double-booked"
2026-03-02,Port Ellery,18:03,4.4,
2026-03-03,Kestrel Bay,06:20,3.1,"Dredger on the bar;
keep to the west channel"
2026-03-03,Kestrel Bay,18:44,3.3,
2026-03-04,Gull Point,07:02,2.8,Neap tide approaching
"""


def budget_xlsx() -> bytes:
    """A workbook of three sheets: "Budget" (a title row, a header, rows of costs, a merged label
    row, a percentage column, a date, a SUM with its cached value, a note below); "Crew roster"
    (a table without a title); "Old rates" hidden."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.properties.title = "Harbour Budget 2026"
    budget = workbook.active
    budget.title = "Budget"
    budget["A1"] = "Port Ellery harbour budget, financial year 2026"
    budget.append([])
    budget.append(["Item", "Category", "Cost (EUR)", "Share", "Approved"])
    rows = [
        ("Dredging of the north basin", "Maintenance", 182_500, 0.412, datetime.date(2026, 1, 14)),
        ("Crane 3 gearbox overhaul", "Maintenance", 64_250, 0.145, datetime.date(2026, 2, 3)),
        ("Pilot boat fuel", "Operations", 41_800.5, 0.094, datetime.date(2026, 1, 20)),
    ]
    for cells in rows:
        budget.append(list(cells))
    budget.append(["Capital projects (approved by the board in March)"])
    budget.merge_cells("A7:E7")
    budget.append(["Solar canopy over berth 4", "Capital", 154_000, 0.349, datetime.date(2026, 3, 11)])
    budget.append(["Total", None, "=SUM(C4:C8)", None, None])
    budget.append([])
    budget.append(["Source: harbour master's office, figures in euros excluding VAT"])
    for number in range(4, 9):
        budget[f"D{number}"].number_format = "0.0%"
    roster = workbook.create_sheet("Crew roster")
    roster.append(["Name", "Role", "Shift"])
    roster.append(["Ines Okafor", "Harbour pilot", "Early"])
    roster.append(["Tomasz Wren", "Crane operator", "Late"])
    roster.append(["Aoife Lindqvist", "Mooring hand", "Night"])
    old = workbook.create_sheet("Old rates")
    old.append(["Rate", "EUR per metre"])
    old.append(["Berthing 2019", 3.1])
    old.sheet_state = "hidden"
    buffer = io.BytesIO()
    workbook.save(buffer)
    total = sum(cost for _item, _category, cost, _share, _date in rows) + 154_000
    return _replace_part(
        buffer.getvalue(),
        "xl/worksheets/sheet1.xml",
        lambda xml: xml.replace(b"<f>SUM(C4:C8)</f><v></v>", b"<f>SUM(C4:C8)</f><v>%s</v>" % str(total).encode()),
    )


def _replace_part(data: bytes, name: str, change: Callable[[bytes], bytes]) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            content = source.read(entry.filename)
            target.writestr(entry, change(content) if entry.filename == name else content)
    return buffer.getvalue()


def _with_sheet_xml(sheet_xml: bytes) -> bytes:
    """The one-sheet workbook openpyxl writes, its sheet part replaced by ``sheet_xml``."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.active["A1"] = "placeholder"
    buffer = io.BytesIO()
    workbook.save(buffer)
    return _replace_part(buffer.getvalue(), "xl/worksheets/sheet1.xml", lambda _xml: sheet_xml)


_SHEET_START = b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
_SHEET_END = b"</sheetData></worksheet>"


# -- hostile spreadsheets ---------------------------------------------------------------------------
def million_rows_xlsx(rows: int = 1_000_000) -> bytes:
    """A sheet of ``rows`` one-cell rows (27 MB of XML, ~100 KB zipped)."""
    return _with_sheet_xml(_SHEET_START + b"<row><c><v>1</v></c></row>" * rows + _SHEET_END)


def huge_cell_xlsx(size: int = 10 * 1024 * 1024) -> bytes:
    """A sheet whose one cell holds ``size`` characters (Excel allows 32,767)."""
    text = b"harbour " * (size // 8)
    return _with_sheet_xml(
        _SHEET_START + b'<row r="1"><c r="A1" t="inlineStr"><is><t>' + text + b"</t></is></c></row>" + _SHEET_END
    )


def zip_bomb_xlsx(unzipped_bytes: int = 600 * 1024 * 1024) -> bytes:
    """A workbook whose sheet part decompresses to ``unzipped_bytes`` of spaces (~1,000:1)."""
    source = zipfile.ZipFile(io.BytesIO(budget_xlsx()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        for entry in source.infolist():
            if entry.filename == "xl/worksheets/sheet2.xml":
                with bomb.open(entry.filename, "w", force_zip64=True) as part:
                    part.write(source.read(entry.filename))
                    block = b" " * (1024 * 1024)
                    for _ in range(unzipped_bytes // len(block)):
                        part.write(block)
            else:
                bomb.writestr(entry, source.read(entry.filename))
    return buffer.getvalue()


def entity_expansion_xlsx() -> bytes:
    """ "Billion laughs" in the sheet part: nested entities declared in a DTD."""
    entities = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{level} "{("&lol" + (str(level - 1) if level > 1 else "") + ";") * 10}">'
        for level in range(1, 10)
    )
    prolog = f'<?xml version="1.0"?><!DOCTYPE worksheet [{entities}]>'.encode()
    body = _SHEET_START + b'<row r="1"><c r="A1" t="inlineStr"><is><t>&lol9;</t></is></c></row>' + _SHEET_END
    return _with_sheet_xml(prolog + body)


def macro_enabled_xlsx() -> bytes:
    """The sample workbook declared an .xlsm (its main part's macro-enabled content type)."""
    return _replace_part(
        budget_xlsx(),
        "[Content_Types].xml",
        lambda xml: re.sub(
            rb'(PartName="/xl/workbook.xml" ContentType=")[^"]+"',
            rb'\1application/vnd.ms-excel.sheet.macroEnabled.main+xml"',
            xml,
        ),
    )


def legacy_xls() -> bytes:
    """The start of a legacy .xls: an OLE2 header and a directory whose entries name the root and
    the ``Workbook`` stream, as Excel 97-2003 writes them (sector 0 is the directory)."""

    def entry(name: str, kind: int) -> bytes:
        encoded = (name + "\0").encode("utf-16-le")
        return encoded.ljust(64, b"\0") + len(encoded).to_bytes(2, "little") + bytes([kind]) + b"\0" * 61

    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 16 + b"\x3e\x00\x03\x00\xfe\xff\x09\x00"
    header = header.ljust(48, b"\0") + (0).to_bytes(4, "little")  # the directory's first sector
    directory = entry("Root Entry", 5) + entry("Workbook", 2) + b"\0" * 256
    return header.ljust(512, b"\0") + directory


def million_rows_csv(rows: int = 1_000_000) -> bytes:
    return b"port,berth\n" + b"Port Ellery,4\n" * rows


def huge_cell_csv(size: int = 10 * 1024 * 1024) -> bytes:
    return b'port,note\nPort Ellery,"' + b"harbour " * (size // 8) + b'"\n'


def hostile_spreadsheets() -> dict[str, bytes]:
    """What docs/formats.md's "Spreadsheets" lists as hostile, each named by what it is."""
    return {
        "zip-bomb.xlsx": zip_bomb_xlsx(),
        "entity-expansion.xlsx": entity_expansion_xlsx(),
        "million-rows.xlsx": million_rows_xlsx(),
        "10mb-cell.xlsx": huge_cell_xlsx(),
        "million-rows.csv": million_rows_csv(),
        "10mb-cell.csv": huge_cell_csv(),
        "macros.xlsm": macro_enabled_xlsx(),
        "legacy.xls": legacy_xls(),
    }


def main() -> None:
    FORMATS_DIR.mkdir(exist_ok=True)
    for name, data in {"harbour-budget.xlsx": budget_xlsx(), "tide-table.csv": TIDE_TABLE_CSV.encode()}.items():
        (FORMATS_DIR / name).write_bytes(data)
        print(f"{FORMATS_DIR / name}: {len(data):,} bytes")


if __name__ == "__main__":
    main()
