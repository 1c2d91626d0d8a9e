"""Tables in text-layer PDFs (rag_ingest.parsing.pdf.tables) on real pages of the eval corpus: a ruled
table becomes a TABLE block with its header row and its rows; a two-column page, a table of contents
with dot leaders and a diagram drawn with boxes do not; a table longer than a chunk is cut between
rows, each piece under the header row."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rag_ingest.core.parsed import BlockKind, PageText, TextBlock
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.parsing.blocks import table_text
from rag_ingest.parsing.pdf.cleanup import clean_page_texts
from rag_ingest.parsing.pdf.extract import parse_pdf
from rag_ingest.parsing.pdf.tables import candidate_pages, find_page_tables, place_tables

from tests.support import hostile_pdfs

pytestmark = pytest.mark.unit
CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"


def _parse(name: str, *, tables: bool = True) -> list[PageText]:
    return parse_pdf((CORPUS / name).read_bytes(), max_bytes=1 << 26, max_pages=100, tables=tables).pages


def _tables(page: PageText) -> list[str]:
    return [page.text[block.start : block.end] for block in page.blocks if block.kind is BlockKind.TABLE]


def _found(name: str, pages: list[int]) -> dict[int, object]:
    """The tables placed on ``pages`` of ``name``, found and placed in the pages' own extracted text."""
    texts = {page.page_number: page.text for page in _parse(name, tables=False) if page.page_number in pages}
    return dict(find_page_tables((CORPUS / name).read_bytes(), texts, lambda work: work(), time.monotonic() + 60))


def test_a_ruled_table_with_merged_cells_becomes_rows_under_its_header() -> None:
    page = _parse("zen-google-docs.pdf")[0]
    [table] = _tables(page)
    rows = table.split("\n")
    assert rows[0].startswith(" | Indonesia") or rows[0].startswith("| Indonesia")
    assert "Capital | Jakarta | Berlin | Vienna | Paris | Vatican City" in rows
    # "Europe" spans four columns on the page: every column of its row reads it.
    assert "Continent | Asia | Europe | Europe | Europe | Europe" in rows
    # The loose lines pypdf gave for the cells are gone: the cells are read once, in their rows.
    assert page.text.count("Jakarta") == 1
    assert page.text.startswith("Example document\n")


def test_a_long_feature_table_over_three_pages_is_one_table_and_the_prose_around_it_stays() -> None:
    pages = _parse("sil-padauk-features.pdf")
    header = (
        "Feature Name | Graphite Feature ID | OpenType Feature ID"
        " | Feature Setting (top-most in each section is default) | Example"
    )
    # The header row the page repeats on pages 3 and 4 is read once: those parts continue page 2's
    # table (tests/unit/test_pdf_table_continuations.py), and the chunker reads them under its header.
    for number, page in enumerate(pages[1:4], start=2):
        [table] = _tables(page)
        [block] = [b for b in page.blocks if b.kind is BlockKind.TABLE]
        assert (table.split("\n")[0] == header) is (number == 2)
        assert block.continues is (number > 2)
    assert "Khamti (Graphite: turns on fdot=1, cv06=1) | kht | kht | Language set to Khamti" in _tables(pages[1])[0]
    assert "affected by a feature is not exhaustive):" in pages[1].text
    assert _parse("sil-padauk-features.pdf", tables=False)[1].blocks == []


def test_a_table_with_horizontal_rules_only_becomes_rows_under_its_header() -> None:
    # LaTeX booktabs: \toprule, \midrule, \bottomrule, columns aligned by space (mnras-guide.pdf
    # page 4: a symbol table and an example table; x11-ctext.pdf page 7; jacow-a4.pdf page 1).
    symbols, example = _tables(_parse("mnras-guide.pdf")[3])
    rows = symbols.split("\n")
    assert rows[0] == "Command | Output | Meaning"
    assert "\\upi | π | upright pi" in rows and "\\upartial | ∂ | upright partial derivative" in rows
    assert example.split("\n")[1:3] == ["Sun | 1.00 | 1.00", "\u03b1 Cen A | 1.10 | 1.52"]
    [encodings] = _tables(_parse("x11-ctext.pdf")[6])
    assert encodings.split("\n")[0] == "Name | Encoding Standard | Description"
    assert "ISO8859-2 | ISO8859-2 | Latinalphabet No. 2" in encodings.split("\n")
    [margins] = _tables(_parse("jacow-a4.pdf")[0])
    assert "Top | 37 mm (1.46 in) | 0.75 in (19 mm)" in margins.split("\n")
    # The ablation's switch turns these off too: their cells stay pypdf's lines.
    assert _parse("mnras-guide.pdf", tables=False)[3].blocks == []


