"""A PDF's pages read into text: the cheap checks, each page's text, and the document's verdicts.

:func:`validate_pdf_header` (size, ``%PDF-``) runs before any parsing, then encryption and the page
count. :func:`parse_page_range` reads a range of pages in three phases over one
:class:`PageOutcome` per page (text layer in pypdf's plain mode, OCR of pages without one, words and
tables); a page that cannot be read within its budget is a failed page, never a failed document.
:func:`join_page_ranges` joins the ranges, cleans them as one document (``cleanup``) and decides
CORRUPT_PDF, PDF_TOO_COMPLEX, EMPTY_DOCUMENT or NO_TEXT_LAYER. Raises ``PermanentError`` for the
document's faults; the OCR engine's ``TransientError`` propagates. Rules and rationale: docs/pdf.md.
"""

from __future__ import annotations

import io
import re
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from pypdf import PageObject, PasswordType, PdfReader
from pypdf.errors import DependencyError, PdfReadError
from pypdf.generic import ArrayObject, StreamObject

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import (
    FigureCounts,
    PageLayout,
    PageText,
    ParsedDocument,
    ParsedRange,
    TextBlock,
    TextSource,
)
from rag_ingest.parsing.ocr.engine import (
    MIN_TEXT_LAYER_CHARS,
    OcrPageError,
    OcrResult,
    OcrUnavailableError,
    PageOcr,
    render_page_png,
)
from rag_ingest.parsing.pdf.budget import DEFAULT_BUDGET, BudgetExceeded, ParseBudget, within_budget
from rag_ingest.parsing.pdf.cleanup import clean_page_texts, join_continued_tables
from rag_ingest.parsing.pdf.figures import PdfFigures, attach_figures, find_figures
from rag_ingest.parsing.pdf.fonts import fonts_read_once
from rag_ingest.parsing.pdf.layout import pack_layout, text_layer_layouts
from rag_ingest.parsing.pdf.tables import TableRows, find_page_tables, place_tables

PDF_MAGIC = b"%PDF-"
#: Acrobat accepts the header anywhere in the first 1024 bytes (some producers prepend junk).
PDF_MAGIC_WINDOW_BYTES = 1024

# Content-stream operators that put marks on a page: text showing, images (XObjects, inline),
# shadings, and path painting. A page without any of them is blank to a reader.
_MARKING_OPERATORS = frozenset(
    {b"Tj", b"TJ", b"'", b'"', b"Do", b"BI", b"INLINE IMAGE", b"sh"}
    | {b"f", b"F", b"f*", b"S", b"s", b"B", b"B*", b"b", b"b*"}
)
# Operators that draw an XObject (an image, or a form that may hold one) or an inline image.
_IMAGE_OPERATORS = frozenset({b"Do", b"BI", b"INLINE IMAGE"})
_ALPHANUMERIC = re.compile(r"[^\W_]")


def validate_pdf_header(head: bytes, size: int, *, max_bytes: int) -> None:
    """Check the object's size and its first bytes (at least the first 1024 when available).

    Raises ``PermanentError`` EMPTY_FILE, FILE_TOO_LARGE or UNSUPPORTED_TYPE. The file name is
    not looked at: only the ``%PDF-`` signature counts.
    """
    if size == 0:
        raise PermanentError(ErrorCode.EMPTY_FILE, "the file is empty (0 bytes)")
    if size > max_bytes:
        raise PermanentError(ErrorCode.FILE_TOO_LARGE, f"{size} bytes exceeds the limit of {max_bytes} bytes")
    if PDF_MAGIC not in head[:PDF_MAGIC_WINDOW_BYTES]:
        raise PermanentError(
            ErrorCode.UNSUPPORTED_TYPE,
            f"no %PDF- signature in the first {PDF_MAGIC_WINDOW_BYTES} bytes: not a PDF file",
        )


