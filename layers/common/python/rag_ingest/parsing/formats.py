"""What an upload is, decided by its bytes, and which reader reads it into pages of blocks.

:func:`detect_format` never looks at the name or the declared type: ``%PDF-`` (within the first
1024 bytes, as the PDF reader accepts it) is a PDF; an OLE2 file is LEGACY_OFFICE_FORMAT; a zip is
DOCX, PPTX or XLSX by its ``[Content_Types].xml`` (``office.ooxml``); a PNG, JPEG or TIFF signature
is an image document (``image_document``); other binary data is UNSUPPORTED_TYPE; text is HTML,
Markdown, CSV or plain text by its start. :func:`read_structured` hands a structured file to its
reader: one page per PPTX slide or XLSX sheet, one page for the others, headings with their anchors,
figures where they stand. The rules: docs/formats.md, "What a file is".
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import DocumentFormat
from rag_ingest.core.upload_types import max_bytes_for
from rag_ingest.parsing.blocks import SNIFF_BYTES, FormatLimits, StructuredDocument, decode_text
from rag_ingest.parsing.figures import CaptionsOnly, ImageReader
from rag_ingest.parsing.html_markdown import read_html, read_markdown, read_text
from rag_ingest.parsing.office.ooxml import ooxml_format
from rag_ingest.parsing.office.powerpoint import read_pptx
from rag_ingest.parsing.office.word import read_docx
from rag_ingest.parsing.pdf.extract import PDF_MAGIC, PDF_MAGIC_WINDOW_BYTES
from rag_ingest.parsing.sheets.delimited import delimiter_of, read_delimited
from rag_ingest.parsing.sheets.xlsx import read_xlsx

OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: Images read as documents (classic TIFF only: BigTIFF is refused below).
IMAGE_SIGNATURES: tuple[tuple[bytes, DocumentFormat], ...] = (
    (b"\x89PNG\r\n\x1a\n", DocumentFormat.PNG),
    (b"\xff\xd8\xff", DocumentFormat.JPEG),
    (b"II*\x00", DocumentFormat.TIFF),
    (b"MM\x00*", DocumentFormat.TIFF),
)
ZIP_MAGIC = b"PK\x03\x04"

# Signatures of common files that are none of the accepted formats: named in the refusal. (Other
# binaries, executables among them, hold NUL bytes: "binary data".)
_OTHER_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II+\x00", "a BigTIFF image"),
    (b"MM\x00+", "a BigTIFF image"),
    (b"{\\rtf", "an RTF document"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"\x7fELF", "an executable"),
)
_HTML_START = re.compile(r"\A\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE | re.DOTALL)
#: An SVG image: its first element is <svg>, after an XML declaration, comments or a doctype.
_SVG_START = re.compile(
    r"\A\s*(?:<\?xml[^>]*>\s*)?(?:(?:<!--.*?-->|<!DOCTYPE[^>]*>)\s*)*<svg[\s>]", re.IGNORECASE | re.DOTALL
)
_HTML_SECTION = re.compile(r"<(?:head|body)[\s>]", re.IGNORECASE)
_MARKDOWN_SIGNS = (
    re.compile(r"^#{1,6}[ \t]+\S", re.MULTILINE),  # ATX heading
    re.compile(r"^\S[^\n]*\n(?:=+|-{2,})[ \t]*$", re.MULTILINE),  # setext heading
    re.compile(r"^(?:```|~~~)", re.MULTILINE),  # fenced code
    re.compile(r"^\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+\|?[ \t]*$", re.MULTILINE),  # table delimiter row
)
_PDF_OBJECT = re.compile(rb"\d+\s+\d+\s+obj\b")


def detect_format(head: bytes, *, size: int, max_bytes: int, read_all: Callable[[], bytes]) -> DocumentFormat:
    """The format of an object from its first bytes (at least ``SNIFF_BYTES`` when it has them)
    and its size; ``read_all`` fetches the whole object (a zip needs it; an OLE2 file may, to be named).

    Raises ``PermanentError``: EMPTY_FILE, FILE_TOO_LARGE, UNSUPPORTED_TYPE, LEGACY_OFFICE_FORMAT,
    MACRO_ENABLED_DOCUMENT, CORRUPT_DOCUMENT, UNSAFE_XML, DOCUMENT_TOO_COMPLEX or UNKNOWN_ENCODING.
    """
    if size == 0:
        raise PermanentError(ErrorCode.EMPTY_FILE, "the file is empty (0 bytes)")
    if size > max_bytes:
        raise PermanentError(ErrorCode.FILE_TOO_LARGE, f"{size} bytes exceeds the limit of {max_bytes} bytes")
    if is_pdf(head):
        return DocumentFormat.PDF
    if head.startswith(OLE2_MAGIC):
        # The directory is often in the first bytes; where it is not, the whole file is read to name it.
        what = legacy_office_refusal(head) or (legacy_office_refusal(read_all()) if size > len(head) else None)
        raise PermanentError(
            ErrorCode.LEGACY_OFFICE_FORMAT,
            what or "an OLE2 compound file (a legacy .doc, .ppt or .xls): save it as .docx, .pptx or .xlsx",
        )
    if head.startswith(ZIP_MAGIC):
        return ooxml_format(read_all())
    for signature, image_format in IMAGE_SIGNATURES:
        if head.startswith(signature):
            limit = max_bytes_for(image_format, max_bytes)
            if size > limit:
                raise PermanentError(
                    ErrorCode.FILE_TOO_LARGE, f"{size} bytes exceeds the limit of {limit} bytes for images"
                )
            return image_format
    for signature, what in _OTHER_SIGNATURES:
        if head.startswith(signature):
            raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, f"the file is {what}")
    text = decode_text(head, partial=size > len(head))
    if _SVG_START.match(text):
        raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, "the file is an SVG image")
    text_kind = text_format(text, partial=size > len(head))
    limit = max_bytes_for(text_kind, max_bytes)
    if size > limit:
        raise PermanentError(
            ErrorCode.FILE_TOO_LARGE, f"{size} bytes exceeds the limit of {limit} bytes for {text_kind.value} files"
        )
    return text_kind


def is_pdf(head: bytes) -> bool:
    """``%PDF-`` at the start, or within the first 1024 bytes (after junk, as Acrobat allows) and
    followed by an object: a text file that merely mentions ``%PDF-`` is not a PDF."""
    if head.startswith(PDF_MAGIC):
        return True
    at = head.find(PDF_MAGIC, 0, PDF_MAGIC_WINDOW_BYTES)
    return at >= 0 and _PDF_OBJECT.search(head, at) is not None


def text_format(text: str, *, partial: bool = False) -> DocumentFormat:
    """HTML, Markdown, CSV (delimited values) or plain text, from the start of the decoded text
    (``partial``: the start of a longer file)."""
    start = text[:SNIFF_BYTES]
    if _HTML_START.match(start) or (start.lstrip().startswith("<") and _HTML_SECTION.search(start[:4096])):
        return DocumentFormat.HTML
    if any(sign.search(start) for sign in _MARKDOWN_SIGNS):
        return DocumentFormat.MARKDOWN
    if delimiter_of(start, partial=partial or len(text) > len(start)):
        return DocumentFormat.CSV
    return DocumentFormat.TEXT


#: The stream that holds a legacy Office document's content, named in the compound file's directory,
#: and what the refusal says of the file.
_LEGACY_STREAMS: tuple[tuple[str, str], ...] = (
    ("WordDocument", "a legacy Word file (.doc): save it as .docx"),
    ("PowerPoint Document", "a legacy PowerPoint file (.ppt): save it as .pptx"),
    ("Workbook", "a legacy Excel file (.xls): save it as .xlsx"),
    ("Book", "a legacy Excel 5 file (.xls): save it as .xlsx"),
)
_OLE2_DIRECTORY_ENTRY = 128


def legacy_office_refusal(data: bytes) -> str | None:
    """What an OLE2 compound file is (.doc, .ppt, .xls), from the entry of its main stream in the
    file's directory (a 128-byte entry: the UTF-16 name, then its length at byte 64); None when
    ``data`` holds no such entry."""
    for stream, what in _LEGACY_STREAMS:
        name = (stream + "\0").encode("utf-16-le")
        at = data.find(name)
        while at >= 0:
            if at % _OLE2_DIRECTORY_ENTRY == 0 and data[at + 64 : at + 66] == len(name).to_bytes(2, "little"):
                return f"an OLE2 compound file, {what}"
            at = data.find(name, at + 1)
    return None


def read_structured(
    data: bytes, document_format: DocumentFormat, limits: FormatLimits, images: ImageReader | None = None
) -> StructuredDocument:
    """A DOCX, PPTX, XLSX, HTML, Markdown, CSV or text file as pages of blocks (raises
    ``PermanentError``); ``images`` reads the text inside its figures' images (default: none,
    captions and alt text only). Spreadsheets and text hold no figures."""
    reader = images if images is not None else CaptionsOnly()
    with_figures = {
        DocumentFormat.DOCX: read_docx,
        DocumentFormat.PPTX: read_pptx,
        DocumentFormat.HTML: read_html,
        DocumentFormat.MARKDOWN: read_markdown,
    }
    without_figures = {
        DocumentFormat.XLSX: read_xlsx,
        DocumentFormat.CSV: read_delimited,
        DocumentFormat.TEXT: read_text,
    }
    if document_format in with_figures:
        return with_figures[document_format](data, limits, reader)
    if document_format in without_figures:
        return without_figures[document_format](data, limits)
    raise ValueError(f"{document_format} is not a structured format")
