"""HTML, Markdown and plain text read into one page of blocks.

- HTML (lxml, libxml2; no network): ``<main>`` or the body, without what is not the document
  (scripts, forms, navigation, site banners, asides, hidden elements, cookie banners); headings,
  paragraphs, tables, figures (``<figure>``, ``<img>``; only a ``data:`` image's bytes are OCR'd).
- Markdown (markdown-it-py, CommonMark with tables); front matter is dropped, its title kept;
  an image is a figure (alt text, its title or a "Figure n" paragraph after it as caption).
- Plain text: paragraphs between blank lines, headings found as in a PDF (``headings``).
Bounds that keep a hostile file cheap raise DOCUMENT_TOO_COMPLEX. What is dropped and why, and the
bounds: docs/formats.md, "The readers", "Figures" and "Hostile inputs".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import BlockKind, Figure
from rag_ingest.parsing.blocks import FIGURE_CAPTION, FormatLimits, PageBuilder, StructuredDocument, decode_text
from rag_ingest.parsing.figures import ImageReader, is_tiny
from rag_ingest.parsing.found_figures import alt_text, structured_document
from rag_ingest.parsing.headings import detect_headings
from rag_ingest.parsing.pdf.cleanup import clean_page_text

_DROPPED_TAGS = frozenset(
    {"script", "style", "noscript", "template", "nav", "aside", "form", "button", "select", "textarea", "input"}
    | {"iframe", "svg", "canvas", "dialog", "object", "embed", "video", "audio", "map", "head", "menu"}
)
_DROPPED_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog", "menu", "menubar"}
)
# A banner's name says what it is for *and* that it is a banner: a manual's section on cookies
# (``id="id-Cookies"``) is content, ``cookie-banner``/``cookie-consent``/``gdpr-notice`` are not.
_BOILERPLATE_NAMES = re.compile(
    r"consent|cc-banner|onetrust|privacy-banner|(cookie|gdpr)s?[-_ ]?(banner|notice|bar|popup|modal|dialog|overlay"
    r"|prompt|message|alert|law|wall|policy-banner)",
    re.IGNORECASE,
)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_PARAGRAPH_TAGS = frozenset({"p", "li", "pre", "blockquote", "dt", "dd", "figcaption", "address", "summary"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w-]+)""", re.IGNORECASE)
#: XHTML's XML declaration (DocBook XSL writes one): lxml refuses a decoded string that carries an
#: encoding declaration, and the text is already decoded.
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")


def read_html(data: bytes, limits: FormatLimits, images: ImageReader) -> StructuredDocument:
    import lxml.etree
    import lxml.html

    declared = _META_CHARSET.search(data[:4096])
    text = decode_text(data, declared=declared.group(1).decode("ascii") if declared else None)
    _bound_text(text, limits)
    text = _XML_DECLARATION.sub("", text, count=1)
    parser = _html_parser()
    try:
        root = lxml.html.document_fromstring(text, parser=parser)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the HTML cannot be parsed: {exc}") from None
    if any(
        "ERR_RESOURCE_LIMIT" in str(error.type_name) or "Excessive depth" in error.message for error in parser.error_log
    ):
        raise PermanentError(
            ErrorCode.DOCUMENT_TOO_COMPLEX, "the HTML nests elements deeper than the parser's limit (256 levels)"
        )
    title_element = root.find(".//title")
    title = " ".join(title_element.text_content().split()) if title_element is not None else None
    main = root.find(".//main")
    if main is None:
        found = root.xpath(".//*[@role='main']")
        main = found[0] if found else root.find("body")
    builder = PageBuilder(page_number=1, used_anchors=set())
    if main is not None:
        _read_element(main, builder, inside_article=main.tag == "article" or bool(main.xpath("ancestor::article")))
    return structured_document([builder], title=title or None, images=images, limits=limits)