def parse_pdf(
    data: bytes,
    *,
    max_bytes: int,
    max_pages: int,
    clean: bool = True,
    budget: ParseBudget = DEFAULT_BUDGET,
    ocr: PageOcr | None = None,
    tables: bool = True,
    figures: PdfFigures | None = None,
) -> ParsedDocument:
    """Extract the text of every page of the PDF in ``data``, cleaned by :func:`clean_pages`
    (``clean=False`` keeps pypdf's raw text: for baselines and benchmarks). Pages that need OCR
    are read by ``ocr`` (see the module docstring). ``tables``: tables become TABLE blocks
    (:mod:`rag_ingest.parsing.pdf.tables`); off, their cells stay loose lines (the ablation's switch).
    ``figures``: the images on pages with a text layer become FIGURE blocks, read as it says
    (:mod:`rag_ingest.parsing.pdf.figures`); None: figures are not looked for.

    Raises ``PermanentError`` with FILE_TOO_LARGE, UNSUPPORTED_TYPE, CORRUPT_PDF, ENCRYPTED_PDF,
    TOO_MANY_PAGES, PDF_TOO_COMPLEX, EMPTY_DOCUMENT or NO_TEXT_LAYER. A page whose extraction
    fails or goes over ``budget`` is listed in ``failed_pages`` (1-based) and kept with empty text;
    if every page fails, the PDF is corrupt (or too complex, when a budget failed a page). The
    OCR engine's ``TransientError`` (throttling) propagates: the stage is retried.

    The whole document is one page range: :func:`parse_page_range` then :func:`join_page_ranges`,
    as the workflow's Parse Map and Chunk do range by range.
    """
    whole = parse_page_range(
        data,
        first_page=1,
        last_page=None,
        max_bytes=max_bytes,
        max_pages=max_pages,
        budget=budget,
        ocr=ocr,
        tables=tables,
        figures=figures,
    )
    return join_page_ranges([whole], clean=clean)


def count_pdf_pages(data: bytes, *, max_bytes: int, max_pages: int) -> int:
    """The PDF's page count, read from its page tree only (no page is parsed).

    Raises ``PermanentError`` as :func:`validate_pdf_header` does, CORRUPT_PDF or ENCRYPTED_PDF
    when the PDF cannot be opened, and TOO_MANY_PAGES over ``max_pages``.
    """
    return _open_checked(data, max_bytes=max_bytes, max_pages=max_pages)[1]


def _open_checked(data: bytes, *, max_bytes: int, max_pages: int) -> tuple[PdfReader, int]:
    """The PDF opened and its page count, after the cheap checks (:func:`count_pdf_pages`)."""
    validate_pdf_header(data[:PDF_MAGIC_WINDOW_BYTES], len(data), max_bytes=max_bytes)
    reader = _open_reader(data)
    page_count = _count_pages(reader)
    if page_count > max_pages:
        raise PermanentError(ErrorCode.TOO_MANY_PAGES, f"{page_count} pages exceeds the limit of {max_pages} pages")
    return reader, page_count


