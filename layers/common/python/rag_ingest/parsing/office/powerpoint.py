"""PowerPoint presentations (python-pptx): one page per slide, numbered as PowerPoint numbers them.

The title placeholder is the slide's heading (anchor ``slide-<n>``), then every other shape's text
in the slide's order (group shapes opened; tables as rows, charts as their data, SmartArt as its
text, pictures as figures: alt text, a "Figure n" text box beside them as caption, the text inside
the image), and the speaker notes last. The slide count is checked from the slide list before
the deck is parsed.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import BlockKind, Figure
from rag_ingest.parsing.blocks import FIGURE_CAPTION, FormatLimits, PageBuilder, StructuredDocument, table_text
from rag_ingest.parsing.figures import ImageReader, image_size
from rag_ingest.parsing.found_figures import alt_text, structured_document
from rag_ingest.parsing.office.ooxml import PROLOG_BYTES, checked_package, open_zip, read_part, refuse_dtd

_SLIDE_ID = re.compile(rb"<p:sldId\b")


def read_pptx(data: bytes, limits: FormatLimits, images: ImageReader) -> StructuredDocument:
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
    builders = []
    for number, slide in enumerate(presentation.slides, start=1):
        builder = PageBuilder(page_number=number, used_anchors=anchors)
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text if title_shape is not None and title_shape.has_text_frame else ""
        shapes = [
            shape for shape in _shapes(slide.shapes) if title_shape is None or shape.shape_id != title_shape.shape_id
        ]
        captions = _picture_captions(shapes)
        taken = {id(caption) for caption in captions.values()}
        # A slide is a section anchored slide-<n>, titled "Slide n" when it has no title; a slide
        # with nothing to read is an empty page: a deck of silent pictures is EMPTY_DOCUMENT.
        builder.add(
            BlockKind.HEADING,
            title if title.strip() else f"Slide {number}",
            level=1,
            anchor=f"slide-{number}",
            needs_body=not title.strip(),
        )
        for shape in shapes:
            if id(shape) in taken:
                continue
            if getattr(shape, "has_table", False) and shape.has_table:
                builder.add(BlockKind.TABLE, table_text(_pptx_rows(shape.table)))
            elif getattr(shape, "has_chart", False) and shape.has_chart:
                for kind, text in _chart_blocks(shape.chart, _alt_text(shape)):
                    builder.add(kind, text)
            elif _is_picture(shape):
                caption = captions.get(id(shape))
                _add_picture(builder, shape, caption.text_frame.text if caption is not None else "")
            elif smart_art := _smart_art_text(slide.part, shape):
                builder.add(BlockKind.PARAGRAPH, smart_art)
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                builder.add(BlockKind.PARAGRAPH, shape.text_frame.text)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                builder.add(BlockKind.PARAGRAPH, f"Notes: {notes.text}")
        builders.append(builder)
    title = (presentation.core_properties.title or "").strip() or None
    return structured_document(builders, title=title, images=images, limits=limits)


_PRESENTATION = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
#: A text box longer than this is the slide's text, not a picture's caption.
MAX_CAPTION_CHARS = 400
#: DrawingML's unit: 914,400 per inch, so 9,525 per pixel at 96 dpi (the size PowerPoint shows it at).
EMU_PER_PIXEL = 9525


def _is_picture(shape: Any) -> bool:
    """A picture (``p:pic``), a placeholder filled with one included: not a picture fill of a shape."""
    element = getattr(shape, "_element", None)
    return element is not None and element.tag == f"{_PRESENTATION}pic"


def _alt_text(shape: Any) -> str:
    """A shape's alt text as PowerPoint's Alt Text pane writes it: its title and its description."""
    element = getattr(shape, "_element", None)
    found = element.xpath("./*[1]/p:cNvPr") if element is not None else []
    if not found:
        return ""
    parts = [alt_text(found[0].get(name) or "") for name in ("title", "descr")]
    return ": ".join(dict.fromkeys(part for part in parts if part))


def _picture_captions(shapes: list[Any]) -> dict[int, Any]:
    """The text box that captions each picture (by the shape's id): a text whose first line reads
    "Figure n: ..." or "Fig. n ...", given to the picture nearest to it on the slide."""
    pictures = [shape for shape in shapes if _is_picture(shape)]
    captions: dict[int, Any] = {}
    for shape in shapes:
        if not pictures or _is_picture(shape) or not (getattr(shape, "has_text_frame", False) and shape.has_text_frame):
            continue
        text = shape.text_frame.text
        if not FIGURE_CAPTION.match(text) or len(text) > MAX_CAPTION_CHARS or text.strip().count("\n") > 1:
            continue  # a caption is a line or two, not a text box that happens to open with one
        free = [picture for picture in pictures if id(picture) not in captions]
        if free:
            captions[id(min(free, key=lambda picture: _distance(picture, shape)))] = shape
    return captions


def _distance(one: Any, other: Any) -> float:
    """Between the centres of two shapes (EMU); a shape without a position is far."""
    try:
        dx = (one.left + one.width / 2) - (other.left + other.width / 2)
        dy = (one.top + one.height / 2) - (other.top + other.height / 2)
    except TypeError:  # an inherited placeholder position python-pptx cannot give
        return float("inf")
    return float((dx * dx + dy * dy) ** 0.5)


def _add_picture(builder: PageBuilder, shape: Any, caption: str) -> None:
    try:
        image: bytes | None = bytes(shape.image.blob)
    except Exception:  # a linked (external) or missing image: its alt text and caption stand
        image = None
    width, height = (round((shape.width or 0) / EMU_PER_PIXEL), round((shape.height or 0) / EMU_PER_PIXEL))
    if image is not None and not (width and height):
        width, height = image_size(image) or (0, 0)
    builder.add_figure(
        Figure(
            caption=" ".join(caption.split()),
            alt_text=_alt_text(shape),
            width_px=width,
            height_px=height,
            image_sha256=hashlib.sha256(image).hexdigest() if image is not None else None,
        ),
        image,
    )


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


def _chart_blocks(chart: Any, described: str = "") -> list[tuple[BlockKind, str]]:
    """A chart's title ("Chart: ...") and alt text (``described``) as a paragraph, and its data as a
    table: a row per category under a header of the series' names (a bar, line, pie or area chart),
    or a row per point, series, x and y (an XY or bubble chart, which has no categories). The
    numbers are what the chart draws; a reader asked about the chart finds them. A chart
    python-pptx cannot read keeps only what it could read."""
    blocks: list[tuple[BlockKind, str]] = []
    lines = [f"Alt text: {described}"] if described else []
    try:
        if chart.has_title and chart.chart_title.has_text_frame and chart.chart_title.text_frame.text.strip():
            lines.insert(0, f"Chart: {chart.chart_title.text_frame.text}")
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
        rows = []
    if lines:
        blocks.append((BlockKind.PARAGRAPH, "\n".join(lines)))
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
