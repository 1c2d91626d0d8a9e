"""Office Open XML: which document a zip is, whether it is safe to open, and its text.

Safety before any parser sees the package (:func:`checked_package`):

- the zip's entry count and declared uncompressed sizes are bounded, and every entry is
  decompressed once in a streaming read that stops at the bound (declared sizes can lie): a zip
  bomb is DOCUMENT_TOO_COMPLEX after reading at most ``max_unzipped_bytes``;
- no XML part may carry a document type declaration: OOXML never needs one, and it is how
  entity expansion ("billion laughs") and external entities get in: UNSAFE_XML. (python-docx and
  python-pptx also parse with ``resolve_entities=False``.)

Word (python-docx): the body's paragraphs and tables in order. Paragraphs styled ``Title`` or
``Heading n`` are headings (level 1, or n); tables are rows of cells, the first row their header.
Running headers and footers, footnotes, comments and images are not read.

PowerPoint (python-pptx): one page per slide, numbered as PowerPoint numbers them. The title
placeholder is the slide's heading (anchor ``slide-<n>``), then every other shape's text in the
slide's order (group shapes opened), tables as rows, and the speaker notes last. Pictures are not
read (docs/formats.md, "Images").
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import BlockKind, DocumentFormat
from rag_ingest.parsing.blocks import FormatLimits, PageBuilder, StructuredDocument, clean_block_text, table_text

_MAIN_CONTENT_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml": DocumentFormat.DOCX,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": DocumentFormat.PPTX,
}
_OTHER_PACKAGES = {
    "wordprocessingml.template": "a Word template (.dotx): save it as a .docx",
    "presentationml.slideshow": "a PowerPoint show (.ppsx): save it as a .pptx",
    "presentationml.template": "a PowerPoint template (.potx): save it as a .pptx",
    "spreadsheetml": "an Excel workbook: spreadsheets are not accepted",
}
_DOCTYPE = re.compile(rb"<!DOCTYPE|<!ENTITY", re.IGNORECASE)
_CONTENT_TYPES_PART = "[Content_Types].xml"
_READ_CHUNK = 1024 * 1024
# How much of an XML part's start is searched for a DTD: it must come before the root element.
_PROLOG_BYTES = 4096


def ooxml_format(data: bytes) -> DocumentFormat:
    """DOCX or PPTX from the package's ``[Content_Types].xml`` (raises ``PermanentError``)."""
    package = _open_zip(data)
    names = set(package.namelist())
    if _CONTENT_TYPES_PART not in names:
        raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, "a zip archive that is not an Office document")
    content_types = _read_part(package, _CONTENT_TYPES_PART, 4 * 1024 * 1024)
    _refuse_dtd(_CONTENT_TYPES_PART, content_types)
    declared = re.findall(rb'ContentType="([^"]+)"', content_types)
    types = [value.decode("ascii", errors="replace") for value in declared]
    if any("macroenabled" in value.lower() for value in types) or any(
        name.lower().endswith("vbaproject.bin") for name in names
    ):
        raise PermanentError(
            ErrorCode.MACRO_ENABLED_DOCUMENT, "the document carries macros (.docm, .pptm): save it without them"
        )
    for value in types:
        if value in _MAIN_CONTENT_TYPES:
            return _MAIN_CONTENT_TYPES[value]
    for marker, what in _OTHER_PACKAGES.items():
        if any(marker in value for value in types):
            raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, f"the file is {what}")
    raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, "an Office Open XML package with no Word or PowerPoint document")


def checked_package(data: bytes, limits: FormatLimits) -> zipfile.ZipFile:
    """The package, once its entries are within ``limits`` and no XML part declares a DTD."""
    package = _open_zip(data)
    entries = package.infolist()
    if len(entries) > limits.max_zip_entries:
        raise PermanentError(
            ErrorCode.DOCUMENT_TOO_COMPLEX, f"{len(entries)} zip entries exceeds the limit of {limits.max_zip_entries}"
        )
    declared = sum(entry.file_size for entry in entries)
    if declared > limits.max_unzipped_bytes:
        raise PermanentError(
            ErrorCode.DOCUMENT_TOO_COMPLEX,
            f"{declared} bytes unzipped exceeds the limit of {limits.max_unzipped_bytes} bytes",
        )
    total = 0
    for entry in entries:
        is_xml = entry.filename.endswith((".xml", ".rels"))
        bound = min(
            limits.max_xml_part_bytes if is_xml else limits.max_unzipped_bytes, limits.max_unzipped_bytes - total
        )
        prolog, size = _stream_part(package, entry, bound)
        total += size
        if is_xml:
            _refuse_dtd(entry.filename, prolog)
    return package


def _open_zip(data: bytes) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the zip package cannot be opened: {exc}") from None