def _html_parser() -> Any:
    """libxml2's HTML parser as every HTML this package reads is parsed: no network, comments and
    processing instructions dropped, its default depth and size limits kept."""
    import lxml.html

    return lxml.html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True, huge_tree=False)


def _dropped(element: Any, inside_article: bool) -> bool:
    tag = element.tag if isinstance(element.tag, str) else ""
    if tag in _DROPPED_TAGS:
        return True
    if tag in ("header", "footer") and not inside_article and not _sectioned(element):
        return True  # the page's banner or footer; a section's own header holds its heading
    attributes = element.attrib
    if attributes.get("role", "").lower() in _DROPPED_ROLES:
        return True
    if "hidden" in attributes or attributes.get("aria-hidden", "").lower() == "true":
        return True
    if _HIDDEN_STYLE.search(attributes.get("style", "")):
        return True
    if tag in _HEADINGS:
        return False  # a heading is the document's, whatever its id says
    names = f"{attributes.get('id', '')} {attributes.get('class', '')}"
    return bool(_BOILERPLATE_NAMES.search(names))


def _sectioned(element: Any) -> bool:
    """Whether ``element`` stands inside the page's main content or a section of it (``<main>``,
    ``role="main"``, ``<article>``, ``<section>``): there a ``<header>`` or ``<footer>`` is that
    section's (its title, its byline), not the site's banner or footer."""
    return bool(element.xpath("ancestor::main or ancestor::article or ancestor::section or ancestor::*[@role='main']"))


def _read_element(element: Any, builder: PageBuilder, *, inside_article: bool) -> None:
    """Blocks of ``element``'s children, in order; loose text between block children is a paragraph,
    the images inside it figures after it."""
    loose: list[str] = [element.text or ""]
    pictures: list[Any] = []  # the images inside the loose text
    for child in element:
        if not isinstance(child.tag, str) or _dropped(child, inside_article):
            loose.append(child.tail or "")
            continue
        tag = child.tag
        if tag in _HEADINGS or tag in _PARAGRAPH_TAGS or tag == "table" or _is_container(child) or tag == "img":
            builder.add(BlockKind.PARAGRAPH, "".join(loose))
            _add_images(builder, pictures)
            loose, pictures = [], []
            if tag == "img":
                _add_images(builder, [child])
            elif _is_figure(child, inside_article):
                _add_html_figure(builder, child, inside_article)
            elif tag in _HEADINGS:
                builder.add(BlockKind.HEADING, _inline_text(child, inside_article), level=_HEADINGS[tag])
            elif tag == "table" and _layout_table(child):
                for cell in _table_cells(child):
                    _read_element(cell, builder, inside_article=inside_article)
            elif tag == "table":
                caption = child.find("caption")
                caption_text = _inline_text(caption, inside_article) if caption is not None else None
                builder.add_table(_html_rows(child, inside_article), caption=caption_text)
            elif tag in _PARAGRAPH_TAGS and not _has_block_children(child):
                preformatted = tag == "pre"
                text = _inline_text(child, inside_article, keep_lines=preformatted)
                builder.add(BlockKind.PARAGRAPH, text, preformatted=preformatted)
                _add_images(builder, _images(child, inside_article))
            else:
                _read_element(child, builder, inside_article=inside_article or tag == "article")
            loose.append(child.tail or "")
        else:
            loose.append(_inline_text(child, inside_article))
            pictures.extend(_images(child, inside_article))
            loose.append(child.tail or "")
    builder.add(BlockKind.PARAGRAPH, "".join(loose))
    _add_images(builder, pictures)


def _images(element: Any, inside_article: bool) -> list[Any]:
    """The ``<img>`` elements in ``element`` (itself included), not inside an element dropped
    between them and it."""
    found = []
    for image in element.iter("img"):
        holder = image
        while holder is not element and holder is not None and not _dropped(holder, inside_article):
            holder = holder.getparent()
        if holder is element:
            found.append(image)
    return found


