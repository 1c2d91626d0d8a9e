"""Word documents (python-docx): the body's paragraphs and tables in order, as one page of blocks.

Paragraphs styled ``Title`` or ``Heading n`` are headings (level 1, or n); tables are rows of
cells, the first row their header; footnotes and endnotes follow the paragraph that first refers
to them, and a text box's paragraphs the paragraph it is anchored in. Pictures (inline or
anchored) are figures after their paragraph (a table's after the table): alt text, the caption
paragraph beside them, the text inside the image (``found_figures``); charts are their title and
data as a table. Running headers and footers and comments are not read.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator
from typing import Any

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import BlockKind, Figure
from rag_ingest.parsing.blocks import FIGURE_CAPTION, TABLE_CAPTION, FormatLimits, PageBuilder, StructuredDocument
from rag_ingest.parsing.figures import ImageReader, image_size
from rag_ingest.parsing.found_figures import alt_text, structured_document
from rag_ingest.parsing.office.charts import read_chart
from rag_ingest.parsing.office.ooxml import checked_package

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_CODE_STYLE = re.compile(r"code|preformatted|^plain text$|verbatim", re.IGNORECASE)


def read_docx(data: bytes, limits: FormatLimits, images: ImageReader) -> StructuredDocument:
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
    body = list(_body_blocks(document.element.body))  # held: lxml keeps these proxies (their ids) alive
    captions = _figure_captions(document, body)
    taken = {id(caption) for caption in captions.values()}

    def read_blocks(container: Any) -> None:
        for element in _body_blocks(container):
            if id(element) in taken:
                continue  # a figure's caption, read with its figure
            if element.tag == qn("w:p"):
                paragraph = Paragraph(element, document)
                level = _heading_level(paragraph)
                text = _paragraph_text(element)
                if level:
                    builder.add(BlockKind.HEADING, text, level=level)
                else:
                    builder.add(BlockKind.PARAGRAPH, text, preformatted=_code_style(paragraph))
                caption = captions.get(id(element))
                _add_drawings(builder, document, element, _paragraph_text(caption) if caption is not None else "")
                for kind, note_id in _note_references(element):
                    if note_id in notes[kind] and note_id not in numbered[kind]:
                        numbered[kind][note_id] = number = len(numbered[kind]) + 1
                        builder.add(BlockKind.PARAGRAPH, f"{kind.capitalize()} {number}: {notes[kind][note_id]}")
                for text_box in _text_boxes(element):
                    read_blocks(text_box)
            else:
                builder.add_table(_docx_rows(Table(element, document)))
                for cell_paragraph in element.iter(qn("w:p")):  # a table's pictures follow it
                    _add_drawings(builder, document, cell_paragraph, "")

    read_blocks(document.element.body)
    title = (document.core_properties.title or "").strip() or None
    return structured_document([builder], title=title, images=images, limits=limits)


_WP = "{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}"
_PIC = "{http://schemas.openxmlformats.org/drawingml/2006/picture}"
_DML = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_CHART = "{http://schemas.openxmlformats.org/drawingml/2006/chart}chart"
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
#: DrawingML's unit: 914,400 per inch, so 9,525 per pixel at 96 dpi (the size Word shows it at).
EMU_PER_PIXEL = 9525


def _drawings(paragraph: Any) -> list[Any]:
    """The drawings of a paragraph (``w:drawing``: pictures, charts, shapes), not those of its text
    boxes or of ``mc:Fallback`` copies."""
    return [
        drawing
        for drawing in paragraph.iter(f"{_W}drawing")
        if _belongs_to(drawing, paragraph, frozenset({f"{_W}txbxContent", _MC_FALLBACK}))
    ]


def _figure_captions(document: Any, body: list[Any]) -> dict[int, Any]:
    """The caption paragraph of each body paragraph holding a picture or a chart (by the element's
    id): the next paragraph when it is a caption (styled Caption, or "Figure n: ..."), else the
    previous one when no figure took it."""
    captions: dict[int, Any] = {}
    taken: set[int] = set()
    for index, element in enumerate(body):
        if element.tag != f"{_W}p" or not _drawings(element) or not _has_figure(element):
            continue
        for neighbour in (index + 1, index - 1):
            if not 0 <= neighbour < len(body) or id(body[neighbour]) in taken:
                continue
            if _is_caption(document, body[neighbour]):
                captions[id(element)] = body[neighbour]
                taken.add(id(body[neighbour]))
                break
    return captions


def _has_figure(paragraph: Any) -> bool:
    return any(
        drawing.find(f".//{_PIC}pic") is not None or drawing.find(f".//{_CHART}") is not None
        for drawing in _drawings(paragraph)
    )


def _is_caption(document: Any, element: Any) -> bool:
    from docx.text.paragraph import Paragraph

    if element.tag != f"{_W}p" or _drawings(element):
        return False
    text = _paragraph_text(element).strip()
    if not text or TABLE_CAPTION.match(text):
        return False
    style = Paragraph(element, document).style
    name = ((style.name if style is not None else "") or "").lower()
    return ("caption" in name and "table" not in name) or bool(FIGURE_CAPTION.match(text))


def _add_drawings(builder: PageBuilder, document: Any, paragraph: Any, caption: str) -> None:
    """A paragraph's pictures as figures and its charts as their data, after its text; the caption
    goes to the first of them."""
    for drawing in _drawings(paragraph):
        frame = drawing.find(f"{_WP}inline")
        if frame is None:
            frame = drawing.find(f"{_WP}anchor")
        if frame is None:
            continue
        properties = frame.find(f"{_WP}docPr")
        described = _alt_text(properties)
        extent = frame.find(f"{_WP}extent")
        width, height = (_pixels(extent.get("cx")), _pixels(extent.get("cy"))) if extent is not None else (0, 0)
        pictures = list(frame.iter(f"{_PIC}pic"))
        for index, picture in enumerate(pictures):
            own = _alt_text(picture.find(f"{_PIC}nvPicPr/{_PIC}cNvPr"))
            alt = (described if index == 0 else "") or (own if len(pictures) > 1 else "")
            _add_picture(builder, document, picture, caption, alt, (width, height) if len(pictures) == 1 else (0, 0))
            caption = ""
        for chart in frame.iter(_CHART):
            _add_chart(builder, document, chart.get(f"{_REL}id"), caption, described)
            caption = ""


def _alt_text(properties: Any) -> str:
    """A drawing's alt text as Word's Alt Text pane writes it: its title and its description."""
    if properties is None:
        return ""
    parts = [alt_text(properties.get(name) or "") for name in ("title", "descr")]
    return ": ".join(dict.fromkeys(part for part in parts if part))


def _pixels(emu: str | None) -> int:
    try:
        return max(0, round(int(emu or "0") / EMU_PER_PIXEL))
    except ValueError:
        return 0


def _add_picture(
    builder: PageBuilder, document: Any, picture: Any, caption: str, alt: str, size: tuple[int, int]
) -> None:
    blip = picture.find(f".//{_DML}blip")
    relation = blip.get(f"{_REL}embed") if blip is not None else None
    image = _related_blob(document, relation)
    width, height = size
    if image is not None and not (width and height):
        width, height = image_size(image) or (0, 0)
    builder.add_figure(
        Figure(
            caption=caption,
            alt_text=alt,
            width_px=width,
            height_px=height,
            image_sha256=hashlib.sha256(image).hexdigest() if image is not None else None,
        ),
        image,
    )


def _add_chart(builder: PageBuilder, document: Any, relation: str | None, caption: str, alt: str) -> None:
    """A chart: its caption, title ("Chart: ...") and alt text, then its data as a table."""
    blob = _related_blob(document, relation)
    try:
        chart = read_chart(blob) if blob is not None else None
    except Exception as error:  # a broken chart part: the document's other text stands
        logger.warning("a Word chart not read: %r", error)
        chart = None
    lines = [caption, f"Chart: {chart.title}" if chart and chart.title else "", f"Alt text: {alt}" if alt else ""]
    builder.add_table(chart.rows if chart else [], caption="\n".join(line for line in lines if line))


def _related_blob(document: Any, relation: str | None) -> bytes | None:
    """The bytes of the part the body relates to by ``relation`` (an image, a chart); None for a
    link to an external file or a missing part."""
    if not relation:
        return None
    try:
        relationship = document.part.rels[relation]
        return None if relationship.is_external else bytes(relationship.target_part.blob)
    except (KeyError, AttributeError):
        return None


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
        if _belongs_to(node, paragraph, _NOT_THE_PARAGRAPHS):
            fixed = _TEXT_PARTS[node.tag]
            parts.append(fixed if fixed is not None else node.text or "")
    return "".join(parts)


def _belongs_to(node: Any, paragraph: Any, stops: frozenset[str]) -> bool:
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
        if _belongs_to(reference, paragraph, frozenset({qn("w:p")}))
    ]


def _text_boxes(paragraph: Any) -> list[Any]:
    """The text boxes anchored in a paragraph (``w:txbxContent``: a sidebar, a callout, a shape's
    text), read after it. Word writes each twice, a DrawingML box in ``mc:Choice`` and a VML copy in
    ``mc:Fallback`` for older readers: the copies under ``mc:Fallback`` are skipped. A box nested in
    another box is read with that box's paragraphs."""
    box_tag = f"{_W}txbxContent"
    return [box for box in paragraph.iter(box_tag) if _belongs_to(box, paragraph, frozenset({_MC_FALLBACK, box_tag}))]


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
