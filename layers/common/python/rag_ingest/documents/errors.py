"""The refusals of the document service, each answered by the API with one status and code
(functions/api/app.py maps them).

May import: ``core``.
"""

from __future__ import annotations


class DocumentNotFoundError(LookupError):
    """No such document for this tenant (missing, another tenant's, or not servable): answer 404."""


class AccessChangeForbiddenError(Exception):
    """A PATCH of ``access`` by someone who may read the document but not manage its access: answer 403."""


class NotRetryableError(Exception):
    """Retry asked for a document that is not FAILED (or cannot be replayed): answer 409."""


class RevisionMismatchError(Exception):
    """PATCH's If-Match names another revision than the record's: answer 412 REVISION_MISMATCH."""


class ConcurrentUpdateError(Exception):
    """Another PATCH changed the record between this one's read and write: answer 409 CONCURRENT_UPDATE."""


class ReindexUnavailableError(Exception):
    """The document's chunks cannot be rewritten in place (their artifacts are gone): answer 409
    REINDEX_UNAVAILABLE."""


class ContentUnavailableError(Exception):
    """GET /documents/{id}/content for a document without a rendered view: a PDF (it opens at its
    page), or one whose extraction has not run or was not kept."""


class InvalidCursorError(ValueError):
    """A list cursor that this API did not issue for this tenant: answer 400."""
