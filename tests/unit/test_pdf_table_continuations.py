"""A ruled table continued on the next page is one table (rag_ingest.parsing.pdf.cleanup.join_continued_tables):
its rows read under the first part's header (a repeated header row is read once), a chunk spanning the
page break cites both pages with rectangles on each; two different tables at a page break stay two.

The PDFs are drawn with fpdf2 (bench/table_continuations.py: a ruled table over a page break, with and
without repeated headings, and a running footer on every page), parsed as the pipeline parses them."""

from __future__ import annotations

import pytest
from fpdf import FPDF
from rag_ingest.core.parsed import BlockKind, PageText
from rag_ingest.ingest.chunking import chunk_pages, document_text
from rag_ingest.ingest.passage_boxes import passage_boxes
from rag_ingest.parsing.pdf.cleanup import join_continued_tables
from rag_ingest.parsing.pdf.extract import join_page_ranges, parse_page_range, parse_pdf
from rag_ingest.parsing.pdf.tables import continues_table

from bench.table_continuations import HEADER, continued_table_pdf, draw_table, station_rows, two_tables_pdf

pytestmark = pytest.mark.unit


def _count(text: str) -> int:
    return len(text.split())


def _parse(data: bytes) -> list[PageText]:
    return parse_pdf(data, max_bytes=1 << 24, max_pages=20).pages


def _tables(page: PageText) -> list[tuple[str, bool]]:
    return [(page.text[b.start : b.end], b.continues) for b in page.blocks if b.kind is BlockKind.TABLE]


def test_a_table_over_a_page_break_is_one_table_whose_repeated_header_is_read_once() -> None:
    pages = _parse(continued_table_pdf(repeat_headings=1))
    assert len(pages) == 2
    [(first, first_continues)] = _tables(pages[0])
    [(rest, continues)] = _tables(pages[1])
    assert first.split("\n")[0] == " | ".join(HEADER) and not first_continues
    assert continues  # the second part carries the first's header, not its own copy of it
    assert rest.split("\n")[0].startswith("ST-") and " | ".join(HEADER) not in rest
    # Every row is read once, in order, across the two parts.
    body = [line.split(" | ")[0] for line in (*first.split("\n")[1:], *rest.split("\n"))]
    assert body == [f"ST-{n:03d}" for n in range(1, 61)]
    # The running footer stays on its page, outside the table.
    assert "Weather station report 2026 - page 1" in pages[0].text


def test_without_repeated_headings_the_second_part_joins_the_first() -> None:
    pages = _parse(continued_table_pdf(repeat_headings=0))
    [(first, _)] = _tables(pages[0])
    [(rest, continues)] = _tables(pages[1])
    assert continues and rest.split("\n")[0].startswith("ST-")
    assert len(first.split("\n")) - 1 + len(rest.split("\n")) == 60


def test_the_continued_rows_read_under_the_header_in_chunks_citing_both_pages_with_rectangles() -> None:
    pages = _parse(continued_table_pdf(repeat_headings=0))
    header = " | ".join(HEADER)
    chunks = passage_boxes(chunk_pages(pages, count_tokens=_count, target_tokens=120, overlap_tokens=20), pages)
    text = document_text(pages)
    rows = [line for line in text.split("\n") if line.startswith("ST-")]
    assert len(rows) == 60
    for row in rows:  # every chunk holding a row reads it under the table's header
        holding = [chunk.text.split("\n") for chunk in chunks if row in chunk.text.split("\n")]
        assert holding, row
        assert all(header in lines[: lines.index(row)] for lines in holding), row
    spanning = [chunk for chunk in chunks if chunk.page_start == 1 and chunk.page_end == 2]
    assert spanning, "a chunk runs over the page break"
    for chunk in spanning:
        assert {box.page for box in chunk.boxes} == {1, 2}
    # A chunk that starts on page 2 inside the table cites page 2 only, its rectangles on page 2.
    second = [chunk for chunk in chunks if chunk.page_start == 2 and "ST-0" in chunk.text]
    assert second and all(chunk.text.startswith(header + "\n") for chunk in second)
    assert all({box.page for box in chunk.boxes} == {2} for chunk in second if chunk.boxes)