def parse_page_range(
    data: bytes,
    *,
    first_page: int,
    last_page: int | None,
    max_bytes: int,
    max_pages: int,
    budget: ParseBudget = DEFAULT_BUDGET,
    ocr: PageOcr | None = None,
    ocr_page_cap: int | None = None,
    tables: bool = True,
    figures: PdfFigures | None = None,
    figure_read_cap: int | None = None,
) -> ParsedRange:
    """The raw (not yet cleaned) text of pages ``first_page``..``last_page`` (1-based, inclusive;
    ``None``: to the last page) of the PDF in ``data``.

    Only the range's pages are parsed (pypdf resolves objects lazily), so the memory is the range's,
    not the document's. The page and document budgets apply to the range (each range is one Parse
    task with its own timeout). ``ocr_page_cap`` is how many of the range's pages may be OCR'd
    (its share of ``ocr.max_pages``, the document's cap; default: all of it). Document-level
    verdicts (every page failed, no text at all) need every range: :func:`join_page_ranges`.
    ``tables``: find tables and make them TABLE blocks of their pages (see :func:`parse_pdf`).
    ``figures``: find the figures of the range's pages with a text layer, reading at most
    ``figure_read_cap`` of them (the range's share of ``figures.max_read``; default: all of it).
    """
    reader, page_count = _open_checked(data, max_bytes=max_bytes, max_pages=max_pages)
    if page_count == 0:
        raise PermanentError(ErrorCode.EMPTY_DOCUMENT, "the PDF has no pages")
    last = page_count if last_page is None else min(last_page, page_count)
    if not 1 <= first_page <= last:
        raise ValueError(f"page range {first_page}-{last_page} is outside the document's {page_count} pages")

    deadline = time.monotonic() + budget.document_seconds
    pages = _read_text_layers(reader, range(first_page, last + 1), page_count, budget, deadline)
    needs_ocr = [
        page
        for page in pages
        if not page.unreadable
        and len(_ALPHANUMERIC.findall(page.text)) < MIN_TEXT_LAYER_CHARS
        and _draws_image(reader.pages[page.number - 1], budget)
    ]
    cap = ocr.max_pages if ocr is not None and ocr_page_cap is None else (ocr_page_cap or 0)
    _read_by_ocr(needs_ocr, data, ocr, cap=cap, span=f"{first_page}-{last}", tables=tables)
    _place_words_and_tables(pages, data, budget, deadline, tables=tables)
    found = None
    if figures is not None:
        found = find_figures(
            data,
            {page.number: page.layout for page in pages if page.from_text_layer},
            page_count=page_count,
            reading=figures,
            cap=figures.max_read if figure_read_cap is None else figure_read_cap,
            deadline=deadline,
        )
    # Whether anything is drawn decides NO_TEXT_LAYER against EMPTY_DOCUMENT at the join. A page
    # with text draws text; only a range without any text pays for reading its content streams.
    draws_marks = any(page.text.strip() for page in pages) or _any_page_has_marks(
        (reader.pages[number - 1] for number in range(first_page, last + 1)), budget
    )
    failure_reasons = {page.number: page.failure_reason for page in pages if page.failure_reason is not None}
    return ParsedRange(
        page_count=page_count,
        first_page=first_page,
        last_page=last,
        pages=[page.page_text() for page in pages],
        failed_pages=[page.number for page in pages if page.unreadable or page.failure_reason is not None],
        failure_reasons=failure_reasons,
        extraction_failures=sum(1 for page in pages if page.unreadable),
        over_budget=[page.over_budget for page in pages if page.over_budget is not None],
        ocr_requested=len(needs_ocr),
        ocr_on=ocr is not None,
        draws_marks=draws_marks,
        metadata_title=_metadata_title(reader) if first_page == 1 else None,
        page_figures=found.by_page if found is not None else {},
        figures=found.counts if found is not None else FigureCounts(),
    )


@dataclass
class PageOutcome:
    """One page of a range as Parse reads it; each phase (text layer, OCR, words and tables) adds
    what it learns, and the page's :class:`PageText` is made from it at the end."""

    number: int
    text: str = ""
    #: Its text layer could not be read (a pypdf error, a broken stream, over its budget).
    unreadable: bool = False
    #: Why it went over its budget: the detail of a PDF_TOO_COMPLEX document.
    over_budget: str | None = None
    #: Why a page that needed OCR has no text (OCR off, over the cap, the engine failed).
    failure_reason: str | None = None
    source: TextSource = TextSource.TEXT_LAYER
    ocr_confidence: float | None = None
    layout: PageLayout | None = None
    #: Tables the OCR engine found (Textract's TABLES), placed into the text in the last phase.
    ocr_tables: list[TableRows] = field(default_factory=list)
    blocks: list[TextBlock] = field(default_factory=list)

    @property
    def from_text_layer(self) -> bool:
        """Text read from the PDF's own text layer: its words and tables are found in the PDF."""
        return self.source is TextSource.TEXT_LAYER and not self.unreadable and bool(self.text.strip())

    def read_by_ocr(self, result: OcrResult, *, tables: bool) -> None:
        self.text = result.text
        if tables and result.tables:
            self.ocr_tables = list(result.tables)
        self.source = TextSource.OCR
        self.ocr_confidence = result.confidence
        self.layout = pack_layout(result.words)

    def page_text(self) -> PageText:
        return PageText(
            page_number=self.number,
            text=self.text,
            source=self.source,
            ocr_confidence=self.ocr_confidence,
            layout=self.layout,
            blocks=self.blocks,
        )


