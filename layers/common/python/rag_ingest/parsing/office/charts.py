"""A DrawingML chart part (``c:chartSpace``, a Word document's chart) read as its title and data.

Word keeps each chart's numbers in the chart part as cached values (``c:strCache``, ``c:numCache``),
what Word draws; the embedded workbook is not opened. The data is a table as the PowerPoint
reader gives a slide's chart: a row per category under the series' names, or ``series | x | y``
for an XY or bubble chart. Imports ``rag_ingest.parsing`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


@dataclass(frozen=True)
class ChartData:
    title: str
    rows: list[list[str]]  # the header first; empty when the chart holds no cached values


def read_chart(xml: bytes) -> ChartData:
    """The chart's title and data from its part's XML (already checked for a DTD by the package)."""
    from lxml import etree

    root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False))
    chart = root.find(f"{_C}chart")
    if chart is None:
        return ChartData("", [])
    title_element = chart.find(f"{_C}title")
    title = ""
    if title_element is not None:
        title = " ".join("".join(t.text or "" for t in title_element.iter(f"{_A}t")).split())
    series = list(chart.iter(f"{_C}ser"))
    if not series:
        return ChartData(title, [])
    names = [_series_name(item, index) for index, item in enumerate(series, start=1)]
    if all(item.find(f"{_C}cat") is None for item in series):  # an XY or bubble chart
        rows = [["Series", "x", "y"]]
        for name, item in zip(names, series, strict=True):
            xs, ys = _points(item.find(f"{_C}xVal")), _points(item.find(f"{_C}yVal"))
            rows += [[name, xs.get(index, ""), ys.get(index, "")] for index in sorted(set(xs) | set(ys))]
        return ChartData(title, rows if len(rows) > 1 else [])
    categories = _points(next(item.find(f"{_C}cat") for item in series if item.find(f"{_C}cat") is not None))
    values = [_points(item.find(f"{_C}val")) for item in series]
    indices = sorted(set(categories).union(*values))
    rows = [["", *names], *([categories.get(i, ""), *(column.get(i, "") for column in values)] for i in indices)]
    return ChartData(title, rows if indices else [])


def _series_name(series: Any, index: int) -> str:
    name = " ".join(text for text in (v.text for v in series.iterfind(f"{_C}tx//{_C}v")) if text)
    return name or f"Series {index}"


def _points(holder: Any) -> dict[int, str]:
    """A category or value reference's cached points by index (12 for 12.0)."""
    if holder is None:
        return {}
    points: dict[int, str] = {}
    for point in holder.iter(f"{_C}pt"):
        value = point.find(f"{_C}v")
        try:
            index = int(point.get("idx", ""))
        except ValueError:
            continue
        points[index] = _number(value.text if value is not None else "")
    return points


def _number(text: str | None) -> str:
    text = (text or "").strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() and "e" not in text.lower() else text