def _stream_part(package: zipfile.ZipFile, entry: zipfile.ZipInfo, bound: int) -> tuple[bytes, int]:
    """(the part's first bytes, its real uncompressed size), decompressing at most ``bound + 1`` bytes."""
    size = 0
    prolog = b""
    try:
        with package.open(entry) as stream:
            while chunk := stream.read(_READ_CHUNK):
                if not prolog:
                    prolog = chunk[:_PROLOG_BYTES]
                size += len(chunk)
                if size > bound:
                    raise PermanentError(
                        ErrorCode.DOCUMENT_TOO_COMPLEX,
                        f"{entry.filename} decompresses past the limit ({bound} bytes): a zip bomb",
                    )
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"{entry.filename} cannot be decompressed: {exc}") from None
    return prolog, size


def _read_part(package: zipfile.ZipFile, name: str, bound: int) -> bytes:
    try:
        with package.open(name) as stream:
            data = stream.read(bound + 1)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"{name} cannot be decompressed: {exc}") from None
    if len(data) > bound:
        raise PermanentError(ErrorCode.DOCUMENT_TOO_COMPLEX, f"{name} is larger than {bound} bytes")
    return data


def _refuse_dtd(name: str, prolog: bytes) -> None:
    root = _root_start(prolog)
    if _DOCTYPE.search(prolog, 0, root):
        raise PermanentError(ErrorCode.UNSAFE_XML, f"{name} declares a DTD or entities, which OOXML never needs")


def _root_start(prolog: bytes) -> int:
    """Where the root element starts (a DTD must come before it): the first ``<`` that opens neither
    a declaration, a processing instruction nor a comment."""
    for match in re.finditer(rb"<([^!?])", prolog):
        return match.start()
    return len(prolog)


# -- Word ---------------------------------------------------------------------------------------
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_CODE_STYLE = re.compile(r"code|preformatted|^plain text$|verbatim", re.IGNORECASE)


def read_docx(data: bytes, limits: FormatLimits) -> StructuredDocument:
    import docx
    from docx.oxml.ns import qn
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    checked_package(data, limits)
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises KeyError, ValueError, lxml errors...: all a broken file
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the Word document cannot be opened: {exc}") from None
    builder = PageBuilder(page_number=1, used_anchors=set())
    notes = {kind: _notes(document, kind) for kind in ("footnote", "endnote")}
    numbered: dict[str, dict[str, int]] = {"footnote": {}, "endnote": {}}

    def read_blocks(container: Any) -> None:
        for element in _body_blocks(container):
            if element.tag == qn("w:p"):
                paragraph = Paragraph(element, document)
                level = _heading_level(paragraph)
                text = _paragraph_text(element)
                if level:
                    builder.add(BlockKind.HEADING, text, level=level)
                else:
                    builder.add(BlockKind.PARAGRAPH, text, preformatted=_code_style(paragraph))
                for kind, note_id in _note_references(element):
                    if note_id in notes[kind] and note_id not in numbered[kind]:
                        numbered[kind][note_id] = number = len(numbered[kind]) + 1
                        builder.add(BlockKind.PARAGRAPH, f"{kind.capitalize()} {number}: {notes[kind][note_id]}")
                for text_box in _text_boxes(element):
                    read_blocks(text_box)
            else:
                builder.add_table(_docx_rows(Table(element, document)))

    read_blocks(document.element.body)
    title = (document.core_properties.title or "").strip() or None
    return StructuredDocument(pages=[builder.page()], title=title)


def _code_style(paragraph: Any) -> bool:
    """Whether a Word paragraph's style is one for code (pandoc's "Source Code", Word's "HTML
    Preformatted", "Plain Text", or any style whose name says code or preformatted)."""
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    return bool(_CODE_STYLE.search(name))