def _read_text_layers(
    reader: PdfReader, numbers: range, page_count: int, budget: ParseBudget, deadline: float
) -> list[PageOutcome]:
    """Phase 1: each page's text layer, within the page's budget and the range's."""
    pages: list[PageOutcome] = []
    text_chars = 0
    # pypdf would read each shared font again on every page (fonts.py).
    with fonts_read_once():
        for number in numbers:
            if time.monotonic() > deadline:
                raise PermanentError(
                    ErrorCode.PDF_TOO_COMPLEX,
                    f"text extraction took more than {budget.document_seconds:g} s before page {number} "
                    f"of {page_count}",
                )
            page = _read_text_layer(reader, number, budget)
            pages.append(page)
            text_chars += len(page.text)
            if text_chars > budget.document_text_chars:
                raise PermanentError(
                    ErrorCode.PDF_TOO_COMPLEX,
                    f"more than {budget.document_text_chars} characters of text by page {number} of {page_count}",
                )
    return pages


def _read_text_layer(reader: PdfReader, number: int, budget: ParseBudget) -> PageOutcome:
    """One page's text layer; a page that cannot be read is a failed page, not a failed document."""
    try:
        page = reader.pages[number - 1]
        text = within_budget(budget.page_seconds, partial(_extract_page, page, budget))
        if not text.strip() and _content_undecodable(page, budget.page_content_bytes):
            # pypdf logs a broken stream and reads it as empty: a failure all the same.
            logger.warning("page %d: content stream cannot be decoded", number)
            return PageOutcome(number, text, unreadable=True)
    except BudgetExceeded as error:
        logger.warning("page %d: over the page budget: %s", number, error)
        return PageOutcome(number, unreadable=True, over_budget=f"page {number} {error}")
    except Exception as error:  # pypdf raises many kinds on one bad page; keep the others
        logger.warning("page %d: text extraction failed: %r", number, error)
        return PageOutcome(number, unreadable=True)
    return PageOutcome(number, text)


def _read_by_ocr(
    needs_ocr: Sequence[PageOutcome], data: bytes, ocr: PageOcr | None, *, cap: int, span: str, tables: bool
) -> None:
    """Phase 2: the pages without a text layer, read by ``ocr`` up to ``cap`` of them (pages
    ``span`` of the document); the others are failed pages with their reason and no text."""
    unavailable: str | None = None  # the engine said it cannot read any page here: stop rasterising
    for position, page in enumerate(needs_ocr):
        if ocr is None:
            page.failure_reason = "no text layer (OCR is off)"
        elif unavailable is not None:
            page.failure_reason = unavailable
        elif position >= cap:
            page.failure_reason = f"no text layer, over the OCR limit of {ocr.max_pages} pages per document" + (
                f" ({cap} of them for pages {span})" if cap != ocr.max_pages else ""
            )
        else:
            try:
                result = ocr.engine.recognize(render_page_png(data, page.number - 1, ocr.dpi))
            except OcrUnavailableError as error:
                unavailable = page.failure_reason = str(error)
            except OcrPageError as error:
                page.failure_reason = f"OCR failed: {error}"
            else:
                page.read_by_ocr(result, tables=tables)
                continue
        logger.warning("page %d: %s", page.number, page.failure_reason)
        page.text = ""


def _place_words_and_tables(
    pages: Sequence[PageOutcome], data: bytes, budget: ParseBudget, deadline: float, *, tables: bool
) -> None:
    """Phase 3: the text layer's words and their rectangles (the OCR'd pages have their engine's),
    then every page's tables placed into its text as TABLE blocks."""
    text_layer = [page for page in pages if page.from_text_layer]
    layouts = text_layer_layouts(data, [page.number for page in text_layer])
    for page in text_layer:
        page.layout = layouts.get(page.number)
    if not tables:
        return
    texts = {page.number: page.text for page in text_layer}
    placed = find_page_tables(data, texts, partial(within_budget, budget.page_seconds), deadline)
    for page in pages:
        if page.ocr_tables:
            placed[page.number] = place_tables(page.text, page.ocr_tables)
    by_number = {page.number: page for page in pages}
    for number, (text, blocks) in placed.items():
        by_number[number].text, by_number[number].blocks = text, blocks