def test_cells_wrapped_over_lines_stay_in_their_rows_where_rows_are_set_apart() -> None:
    # jacow-a4.pdf page 3: a style table whose rows stand 16.4 pt apart and whose wrapped cells' lines
    # 12 pt; mnras-guide.pdf page 4 draws \lesssim as "<" over "≈", two lines of one row.
    [styles] = _tables(_parse("jacow-a4.pdf")[2])
    rows = styles.split("\n")
    assert "Author list 12 pt UPPER- and lowercase | 9 pt | 12 pt" in rows
    assert "Refs. ≥ 10 9 pt \\bibliography{99} | 0 pt | 3 pt" in rows
    assert len(rows) == 12  # the header and 11 styles, not a row per line
    symbols, _example = _tables(_parse("mnras-guide.pdf")[3])
    assert "\\loa | < ≈ | less than approximately" in symbols.split("\n")


def test_a_rotated_watermark_over_a_table_and_a_four_line_header_leave_the_rows_whole() -> None:
    # tugboat-babelbib.pdf (a "preliminary draft" watermark set at an angle across every page):
    # page 8's replacement table, where the watermark's "t" once joined a cell's "in" ("tin") and
    # its box covered the gutter; page 3's font table, whose header is four lines (52 pt) tall.
    pages = _parse("tugboat-babelbib.pdf")
    [replacements] = _tables(pages[7])
    rows = replacements.split("\n")
    assert rows[0] == "Text | Macro"
    assert "in | \\btxinlong{}" in rows and "Ph.D. thesis | \\btxphdthesis{}" in rows
    [fonts] = _tables(pages[2])
    assert "ISBN | ISBN | \\MakeUppercase | \\MakeUppercase" in fonts.split("\n")


def _crane_grid(*, watermark: bool) -> bytes:
    """A one-page PDF: a ruled crane table (4 rows, 3 columns), a sentence, and a diagonal 90-pt
    "DRAFT" across the table when ``watermark``."""
    rows = [("Crane", "Lift", "Outreach"), ("G1", "40 t", "45 m"), ("G2", "65 t", "52 m"), ("G3", "65 t", "60 m")]
    xs, ys = [72, 222, 372, 522], [700 - 30 * row for row in range(len(rows) + 1)]
    ops = [b"0.5 w"]
    ops += [b"%d %d m %d %d l S" % (xs[0], y, xs[-1], y) for y in ys]
    ops += [b"%d %d m %d %d l S" % (x, ys[0], x, ys[-1]) for x in xs]
    for r, row in enumerate(rows):
        ops += [
            b"BT /F1 11 Tf %d %d Td (%s) Tj ET" % (xs[c] + 6, ys[r] - 20, cell.encode()) for c, cell in enumerate(row)
        ]
    ops.append(b"BT /F1 11 Tf 72 560 Td (Cranes are inspected every spring.) Tj ET")
    if watermark:
        ops.append(b"BT /F1 90 Tf 0.7071 0.7071 -0.7071 0.7071 150 480 Tm (DRAFT) Tj ET")
    return hostile_pdfs.page_pdf(b"\n".join(ops))


def test_a_diagonal_watermark_across_a_ruled_table_leaves_its_cells_alone() -> None:
    # Before: "Crane | T Lift | Outreach", "G1 | F 40 t | 45 m": the watermark's letters in the cells.
    expected = ["Crane | Lift | Outreach\nG1 | 40 t | 45 m\nG2 | 65 t | 52 m\nG3 | 65 t | 60 m"]
    for watermark in (False, True):
        page = parse_pdf(_crane_grid(watermark=watermark), max_bytes=1 << 24, max_pages=10).pages[0]
        assert _tables(page) == expected, watermark


def test_found_places_tables_in_the_pages_own_text() -> None:
    # What the next test's emptiness means: the same helper finds the tables that are there.
    assert sorted(_found("zen-google-docs.pdf", [1])) == [1]
    assert sorted(_found("tugboat-babelbib.pdf", [2, 3, 4, 8])) == [3, 8]


def test_two_column_text_a_table_of_contents_and_a_box_diagram_are_not_tables() -> None:
    assert _found("ltnews35.pdf", [1, 2, 3]) == {}  # two columns (page 1 also lists its contents)
    assert _found("tugboat-babelbib.pdf", [2, 4]) == {}  # a two-column journal article (page 3 has Table 1)
    assert _found("r-intro.pdf", [1, 3, 4]) == {}  # a title page between rules; contents with dot leaders
    assert _found("why3-manual.pdf", [4, 11, 16]) == {}  # a contents page; framed code listings
    assert _found("geobase-nhn-data-model.pdf", [6, 10, 13, 18]) == {}  # diagrams drawn with boxes


