"""The shared parts of the structured formats' readers (``office``, ``html_markdown``, ``sheets``):
text decoding, the limits that bound a hostile file, and pages of blocks with their offsets."""

from __future__ import annotations

import codecs
import re
import textwrap
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import BlockKind, Figure, FigureCounts, PageText, SheetCells, TextBlock
from rag_ingest.parsing.figures import figure_text

#: Validate reads this much of an object to tell text formats apart (a zip is read whole).
SNIFF_BYTES = 64 * 1024
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
)


#: UTF-16 without a byte order mark: the share of code units with a NUL high byte (Latin text).
_UTF16_NUL_SHARE = 0.6


def decode_text(data: bytes, *, partial: bool = False, declared: str | None = None) -> str:
    """The text of ``data``: by its byte order mark, else UTF-16 by its NUL bytes' pattern when it
    has NUL bytes, else the ``declared`` charset (HTML's meta), else UTF-8, else what
    charset-normalizer finds. ``partial``: ``data`` is the start of a
    longer file (a character cut at its end is not an error).

    Raises ``PermanentError`` UNSUPPORTED_TYPE for binary data (NUL bytes outside UTF-16/32) and
    UNKNOWN_ENCODING when no encoding reads it."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _decode(data, encoding, partial)
    if b"\x00" in data:
        binary = PermanentError(ErrorCode.UNSUPPORTED_TYPE, "the file holds binary data (NUL bytes): not a text format")
        wide = _utf16_without_bom(data)
        if wide is None:
            raise binary
        text = _decode(data, wide, partial)
        if _control_share(text) > 0.01:
            raise binary
        return text
    if declared:
        try:
            return _decode(data, declared, partial)
        except (LookupError, PermanentError):
            pass  # a wrong declaration: detect instead
    try:
        return _decode(data, "utf-8", partial)
    except PermanentError:
        pass
    from charset_normalizer import from_bytes

    matches = from_bytes(data[: 4 * SNIFF_BYTES])
    best = matches.best()
    if best is None or best.encoding is None:
        raise PermanentError(ErrorCode.UNKNOWN_ENCODING, "the text decodes in no recognised character encoding")
    encoding = best.encoding
    # Single-byte code pages often tie (cp1250, cp1252, cp1257 read the same bytes equally well):
    # among the tied, Windows-1252, the commonest legacy encoding of Western text, wins.
    tied = {match.encoding for match in matches if (match.chaos, match.coherence) == (best.chaos, best.coherence)}
    if "cp1252" in tied:
        encoding = "cp1252"
    text = _decode(data, encoding, partial)
    if _control_share(text) > 0.01:
        raise PermanentError(ErrorCode.UNKNOWN_ENCODING, f"the text read as {encoding} is mostly control characters")
    return text


def _utf16_without_bom(data: bytes) -> str | None:
    """The UTF-16 byte order of ``data`` when it looks like UTF-16 text written without a byte
    order mark (some Windows tools' "Unicode"): a NUL in most code units' high byte and none in
    their low byte, as text of Latin letters gives; else None (binary data)."""
    sample = data[: 2 * 4096]
    pairs = len(sample) // 2
    if pairs < 4:
        return None
    even_nuls = sample[0 : 2 * pairs : 2].count(0)
    odd_nuls = sample[1 : 2 * pairs : 2].count(0)
    if odd_nuls >= _UTF16_NUL_SHARE * pairs and even_nuls == 0:
        return "utf-16-le"
    if even_nuls >= _UTF16_NUL_SHARE * pairs and odd_nuls == 0:
        return "utf-16-be"
    return None


def _decode(data: bytes, encoding: str, partial: bool) -> str:
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    try:
        return decoder.decode(data, final=not partial)
    except UnicodeDecodeError as exc:
        raise PermanentError(ErrorCode.UNKNOWN_ENCODING, f"the text is not valid {encoding}: {exc.reason}") from None


def _control_share(text: str) -> float:
    sample = text[:SNIFF_BYTES]
    if not sample:
        return 0.0
    controls = sum(1 for character in sample if unicodedata.category(character) == "Cc" and character not in "\t\r\n\f")
    return controls / len(sample)


# -- blocks -------------------------------------------------------------------------------------
_INVISIBLE = re.compile(
    "[\u00ad\u200b\u2060\ufeff" + "".join(chr(c) for c in range(0x20) if chr(c) not in "\t\n") + "]"
)
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n\s*\n")
_SLUG_DROP = re.compile(r"[^\w\- ]")
#: A table's caption line: "Table 3: ...", "Table 2.1. ...", "Tab. IV - ...".
TABLE_CAPTION = re.compile(r"(?:Table|Tab\.)\s*[A-Z]?[\dIVXL]+(?:[.\-]\d+)*\s*(?:[:.\u2013\u2014-]|$)", re.IGNORECASE)
#: A figure's caption line: "Figure 3: ...", "Fig. 2.1 - ..." ("Figure 3 shows ..." is a sentence).
FIGURE_CAPTION = re.compile(
    r"\s*(?:Figure|Fig\.)\s*[A-Z]?[\dIVXL]+(?:[.\-]\d+)*\s*(?:[:.\u2013\u2014-]|$)", re.IGNORECASE
)


def clean_block_text(text: str, *, preformatted: bool = False) -> str:
    """One block's text as indexed: invisible characters dropped, horizontal whitespace one
    space, lines stripped, no blank line inside (a blank line would end the chunker's paragraph).
    ``preformatted`` (a code block): lines keep their indentation, less what all of them share
    (tabs become spaces, 8 columns, as a terminal shows them); spaces inside a line are one."""
    text = unicodedata.normalize("NFC", _INVISIBLE.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    if preformatted:
        lines = [line.expandtabs().rstrip() for line in text.split("\n")]
        dedented = textwrap.dedent("\n".join(line for line in lines if line)).strip("\n").split("\n")
        # Indentation is meaning (Python's blocks); spaces that align columns inside a line are not,
        # and cost tokens: one space each.
        return "\n".join(
            line[: len(line) - len(line.lstrip(" "))] + _HORIZONTAL_SPACE.sub(" ", line.lstrip(" "))
            for line in dedented
        )
    text = _HORIZONTAL_SPACE.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n", text).strip()


def slug(title: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces to hyphens."""
    return _SLUG_DROP.sub("", title.strip().lower()).replace(" ", "-")[:80] or "section"


def table_text(rows: Iterable[Iterable[str]]) -> str:
    """A table as lines of cells (`` | `` between them), its first row the header; empty rows dropped."""
    lines = []
    for row in rows:
        cells = [" ".join(clean_block_text(cell).split()) for cell in row]
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


@dataclass
class FoundFigure:
    """A figure a reader met, before the decoration filter and OCR (``parsing.found_figures``):
    the figure as the file describes it, its image's bytes when the file holds them (None: an
    external URL, a chart), and whether it is indexed (``kept``) once the document is read."""

    figure: Figure
    page_number: int
    image: bytes | None = None
    kept: bool = True
    #: Decoration by the file's own say (HTML's ``alt=""`` or ``role="presentation"``): never indexed.
    marked: bool = False


@dataclass
class _Entry:
    kind: BlockKind
    text: str
    level: int = 0
    anchor: str | None = None
    found: FoundFigure | None = None
    #: A heading that stands only when a block after it on the page has text (a slide's "Slide n").
    needs_body: bool = False
    cells: SheetCells | None = None  # a spreadsheet's block: the cells its lines come from


@dataclass
class PageBuilder:
    """Collects one page's blocks; :meth:`page` joins them with blank lines (the chunker's paragraph
    boundary) and records each block's offsets. Anchors are unique across the document (``used``).
    A figure's text is known only once the document is read (decoration, OCR): :meth:`page` is
    called after ``parsing.found_figures`` has decided."""

    page_number: int
    used_anchors: set[str]
    entries: list[_Entry] = field(default_factory=list)
    figures: list[FoundFigure] = field(default_factory=list)

    def add(
        self,
        kind: BlockKind,
        text: str,
        level: int = 0,
        anchor: str | None = None,
        *,
        preformatted: bool = False,
        needs_body: bool = False,
        cells: SheetCells | None = None,
    ) -> None:
        """A block (``preformatted``: a code block, its lines' indentation kept; ``needs_body``: a
        heading dropped when nothing after it on the page has text; ``cells``: a spreadsheet's)."""
        cleaned = clean_block_text(text, preformatted=preformatted)
        if not cleaned:
            return
        if kind is BlockKind.HEADING:
            cleaned = " ".join(cleaned.split())  # a heading is one line
            anchor = self._unique(anchor or slug(cleaned))
        self.entries.append(_Entry(kind, cleaned, level, anchor, needs_body=needs_body, cells=cells))

    def add_table(self, rows: Iterable[Iterable[str]], caption: str | None = None) -> None:
        """A table (:func:`table_text`); a caption is its own paragraph before it."""
        if caption:
            self.add(BlockKind.PARAGRAPH, caption)
        self.add(BlockKind.TABLE, table_text(rows))

    def add_figure(self, figure: Figure, image: bytes | None = None, *, marked: bool = False) -> FoundFigure:
        """A figure where it stands in the reading order: a FIGURE block of
        :func:`~rag_ingest.parsing.figures.figure_text` once decided, none when skipped or silent."""
        found = FoundFigure(figure=figure, page_number=self.page_number, image=image, kept=not marked, marked=marked)
        self.entries.append(_Entry(BlockKind.FIGURE, "", found=found))
        self.figures.append(found)
        return found

    def page(self) -> PageText:
        texts = [self._text(entry) for entry in self.entries]
        parts: list[str] = []
        blocks: list[TextBlock] = []
        offset = 0
        for index, (entry, text) in enumerate(zip(self.entries, texts, strict=True)):
            if not text or (entry.needs_body and not any(texts[index + 1 :])):
                continue
            if parts:
                offset += 2  # the "\n\n" before this block
            figure = entry.found.figure if entry.found is not None else None
            blocks.append(
                TextBlock(
                    start=offset,
                    end=offset + len(text),
                    kind=entry.kind,
                    level=entry.level,
                    anchor=entry.anchor,
                    figure=figure,
                    cells=entry.cells,
                )
            )
            parts.append(text)
            offset += len(text)
        return PageText(page_number=self.page_number, text="\n\n".join(parts), blocks=blocks)

    @staticmethod
    def _text(entry: _Entry) -> str:
        if entry.found is None:
            return entry.text
        return clean_block_text(figure_text(entry.found.figure)) if entry.found.kept else ""

    def _unique(self, anchor: str) -> str:
        candidate, number = anchor, 1
        while candidate in self.used_anchors:
            candidate = f"{anchor}-{number}"
            number += 1
        self.used_anchors.add(candidate)
        return candidate


@dataclass(frozen=True)
class StructuredDocument:
    """A structured format read into pages of blocks, and its title when the file states one.

    The figure counts (``parsing.found_figures``): figures indexed, images skipped as decoration
    (tiny, the same image repeated, or marked so: HTML's ``alt=""``, ``role="presentation"``),
    images whose text was read, and images that were not (over the caps, or not PNG/JPEG)."""

    pages: list[PageText]
    title: str | None = None
    figures: int = 0
    figures_skipped_tiny: int = 0
    figures_skipped_repeated: int = 0
    figures_skipped_marked: int = 0
    figures_ocr: int = 0
    figures_not_ocr: int = 0
    figures_without_text: int = 0

    @property
    def figure_counts(self) -> FigureCounts:
        """The counts as the document's record keeps them (``ParsedRange.figures``)."""
        return FigureCounts(
            indexed=self.figures,
            skipped_tiny=self.figures_skipped_tiny,
            skipped_repeated=self.figures_skipped_repeated,
            skipped_marked=self.figures_skipped_marked,
            over_read_cap=self.figures_not_ocr,
            without_text=self.figures_without_text,
        )


@dataclass(frozen=True)
class FormatLimits:
    """Bounds that make a hostile file cost seconds (docs/formats.md, "Hostile inputs")."""

    max_pages: int  # PPTX slides (the document page limit)
    max_zip_entries: int = 50_000
    max_unzipped_bytes: int = 512 * 1024 * 1024
    max_xml_part_bytes: int = 128 * 1024 * 1024
    max_markdown_line_chars: int = 100_000
    max_text_chars: int = 50_000_000
    #: Images inside a document read by OCR, at most (the rest are their caption and alt text).
    max_figures_ocr: int = 50
    #: An image larger than this, in bytes or pixels (or wider or taller than Textract's 10,000
    #: pixels), is not OCR'd: docs/formats.md, "Figures".
    max_figure_image_bytes: int = 10 * 1024 * 1024
    max_figure_image_pixels: int = 25_000_000
    # Spreadsheets (rag_ingest.parsing.sheets): rows and cells of a workbook or CSV, and one cell's
    # characters (Excel's own limit); hidden sheets are read only when asked (parsing.indexHiddenSheets).
    max_sheet_rows: int = 100_000
    max_sheet_cells: int = 1_000_000
    max_cell_chars: int = 32_767
    read_hidden_sheets: bool = False
