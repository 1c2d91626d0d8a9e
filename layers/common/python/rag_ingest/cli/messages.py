"""Error codes of FAILED documents as sentences a person understands."""

from __future__ import annotations

from rag_ingest.errors import ErrorCode

SENTENCES: dict[str, str] = {
    ErrorCode.UNSUPPORTED_TYPE: "This file is not a PDF.",
    ErrorCode.FILE_TOO_LARGE: "This file is larger than the upload limit.",
    ErrorCode.TOO_MANY_PAGES: "This PDF has more pages than the limit.",
    ErrorCode.ENCRYPTED_PDF: "This PDF is password-protected.",
    ErrorCode.CORRUPT_PDF: "This PDF is damaged and cannot be read.",
    ErrorCode.NO_TEXT_LAYER: "This PDF has no text layer (scanned pages without text).",
    ErrorCode.EMPTY_DOCUMENT: "This PDF contains no text to index.",
    ErrorCode.OBJECT_NOT_FOUND: "The uploaded file was not found in storage.",
    ErrorCode.INPUT_TOO_LONG: "A passage of this PDF is too long to process.",
    ErrorCode.INVALID_REQUEST: "The request was invalid.",
    ErrorCode.TRANSIENT_RETRIES_EXHAUSTED: "A service was unavailable for too long; retry later.",
    ErrorCode.TIMEOUT: "Processing took too long; retry later.",
    ErrorCode.STUCK: "Processing stopped making progress; retry later.",
    ErrorCode.SUPERSEDED: "A newer upload of this document replaced this one.",
    ErrorCode.INTERNAL_ERROR: "Something went wrong on our side; retry later.",
}


def sentence(code: str | None) -> str:
    """The sentence of a code; unknown codes (added after this CLI was built) read as themselves."""
    if not code:
        return "The document failed."
    return SENTENCES.get(code, f"The document failed ({code}).")
