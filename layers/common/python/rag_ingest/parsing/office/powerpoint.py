"""PowerPoint presentations (python-pptx): one page per slide, numbered as PowerPoint numbers them.

The title placeholder is the slide's heading (anchor ``slide-<n>``), then every other shape's text
in the slide's order (group shapes opened; tables as rows, charts as their data, SmartArt as its
text), and the speaker notes last. Pictures are not read (docs/formats.md, "Images"). The slide
count is checked from the slide list before the deck is parsed.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import BlockKind
from rag_ingest.parsing.blocks import FormatLimits, PageBuilder, StructuredDocument, clean_block_text, table_text
from rag_ingest.parsing.office.ooxml import PROLOG_BYTES, checked_package, open_zip, read_part, refuse_dtd

_SLIDE_ID = re.compile(rb"<p:sldId\b")


def read_pptx(data: bytes, limits: FormatLimits) -> StructuredDocument:
    import pptx

    package = open_zip(data)
    # The page limit first, from the slide list alone: a 10,000-slide deck is refused unparsed.
    presentation_xml = _presentation_part(package)
    refuse_dtd("ppt/presentation.xml", presentation_xml[:PROLOG_BYTES])
    slides = len(_SLIDE_ID.findall(presentation_xml))
    if slides > limits.max_pages:
        raise PermanentError(ErrorCode.TOO_MANY_PAGES, f"{slides} slides exceeds the limit of {limits.max_pages} pages")
    checked_package(data, limits)
    try:
        presentation = pptx.Presentation(io.BytesIO(data))
    except Exception as exc:  # python-pptx raises KeyError, ValueError, lxml errors...: all a broken file
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the presentation cannot be opened: {exc}") from None
    anchors: set[str] = set()
    pages = []
    for number, slide in enumerate(presentation.slides, start=1):
        builder = PageBuilder(page_number=number, used_anchors=anchors)
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text if title_shape is not None and title_shape.has_text_frame else ""
        body: list[tuple[BlockKind, str]] = []  # the slide's text, before its heading is known to be needed
        for shape in _shapes(slide.shapes):
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if getattr(shape, "has_table", False) and shape.has_table:
                body.append((BlockKind.TABLE, table_text(_pptx_rows(shape.table))))
            elif getattr(shape, "has_chart", False) and shape.has_chart:
                body.extend(_chart_blocks(shape.chart))
            elif smart_art := _smart_art_text(slide.part, shape):
                body.append((BlockKind.PARAGRAPH, smart_art))
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                body.append((BlockKind.PARAGRAPH, shape.text_frame.text))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                body.append((BlockKind.PARAGRAPH, f"Notes: {notes.text}"))
        # A slide with text is a section anchored slide-<n> (titled "Slide n" when it has no title); a
        # slide with none (a picture) is an empty page: an image-only deck is EMPTY_DOCUMENT.
        if title.strip() or any(clean_block_text(text) for _kind, text in body):
            heading = title if title.strip() else f"Slide {number}"
            builder.add(BlockKind.HEADING, heading, level=1, anchor=f"slide-{number}")
            for kind, text in body:
                builder.add(kind, text)
        pages.append(builder.page())
    title = (presentation.core_properties.title or "").strip() or None
    return StructuredDocument(pages=pages, title=title)


def _pptx_rows(table: Any) -> list[list[str]]:
    """A slide table's rows, a merged cell's text in every position it covers (python-pptx gives
    the covered positions empty), as the other formats' merged cells are; a row that is one merged
    cell across the table (a label) stays one cell."""
    rows = [[cell.text for cell in row.cells] for row in table.rows]
    width = max((len(row) for row in rows), default=0)
    labels: set[int] = set()
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            if not cell.is_merge_origin:
                continue
            if c == 0 and cell.span_width >= width > 1:
                labels.update(range(r, r + cell.span_height))
            for covered_row in range(r, min(r + cell.span_height, len(rows))):
                for covered_column in range(c, min(c + cell.span_width, len(rows[covered_row]))):
                    rows[covered_row][covered_column] = cell.text
    return [[row[0]] if r in labels else row for r, row in enumerate(rows)]


def _chart_blocks(chart: Any) -> list[tuple[BlockKind, str]]:
    """A chart's title ("Chart: ...") and its data as a table: a row per category under a header of
    the series' names (a bar, line, pie or area chart), or a row per point, series, x and y (an XY
    or bubble chart, which has no categories). The numbers are what the chart draws; a reader asked
    about the chart finds them. A chart python-pptx cannot read keeps only what it could read."""
    blocks: list[tuple[BlockKind, str]] = []
    try:
        if chart.has_title and chart.chart_title.has_text_frame and chart.chart_title.text_frame.text.strip():
            blocks.append((BlockKind.PARAGRAPH, f"Chart: {chart.chart_title.text_frame.text}"))
        series = list(chart.series)
        categories = [str(label) for label in chart.plots[0].categories] if len(chart.plots) else []
        if categories:
            header = ["", *(item.name or f"Series {index}" for index, item in enumerate(series, start=1))]
            values = [list(item.values) for item in series]
            rows = [
                [category, *(_number(column[row]) if row < len(column) else "" for column in values)]
                for row, category in enumerate(categories)
            ]
        else:  # an XY or bubble chart: a row per point, x beside y
            header = ["Series", "x", "y"]
            rows = [
                [item.name or f"Series {index}", _number(x), _number(y)]
                for index, item in enumerate(series, 1)
                for x, y in zip(_x_values(item), item.values, strict=False)
            ]
    except Exception as error:  # python-pptx reads the common chart types; another keeps its title
        logger.warning("a chart's data not read: %r", error)
        return blocks
    if rows:
        blocks.append((BlockKind.TABLE, table_text([header, *rows])))
    return blocks


_DIAGRAM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/main"


def _smart_art_text(slide_part: Any, shape: Any) -> str:
    """A SmartArt graphic's text (its diagram data part's nodes), a line per node in the diagram's
    order (a node, then its children); "" for any other shape. python-pptx does not read
    SmartArt, whose text lives in its own part, not in the slide."""
    element = getattr(shape, "_element", None)
    if element is None or not element.tag.endswith("}graphicFrame"):
        return ""
    found = list(element.iter(f"{{{_DIAGRAM}}}relIds"))
    if not found:
        return ""
    relation = found[0].get(f"{{{_RELATIONSHIPS}}}dm")
    try:
        from pptx.oxml import parse_xml

        data = parse_xml(slide_part.related_part(relation).blob)
    except Exception as error:  # a missing or broken part: the slide's other text stands
        logger.warning("a SmartArt graphic's text not read: %r", error)
        return ""
    texts: dict[str, str] = {}
    documents: list[str] = []
    for point in data.iter(f"{{{_DIAGRAM}}}pt"):
        kind = point.get("type", "node")
        if kind == "doc":
            documents.append(point.get("modelId", ""))
        elif kind in ("node", "asst"):
            paragraphs = (
                "".join(run.text or "" for run in p.iter(f"{{{_DRAWING}}}t")) for p in point.iter(f"{{{_DRAWING}}}p")
            )
            texts[point.get("modelId", "")] = " ".join(text for text in paragraphs if text.strip())
    children: dict[str, list[tuple[int, str]]] = {}
    for connection in data.iter(f"{{{_DIAGRAM}}}cxn"):
        if connection.get("type", "parOf") == "parOf":
            order_text = connection.get("srcOrd", "0")
            order = int(order_text) if order_text.isdigit() else 0
            children.setdefault(connection.get("srcId", ""), []).append((order, connection.get("destId", "")))
    lines: list[str] = []
    seen: set[str] = set()

    def walk(node: str) -> None:
        for _order, child in sorted(children.get(node, [])):
            if child in seen:
                continue  # a cycle in a broken file
            seen.add(child)
            if texts.get(child):
                lines.append(texts[child])
            walk(child)

    for document in documents:
        walk(document)
    lines += [text for node, text in texts.items() if text and node not in seen]  # not connected: still read
    return "\n".join(lines)


def _x_values(series: Any) -> list[float | None]:
    """An XY series' x values, from its cached points (python-pptx reads only the y values)."""
    points: dict[int, float | None] = {}
    for point in series._element.xpath("./c:xVal//c:pt"):
        value = point.xpath("./c:v/text()")
        try:
            points[int(point.get("idx"))] = float(value[0]) if value else None
        except ValueError:
            points[int(point.get("idx"))] = None
    count = max(points, default=-1) + 1
    return [points.get(index) for index in range(count)]


def _number(value: Any) -> str:
    """A chart value as written: 12 for 12.0, 4.5 for 4.5, empty for a gap."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _presentation_part(package: zipfile.ZipFile) -> bytes:
    try:
        return read_part(package, "ppt/presentation.xml", 64 * 1024 * 1024)
    except KeyError:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, "the presentation has no ppt/presentation.xml") from None


def _shapes(shapes: Any) -> Iterator[Any]:
    """Every shape in order, the shapes inside groups in place of the group."""
    for shape in shapes:
        if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):
            yield from _shapes(shape.shapes)
        else:
            yield shape