#: A ``role`` that says an image is decoration, not content (WAI-ARIA).
_DECORATIVE_ROLES = frozenset({"presentation", "none"})
_DATA_URI = re.compile(r"data:([\w.+-]+/[\w.+-]+)?((?:;[\w-]+=[^;,]*)*)(;base64)?,(.*)", re.DOTALL | re.IGNORECASE)


def _add_images(builder: PageBuilder, images: list[Any]) -> None:
    """Each ``<img>`` a figure: its alt text, its title as caption; ``alt=""``, a presentation role
    or a declared size too small for a figure (an icon, a spacer) marks it decoration."""
    for image in images:
        alt, size = image.get("alt"), _size(image)
        marked = (alt is not None and not alt.strip()) or image.get("role", "").lower() in _DECORATIVE_ROLES
        _add_figure(
            builder, image.get("src") or "", alt or "", image.get("title") or "", size, marked=marked or is_tiny(*size)
        )


#: A figure's caption is short: a "figure" element holding more text is a section that holds images.
MAX_CAPTION_CHARS = 400


def _is_figure(element: Any, inside_article: bool) -> bool:
    """A ``<figure>``, or a ``<div class="figure">`` (DocBook XSL, Publican, older Sphinx), that
    holds images and no more text than a caption."""
    classes = (element.get("class") or "").split()
    if element.tag != "figure" and not (element.tag == "div" and "figure" in classes):
        return False
    return bool(_images(element, inside_article)) and len(_figure_caption(element, inside_article)) <= MAX_CAPTION_CHARS


def _figure_caption(figure: Any, inside_article: bool) -> str:
    """Its ``<figcaption>``, else all its text (a DocBook figure's title paragraph)."""
    caption = figure.find(".//figcaption")
    return " ".join(_inline_text(caption if caption is not None else figure, inside_article).split())


def _add_html_figure(builder: PageBuilder, figure: Any, inside_article: bool) -> None:
    """A figure element holding images: one figure, its caption, the images' alt texts its alt
    text, the first image's bytes (a ``data:`` URI) read for text."""
    images = _images(figure, inside_article)
    caption = _figure_caption(figure, inside_article)
    alts = [image.get("alt") or "" for image in images]
    titles = [image.get("title") or "" for image in images]
    alt = " ".join(dict.fromkeys(text.strip() for text in alts if text.strip()))
    title = " ".join(dict.fromkeys(text.strip() for text in titles if text.strip()))
    marked = not caption.strip() and not alt and all(text is not None for text in (i.get("alt") for i in images))
    _add_figure(builder, images[0].get("src") or "", alt, caption or title, _size(images[0]), marked=marked)


def _size(image: Any) -> tuple[int, int]:
    """An ``<img>``'s width and height attributes in pixels (0: absent, a percentage, or not a number)."""
    sizes = []
    for name in ("width", "height"):
        value = (image.get(name) or "").strip().removesuffix("px")
        sizes.append(int(value) if value.isdigit() else 0)
    return sizes[0], sizes[1]


def _add_figure(
    builder: PageBuilder, source: str, alt: str, caption: str, size: tuple[int, int], *, marked: bool = False
) -> None:
    """A figure of an image at ``source``: a ``data:`` URI's bytes are the image (to OCR); a URL is
    never fetched, and names the image (the same URL many times over is an icon)."""
    image = _data_uri_bytes(source)
    identity = image if image is not None else source.strip().encode("utf-8", "replace")
    figure = Figure(
        caption=" ".join(caption.split()),
        alt_text=alt_text(alt),
        width_px=size[0],
        height_px=size[1],
        image_sha256=hashlib.sha256(identity).hexdigest() if identity else None,
    )
    builder.add_figure(figure, image, marked=marked)


def _data_uri_bytes(source: str) -> bytes | None:
    """The bytes of a ``data:`` URI (base64 or percent-encoded); None for anything else."""
    match = _DATA_URI.match(source.strip())
    if match is None:
        return None
    payload = match.group(4)
    try:
        return (
            base64.b64decode("".join(payload.split()), validate=True) if match.group(3) else unquote_to_bytes(payload)
        )
    except (binascii.Error, ValueError):
        return None


