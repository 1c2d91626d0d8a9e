"""What a reader makes of a document: pages of text blocks, word boxes, and the chunks cut from them.

Pure pydantic models; imports only ``rag_ingest.core``. Stage artifacts in S3 are these models as JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from enum import StrEnum

from pydantic import BaseModel, Field


class TextSource(StrEnum):
    """How a page's text was obtained."""

    TEXT_LAYER = "text_layer"  # extracted from the PDF's own text operators
    OCR = "ocr"  # recognised on an image of the page (it has no usable text layer)


class DocumentFormat(StrEnum):
    """What an upload is, decided by its bytes (rag_ingest.parsing.formats), never by its name."""

    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    HTML = "html"
    MARKDOWN = "markdown"
    TEXT = "text"
    # Images as documents, read by OCR: one page per image (per TIFF page).
    PNG = "png"
    JPEG = "jpeg"
    TIFF = "tiff"
    XLSX = "xlsx"
    CSV = "csv"  # comma-, semicolon-, tab- or pipe-separated values (a TSV is a CSV with tabs)

    @property
    def content_type(self) -> str:
        """The media type of the format (the chunks' ``content_type``, the download's header)."""
        return FORMAT_CONTENT_TYPES[self]


FORMAT_CONTENT_TYPES: dict[DocumentFormat, str] = {
    DocumentFormat.PDF: "application/pdf",
    DocumentFormat.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    DocumentFormat.PPTX: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    DocumentFormat.HTML: "text/html",
    DocumentFormat.MARKDOWN: "text/markdown",
    DocumentFormat.TEXT: "text/plain",
    DocumentFormat.PNG: "image/png",
    DocumentFormat.JPEG: "image/jpeg",
    DocumentFormat.TIFF: "image/tiff",
    DocumentFormat.XLSX: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    DocumentFormat.CSV: "text/csv",
}
#: Formats that are an image of pages: read by OCR, cited by page and rectangle as a scanned PDF is.
IMAGE_FORMATS = frozenset({DocumentFormat.PNG, DocumentFormat.JPEG, DocumentFormat.TIFF})


class BlockKind(StrEnum):
    HEADING = "heading"
    PARAGRAPH = "paragraph"  # a paragraph, a list item, a code block, a slide's text frame
    TABLE = "table"
    FIGURE = "figure"  # an image, chart or diagram: its passage is its caption, alt text, OCR, description


class PassageBox(BaseModel):
    """One rectangle of a passage on a page, as fractions of the displayed page (origin top-left):
    Textract's convention, so a viewer multiplies by the rendered page's width and height."""

    page: int = Field(ge=1)
    x0: float = Field(ge=0.0, le=1.0)
    y0: float = Field(ge=0.0, le=1.0)
    x1: float = Field(ge=0.0, le=1.0)
    y1: float = Field(ge=0.0, le=1.0)


class FigureSource(StrEnum):
    """Where a figure passage's text came from: offline only the first three; ``vision`` is a
    Bedrock vision model's description (AWS, when switched on)."""

    CAPTION = "caption"
    ALT_TEXT = "alt_text"
    OCR = "ocr"
    VISION = "vision"


class Figure(BaseModel):
    """A figure a reader found (rag_ingest.parsing.figures): what describes it, and where it stands.

    ``box``: on a PDF page or an image document, the figure's rectangle (a citation's highlight);
    None in formats without geometry (a slide or a section cites it). ``image_sha256``: the image's
    bytes, which tell a logo repeated on many pages from a figure."""

    caption: str = ""
    alt_text: str = ""
    ocr_text: str = ""
    description: str = ""
    box: PassageBox | None = None
    width_px: int = Field(default=0, ge=0)
    height_px: int = Field(default=0, ge=0)
    image_sha256: str | None = None

    @property
    def sources(self) -> list[FigureSource]:
        """The kinds of text this figure's passage holds, in passage order."""
        present = (
            (FigureSource.CAPTION, self.caption),
            (FigureSource.ALT_TEXT, self.alt_text),
            (FigureSource.OCR, self.ocr_text),
            (FigureSource.VISION, self.description),
        )
        return [source for source, text in present if text.strip()]


