"""Tables in Tesseract's layout (rag_ingest.parsing.ocr.local.tesseract_tables), on Tesseract 5.3's TSV
output recorded for real corpus pages rendered at the OCR resolution (200 dpi), clean or as the eval's
desk-scanned variant (eval/scans/variant.py): the ruled table of zen-google-docs.pdf and the rule-less
table of mnras-guide.pdf p4 are found, rows under their header; a table of contents with dot leaders
(r-intro.pdf p3, clean; cfitsio-quick.pdf p1, desk-scanned, its leaders read as noise) and a
two-column newsletter page (ltnews35.pdf p2) are not tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from rag_ingest.core.parsed import BlockKind, PageText
from rag_ingest.parsing.ocr.local import tesseract_tsv_result
from rag_ingest.parsing.pdf.cleanup import clean_page_texts
from rag_ingest.parsing.pdf.tables import place_tables

pytestmark = pytest.mark.unit
RECORDED = Path(__file__).parent / "tesseract_tsv"


def test_a_ruled_table_in_a_scan_becomes_rows_under_its_header() -> None:
    result = tesseract_tsv_result((RECORDED / "zen-google-docs-p1.tsv").read_text())
    [table] = result.tables
    assert table[0][1:] == ["Indonesia", "Germany", "Austria", "France", "Vatican"]
    assert table[2] == ["Capital", "Jakarta", "Berlin", "Vienna", "Paris", "Vatican City"]
    text, blocks = place_tables(result.text, list(result.tables))
    [page] = clean_page_texts([PageText(page_number=1, text=text, blocks=blocks)])
    [block] = page.blocks
    assert block.kind is BlockKind.TABLE
    assert "Capital | Jakarta | Berlin | Vienna | Paris | Vatican City" in page.text[block.start : block.end]
    assert page.text.count("Jakarta") == 1


def test_a_table_without_rules_in_a_desk_scan_is_found() -> None:
    result = tesseract_tsv_result((RECORDED / "mnras-guide-p4-desk-scan.tsv").read_text())
    symbols = result.tables[0]
    assert symbols[0] == ["Command", "Output", "Meaning"]
    assert ["\\upartial", "a", "upright partial derivative"] in symbols


@pytest.mark.parametrize("name", ["r-intro-p3.tsv", "ltnews35-p2.tsv", "cfitsio-quick-p1-desk-scan.tsv"])
def test_a_table_of_contents_and_a_two_column_page_are_not_tables(name: str) -> None:
    result = tesseract_tsv_result((RECORDED / name).read_text())
    assert result.text and result.tables == ()


def test_a_cell_wrapped_over_two_lines_makes_two_rows() -> None:
    """The shortfall docs/ocr.md names: Tesseract's rows are printed lines, not table rows."""
    [table] = tesseract_tsv_result((RECORDED / "sil-padauk-features-p4.tsv").read_text()).tables
    assert table[0][:2] == ["Feature Name", "Graphite"] and table[1][1] == "Feature ID"
    assert table[2][0] == "Variant tta" and table[3][0] == "(U+100B)"