_BLOCK_TAGS = frozenset(
    {"div", "section", "article", "main", "body", "header", "footer", "ul", "ol", "dl", "figure", "details"}
    | {"table", "blockquote", "center", "hgroup", "fieldset"}
    | set(_HEADINGS)
    | _PARAGRAPH_TAGS
)


def _is_container(element: Any) -> bool:
    return element.tag in _BLOCK_TAGS


def _has_block_children(element: Any) -> bool:
    return any(isinstance(child.tag, str) and child.tag in _BLOCK_TAGS for child in element)


def _inline_text(element: Any, inside_article: bool, *, keep_lines: bool = False) -> str:
    """The text of ``element`` without its dropped descendants; ``<br>`` is a line break."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if node.text:
            parts.append(node.text if keep_lines else " ".join(node.text.split("\n")))
        for child in node:
            if isinstance(child.tag, str) and not _dropped(child, inside_article):
                if child.tag == "br":
                    parts.append("\n")
                else:
                    walk(child)
                    if child.tag in _BLOCK_TAGS:
                        parts.append("\n")
            if child.tail:
                parts.append(child.tail if keep_lines else " ".join(child.tail.split("\n")))

    walk(element)
    return "".join(parts)


def _layout_table(table: Any) -> bool:
    """Whether a ``<table>`` lays out a page rather than holding data: ``role="presentation"`` or
    ``"none"``, or a cell holding a table or a heading (old sites and generators put the whole page,
    menus and all, in table cells). Its cells are then read as sections, in order; a data table's
    cells may hold paragraphs (Sphinx wraps each in ``<p>``), so that alone says nothing."""
    if table.get("role", "").lower() in ("presentation", "none"):
        return True
    return any(
        isinstance(element.tag, str) and (element.tag == "table" or element.tag in _HEADINGS)
        for cell in _table_cells(table)
        for element in cell.iterdescendants()
    )


def _table_cells(table: Any) -> list[Any]:
    """The table's own cells (not a nested table's), row by row."""
    return [cell for row in _row_cells(table) for cell in row]


def _row_cells(table: Any) -> list[list[Any]]:
    """The table's own rows, each as its ``<td>`` and ``<th>`` cells."""
    rows = table.xpath("./thead/tr | ./tbody/tr | ./tr | ./tfoot/tr")
    return [[cell for cell in row if cell.tag in ("td", "th")] for row in rows]


#: HTML caps colspan at 1,000 and rowspan at 65,534 (the HTML Standard, "Processing model" of tables).
_MAX_COLSPAN = 1000
_MAX_ROWSPAN = 65534
#: A table whose spans would make more cells than this is read as written (a hostile colspan).
_MAX_EXPANDED_CELLS = 200_000


def _html_rows(table: Any, inside_article: bool) -> list[list[str]]:
    """The table's rows of cell texts, a cell spanning columns or rows repeated in each grid
    position it covers, so every value stands under its column's header (as a PDF table's merged
    cells are). A row that is one cell spanning every column (a label) stays one cell."""
    rows = _row_cells(table)
    texts = [[_inline_text(cell, inside_article) for cell in row] for row in rows]
    if not any(cell.get("colspan") or cell.get("rowspan") for row in rows for cell in row):
        return texts
    grid: list[list[str]] = []
    below: dict[int, tuple[int, str]] = {}  # column -> (rows still covered, the spanning cell's text)
    made = 0
    for row, row_texts in zip(rows, texts, strict=True):
        out: list[str] = []
        for cell, text in zip(row, row_texts, strict=True):
            _fill_from_above(out, below)
            rows_down = _span(cell.get("rowspan"), _MAX_ROWSPAN)
            for _ in range(_span(cell.get("colspan"), _MAX_COLSPAN)):
                if rows_down > 1:
                    below[len(out)] = (rows_down - 1, text)
                out.append(text)
        last = max(below, default=-1)  # spans from above after the row's last cell, up to here
        while len(out) <= last:
            if len(out) in below:
                _fill_from_above(out, below)
            else:
                out.append("")  # a position no cell covers
        made += len(out)
        if made > _MAX_EXPANDED_CELLS:
            return texts
        grid.append(out)
    width = max((len(out) for out in grid), default=0)
    # A column no row fills (an admonition's icon cell spanning its rows) is no column.
    empty = {column for column in range(width) if not any(column < len(out) and out[column].strip() for out in grid)}
    return [
        row_texts
        if len(row) == 1 and _span(row[0].get("colspan"), _MAX_COLSPAN) >= width > 1
        else [text for column, text in enumerate(out) if column not in empty]
        for row, row_texts, out in zip(rows, texts, grid, strict=True)
    ]