def join_page_ranges(ranges: Sequence[ParsedRange], *, clean: bool = True) -> ParsedDocument:
    """The document from its parsed page ranges (in any order; together they must cover every
    page once): the pages in order, cleaned as one document by :func:`clean_pages` (running lines
    and hyphenation need every page), and the document-level verdicts of :func:`parse_pdf`.

    Raises ``PermanentError`` PDF_TOO_COMPLEX or CORRUPT_PDF when no page could be extracted,
    NO_TEXT_LAYER or EMPTY_DOCUMENT when no page has text.
    """
    if not ranges:
        raise ValueError("no page ranges to join")
    ordered = sorted(ranges, key=lambda parsed: parsed.first_page)
    page_count = ordered[0].page_count
    pages = [page for parsed in ordered for page in parsed.pages]
    if [page.page_number for page in pages] != list(range(1, page_count + 1)):
        raise ValueError(f"the page ranges do not cover the document's {page_count} pages exactly once")
    failed_pages = sorted(number for parsed in ordered for number in parsed.failed_pages)
    failure_reasons = {number: reason for parsed in ordered for number, reason in parsed.failure_reasons.items()}
    over_budget = [reason for parsed in ordered for reason in parsed.over_budget]
    if clean:
        pages = join_continued_tables(clean_page_texts(pages))

    if sum(parsed.extraction_failures for parsed in ordered) == page_count:
        if over_budget:
            raise PermanentError(
                ErrorCode.PDF_TOO_COMPLEX,
                f"no page could be read within the parser's budget: {'; '.join(over_budget[:3])}"
                + (f" (and {len(over_budget) - 3} more)" if len(over_budget) > 3 else ""),
            )
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"text extraction failed on all {page_count} pages")
    if not any(page.text.strip() for page in pages):
        if any(parsed.draws_marks for parsed in ordered):
            ocr_pages = sum(1 for page in pages if page.source is TextSource.OCR)
            needs_ocr = sum(parsed.ocr_requested for parsed in ordered)
            ocr_on = all(parsed.ocr_on for parsed in ordered)
            how = f"{ocr_pages} read by OCR, {len(failure_reasons)} failed" if ocr_on else "OCR is off"
            raise PermanentError(
                ErrorCode.NO_TEXT_LAYER,
                f"none of the {page_count} pages has extractable text (scanned or drawn; {needs_ocr} need OCR: {how})",
            )
        raise PermanentError(ErrorCode.EMPTY_DOCUMENT, f"all {page_count} pages are blank")
    # Figures after cleaning: their text is no running line, nor a table's continuation.
    page_figures = {number: figures for parsed in ordered for number, figures in parsed.page_figures.items()}
    counts = sum((parsed.figures for parsed in ordered), FigureCounts())
    pages, counts = attach_figures(pages, page_figures, counts, page_count=page_count)
    return ParsedDocument(
        page_count=page_count,
        figures=counts,
        pages=pages,
        failed_pages=failed_pages,
        failure_reasons=failure_reasons,
        metadata_title=ordered[0].metadata_title,
    )


def _draws_image(page: PageObject, budget: ParseBudget) -> bool:
    """True when the page's content stream draws an XObject (image or form) or an inline image."""
    try:
        contents = page.get_contents()
        if contents is None:
            return False
        operations = within_budget(budget.page_seconds, partial(getattr, contents, "operations"))
    except Exception:  # unparsable: it stays a page without text, as before OCR
        return False
    return any(operator in _IMAGE_OPERATORS for _operands, operator in operations)


def _metadata_title(reader: PdfReader) -> str | None:
    """The document information dictionary's /Title, or None when absent or unreadable."""
    try:
        title = reader.metadata.title if reader.metadata is not None else None
    except Exception:  # a broken info dictionary must not fail a readable document
        return None
    return str(title) if title else None


def _extract_page(page: PageObject, budget: ParseBudget) -> str:
    """The page's text, or ``BudgetExceeded`` when its content or its text is too large."""
    contents = page.get_contents()
    size = len(contents.get_data()) if contents is not None else 0
    if size > budget.page_content_bytes:
        raise BudgetExceeded(f"{size} bytes of content stream (budget {budget.page_content_bytes})")
    text = page.extract_text(extraction_mode="plain")
    if len(text) > budget.page_text_chars:
        raise BudgetExceeded(f"{len(text)} characters of text (budget {budget.page_text_chars})")
    return text


