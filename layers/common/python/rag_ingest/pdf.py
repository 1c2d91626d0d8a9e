"""PDF checks and text extraction (pypdf, plain mode).

Cheap checks run before any parsing, in this order: size, ``%PDF-`` magic bytes, then (after
opening) encryption and page count. :func:`validate_pdf_header` holds the first two so a
Validate stage can run them on a ranged GET of the object's first bytes plus its size.

Empty versus no text layer (both mean "nothing to index"):

- ``EMPTY_DOCUMENT``: the PDF has zero pages, or none of its pages draws anything (no text,
  image, shading or path painting operator in any content stream): there is nothing to read.
- ``NO_TEXT_LAYER``: at least one page draws something, but no page yields text: a scan or a
  drawing, which only OCR could read.
"""

from __future__ import annotations

import io
import logging
import re

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, PdfReadError

from rag_ingest.errors import ErrorCode, PermanentError
from rag_ingest.models import PageText, ParsedDocument

logger = logging.getLogger(__name__)

PDF_MAGIC = b"%PDF-"
#: Acrobat accepts the header anywhere in the first 1024 bytes (some producers prepend junk).
PDF_MAGIC_WINDOW_BYTES = 1024

_LIGATURES = {
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
}
_LIGATURE_TABLE = str.maketrans(_LIGATURES)
# Control characters (Unicode category Cc) that are not whitespace, plus invisible format
# characters that split words for the tokenizer: soft hyphen, zero-width space, word joiner, BOM.
# Whitespace controls (tab, form feed, ...) are left to the whitespace collapsing below.
_INVISIBLE_CHARS = re.compile(
    "["
    + "".join(re.escape(chr(code)) for code in [*range(0x20), *range(0x7F, 0xA0)] if not chr(code).isspace())
    + "\u00ad\u200b\u2060\ufeff]"
)
# Hyphen at a line end between two letters: a word broken by the layout when the next letter is
# lower case. A capital after the break ("Anglo-\nSaxon") keeps its hyphen.
_LINE_END_HYPHEN = re.compile(r"([^\W\d_])-[ \t]*\n[ \t]*([^\W\d_])")
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{3,}")

# Content-stream operators that put marks on a page: text showing, images (XObjects, inline),
# shadings, and path painting. A page without any of them is blank to a reader.
_MARKING_OPERATORS = frozenset(
    {b"Tj", b"TJ", b"'", b'"', b"Do", b"BI", b"INLINE IMAGE", b"sh"}
    | {b"f", b"F", b"f*", b"S", b"s", b"B", b"B*", b"b", b"b*"}
)


def validate_pdf_header(head: bytes, size: int, *, max_bytes: int) -> None:
    """Check the object's size and its first bytes (at least the first 1024 when available).

    Raises ``PermanentError`` FILE_TOO_LARGE or UNSUPPORTED_TYPE. The file name is not looked at:
    only the ``%PDF-`` signature counts.
    """
    if size > max_bytes:
        raise PermanentError(ErrorCode.FILE_TOO_LARGE, f"{size} bytes exceeds the limit of {max_bytes} bytes")
    if PDF_MAGIC not in head[:PDF_MAGIC_WINDOW_BYTES]:
        raise PermanentError(
            ErrorCode.UNSUPPORTED_TYPE,
            f"no %PDF- signature in the first {PDF_MAGIC_WINDOW_BYTES} bytes: not a PDF file",
        )


def clean_page_text(text: str) -> str:
    """Normalise extracted text: ligatures, broken words, control chars and whitespace.

    Line breaks are kept (a paragraph break stays one blank line); runs of other whitespace
    become one space, and lines are stripped.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.translate(_LIGATURE_TABLE)
    text = _INVISIBLE_CHARS.sub("", text)
    text = _LINE_END_HYPHEN.sub(_join_broken_word, text)
    text = _HORIZONTAL_SPACE.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()


def _join_broken_word(match: re.Match[str]) -> str:
    before, after = match.group(1), match.group(2)
    return before + after if after.islower() else f"{before}-\n{after}"


def parse_pdf(data: bytes, *, max_bytes: int, max_pages: int) -> ParsedDocument:
    """Extract the cleaned text of every page of the PDF in ``data``.

    Raises ``PermanentError`` with FILE_TOO_LARGE, UNSUPPORTED_TYPE, CORRUPT_PDF, ENCRYPTED_PDF,
    TOO_MANY_PAGES, EMPTY_DOCUMENT or NO_TEXT_LAYER. A page whose extraction fails is listed in
    ``failed_pages`` (1-based) and kept with empty text; if every page fails, the PDF is corrupt.
    """
    validate_pdf_header(data[:PDF_MAGIC_WINDOW_BYTES], len(data), max_bytes=max_bytes)
    reader = _open_reader(data)
    page_count = _count_pages(reader)
    if page_count > max_pages:
        raise PermanentError(ErrorCode.TOO_MANY_PAGES, f"{page_count} pages exceeds the limit of {max_pages} pages")
    if page_count == 0:
        raise PermanentError(ErrorCode.EMPTY_DOCUMENT, "the PDF has no pages")

    pages: list[PageText] = []
    failed_pages: list[int] = []
    for page_number in range(1, page_count + 1):
        try:
            raw_text = reader.pages[page_number - 1].extract_text(extraction_mode="plain")
        except Exception as error:  # pypdf raises many kinds on one bad page; keep the others
            logger.warning("page %d: text extraction failed: %r", page_number, error)
            failed_pages.append(page_number)
            raw_text = ""
        pages.append(PageText(page_number=page_number, text=clean_page_text(raw_text)))

    if len(failed_pages) == page_count:
        raise PermanentError(ErrorCode.CORRUPT_PDF, f"text extraction failed on all {page_count} pages")
    if not any(page.text for page in pages):
        if _any_page_has_marks(reader):
            raise PermanentError(
                ErrorCode.NO_TEXT_LAYER,
                f"none of the {page_count} pages has extractable text (scanned or drawn; OCR needed)",
            )
        raise PermanentError(ErrorCode.EMPTY_DOCUMENT, f"all {page_count} pages are blank")
    return ParsedDocument(page_count=page_count, pages=pages, failed_pages=failed_pages)


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


def _any_page_has_marks(reader: PdfReader) -> bool:
    """True when some page's content stream paints something (text, image, shading or path)."""
    for page in reader.pages:
        try:
            contents = page.get_contents()
            if contents is None:
                continue
            operations = contents.operations
        except Exception:  # an unparsable content stream still stands for something drawn
            return True
        if any(operator in _MARKING_OPERATORS for _operands, operator in operations):
            return True
    return False