def test_before_the_join_the_second_part_had_no_header() -> None:
    # What the join fixes: pdfplumber finds two tables; the second's first row is a data row.
    raw = parse_page_range(
        continued_table_pdf(repeat_headings=0), first_page=1, last_page=None, max_bytes=1 << 24, max_pages=20
    )
    second = raw.pages[1]
    [block] = [b for b in second.blocks if b.kind is BlockKind.TABLE]
    assert second.text[block.start : block.end].startswith("ST-") and not block.continues


def test_the_join_holds_across_parse_page_ranges() -> None:
    data = continued_table_pdf(repeat_headings=1)
    whole = parse_pdf(data, max_bytes=1 << 24, max_pages=20).pages
    ranges = [
        parse_page_range(data, first_page=page, last_page=page, max_bytes=1 << 24, max_pages=20) for page in (1, 2)
    ]
    assert join_page_ranges(ranges).pages == whole


@pytest.mark.parametrize(
    ("line", "joined"),
    [
        ("Table 2: Readings of the second survey", False),  # a caption of its own: a new table
        ("The next readings come from the coastal stations, measured with new gauges.", False),  # prose
        ("Table 1 (continued)", True),  # says it goes on: the same table
    ],
)
def test_what_stands_above_the_next_pages_table_decides(line: str, joined: bool) -> None:
    def second(pdf: FPDF) -> None:  # the same columns at the same places, the header row repeated
        pdf.multi_cell(0, 5, line)
        pdf.ln(2)
        draw_table(pdf, HEADER, station_rows(5, first=200), col_widths=(25, 55, 40, 30))

    pages = _parse(two_tables_pdf(second))
    [(table, continues)] = _tables(pages[1])
    assert continues is joined
    assert table.startswith(" | ".join(HEADER)) is not joined  # a joined part's repeated header is dropped
    assert pages[1].text.startswith(line)


def test_a_table_with_other_columns_at_the_top_of_the_next_page_stays_a_table_of_its_own() -> None:
    def second(pdf: FPDF) -> None:  # no caption, no prose: only the columns tell them apart
        draw_table(
            pdf,
            ("Code", "Name", "Notes", "Year"),
            [("A1", "Alpha", "first", "2024"), ("B2", "Beta", "second", "2025")],
            col_widths=(20, 30, 80, 20),
        )

    pages = _parse(two_tables_pdf(second))
    [(table, continues)] = _tables(pages[1])
    assert not continues and table.startswith("Code | Name | Notes | Year")


def test_a_header_row_over_a_column_of_numbers_opens_a_new_table() -> None:
    # Same columns at the same places, nothing between: the first row "Site | Town | Readings | Days"
    # has words where the first table's Temperature and Rain days columns hold numbers.
    def second(pdf: FPDF) -> None:
        draw_table(pdf, ("Site", "Town", "Readings", "Days"), station_rows(4, first=300), col_widths=(25, 55, 40, 30))

    pages = _parse(two_tables_pdf(second))
    [(table, continues)] = _tables(pages[1])
    assert not continues and table.startswith("Site | Town | Readings | Days")


def test_without_column_edges_only_a_repeated_header_joins() -> None:
    # An OCR engine's tables carry no column edges: a repeated header row is the evidence needed.
    header, body = [list(HEADER)], [list(row) for row in station_rows(3)]
    more = [list(row) for row in station_rows(3, first=4)]
    assert continues_table(header + body, None, header + more, None) is True
    assert continues_table(header + body, None, more, None) is None
    edges = [0.1, 0.2, 0.5, 0.7, 0.85]
    assert continues_table(header + body, edges, more, edges) is False
    assert continues_table(header + body, edges, more, [0.1, 0.3, 0.5, 0.7, 0.85]) is None
    assert continues_table(header + body, edges, [row[:3] for row in more], edges[:4]) is None


def test_pages_without_tables_or_not_following_each_other_are_left_as_they_are() -> None:
    pages = _parse(continued_table_pdf())
    assert join_continued_tables(pages[:1]) == pages[:1]
    apart = [pages[0], pages[1].model_copy(update={"page_number": 3})]
    assert join_continued_tables(apart) == apart
