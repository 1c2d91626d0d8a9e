"""Word documents (python-docx): the body's paragraphs and tables in order, as one page of blocks.

Paragraphs styled ``Title`` or ``Heading n`` are headings (level 1, or n); tables are rows of
cells, the first row their header; footnotes and endnotes follow the paragraph that first refers
to them, and a text box's paragraphs the paragraph it is anchored in. Running headers and footers,
comments and images are not read.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import BlockKind
from rag_ingest.parsing.blocks import FormatLimits, PageBuilder, StructuredDocument
from rag_ingest.parsing.office.ooxml import checked_package

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
