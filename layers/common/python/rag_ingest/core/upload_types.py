"""What an upload may declare: the media types accepted, the format each announces, and the size
limit of each format. The declaration only shapes the presigned POST (its Content-Type and size
conditions); Validate decides what the object is by its bytes (rag_ingest.parsing.formats). What a
client declares for a file is the client's (``rag_ingest_client.uploads``)."""

from __future__ import annotations

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import IMAGE_FORMATS, DocumentFormat

#: HTML, Markdown, CSV and text beyond this are not documents a person wrote (the same bound for the
#: presigned POST and for Validate).
MAX_TEXT_FORMAT_BYTES = 20 * 1024 * 1024
#: An image document beyond this is refused: Textract's synchronous calls take at most 10 MB
#: (https://docs.aws.amazon.com/textract/latest/dg/limits-document.html), and a TIFF page is sent whole.
MAX_IMAGE_BYTES = 10 * 1024 * 1024
TEXT_FORMATS = frozenset({DocumentFormat.HTML, DocumentFormat.MARKDOWN, DocumentFormat.TEXT, DocumentFormat.CSV})

#: The media types an upload may declare, and the format each announces. The declaration sets the
#: presigned POST's Content-Type and size limit; Validate still decides by the bytes.
UPLOAD_CONTENT_TYPES: dict[str, DocumentFormat] = {
    **{document_format.content_type: document_format for document_format in DocumentFormat},
    "application/xhtml+xml": DocumentFormat.HTML,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/tab-separated-values": DocumentFormat.CSV,
}

# Declared types refused with their own code before any byte is sent.
_REFUSED_CONTENT_TYPES: dict[str, tuple[ErrorCode, str]] = {
    "application/msword": (ErrorCode.LEGACY_OFFICE_FORMAT, "a legacy Word file (.doc): save it as .docx"),
    "application/vnd.ms-powerpoint": (
        ErrorCode.LEGACY_OFFICE_FORMAT,
        "a legacy PowerPoint file (.ppt): save it as .pptx",
    ),
    "application/vnd.ms-excel": (ErrorCode.LEGACY_OFFICE_FORMAT, "a legacy Excel file (.xls): save it as .xlsx"),
    "application/vnd.ms-word.document.macroenabled.12": (
        ErrorCode.MACRO_ENABLED_DOCUMENT,
        "a macro-enabled Word file (.docm): save it as .docx",
    ),
    "application/vnd.ms-powerpoint.presentation.macroenabled.12": (
        ErrorCode.MACRO_ENABLED_DOCUMENT,
        "a macro-enabled PowerPoint file (.pptm): save it as .pptx",
    ),
    "application/vnd.ms-excel.sheet.macroenabled.12": (
        ErrorCode.MACRO_ENABLED_DOCUMENT,
        "a macro-enabled Excel file (.xlsm): save it as .xlsx",
    ),
}


def upload_format(content_type: str) -> DocumentFormat:
    """The format an upload's declared media type announces (parameters such as ``charset`` are
    ignored); raises ``PermanentError`` for a type that is not accepted."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type in UPLOAD_CONTENT_TYPES:
        return UPLOAD_CONTENT_TYPES[media_type]
    if media_type in _REFUSED_CONTENT_TYPES:
        code, what = _REFUSED_CONTENT_TYPES[media_type]
        raise PermanentError(code, f"{content_type} is {what}")
    accepted = ", ".join(sorted(UPLOAD_CONTENT_TYPES))
    raise PermanentError(
        ErrorCode.UNSUPPORTED_TYPE, f"{content_type or 'no type'} is not accepted (accepted: {accepted})"
    )


def max_bytes_for(document_format: DocumentFormat, max_file_bytes: int) -> int:
    """The size limit of a format: the configured one, at most ``MAX_TEXT_FORMAT_BYTES`` for text
    and ``MAX_IMAGE_BYTES`` for images."""
    if document_format in IMAGE_FORMATS:
        return min(max_file_bytes, MAX_IMAGE_BYTES)
    return min(max_file_bytes, MAX_TEXT_FORMAT_BYTES) if document_format in TEXT_FORMATS else max_file_bytes