def _fill_from_above(out: list[str], below: dict[int, tuple[int, str]]) -> None:
    """Append to the row ``out`` the cells that rows above span down into its next positions."""
    while len(out) in below:
        left, text = below.pop(len(out))
        if left > 1:
            below[len(out)] = (left - 1, text)
        out.append(text)


def _span(value: str | None, limit: int) -> int:
    """A colspan or rowspan: its number, 1 when absent, zero or not a number, at most ``limit``."""
    try:
        return min(max(int(value or "1"), 1), limit)
    except ValueError:
        return 1


# -- Markdown -----------------------------------------------------------------------------------
def read_markdown(data: bytes, limits: FormatLimits, images: ImageReader) -> StructuredDocument:
    from markdown_it import MarkdownIt

    text = decode_text(data)
    _bound_text(text, limits)
    longest = max((len(line) for line in text.splitlines()), default=0)
    if longest > limits.max_markdown_line_chars:
        raise PermanentError(
            ErrorCode.DOCUMENT_TOO_COMPLEX,
            f"a line of {longest} characters exceeds the Markdown limit of {limits.max_markdown_line_chars}",
        )
    text, title = _without_front_matter(text)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    builder = PageBuilder(page_number=1, used_anchors=set())
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.type == "heading_open":
            heading = _inline(tokens[index + 1])
            level = int(token.tag[1])
            title = title or (heading if level == 1 else None)
            builder.add(BlockKind.HEADING, heading, level=level)
            index += 3
        elif token.type == "paragraph_open":
            found: list[Any] = []
            text = _inline(tokens[index + 1], found)
            builder.add(BlockKind.PARAGRAPH, text)
            index += 3
            following = (
                tokens[index + 1] if index + 2 < len(tokens) and tokens[index].type == "paragraph_open" else None
            )
            caption = ""
            if found and not text.strip() and following is not None and FIGURE_CAPTION.match(_inline(following)):
                caption, index = _inline(following), index + 3  # "Figure n: ..." under a lone image
            for image in found:
                title = str(image.attrs.get("title") or "")
                _add_figure(builder, str(image.attrs.get("src") or ""), image.content, title or caption, (0, 0))
                caption = ""
        elif token.type in ("fence", "code_block"):
            builder.add(BlockKind.PARAGRAPH, token.content, preformatted=True)
            index += 1
        elif token.type == "table_open":
            rows, index = _markdown_table(tokens, index)
            builder.add_table(rows)
        elif token.type == "html_block":
            _read_html_block(token.content, builder)
            index += 1
        else:
            index += 1
    return structured_document([builder], title=title, images=images, limits=limits)


