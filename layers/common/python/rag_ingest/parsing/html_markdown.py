"""HTML, Markdown and plain text read into one page of blocks.

- HTML (lxml, libxml2; no network): the ``<main>`` when there is one, else the body, without what
  is not the document (scripts, forms, navigation, site headers and footers, asides, hidden
  elements, cookie banners); headings, paragraphs, and tables with their captions.
- Markdown (markdown-it-py, CommonMark with tables); front matter is dropped, its title kept.
- Plain text: paragraphs between blank lines, headings found as in a PDF (``headings``).
Bounds that keep a hostile file cheap (nesting, line length, text) raise DOCUMENT_TOO_COMPLEX.
What is dropped and why, and the bounds' figures: docs/formats.md, "The readers" and "Hostile inputs".
"""

from __future__ import annotations

import re
from typing import Any

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import BlockKind
from rag_ingest.parsing.blocks import FormatLimits, PageBuilder, StructuredDocument, decode_text
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


def read_html(data: bytes, limits: FormatLimits) -> StructuredDocument:
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
    return StructuredDocument(pages=[builder.page()], title=title or None)


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
    """Blocks of ``element``'s children, in order; loose text between block children is a paragraph."""
    loose: list[str] = [element.text or ""]
    for child in element:
        if not isinstance(child.tag, str) or _dropped(child, inside_article):
            loose.append(child.tail or "")
            continue
        tag = child.tag
        if tag in _HEADINGS or tag in _PARAGRAPH_TAGS or tag == "table" or _is_container(child):
            builder.add(BlockKind.PARAGRAPH, "".join(loose))
            loose = []
            if tag in _HEADINGS:
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
            else:
                _read_element(child, builder, inside_article=inside_article or tag == "article")
            loose.append(child.tail or "")
        else:
            loose.append(_inline_text(child, inside_article))
            loose.append(child.tail or "")
    builder.add(BlockKind.PARAGRAPH, "".join(loose))


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
def read_markdown(data: bytes, limits: FormatLimits) -> StructuredDocument:
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
            builder.add(BlockKind.PARAGRAPH, _inline(tokens[index + 1]))
            index += 3
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
    return StructuredDocument(pages=[builder.page()], title=title)


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


def _inline(token: Any) -> str:
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content if child.type != "html_inline" else "")
        elif child.type == "softbreak":
            parts.append(" ")
        elif child.type == "hardbreak":
            parts.append("\n")
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
