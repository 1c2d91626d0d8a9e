"""Tables with horizontal rules only (LaTeX's ``booktabs``, word processors' simple styles).

No vertical rule, no cell borders, so pdfplumber's grid finder sees none. :func:`rule_groups`
finds three or more horizontal rules of one extent with no vertical edge between them;
:func:`rows_between_rules` cuts the words between them into columns at the body's gutters and rows
at its lines (a cell wrapped over lines joined by spacing, :func:`body_rows`), the header's lines
joined column by column. Alignment alone is no evidence, so the rules are required; what this finds
is judged as every table is (``tables.keep_table``). Positions are in a top-down page space
(pdfplumber's; the pdfium pre-check converts its bottom-up one). Rules: docs/formats.md, "Tables in PDFs".
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: (position, low, high): a horizontal edge is (top, x0, x1), a vertical one (x, top, bottom).
Edge = tuple[float, float, float]
#: A word: (x0, top, x1, bottom, text).
Word = tuple[float, float, float, float, str]

TOLERANCE = 3.0
MIN_RULE_WIDTH = 72.0
MIN_RULES = 3
MAX_HEADER_HEIGHT = 60.0
MIN_GUTTER = 6.0
GUTTER_OF_HEIGHT = 0.8
#: More than these on a page, it is a drawing, not a page of tables (rule_groups does no work on it).
MAX_RULES = 400
MAX_VERTICAL_EDGES = 5000
#: Words of one line: their tops within this many points.
LINE_TOLERANCE = 2.5
#: body_rows: a gap between two lines' tops more than this times the body's smallest starts a row...
ROW_GAP_RATIO = 1.25
#: ...and lines close under a row's first line are joined to it only when at least this share of
#: them fill fewer cells than it (wrapped cells; rows of a group set close together fill as many).
CONTINUATION_SHARE = 2 / 3
#: A cell that is a number, with a sign or comparison, a currency, a percent or a short unit ("14 pt").
_NUMBER = re.compile(r"[-+\u2212±<>≤≥~≈]?\s*[$€£]?\d[\d.,]*\s*(%|[A-Za-zµ°]{1,4})?")


@dataclass(frozen=True)
class RuleGroup:
    """Rules of one table, top-down: ``tops[0]`` the top rule, ``tops[1]`` under the header,
    ``tops[-1]`` the bottom rule; ``x0``..``x1`` their common extent."""

    x0: float
    x1: float
    tops: tuple[float, ...]

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return (self.x0, self.tops[0], self.x1, self.tops[-1])


@dataclass(frozen=True)
class RuleTable:
    rows: list[list[str]]
    top: float
    #: the left edge of each column and the right edge of the last, in page units
    column_edges: tuple[float, ...]


def merged_rules(horizontal: Iterable[Edge]) -> list[Edge]:
    """Horizontal edges as rules: touching segments at one height joined, then the narrow dropped.
    Sorted once and swept (a page may draw thousands of edges)."""
    merged: list[Edge] = []
    band: list[Edge] = []  # edges within TOLERANCE of the band's first height

    def close_band() -> None:
        current: list[float] | None = None
        for top, x0, x1 in sorted(band, key=lambda edge: edge[1]):
            if current is not None and x0 <= current[2] + TOLERANCE:
                current[2] = max(current[2], x1)
                continue
            if current is not None:
                merged.append((current[0], current[1], current[2]))
            current = [top, x0, x1]
        if current is not None:
            merged.append((current[0], current[1], current[2]))

    for edge in sorted(horizontal):
        if band and edge[0] - band[0][0] > TOLERANCE:
            close_band()
            band = []
        band.append(edge)
    if band:
        close_band()
    return [(top, x0, x1) for top, x0, x1 in merged if x1 - x0 >= MIN_RULE_WIDTH]


def rule_groups(horizontal: Iterable[Edge], vertical: Sequence[Edge]) -> list[RuleGroup]:
    """The page's rule groups (see the module docstring), top to bottom, none overlapping another.
    A page of more than ``MAX_RULES`` rules or ``MAX_VERTICAL_EDGES`` vertical edges is a drawing
    (a chart, a form, a map): no groups, and no quadratic work on it."""
    rules = merged_rules(horizontal)
    if len(rules) > MAX_RULES or len(vertical) > MAX_VERTICAL_EDGES:
        return []
    by_extent: dict[tuple[float, float], list[float]] = {}
    for top, x0, x1 in rules:
        extent = next(
            (key for key in by_extent if abs(key[0] - x0) <= TOLERANCE and abs(key[1] - x1) <= TOLERANCE), (x0, x1)
        )
        by_extent.setdefault(extent, []).append(top)
    groups: list[RuleGroup] = []
    for (x0, x1), tops in sorted(by_extent.items(), key=lambda item: min(item[1])):
        distinct = _distinct(tops)
        if len(distinct) < MIN_RULES or distinct[1] - distinct[0] > MAX_HEADER_HEIGHT:
            continue
        group = RuleGroup(x0, x1, tuple(distinct))
        if _crossed_by(group, vertical) or any(_overlap(group.bbox, other.bbox) for other in groups):
            continue
        groups.append(group)
    return groups


def _distinct(tops: Iterable[float]) -> list[float]:
    """Heights within ``TOLERANCE`` of the one before as one (a thin rectangle's two sides), top-down."""
    distinct: list[float] = []
    for top in sorted(tops):
        if not distinct or top - distinct[-1] > TOLERANCE:
            distinct.append(top)
    return distinct


def _crossed_by(group: RuleGroup, vertical: Sequence[Edge]) -> bool:
    top, bottom = group.tops[0], group.tops[-1]
    return any(
        group.x0 - TOLERANCE <= x <= group.x1 + TOLERANCE and low <= bottom + TOLERANCE and high >= top - TOLERANCE
        for x, low, high in vertical
    )


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def overlaps_any(group: RuleGroup, boxes: Iterable[tuple[float, float, float, float]]) -> bool:
    return any(_overlap(group.bbox, box) for box in boxes)


def rows_between_rules(words: Sequence[Word], group: RuleGroup) -> RuleTable | None:
    """The table the group's words make (header row first), or None: no header, no body, or one column."""
    under_header = group.tops[1]
    header = [word for word in words if (word[1] + word[3]) / 2 < under_header]
    body = [word for word in words if (word[1] + word[3]) / 2 >= under_header]
    if not header or not body:
        return None
    gutter = max(MIN_GUTTER, GUTTER_OF_HEIGHT * statistics.median(word[3] - word[1] for word in body))
    columns: list[list[float]] = []
    for x0, x1 in sorted((word[0], word[2]) for word in body):
        if columns and x0 - columns[-1][1] < gutter:
            columns[-1][1] = max(columns[-1][1], x1)
        else:
            columns.append([x0, x1])
    if len(columns) < 2:
        return None

    def column_of(word: Word) -> int:
        middle = (word[0] + word[2]) / 2
        return min(
            range(len(columns)),
            key=lambda c: (
                0.0
                if columns[c][0] <= middle <= columns[c][1]
                else min(abs(middle - columns[c][0]), abs(middle - columns[c][1]))
            ),
        )

    def row(line: Sequence[Word]) -> list[str]:
        cells: list[list[str]] = [[] for _ in columns]
        for word in line:
            cells[column_of(word)].append(word[4])
        return [" ".join(cell) for cell in cells]

    header_lines = [row(line) for line in _lines(header)]
    header_row = [" ".join(cell for cell in cells if cell) for cells in zip(*header_lines, strict=True)]
    body_lines = _lines(body)
    tops = [min(word[1] for word in line) for line in body_lines]
    rows = [header_row, *body_rows([row(line) for line in body_lines], tops, group.tops[2:-1])]
    edges = (*(column[0] for column in columns), columns[-1][1])
    return RuleTable(rows=rows, top=group.tops[0], column_edges=tuple(edges))


def body_rows(lines: Sequence[list[str]], tops: Sequence[float], rules: Sequence[float] = ()) -> list[list[str]]:
    """The body's lines (cells per column, top to bottom, ``tops`` their heights) as rows: each line
    a row, unless rows are set apart by space (see the module docstring). A rule between two lines
    (a ``\\midrule``) starts a row, and so does a close line with a number where its row's first
    line has one (a row of a group set close, not a wrapped cell)."""
    pairs = list(itertools.pairwise(tops))
    if not pairs:
        return [list(line) for line in lines]
    widest_close = ROW_GAP_RATIO * min(below - above for above, below in pairs)
    if all(below - above <= widest_close for above, below in pairs):
        return [list(line) for line in lines]  # evenly spaced: space tells nothing
    starts_row = [True] + [
        below - above > widest_close or any(above < rule < below for rule in rules) for above, below in pairs
    ]
    filled = [sum(1 for cell in line if cell) for line in lines]
    continuing: set[int] = set()
    close = 0
    first = 0  # the current row's first line
    for index, line in enumerate(lines):
        if starts_row[index]:
            first = index
            continue
        close += 1
        numbers_in_a_column = any(
            _NUMBER.fullmatch(mine) and _NUMBER.fullmatch(more) for mine, more in zip(lines[first], line, strict=True)
        )
        if filled[index] < filled[first] and not numbers_in_a_column:
            continuing.add(index)
        else:
            first = index  # a row of its own, set close
    if len(continuing) < CONTINUATION_SHARE * close:
        return [list(line) for line in lines]  # most close lines are rows of their own
    rows: list[list[str]] = []
    for index, line in enumerate(lines):
        if index in continuing:
            rows[-1] = [" ".join(part for part in pair if part) for pair in zip(rows[-1], line, strict=True)]
        else:
            rows.append(list(line))
    return rows


def _lines(words: Sequence[Word]) -> list[list[Word]]:
    """Words grouped into lines by their tops, each line left to right."""
    lines: list[list[Word]] = []
    for word in sorted(words, key=lambda word: (word[1], word[0])):
        if lines and abs(lines[-1][0][1] - word[1]) <= LINE_TOLERANCE:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda word: word[0]) for line in lines]
