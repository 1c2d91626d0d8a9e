"""One error taxonomy for the whole pipeline, and the base of the API's refusals (``ApiRefusal``).

Step Functions matches Retry/Catch on the Lambda ``errorType``, the exception's class name, so three
class names cross the Lambda boundary for failures: ``TransientError`` (retried with backoff),
``PermanentError`` (never retried; its code starts the message) and anything else (a few retries,
then INTERNAL_ERROR). Do not subclass these for new failure kinds: add an ``ErrorCode`` instead.
``EmbeddingCapacityWait`` crosses it too and is no failure: an Embed task giving way to the shared
embedding quota (rag_ingest.embeddings.capacity), under a Retry of its own that spends no
transient-error budget.
"""

from __future__ import annotations

import json
from enum import StrEnum

from pydantic import ValidationError


class ErrorCode(StrEnum):
    UNSUPPORTED_TYPE = "UNSUPPORTED_TYPE"
    FILE_TOO_LARGE = "FILE_TOO_LARGE"
    TOO_MANY_PAGES = "TOO_MANY_PAGES"
    ENCRYPTED_PDF = "ENCRYPTED_PDF"
    CORRUPT_PDF = "CORRUPT_PDF"
    # Over the parser's budget (time, content bytes or characters per page, or time in total):
    # a hostile or absurd PDF (e.g. 400,000 text operators on one page), never worth a timeout.
    PDF_TOO_COMPLEX = "PDF_TOO_COMPLEX"
    NO_TEXT_LAYER = "NO_TEXT_LAYER"
    # Word, PowerPoint and Excel's binary formats (.doc, .ppt, .xls: OLE2 compound files) are not read.
    LEGACY_OFFICE_FORMAT = "LEGACY_OFFICE_FORMAT"
    # .docm, .pptm, .xlsm: documents that carry macros are refused whole, not read with the macros ignored.
    MACRO_ENABLED_DOCUMENT = "MACRO_ENABLED_DOCUMENT"
    # A DOCX, PPTX, XLSX, HTML, Markdown, CSV or text file that cannot be opened as what its bytes say it is.
    CORRUPT_DOCUMENT = "CORRUPT_DOCUMENT"
    # Over a parser's bound (rag_ingest.parsing.formats): a zip bomb, nesting past the HTML parser's
    # depth, a line too long for Markdown. A hostile or absurd file, never worth a timeout.
    DOCUMENT_TOO_COMPLEX = "DOCUMENT_TOO_COMPLEX"
    # An XML part with a document type declaration (entity expansion, external entities).
    UNSAFE_XML = "UNSAFE_XML"
    # A spreadsheet over its bounds (rag_ingest.parsing.sheets; docs/formats.md, "Spreadsheets"):
    # more rows, or more cells, than a workbook or CSV may have, or one cell longer than Excel allows.
    TOO_MANY_ROWS = "TOO_MANY_ROWS"
    TOO_MANY_CELLS = "TOO_MANY_CELLS"
    CELL_TOO_LARGE = "CELL_TOO_LARGE"
    # Text whose bytes decode in no encoding the detector trusts.
    UNKNOWN_ENCODING = "UNKNOWN_ENCODING"
    EMPTY_DOCUMENT = "EMPTY_DOCUMENT"
    # A zero-byte object: the uploader's mistake, not a system error.
    EMPTY_FILE = "EMPTY_FILE"
    OBJECT_NOT_FOUND = "OBJECT_NOT_FOUND"
    # An object whose key names no valid tenant (written outside the API): intake rejects it.
    INVALID_OBJECT_KEY = "INVALID_OBJECT_KEY"
    INPUT_TOO_LONG = "INPUT_TOO_LONG"
    # The bulk lane's Bedrock batch inference job failed, stopped, expired, ran past its timeout or
    # answered a record with an error (rag_ingest.ingest.batch_embedding).
    EMBEDDING_BATCH_FAILED = "EMBEDDING_BATCH_FAILED"
    INVALID_REQUEST = "INVALID_REQUEST"
    TRANSIENT_RETRIES_EXHAUSTED = "TRANSIENT_RETRIES_EXHAUSTED"
    # The embedding quota stayed booked for longer than the workflow waits for it (its Retry ran out).
    EMBEDDING_CAPACITY = "EMBEDDING_CAPACITY"
    TIMEOUT = "TIMEOUT"
    STUCK = "STUCK"
    SUPERSEDED = "SUPERSEDED"
    # The reconciler found the record's uploaded object version gone from the bucket (deleted
    # outside the API): nothing can re-read it, so the document is FAILED for good.
    SOURCE_OBJECT_MISSING = "SOURCE_OBJECT_MISSING"
    INTERNAL_ERROR = "INTERNAL_ERROR"