class FigureCounts(BaseModel):
    """A document's figures: those indexed, those skipped as decoration (rag_ingest.parsing.figures),
    and those indexed by their caption alone because the document's reading cap was reached (or,
    in a DOCX, PPTX or HTML file, because the engine does not take the image's format)."""

    indexed: int = Field(default=0, ge=0)
    skipped_tiny: int = Field(default=0, ge=0)
    skipped_repeated: int = Field(default=0, ge=0)
    #: Decoration by the file's own say (HTML's ``alt=""`` or ``role="presentation"``).
    skipped_marked: int = Field(default=0, ge=0)
    over_read_cap: int = Field(default=0, ge=0)
    #: Found and not decoration, but with no text to index (no caption, alt text or reading).
    without_text: int = Field(default=0, ge=0)

    def __add__(self, other: FigureCounts) -> FigureCounts:
        return FigureCounts(**{name: getattr(self, name) + getattr(other, name) for name in FigureCounts.model_fields})


class SheetCells(BaseModel):
    """Where a spreadsheet block's lines stand in its sheet (rag_ingest.parsing.sheets): a citation's
    cell range. ``rows``: the sheet row of each line of the block's text, 0 for a line the sheet
    does not hold (a table's made-up header of column letters)."""

    sheet: str | None = None  # None for a CSV, which has no sheet names
    first_column: int = Field(ge=1)
    last_column: int = Field(ge=1)
    rows: list[int]


