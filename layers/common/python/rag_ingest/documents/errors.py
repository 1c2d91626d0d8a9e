"""The refusals of the document service: each is an ``ApiRefusal`` with the status and code the
API answers it with (rag_ingest.core.errors).

May import: ``core``.
"""

from __future__ import annotations

from rag_ingest.core.errors import ApiRefusal


class DocumentNotFoundError(ApiRefusal, LookupError):
    """No such document for this tenant (missing, another tenant's, or not servable)."""

    status = 404
    code = "NOT_FOUND"

    @property
    def message(self) -> str:
        # Missing and another tenant's documents answer alike; the id is not echoed (it may be any text).
        return "no such document"


class AccessChangeForbiddenError(ApiRefusal):
    """A PATCH of ``access`` by someone who may read the document but not manage its access."""

    status = 403
    code = "ACCESS_CHANGE_FORBIDDEN"


class EditForbiddenError(ApiRefusal):
    """A change, retry or delete by someone who may read the document but not edit it."""

    status = 403
    code = "EDIT_FORBIDDEN"


class NotRetryableError(ApiRefusal):
    """Retry asked for a document that is not FAILED (or cannot be replayed)."""

    status = 409
    code = "NOT_RETRYABLE"


class RevisionMismatchError(ApiRefusal):
    """PATCH's If-Match names another revision than the record's."""

    status = 412
    code = "REVISION_MISMATCH"

    @property
    def message(self) -> str:
        return f"{self}: read it again (GET) and resend with its ETag"


class ConcurrentUpdateError(ApiRefusal):
    """Another PATCH changed the record between this one's read and write."""

    status = 409
    code = "CONCURRENT_UPDATE"


class ReindexUnavailableError(ApiRefusal):
    """The document's chunks cannot be rewritten in place (their artifacts are gone)."""

    status = 409
    code = "REINDEX_UNAVAILABLE"


class ContentUnavailableError(ApiRefusal):
    """GET /documents/{id}/content for a document without a rendered view: a PDF (it opens at its
    page), or one whose extraction has not run or was not kept."""

    status = 409
    code = "NO_RENDERED_VIEW"


class NotUploadedError(ApiRefusal):
    """GET /documents/{id}/download of a document whose upload has not arrived (AWAITING_UPLOAD): it
    exists, its bytes do not yet."""

    status = 409
    code = "NOT_UPLOADED"


class InvalidCursorError(ApiRefusal, ValueError):
    """A list cursor that this API did not issue for this tenant."""

    code = "INVALID_CURSOR"