def _body_blocks(container: Any) -> Iterator[Any]:
    """The body's paragraphs and tables in order, including those inside content controls
    (``w:sdt``: Word wraps cover pages, tables of contents and form fields in them)."""
    from docx.oxml.ns import qn

    for child in container.iterchildren():
        if child.tag in (qn("w:p"), qn("w:tbl")):
            yield child
        elif child.tag == qn("w:sdt"):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _body_blocks(content)


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
#: What a paragraph's text is made of: text, tabs, breaks, and hyphens Word does not break at.
_TEXT_PARTS = {f"{_W}t": None, f"{_W}tab": "\t", f"{_W}br": "\n", f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-"}
#: Where a paragraph's text parts are not its text: a text box's (read after it), deleted or
#: moved-away text of tracked changes, and the VML copy of a drawing.
_NOT_THE_PARAGRAPHS = frozenset({f"{_W}txbxContent", f"{_W}del", f"{_W}moveFrom", _MC_FALLBACK})


def _paragraph_text(paragraph: Any) -> str:
    """A Word paragraph's text as Word shows it, in order: its runs wherever they stand, inside
    hyperlinks, tracked insertions (``w:ins``), smart tags, simple fields and inline content
    controls (python-docx's ``paragraph.text`` reads only the runs directly in the paragraph and in
    hyperlinks, so an inserted word was lost); deleted text and text boxes' text left out."""
    parts: list[str] = []
    for node in paragraph.iter(*_TEXT_PARTS):
        if _stands_in(node, paragraph, _NOT_THE_PARAGRAPHS):
            fixed = _TEXT_PARTS[node.tag]
            parts.append(fixed if fixed is not None else node.text or "")
    return "".join(parts)


def _stands_in(node: Any, paragraph: Any, stops: frozenset[str]) -> bool:
    """Whether ``node`` is ``paragraph``'s own: walking up from it, the paragraph comes before any
    element whose tag is in ``stops`` (a text box, a deletion, another paragraph...)."""
    holder = node.getparent()
    while holder is not None and holder is not paragraph and holder.tag not in stops:
        holder = holder.getparent()
    return holder is paragraph


def _notes(document: Any, kind: str) -> dict[str, str]:
    """The document's footnotes or endnotes (``kind``) by id: their paragraphs' text, one line each;
    the separators Word keeps among them (``w:type``) left out. Empty when the part is absent."""
    from docx.oxml import parse_xml
    from docx.oxml.ns import qn

    part = next(
        (
            rel.target_part
            for rel in document.part.rels.values()
            if not rel.is_external and rel.reltype.endswith(f"/{kind}s")
        ),
        None,
    )
    if part is None:
        return {}
    root = part.element if hasattr(part, "element") else parse_xml(part.blob)
    notes: dict[str, str] = {}
    for note in root.iterchildren(qn(f"w:{kind}")):
        if note.get(qn("w:type")):
            continue
        text = "\n".join(_paragraph_text(p) for p in note.iter(qn("w:p"))).strip()
        if text:
            notes[note.get(qn("w:id"))] = text
    return notes


def _note_references(paragraph: Any) -> list[tuple[str, str]]:
    """(``footnote`` or ``endnote``, id) of the notes a paragraph refers to, in order; references
    inside its text boxes are left to the boxes' own paragraphs."""
    from docx.oxml.ns import qn

    tags = {qn("w:footnoteReference"): "footnote", qn("w:endnoteReference"): "endnote"}
    return [
        (tags[reference.tag], reference.get(qn("w:id")))
        for reference in paragraph.iter(*tags)
        if _stands_in(reference, paragraph, frozenset({qn("w:p")}))
    ]


def _text_boxes(paragraph: Any) -> list[Any]:
    """The text boxes anchored in a paragraph (``w:txbxContent``: a sidebar, a callout, a shape's
    text), read after it. Word writes each twice, a DrawingML box in ``mc:Choice`` and a VML copy in
    ``mc:Fallback`` for older readers: the copies under ``mc:Fallback`` are skipped. A box nested in
    another box is read with that box's paragraphs."""
    box_tag = f"{_W}txbxContent"
    return [box for box in paragraph.iter(box_tag) if _stands_in(box, paragraph, frozenset({_MC_FALLBACK, box_tag}))]


def _heading_level(paragraph: Any) -> int:
    style = paragraph.style
    while style is not None:
        name = style.name or ""
        if name.lower() == "title":
            return 1
        match = _HEADING_STYLE.match(name)
        if match:
            return max(1, int(match.group(1)))
        style = style.base_style
    return 0


def _docx_rows(table: Any) -> Iterator[list[str]]:
    """A Word table's rows. python-docx gives a merged cell in every grid position it covers (across
    columns and down rows): it is read there, so every value stands under its column's header, as
    the other formats' merged cells are; a row that is one merged cell (a label) is one cell."""
    for row in table.rows:
        cells = row.cells
        if len(cells) > 1 and all(cell._tc is cells[0]._tc for cell in cells):
            yield [_cell_text(cells[0])]
        else:
            yield [_cell_text(cell) for cell in cells]


def _cell_text(cell: Any) -> str:
    """A Word cell's text: its paragraphs and the tables nested in it (python-docx's ``cell.text``
    reads the paragraphs only), a nested table's rows as lines of cells."""
    from docx.table import Table

    parts: list[str] = []
    for block in cell.iter_inner_content():
        if isinstance(block, Table):
            parts.extend(" ".join(text for text in row if text.strip()) for row in _docx_rows(block))
        else:
            parts.append(_paragraph_text(block._p))
    return "\n".join(part for part in parts if part.strip())


# -- PowerPoint ---------------------------------------------------------------------------------
_SLIDE_ID = re.compile(rb"<p:sldId\b")


def read_pptx(data: bytes, limits: FormatLimits) -> StructuredDocument:
    import pptx

    package = _open_zip(data)
    # The page limit first, from the slide list alone: a 10,000-slide deck is refused unparsed.
    presentation_xml = _presentation_part(package)
    _refuse_dtd("ppt/presentation.xml", presentation_xml[:_PROLOG_BYTES])
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
        return _read_part(package, "ppt/presentation.xml", 64 * 1024 * 1024)
    except KeyError:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, "the presentation has no ppt/presentation.xml") from None


def _shapes(shapes: Any) -> Iterator[Any]:
    """Every shape in order, the shapes inside groups in place of the group."""
    for shape in shapes:
        if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):
            yield from _shapes(shape.shapes)
        else:
            yield shape