class TextBlock(BaseModel):
    """A block of a structured document (DOCX, PPTX, HTML, Markdown, text): ``text[start:end]`` of
    its page. Headings carry their level (1 = outermost) and the anchor the rendered view gives them."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    kind: BlockKind
    level: int = Field(default=0, ge=0)
    anchor: str | None = None
    #: A PDF table's column edges (each column's left, then the last's right) as fractions of the page's
    #: width: what tells a table continued on the next page (rag_ingest.parsing.pdf.tables).
    columns: list[float] | None = None
    #: A table that continues the previous page's last table (its rows read under that table's
    #: header; a repeated header row was dropped from the text).
    continues: bool = False
    #: A FIGURE block's figure: the block's text is ``rag_ingest.parsing.figures.figure_text`` of it.
    figure: Figure | None = None
    #: A spreadsheet's block (XLSX, CSV): the cells its lines come from.
    cells: SheetCells | None = None


class PageLayout(BaseModel):
    """Where a PDF page's words stand, as its source read them (pdfium's text layer, or the OCR
    engine's words), for a passage's rectangles (``rag_ingest.parsing.pdf.layout``).

    ``words``: the words in the source's order, joined by single spaces (no word holds a space).
    ``boxes``: per word a rectangle on the page *as displayed* (its ``/Rotate`` applied), in
    fractions of the page's width and height from the top-left corner: four little-endian uint16
    (x0, y0, x1, y1; 65535 = 1), base64. Packed because the Chunk stage holds every page of a
    2,000-page document at once: about 14 bytes a word this way, against ~150 as Python floats.
    """

    words: str
    boxes: str


class PageText(BaseModel):
    """Text of one PDF page (or PPTX slide; the one "page" of a DOCX, HTML, Markdown or text
    file); ``page_number`` is 1-based as a reader counts.

    ``ocr_confidence`` is the OCR engine's mean confidence over the page's lines (0..1), only
    for ``source == ocr``. ``blocks``: the structure a structured format states (headings,
    paragraphs, tables), in order; empty for PDF pages, whose headings the chunker detects.
    """

    page_number: int = Field(ge=1)
    text: str
    source: TextSource = TextSource.TEXT_LAYER
    ocr_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    blocks: list[TextBlock] = Field(default_factory=list)
    #: PDF pages: where each word stands (None: a structured format, or no geometry was read).
    layout: PageLayout | None = None


def section_paragraphs(pages: Iterable[PageText]) -> Iterator[tuple[PageText, TextBlock, str | None, int | None]]:
    """Each block of ``pages`` with its page, the anchor of the section it is in and, for a
    non-heading block, its 1-based number in that section (None for a heading). The one rule a
    passage's ``anchor`` and ``paragraph_index`` (the chunker) and the rendered view's block ids
    (the API) both follow."""
    section: str | None = None
    number = 0
    for page in pages:
        for block in page.blocks:
            if block.kind is BlockKind.HEADING:
                section, number = block.anchor, 0
                yield page, block, section, None
            else:
                number += 1
                yield page, block, section, number


class ParsedDocument(BaseModel):
    """The Parse stage's artifact (stored in S3; Step Functions only carries its key and counts).

    ``failure_reasons`` says why a page in ``failed_pages`` failed, where a reason is known
    (e.g. over the OCR page cap).
    """

    page_count: int = Field(ge=0)
    pages: list[PageText]
    failed_pages: list[int] = Field(default_factory=list)
    # sha256 of the uploaded bytes (hex): the same bytes uploaded again are the same document's copy.
    content_sha256: str | None = None
    #: The PDF's metadata title as written (often empty or a placeholder; see retrieval_text).
    metadata_title: str | None = None
    failure_reasons: dict[int, str] = Field(default_factory=dict)
    figures: FigureCounts = Field(default_factory=FigureCounts)

    @property
    def ocr_pages(self) -> int:
        """Pages whose text came from OCR."""
        return sum(1 for page in self.pages if page.source is TextSource.OCR)


class ParsedRange(BaseModel):
    """One Parse Map task's artifact: the raw (not yet cleaned) text of a page range and what the
    join needs for the document-level verdicts (``rag_ingest.parsing.pdf.extract.join_page_ranges``)."""

    # The format the range was read as: the join cleans PDF text only (structured formats' text
    # is clean as extracted, and their block offsets must stay valid).
    document_format: DocumentFormat = DocumentFormat.PDF
    page_count: int = Field(ge=1)  # the document's
    first_page: int = Field(ge=1)
    last_page: int = Field(ge=1)
    pages: list[PageText]
    failed_pages: list[int] = Field(default_factory=list)
    failure_reasons: dict[int, str] = Field(default_factory=dict)
    # Pages whose extraction failed (over budget or broken), before OCR: all of them failing is CORRUPT_PDF.
    extraction_failures: int = Field(default=0, ge=0)
    over_budget: list[str] = Field(default_factory=list)
    ocr_requested: int = Field(default=0, ge=0)  # pages without a text layer that draw an image
    ocr_on: bool = False
    # Some page draws something (text, image, path): no text anywhere is then NO_TEXT_LAYER, not EMPTY_DOCUMENT.
    draws_marks: bool = False
    metadata_title: str | None = None  # read by the range holding page 1
    # sha256 of the uploaded bytes (hex), on the first range: Parse's first task reads them whole.
    content_sha256: str | None = None
    #: A PDF range's figures by page number (the join appends them to the cleaned pages as FIGURE
    #: blocks, after skipping images repeated across ranges), and the decoration it skipped.
    page_figures: dict[int, list[Figure]] = Field(default_factory=dict)
    figures: FigureCounts = Field(default_factory=FigureCounts)

    @property
    def ocr_pages(self) -> int:
        return sum(1 for page in self.pages if page.source is TextSource.OCR)

    @property
    def pages_parsed(self) -> int:
        return self.last_page - self.first_page + 1


class Chunk(BaseModel):
    """A passage to embed and index, with its provenance in the document."""

    chunk_index: int = Field(ge=0)
    text: str
    page_start: int = Field(ge=1)
    page_end: int = Field(ge=1)
    heading_path: list[str] = Field(default_factory=list)
    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    token_count: int = Field(ge=0)
    #: The document's title (retrieval_text.document_title): part of the text it is found by.
    document_title: str = ""
    #: Structured formats: the anchor of the section the chunk starts in (the rendered view's id)
    #: and the 1-based number of its first paragraph inside that section.
    anchor: str | None = None
    paragraph_index: int | None = Field(default=None, ge=1)
    #: The format of the document (a PDF's page, a PPTX's slide, a section of the others).
    document_format: DocumentFormat = DocumentFormat.PDF
    #: PDF: where the passage stands, one rectangle per line it covers on each of its pages (a
    #: figure's passage: the figure's rectangle).
    boxes: list[PassageBox] = Field(default_factory=list)
    #: A figure's passage (a FIGURE block): what its text holds (caption, alt text, OCR, a model's
    #: description), so an offline figure reads as caption, alt text and OCR only. None: not a figure.
    figure_sources: list[FigureSource] | None = None
    #: XLSX, CSV: the cells the passage's rows come from, as a spreadsheet names them (``Budget!A12:F40``).
    cell_range: str | None = None
