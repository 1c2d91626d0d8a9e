"""Tables continued over a page break (docs/formats.md, "A table over a page break"): for each PDF of
the eval corpus and of bench/corpus, and PDFs generated here with fpdf2 (a ruled table over page
breaks, with and without its header row repeated; a new captioned table at the top of a page), parsed
and chunked as the pipeline does (300/60 tokens): the TABLE blocks, the tables they make (a block that
continues the previous page's table is not a table of its own) and, where the table's header row is
known, how many times the text holds it and how many body rows a chunk reads under it (the header
line above the row in the chunk). Run it on an older checkout (``PYTHONPATH=<its layer>``) for the
before figures.

    .venv/bin/python -m bench.table_continuations [PDF ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fpdf import FPDF
from rag_ingest.core.parsed import BlockKind, PageText
from rag_ingest.core.tokens import count_tokens
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.pdf.extract import parse_pdf

ROOT = Path(__file__).resolve().parents[1]
CORPORA = (ROOT / "eval" / "corpus", ROOT / "bench" / "corpus")


HEADER = ("Station", "City", "Temperature", "Rain days")
CITIES = ("Oslo", "Bergen", "Tromso", "Lisbon", "Porto", "Madrid", "Seville", "Vienna", "Graz", "Zurich", "Basel")


def station_rows(count: int, first: int = 1) -> list[tuple[str, ...]]:
    """Rows of the generated table: a station id, a city, a temperature and a count of days."""
    return [
        (f"ST-{n:03d}", f"{CITIES[n % len(CITIES)]} {n}", f"{(n * 7) % 30}.{n % 10} C", str((n * 3) % 17))
        for n in range(first, first + count)
    ]


class _Report(FPDF):
    def footer(self) -> None:  # a running footer: the same line at the bottom of every page
        self.set_y(-12)
        self.set_font("Helvetica", size=8)
        self.cell(0, 6, f"Weather station report 2026 - page {self.page_no()}", align="C")


def draw_table(pdf: FPDF, header: Sequence[str], rows: Sequence[Sequence[str]], **options: object) -> None:
    with pdf.table(**options) as table:  # type: ignore[arg-type]
        for row in (header, *rows):
            cells = table.row()
            for cell in row:
                cells.cell(cell)


def report_pdf(draw: Callable[[FPDF], None]) -> bytes:
    """An A4 report whose pages carry a running footer, its body drawn by ``draw``."""
    pdf = _Report(format="A4")
    pdf.set_auto_page_break(True, margin=20)
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    draw(pdf)
    return bytes(pdf.output())


def _intro(pdf: FPDF, caption: str = "Table 1: Readings of the weather stations") -> None:
    pdf.multi_cell(0, 5, "The stations below were read every morning during the survey year.")
    pdf.ln(4)
    pdf.multi_cell(0, 5, caption)
    pdf.ln(2)


def continued_table_pdf(rows: int = 60, repeat_headings: int = 1) -> bytes:
    """One ruled table over page breaks (fpdf2 breaks it between rows), prose before and after."""

    def draw(pdf: FPDF) -> None:
        _intro(pdf)
        draw_table(pdf, HEADER, station_rows(rows), repeat_headings=repeat_headings, col_widths=(25, 55, 40, 30))
        pdf.ln(4)
        pdf.multi_cell(0, 5, "The survey closed at the end of the year with every station read.")

    return report_pdf(draw)


def two_tables_pdf(second: Callable[[FPDF], None]) -> bytes:
    """A table that ends its page, then ``second`` draws what starts the next page."""

    def draw(pdf: FPDF) -> None:
        _intro(pdf)
        draw_table(pdf, HEADER, station_rows(12), col_widths=(25, 55, 40, 30))
        pdf.add_page()
        second(pdf)

    return report_pdf(draw)


#: The header row each measured table's rows belong under, where the document is known.
KNOWN_HEADERS = {
    "sil-padauk-features.pdf": "Feature Name | Graphite Feature ID | OpenType Feature ID"
    " | Feature Setting (top-most in each section is default) | Example",
}
GENERATED_HEADER = " | ".join(HEADER)


def generated() -> dict[str, bytes]:
    """The generated PDFs measured beside the corpus."""

    def captioned(pdf: FPDF) -> None:
        pdf.multi_cell(0, 5, "Table 2: Readings of the second survey")
        pdf.ln(2)
        draw_table(pdf, HEADER, station_rows(5, first=200), col_widths=(25, 55, 40, 30))

    return {
        "generated: 60 rows, header repeated": continued_table_pdf(60, repeat_headings=1),
        "generated: 120 rows, not repeated": continued_table_pdf(120, repeat_headings=0),
        "generated: two tables at a break": two_tables_pdf(captioned),
    }


def measure(pages: list[PageText], header: str | None) -> tuple[int, int, int, int, int]:
    """(TABLE blocks, tables, header rows in the text, body rows, body rows read under ``header``: a
    chunk holding the row holds the header line above it). Without ``header`` the last two are 0."""
    blocks = tables = headers = 0
    rows: list[str] = []
    for page in pages:
        for block in page.blocks:
            if block.kind is not BlockKind.TABLE:
                continue
            blocks += 1
            tables += not getattr(block, "continues", False)  # the attribute is new: measure before it too
            for line in page.text[block.start : block.end].split("\n"):
                if line == header:
                    headers += 1
                else:
                    rows.append(line)
    if header is None:
        return blocks, tables, 0, 0, 0
    chunks = [chunk.text.split("\n") for chunk in chunk_pages(pages, count_tokens=count_tokens)]
    under = sum(1 for row in rows if any(row in lines and header in lines[: lines.index(row)] for lines in chunks))
    return blocks, tables, headers, len(rows), under


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "pdfs", nargs="*", type=Path, help="default: the eval corpus, bench/corpus and the generated PDFs"
    )
    args = parser.parse_args(argv)
    documents: dict[str, bytes] = {
        pdf.name: pdf.read_bytes()
        for pdf in (args.pdfs or sorted(pdf for corpus in CORPORA for pdf in corpus.glob("*.pdf")))
    }
    if not args.pdfs:
        documents |= generated()
    print("| document | TABLE blocks | tables | header rows | body rows | read under the header |")
    print("|---|---|---|---|---|---|")
    for name, data in documents.items():
        pages = parse_pdf(data, max_bytes=1 << 27, max_pages=5000).pages
        header = KNOWN_HEADERS.get(name, GENERATED_HEADER if name.startswith("generated") else None)
        blocks, tables, headers, rows, under = measure(pages, header)
        if blocks:
            known = f"{headers} | {rows} | {under}" if header else "| | "
            print(f"| {name} | {blocks} | {tables} | {known} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
