"""Office Open XML packages: which document a zip is, and whether it is safe to open.

:func:`ooxml_format` reads ``[Content_Types].xml``: DOCX, PPTX or XLSX; macros are
MACRO_ENABLED_DOCUMENT, other packages UNSUPPORTED_TYPE. :func:`checked_package` runs before any
parser sees the package: the zip's entry count and sizes are bounded, and every entry is
decompressed once in a streaming read that stops at the bound (declared sizes can lie), so a zip
bomb is DOCUMENT_TOO_COMPLEX; an XML part with a document type declaration (how entity expansion
and external entities get in; OOXML never needs one) is UNSAFE_XML.
"""

from __future__ import annotations

import io
import re
import zipfile

from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.parsed import DocumentFormat
from rag_ingest.parsing.blocks import FormatLimits

_MAIN_CONTENT_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml": DocumentFormat.DOCX,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": DocumentFormat.PPTX,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml": DocumentFormat.XLSX,
}
_OTHER_PACKAGES = {
    "wordprocessingml.template": "a Word template (.dotx): save it as a .docx",
    "presentationml.slideshow": "a PowerPoint show (.ppsx): save it as a .pptx",
    "presentationml.template": "a PowerPoint template (.potx): save it as a .pptx",
    "spreadsheetml.template": "an Excel template (.xltx): save it as a .xlsx",
}
#: What a macro-enabled package is, by its main part's content type, and what to do about it.
_MACRO_KINDS = {
    "ms-excel.sheet.macroenabled": " (an Excel .xlsm): save it as .xlsx",
    "ms-excel.sheet.binary": " (an Excel binary .xlsb): save it as .xlsx",
    "ms-word.document.macroenabled": " (a Word .docm): save it as .docx",
    "ms-powerpoint.presentation.macroenabled": " (a PowerPoint .pptm): save it as .pptx",
}
_DOCTYPE = re.compile(rb"<!DOCTYPE|<!ENTITY", re.IGNORECASE)
_CONTENT_TYPES_PART = "[Content_Types].xml"
_READ_CHUNK = 1024 * 1024
#: How much of an XML part's start is searched for a DTD: it must come before the root element.
PROLOG_BYTES = 4096


def ooxml_format(data: bytes) -> DocumentFormat:
    """DOCX, PPTX or XLSX from the package's ``[Content_Types].xml`` (raises ``PermanentError``)."""
    package = open_zip(data)
    names = set(package.namelist())
    if _CONTENT_TYPES_PART not in names:
        raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, "a zip archive that is not an Office document")
    content_types = read_part(package, _CONTENT_TYPES_PART, 4 * 1024 * 1024)
    refuse_dtd(_CONTENT_TYPES_PART, content_types)
    declared = re.findall(rb'ContentType="([^"]+)"', content_types)
    types = [value.decode("ascii", errors="replace") for value in declared]
    if any("macroenabled" in value.lower() for value in types) or any(
        name.lower().endswith("vbaproject.bin") for name in names
    ):
        kind = next(
            (what for marker, what in _MACRO_KINDS.items() if any(marker in value.lower() for value in types)),
            " (.docm, .pptm, .xlsm): save it without them",
        )
        raise PermanentError(ErrorCode.MACRO_ENABLED_DOCUMENT, f"the document carries macros{kind}")
    for value in types:
        if value in _MAIN_CONTENT_TYPES:
            return _MAIN_CONTENT_TYPES[value]
    for marker, what in _OTHER_PACKAGES.items():
        if any(marker in value for value in types):
            raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, f"the file is {what}")
    raise PermanentError(
        ErrorCode.UNSUPPORTED_TYPE, "an Office Open XML package with no Word, PowerPoint or Excel document"
    )


def checked_package(data: bytes, limits: FormatLimits) -> zipfile.ZipFile:
    """The package, once its entries are within ``limits`` and no XML part declares a DTD."""
    package = open_zip(data)
    entries = package.infolist()
    if len(entries) > limits.max_zip_entries:
        raise PermanentError(
            ErrorCode.DOCUMENT_TOO_COMPLEX, f"{len(entries)} zip entries exceeds the limit of {limits.max_zip_entries}"
        )
    declared = sum(entry.file_size for entry in entries)
    if declared > limits.max_unzipped_bytes:
        raise PermanentError(
            ErrorCode.DOCUMENT_TOO_COMPLEX,
            f"{declared} bytes unzipped exceeds the limit of {limits.max_unzipped_bytes} bytes",
        )
    total = 0
    for entry in entries:
        is_xml = entry.filename.endswith((".xml", ".rels"))
        bound = min(
            limits.max_xml_part_bytes if is_xml else limits.max_unzipped_bytes, limits.max_unzipped_bytes - total
        )
        prolog, size = _stream_part(package, entry, bound)
        total += size
        if is_xml:
            refuse_dtd(entry.filename, prolog)
    return package


def open_zip(data: bytes) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"the zip package cannot be opened: {exc}") from None


def _stream_part(package: zipfile.ZipFile, entry: zipfile.ZipInfo, bound: int) -> tuple[bytes, int]:
    """(the part's first bytes, its real uncompressed size), decompressing at most ``bound + 1`` bytes."""
    size = 0
    prolog = b""
    try:
        with package.open(entry) as stream:
            while chunk := stream.read(_READ_CHUNK):
                if not prolog:
                    prolog = chunk[:PROLOG_BYTES]
                size += len(chunk)
                if size > bound:
                    raise PermanentError(
                        ErrorCode.DOCUMENT_TOO_COMPLEX,
                        f"{entry.filename} decompresses past the limit ({bound} bytes): a zip bomb",
                    )
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"{entry.filename} cannot be decompressed: {exc}") from None
    return prolog, size


def read_part(package: zipfile.ZipFile, name: str, bound: int) -> bytes:
    try:
        with package.open(name) as stream:
            data = stream.read(bound + 1)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
        raise PermanentError(ErrorCode.CORRUPT_DOCUMENT, f"{name} cannot be decompressed: {exc}") from None
    if len(data) > bound:
        raise PermanentError(ErrorCode.DOCUMENT_TOO_COMPLEX, f"{name} is larger than {bound} bytes")
    return data


def refuse_dtd(name: str, prolog: bytes) -> None:
    root = _root_start(prolog)
    if _DOCTYPE.search(prolog, 0, root):
        raise PermanentError(ErrorCode.UNSAFE_XML, f"{name} declares a DTD or entities, which OOXML never needs")


def _root_start(prolog: bytes) -> int:
    """Where the root element starts (a DTD must come before it): the first ``<`` that opens neither
    a declaration, a processing instruction nor a comment."""
    for match in re.finditer(rb"<([^!?])", prolog):
        return match.start()
    return len(prolog)
