"""Rule groups and their rows (rag_ingest/parsing/pdf/rule_tables.py) on hand-made edges and words; the
real pages are in tests/unit/test_pdf_tables.py."""

from __future__ import annotations

import pytest
from rag_ingest.parsing.pdf.rule_tables import (
    MAX_RULES,
    MAX_VERTICAL_EDGES,
    RuleGroup,
    body_rows,
    merged_rules,
    rows_between_rules,
    rule_groups,
)

pytestmark = pytest.mark.unit

# A booktabs table 200 pt wide at x 100-300: rules at 100 (top), 118 (under the header), 160 (bottom),
# each drawn as a thin rectangle (two edges 0.4 pt apart), the top one in two touching segments.
BOOKTABS = [
    (100.0, 100.0, 180.0),
    (100.4, 180.0, 300.0),
    (118.0, 100.0, 300.0),
    (118.4, 100.0, 300.0),
    (160.0, 100.0, 300.0),
    (160.4, 100.0, 300.0),
]


def _word(x0: float, top: float, text: str) -> tuple[float, float, float, float, str]:
    return (x0, top, x0 + 5.0 * len(text), top + 8.0, text)


def test_touching_segments_at_one_height_are_one_rule_and_short_ones_are_dropped() -> None:
    rules = merged_rules([*BOOKTABS, (200.0, 100.0, 150.0)])  # 50 pt: a rule under a heading, not a table's
    assert (100.0, 100.0, 300.0) in rules
    assert all(x1 - x0 >= 72 for _top, x0, x1 in rules)


def test_three_rules_of_one_width_make_a_group() -> None:
    assert rule_groups(BOOKTABS, []) == [RuleGroup(100.0, 300.0, (100.0, 118.0, 160.0))]


@pytest.mark.parametrize(
    ("horizontal", "vertical", "why"),
    [
        (BOOKTABS[:4], [], "two rules: a rule above and below a heading"),
        (BOOKTABS, [(100.0, 100.0, 160.0), (300.0, 100.0, 160.0)], "a box: vertical edges at its sides"),
        (BOOKTABS, [(200.0, 120.0, 150.0)], "a ruled grid: a vertical rule inside"),
        ([(100.0, 100.0, 300.0), (190.0, 100.0, 300.0), (260.0, 100.0, 300.0)], [], "a header 90 pt tall"),
        ([(100.0, 100.0, 300.0), (118.0, 100.0, 250.0), (160.0, 100.0, 300.0)], [], "rules of other widths"),
    ],
)
def test_what_is_no_rule_group(horizontal: list[tuple[float, float, float]], vertical: list, why: str) -> None:
    assert rule_groups(horizontal, vertical) == [], why


def test_the_words_between_the_rules_become_a_header_row_and_rows_by_the_body_gutters() -> None:
    [group] = rule_groups(BOOKTABS, [])
    words = [
        # header, on two lines: "(kg)" under "Mass"
        _word(105, 104, "Star"),
        _word(160, 103.5, "Mass"),
        _word(230, 104, "Luminosity"),
        _word(160, 110, "(kg)"),
        # body: the second column's words start where the header's do, a row's tops differ by a glyph
        _word(105, 122, "Sun"),
        _word(160, 121, "1.00"),
        _word(230, 122, "1.00"),
        _word(105, 134, "Alpha"),
        _word(135, 134, "Cen"),
        _word(160, 134, "1.10"),
        _word(230, 133.5, "1.52"),
        _word(105, 146, "Tau"),
        _word(230, 146, "0.52"),
    ]
    table = rows_between_rules(words, group)
    assert table is not None
    assert table.rows == [
        ["Star", "Mass (kg)", "Luminosity"],
        ["Sun", "1.00", "1.00"],
        ["Alpha Cen", "1.10", "1.52"],
        ["Tau", "", "0.52"],
    ]
    assert table.top == 100.0
    assert table.column_edges == (105.0, 160.0, 230.0, 250.0)  # the body's extent: "1.52" ends at 250


def test_a_cell_wrapped_over_lines_stays_in_its_row_when_rows_are_set_apart_by_space() -> None:
    # A word processor's padded table: rows 18 pt apart, the lines of a wrapped cell 12 pt.
    [group] = rule_groups([(100.0, 100.0, 300.0), (118.0, 100.0, 300.0), (190.0, 100.0, 300.0)], [])
    words = [
        _word(105, 104, "Style"),
        _word(230, 104, "Size"),
        _word(105, 122, "Title"),
        _word(230, 122, "14 pt"),
        _word(105, 134, "uppercase,"),
        _word(105, 146, "bold"),
        _word(105, 164, "Author"),
        _word(150, 164, "list"),
        _word(230, 164, "12 pt"),
        _word(105, 176, "mixed"),
        _word(150, 176, "case"),
    ]
    table = rows_between_rules(words, group)
    assert table is not None
    assert table.rows == [["Style", "Size"], ["Title uppercase, bold", "14 pt"], ["Author list mixed case", "12 pt"]]


def test_rows_are_lines_where_space_cannot_tell_a_wrapped_cell() -> None:
    lines = [["Sun", "1.00"], ["Tau", ""], ["Vega", "2.1"]]
    # Evenly spaced (LaTeX's tabular): a line with an empty cell is a row.
    assert body_rows(lines, [120.0, 132.0, 144.0]) == lines
    # Rows of a group set close, groups set apart: a close line with a number where its row's
    # first line has one is a row of its own.
    group_rows = [["Sun", "1.00"], ["", "1.10"], ["", "0.90"], ["Vega", "2.1"], ["", "2.3"]]
    assert body_rows(group_rows, [120.0, 132.0, 144.0, 162.0, 174.0]) == group_rows
    # A rule between two close lines (a \midrule) starts a row.
    wrapped = [["Title", "14 pt"], ["bold", ""], ["Author", "12 pt"], ["mixed", ""]]
    assert body_rows(wrapped, [120.0, 132.0, 150.0, 162.0], rules=[141.0]) == [
        ["Title bold", "14 pt"],
        ["Author mixed", "12 pt"],
    ]
    assert body_rows(wrapped, [120.0, 132.0, 150.0, 162.0], rules=[128.0]) == [
        ["Title", "14 pt"],
        ["bold", ""],
        ["Author mixed", "12 pt"],
    ]


def test_one_column_of_body_or_no_header_is_no_table() -> None:
    [group] = rule_groups(BOOKTABS, [])
    code = [_word(105, 104, "Algorithm"), _word(105, 122, "for"), _word(120, 122, "each"), _word(110, 134, "x")]
    assert rows_between_rules(code, group) is None  # the body's words leave no gutter
    no_header = [_word(105, 122, "a"), _word(200, 122, "b")]
    assert rows_between_rules(no_header, group) is None


def test_a_page_drawn_with_thousands_of_rules_or_edges_is_a_drawing() -> None:
    # A chart or a form: tens of thousands of segments. No groups (and so no quadratic work on them).
    ruled_paper = [(12.0 * index, 50.0 + index % 300, 400.0 + index) for index in range(50_000)]
    assert rule_groups(ruled_paper, []) == []
    hatching = [(float(index % 500), 0.0, 10.0) for index in range(MAX_VERTICAL_EDGES + 1)]
    assert rule_groups(BOOKTABS, hatching) == []  # the table's own rules would group, but not on a drawing
    assert len(merged_rules(ruled_paper)) > MAX_RULES