def test_a_table_whose_words_the_text_does_not_hold_is_left_out() -> None:
    text = "Some prose here.\nMore prose follows."
    assert place_tables(text, [[["Name", "Value"], ["alpha", "1"]]]) == (text, [])


def test_a_caption_next_to_the_table_goes_before_it_and_cleanup_leaves_the_rows_whole() -> None:
    raw = "Intro line one\nTable 3: Sizes of the ﬁles\nName Size\nalpha 12\nbeta-\ngamma 7\nclosing sen-\ntence here"
    rows = [["Name", "Size"], ["alpha", "12"], ["beta-", "gamma 7"]]
    text, blocks = place_tables(raw, [rows])
    [block] = blocks
    assert text[block.start : block.end] == table_text(rows)
    assert "Table 3: Sizes of the ﬁles\n\n" + table_text(rows) in text
    [page] = clean_page_texts([PageText(page_number=1, text=text, blocks=blocks)])
    [cleaned] = page.blocks
    # Ligatures go in the caption, dehyphenation joins the prose but never a table's rows.
    assert (
        page.text == "Intro line one\n\nTable 3: Sizes of the files\n\n"
        "Name | Size\nalpha | 12\nbeta- | gamma 7\n\nclosing sentence here"
    )
    assert page.text[cleaned.start : cleaned.end] == "Name | Size\nalpha | 12\nbeta- | gamma 7"


def test_a_pdf_table_longer_than_a_chunk_is_cut_between_rows_each_piece_under_the_header() -> None:
    header = "Month | Rainfall | Station"
    rows = [f"{month} | {10 + index} mm | Station number {index}" for index, month in enumerate(["January"] * 40)]
    body = "\n".join([header, *rows])
    text = "The 1.2 Rainfall section\n\n" + body + "\n\nThe end of the report."
    start = text.index(header)
    page = PageText(
        page_number=1, text=text, blocks=[TextBlock(start=start, end=start + len(body), kind=BlockKind.TABLE)]
    )
    chunks = chunk_pages([page], count_tokens=lambda t: len(t.split()), target_tokens=60, overlap_tokens=10)
    table_chunks = [chunk for chunk in chunks if "Station number" in chunk.text]
    assert len(table_chunks) >= 4
    for chunk in table_chunks:
        lines = [line for line in chunk.text.split("\n") if "|" in line]
        assert lines[0] == header
        assert all(line == header or line in rows for line in lines)  # no row is cut
    # Every row is indexed, in some chunk.
    assert {line for chunk in table_chunks for line in chunk.text.split("\n")} >= set(rows)


def test_a_table_opens_its_own_chunk_with_its_caption_and_takes_no_overlap() -> None:
    from rag_ingest.core.tokens import count_tokens

    [chunk_before, table_chunk, *_] = chunk_pages(
        _parse("zen-google-docs.pdf"), count_tokens=count_tokens, target_tokens=300, overlap_tokens=60
    )
    assert "Namespaces are one honking great idea" in chunk_before.text and "Jakarta" not in chunk_before.text
    assert table_chunk.text.startswith("| Indonesia") and "Namespaces" not in table_chunk.text

    body = "Name | Size\nalpha | 12\nbeta | 7"
    text = "A first paragraph of prose that fills the chunk enough to end it.\n\nTable 2: Sizes\n\n" + body
    start = text.index(body)
    page = PageText(page_number=1, text=text, blocks=[TextBlock(start=start, end=len(text), kind=BlockKind.TABLE)])
    chunks = chunk_pages([page], count_tokens=lambda t: len(t.split()), target_tokens=40, overlap_tokens=10)
    assert [chunk.text for chunk in chunks][-1] == "Table 2: Sizes\n\n" + body


def test_the_pre_check_passes_grids_and_skips_framed_and_stacked_boxes() -> None:
    def candidates(name: str, pages: list[int]) -> list[int]:
        return candidate_pages((CORPUS / name).read_bytes(), pages)

    assert candidates("zen-google-docs.pdf", [1]) == [1]
    assert candidates("sil-padauk-features.pdf", [1, 2, 3, 4]) == [2, 3, 4]
    assert candidates("latex-usrguide.pdf", [8, 11, 12]) == []  # framed command signatures
    assert candidates("why3-manual.pdf", [16, 17]) == []  # stacked boxes of code: one column
    # Prose, code and contents pages; only the title page passes, by its three rules of one width
    # (the finder then keeps nothing there: test_two_column_text_...).
    assert candidates("r-intro.pdf", list(range(1, 31))) == [1]
    # Three rules of one width with a header's height between the first two: a rule-bounded table.
    assert candidates("mnras-guide.pdf", [1, 2, 3, 4, 5]) == [3, 4, 5]