#: Front matter (Jekyll, Hugo, MkDocs...): YAML between "---" lines or TOML between "+++" lines, at
#: the very start; left in, CommonMark reads the closing "---" as a heading's underline.
_FRONT_MATTER = re.compile(r"\A(?:\ufeff)?(---|\+\+\+)[ \t]*\r?\n(.*?)\r?\n(?:\1|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)
#: Its first line is a key: "title: ..." (YAML) or "title = ..." (TOML).
_FRONT_MATTER_KEY = re.compile(r"[\w-]+[ \t]*[:=]")
_FRONT_MATTER_TITLE = re.compile(r"^title[ \t]*[:=][ \t]*(.+?)[ \t]*$", re.MULTILINE | re.IGNORECASE)


def _without_front_matter(text: str) -> tuple[str, str | None]:
    """The Markdown without its front matter, and the front matter's title (None when absent): the
    block is metadata, not text; its title names the document."""
    match = _FRONT_MATTER.match(text)
    if match is None or not _FRONT_MATTER_KEY.match(match.group(2)):
        return text, None  # none, or a thematic break that opens the text
    found = _FRONT_MATTER_TITLE.search(match.group(2))
    title = found.group(1).strip().strip("'\"").strip() if found else ""
    return text[match.end() :], title or None


def _read_html_block(html: str, builder: PageBuilder) -> None:
    """An HTML block in Markdown (a README's centred paragraph, a ``<details>`` summary, an HTML
    table) read as the HTML reader reads a page's elements; markup that says nothing (a comment, an
    image) adds nothing."""
    import lxml.etree
    import lxml.html

    if not html.strip():
        return
    try:
        fragment = lxml.html.fragment_fromstring(html, create_parent="div", parser=_html_parser())
    except (lxml.etree.ParserError, ValueError):
        return  # a fragment libxml2 cannot read: the Markdown around it stands
    _read_element(fragment, builder, inside_article=False)


def _inline(token: Any, images: list[Any] | None = None) -> str:
    """An inline token's text; its images' alt text in it, or (``images`` given) the images
    collected there instead."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content if child.type != "html_inline" else "")
        elif child.type == "softbreak":
            parts.append(" ")
        elif child.type == "hardbreak":
            parts.append("\n")
        elif child.type == "image" and images is not None:
            images.append(child)
        elif child.type == "image":
            parts.append(child.content)  # its alt text
    return "".join(parts)


def _markdown_table(tokens: list[Any], index: int) -> tuple[list[list[str]], int]:
    rows: list[list[str]] = []
    row: list[str] = []
    while index < len(tokens) and tokens[index].type != "table_close":
        token = tokens[index]
        if token.type == "tr_open":
            row = []
        elif token.type == "inline":
            row.append(_inline(token))
        elif token.type == "tr_close":
            rows.append(row)
        index += 1
    return rows, index + 1


# -- text -----------------------------------------------------------------------------------------
def read_text(data: bytes, limits: FormatLimits) -> StructuredDocument:
    text = clean_page_text(decode_text(data))
    _bound_text(text, limits)
    headings = {heading.start: heading for heading in detect_headings(text)}
    builder = PageBuilder(page_number=1, used_anchors=set())
    cursor = 0
    for match in re.finditer(r"\n[^\S\n]*\n\s*|\Z", text):
        paragraph_start, paragraph_end = cursor, match.start()
        cursor = match.end()
        position = paragraph_start
        # A heading line starts a paragraph of its own (the text under it may follow without a blank line).
        for start in sorted(start for start in headings if paragraph_start <= start < paragraph_end):
            heading = headings[start]
            builder.add(BlockKind.PARAGRAPH, text[position:start])
            builder.add(BlockKind.HEADING, heading.title, level=heading.level)
            position = heading.end
        builder.add(BlockKind.PARAGRAPH, text[position:paragraph_end])
        if match.end() == len(text):
            break
    return StructuredDocument(pages=[builder.page()])


def _bound_text(text: str, limits: FormatLimits) -> None:
    if len(text) > limits.max_text_chars:
        raise PermanentError(
            ErrorCode.DOCUMENT_TOO_COMPLEX, f"{len(text)} characters exceeds the limit of {limits.max_text_chars}"
        )