#: Failures of the system, which the SystemFailuresAlarm counts (it pages) and replay takes by default;
#: every other code is the input's, the uploader's to fix, and never pages anyone.
SYSTEM_ERROR_CODES: tuple[ErrorCode, ...] = (
    ErrorCode.INTERNAL_ERROR,
    ErrorCode.TRANSIENT_RETRIES_EXHAUSTED,
    ErrorCode.EMBEDDING_CAPACITY,
    ErrorCode.TIMEOUT,
    ErrorCode.STUCK,
    ErrorCode.EMBEDDING_BATCH_FAILED,
)


def failure_cause(code: ErrorCode) -> str:
    """``system`` or ``input``: the ``Cause`` dimension of the DocumentsFailed metric, which the
    SystemFailuresAlarm selects on (one equality; Metrics Insights documents no ``OR``)."""
    return "system" if code in SYSTEM_ERROR_CODES else "input"


class RagIngestError(Exception):
    """Base of the project's own errors."""


class TransientError(RagIngestError):
    """Throttling, timeouts, 5xx, connection errors: safe to retry with backoff."""


class EmbeddingCapacityWait(TransientError):
    """Not a failure: the shared embedding quota is booked further ahead than an Embed task waits.
    Step Functions calls the task again under its own Retry; finished batches stay checkpointed."""

    def __init__(self, message: str, *, booked_ahead_seconds: float = 0.0) -> None:
        super().__init__(message)
        self.booked_ahead_seconds = booked_ahead_seconds


class PermanentError(RagIngestError):
    """The input can never succeed: the document goes FAILED with ``code``, no retry."""

    def __init__(self, code: ErrorCode, detail: str) -> None:
        self.code = ErrorCode(code)
        self.detail = detail
        # "CODE: detail" is what reaches Step Functions as errorMessage; see parse_failure().
        super().__init__(f"{self.code.value}: {detail}")


class StaleWriteError(RagIngestError):
    """A conditional status update lost: another (later) worker owns the document's state."""


class IndexArtifactsMissingError(RagIngestError):
    """A document version's chunks or Embed checkpoints are no longer in S3: its chunks cannot be
    rewritten in place (PATCH answers 409 ``REINDEX_UNAVAILABLE``; a replay of Index rebuilds them)."""


class ConfigurationError(RagIngestError):
    """The environment of a function is missing or invalid (raised at cold start)."""


class ApiRefusal(Exception):
    """A request the HTTP API refuses on purpose: answered ``status`` with the error body
    ``{"error": {"code": code, "message": message}}`` (functions/api/app.py has the one handler).

    A subclass sets ``status`` and ``code``; ``message`` is the exception's text unless the subclass
    must say less (a missing document never echoes the id asked for).
    """

    status: int = 400
    code: str = "INVALID_REQUEST"

    @property
    def message(self) -> str:
        return str(self)

    @property
    def headers(self) -> dict[str, str]:
        """Headers of the answer beside the body (``Retry-After`` of a limit: rag_ingest.core.limits)."""
        return {}


def parse_failure(error_type: str, cause: str) -> tuple[ErrorCode, str]:
    """Turn a Step Functions Catch output (``Error``, ``Cause``) into an error code and detail.

    ``cause`` is the Lambda error JSON (``errorType``, ``errorMessage``, ...) for task failures,
    or a plain string for States.* errors.
    """
    message = cause
    try:
        payload = json.loads(cause)
        if isinstance(payload, dict):
            message = str(payload.get("errorMessage", cause))
    except (TypeError, ValueError):
        pass
    if error_type == "PermanentError":
        code_text, _, detail = message.partition(": ")
        try:
            return ErrorCode(code_text), detail
        except ValueError:
            return ErrorCode.INTERNAL_ERROR, message
    if error_type == "TransientError":
        return ErrorCode.TRANSIENT_RETRIES_EXHAUSTED, message
    if error_type == EmbeddingCapacityWait.__name__:
        return ErrorCode.EMBEDDING_CAPACITY, message
    if error_type in ("States.Timeout", "Sandbox.Timedout"):
        return ErrorCode.TIMEOUT, message
    return ErrorCode.INTERNAL_ERROR, f"{error_type}: {message}"


def validation_problems(exc: ValidationError, whole: str = "request") -> str:
    """A model's validation errors in one line, each as ``field.path: message`` (``whole`` names an
    error about the input as a whole)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors(include_url=False))
