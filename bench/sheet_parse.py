"""What reading a spreadsheet costs Parse (docs/formats.md, "Spreadsheets"): an XLSX written by
openpyxl and the same table as a CSV, of ``--cells`` cells each (ten columns: text, whole
numbers, decimals, dates), read as Parse reads them (``read_structured``), each size in a fresh
process; best wall time of ``--repeat`` runs, and the process's peak resident memory over what
the imports took; then both per 10,000 cells.

    .venv/bin/python -m bench.sheet_parse [--cells 10000 100000 500000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import multiprocessing
import resource
import time

from rag_ingest.core.parsed import DocumentFormat
from rag_ingest.parsing.blocks import FormatLimits
from rag_ingest.parsing.formats import read_structured

COLUMNS = 10
#: cdk.json's limits.maxPages; the spreadsheet bounds are FormatLimits' own.
LIMITS = FormatLimits(max_pages=5000)


def table(rows: int) -> list[list[object]]:
    """A header and ``rows`` rows of ten cells, as a ledger holds them."""
    start = datetime.date(2026, 1, 1)
    header: list[object] = [
        "Entry",
        "Berth",
        "Vessel",
        "Length (m)",
        "Draught (m)",
        "Fee (EUR)",
        "Arrived",
        "Agent",
        "Tugs",
        "Note",
    ]
    body: list[list[object]] = [
        [
            f"E-{row:07d}",
            row % 40 + 1,
            f"Vessel {row % 977}",
            round(80 + (row % 300) * 0.5, 1),
            round(4 + (row % 90) * 0.1, 2),
            round(1200 + row * 0.37, 2),
            start + datetime.timedelta(days=row % 365),
            f"Agency {row % 53}",
            row % 4,
            "pilot on board" if row % 3 else "berthed without tug",
        ]
        for row in range(rows)
    ]
    return [header, *body]


def xlsx_bytes(rows: list[list[object]]) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet("Ledger")
    for row in rows:
        sheet.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def csv_bytes(rows: list[list[object]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue().encode()


def _measure(document_format: str, cells: int, repeat: int, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    rows = table(cells // COLUMNS)
    data = xlsx_bytes(rows) if document_format == "xlsx" else csv_bytes(rows)
    del rows
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        read_structured(data, DocumentFormat(document_format), LIMITS)
        best = min(best, time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline  # KiB on Linux
    results.put((len(data), best, peak / 1024))


def measure(document_format: str, cells: int, repeat: int) -> tuple[int, float, float]:
    """(file bytes, best seconds, peak MB over the baseline) in a process of its own."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_measure, args=(document_format, cells, repeat, results))
    process.start()
    outcome = results.get()
    process.join()
    return outcome  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, nargs="+", default=[10_000, 100_000, 500_000])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    print("| format | cells | file | parse (best) | per 10,000 cells | peak memory | per 10,000 cells |")
    print("|---|---|---|---|---|---|---|")
    for document_format in ("xlsx", "csv"):
        for cells in options.cells:
            size, seconds, peak_mb = measure(document_format, cells, options.repeat)
            per = 10_000 / cells
            print(
                f"| {document_format.upper()} | {cells:,} | {size / 1024:,.0f} KB | {seconds:.2f} s "
                f"| {seconds * per * 1000:.0f} ms | {peak_mb:.0f} MB | {peak_mb * per:.1f} MB |"
            )


if __name__ == "__main__":
    main()