def _open_reader(data: bytes) -> PdfReader:
    try:
        # Without a password pypdf already tries the empty one; decrypt("") below makes it explicit.
        reader = PdfReader(io.BytesIO(data), strict=False)
    except PdfReadError as error:  # also PdfStreamError, EmptyFileError
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable PDF: {error}") from error
    except NotImplementedError as error:
        # pypdf cannot open some security handlers (public-key /Adobe.PubSec, unknown /V).
        code = ErrorCode.ENCRYPTED_PDF if b"/Encrypt" in data else ErrorCode.CORRUPT_PDF
        raise PermanentError(code, f"unsupported PDF feature: {error}") from error
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as error:
        # pypdf's lenient parser surfaces some malformed structures as plain Python errors.
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable PDF: {error!r}") from error
    if reader.is_encrypted:
        _decrypt_with_empty_password(reader)
    return reader


def _decrypt_with_empty_password(reader: PdfReader) -> None:
    """Open a PDF that is encrypted with an empty user password (only an owner password set).

    Readers open such files without asking; so do we. Any other password is ENCRYPTED_PDF.
    A missing ``cryptography`` package (needed for AES) is a deployment fault, not the
    document's: DependencyError propagates.
    """
    try:
        result = reader.decrypt("")
    except DependencyError:
        raise
    except (PdfReadError, NotImplementedError, ValueError, KeyError) as error:
        raise PermanentError(ErrorCode.ENCRYPTED_PDF, f"encrypted PDF, cannot be opened: {error}") from error
    if result == PasswordType.NOT_DECRYPTED:
        raise PermanentError(ErrorCode.ENCRYPTED_PDF, "the PDF is encrypted with a user password")


def _count_pages(reader: PdfReader) -> int:
    try:
        return len(reader.pages)
    except PdfReadError as error:
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable page tree: {error}") from error
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as error:
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"unreadable page tree: {error!r}") from error


def _content_undecodable(page: PageObject, max_output: int) -> bool:
    """True when a Flate-compressed content stream of the page is not valid zlib data.

    pypdf logs such a stream and reads it as empty, which would pass for a blank page. Only
    Flate (nearly every PDF's content filter) is checked; an empty but valid stream is fine.
    Decompression stops after ``max_output`` bytes (a flate bomb is not inflated here).
    """
    contents = page.get("/Contents")
    if contents is None:
        return False
    contents = contents.get_object()
    streams = [item.get_object() for item in contents] if isinstance(contents, ArrayObject) else [contents]
    for stream in streams:
        if not isinstance(stream, StreamObject):
            continue
        filters = stream.get("/Filter")
        first_filter = filters[0] if isinstance(filters, ArrayObject) and filters else filters
        if first_filter != "/FlateDecode":
            continue
        # pypdf has no public accessor for a stream's stored (still encoded) bytes; _data is that.
        if _flate_error(getattr(stream, "_data", b"") or b"", max_output):
            return True
    return False


def _flate_error(data: bytes, max_output: int) -> bool:
    """True when ``data`` is not valid zlib data, inflating at most ``max_output`` bytes, 64 KB at a time."""
    decompressor = zlib.decompressobj()
    pending, produced = data, 0
    try:
        while pending and produced <= max_output:
            produced += len(decompressor.decompress(pending, 65536))
            pending = decompressor.unconsumed_tail
    except zlib.error:
        return True
    return False


def _any_page_has_marks(pages: Iterable[PageObject], budget: ParseBudget) -> bool:
    """True when some page's content stream paints something (text, image, shading or path)."""
    for page in pages:
        try:
            contents = page.get_contents()
            if contents is None:
                continue
            operations = within_budget(budget.page_seconds, partial(getattr, contents, "operations"))
        except Exception:  # an unparsable (or over-budget) content stream still stands for something drawn
            return True
        if any(operator in _MARKING_OPERATORS for _operands, operator in operations):
            return True
    return False
