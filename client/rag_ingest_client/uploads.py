"""What a client checks of a file before uploading it, and the media type it declares.

Pure functions of a file's name and first bytes. The service decides again from the stored bytes
(``rag_ingest.parsing.formats``); ``tests/unit/test_upload_policy.py`` holds these types equal to
those the API accepts. The page's ``web/upload.js`` applies the same refusals.
May import: the standard library only.
"""

from __future__ import annotations

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
HTML = "text/html"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
PNG = "image/png"
JPEG = "image/jpeg"
TIFF = "image/tiff"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CSV = "text/csv"
TSV = "text/tab-separated-values"

#: The file names a client goes by to declare a type (the CLI's folder walk, the page's picker).
EXTENSION_TYPES: dict[str, str] = {
    ".pdf": PDF,
    ".docx": DOCX,
    ".pptx": PPTX,
    ".html": HTML,
    ".htm": HTML,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": TEXT,
    ".png": PNG,
    ".jpg": JPEG,
    ".jpeg": JPEG,
    ".tif": TIFF,
    ".tiff": TIFF,
    ".xlsx": XLSX,
    ".csv": CSV,
    ".tsv": TSV,
}
#: The Office files whose bytes are a zip, by name: what a client declares for them.
_OFFICE_ZIPS = (DOCX, PPTX, XLSX)
#: Files refused by name before upload, with the code the service would fail them with (the API's
#: refused types, rag_ingest.core.upload_types): legacy binaries and macro-enabled packages.
REFUSED_EXTENSIONS: dict[str, tuple[str, str]] = {
    ".doc": ("LEGACY_OFFICE_FORMAT", "an old binary Word file (.doc): save it as .docx"),
    ".ppt": ("LEGACY_OFFICE_FORMAT", "an old binary PowerPoint file (.ppt): save it as .pptx"),
    ".xls": ("LEGACY_OFFICE_FORMAT", "an old binary Excel file (.xls): save it as .xlsx"),
    ".docm": ("MACRO_ENABLED_DOCUMENT", "a macro-enabled Word file (.docm): save it as .docx"),
    ".pptm": ("MACRO_ENABLED_DOCUMENT", "a macro-enabled PowerPoint file (.pptm): save it as .pptx"),
    ".xlsm": ("MACRO_ENABLED_DOCUMENT", "a macro-enabled Excel file (.xlsm): save it as .xlsx"),
}

#: Images read as documents (by OCR), by their first bytes; a GIF is refused.
_IMAGE_SIGNATURES = {b"\x89PNG\r\n\x1a\n": PNG, b"\xff\xd8\xff": JPEG, b"II*\x00": TIFF, b"MM\x00*": TIFF}
_GIF = b"GIF8"
_ZIP = b"PK\x03\x04"
_PDF = b"%PDF-"
_OLE = b"\xd0\xcf\x11\xe0"


def client_refusal(filename: str, head: bytes) -> str | None:
    """Why a client refuses a file before uploading it, from its first bytes: a file that can never
    succeed. None: send it."""
    if not head:
        return "the file is empty"
    refused = REFUSED_EXTENSIONS.get(_suffix(filename))
    if refused and head.startswith((_OLE, _ZIP)):
        return f"{refused[0]}: {refused[1]}"
    if head.startswith(_OLE):
        return "an old binary Office file (.doc, .ppt or .xls): save it as .docx, .pptx or .xlsx"
    if head.startswith(_GIF):
        return "a GIF image (PNG, JPEG and TIFF images are read)"
    if head.startswith(tuple(_IMAGE_SIGNATURES)):
        return None
    if head.startswith(_ZIP):
        # A zip's headers always hold NUL bytes: its name decides, and Validate reads its parts.
        if EXTENSION_TYPES.get(_suffix(filename)) in _OFFICE_ZIPS:
            return None
        return "a zip archive that is not a Word (.docx), PowerPoint (.pptx) or Excel (.xlsx) file"
    if head.startswith(_PDF):
        return None
    if not head.startswith((b"\xff\xfe", b"\xfe\xff")) and b"\x00" in head:
        return "binary data, not a document the pipeline reads"
    return None


def declared_type(filename: str, head: bytes) -> str:
    """The type a client declares for a file: from its first bytes when they say PDF or zip, else
    from its extension, else ``text/plain`` (the pipeline decides again from the stored bytes)."""
    by_name = EXTENSION_TYPES.get(_suffix(filename))
    if head.startswith(_PDF):
        return PDF
    image = next((kind for signature, kind in _IMAGE_SIGNATURES.items() if head.startswith(signature)), None)
    if image is not None:
        return image
    if head.startswith(_ZIP):
        return by_name if by_name in _OFFICE_ZIPS else DOCX
    return by_name or TEXT


def _suffix(filename: str) -> str:
    return "." + filename.rpartition(".")[2].lower() if "." in filename else ""
