"""The refusals of the sources API: each an ``ApiRefusal`` with its status and code (docs/sources.md)."""

from __future__ import annotations

from rag_ingest.core.errors import ApiRefusal


class SourceNotFoundError(ApiRefusal, LookupError):
    """Missing, or another tenant's: the same answer for both, without echoing the id."""

    status = 404
    code = "NOT_FOUND"

    @property
    def message(self) -> str:
        return "no such source"


class SyncNotFoundError(SourceNotFoundError):
    @property
    def message(self) -> str:
        return "no such sync"


class ItemNotFoundError(SourceNotFoundError):
    @property
    def message(self) -> str:
        return "no such item"


class SourceConfigError(ApiRefusal, ValueError):
    code = "SOURCE_CONFIG_INVALID"


class SyncInProgressError(ApiRefusal):
    status = 409
    code = "SYNC_IN_PROGRESS"


class SourceKindError(ApiRefusal):
    """The route does not apply to this kind: a custom source is not listed, only it takes items."""

    code = "SOURCE_KIND_MISMATCH"


class SourceLimitError(ApiRefusal):
    code = "SOURCE_LIMIT_REACHED"


class SyncRateLimitedError(ApiRefusal):
    status = 429
    code = "SYNC_RATE_LIMITED"


class DeleteModeError(ApiRefusal):
    code = "SOURCE_DELETE_MODE_REQUIRED"


class ItemTooLargeError(ApiRefusal):
    status = 413
    code = "FILE_TOO_LARGE"
