"""The ports an S3 source reads a bucket through, the codes its failures carry, and its typed errors.

``BucketReader`` lists object versions a page at a time and reads one pinned version;
``ObjectCopier`` copies one pinned version between buckets server side. rag_ingest.adapters.
source_bucket implements both with boto3. ``ServerSideCopy`` is what the sync engine calls to put an
item into the stack's bucket without its bytes passing through a function. May import
``rag_ingest.core`` and ``rag_ingest.sources.connector`` only. The rules: docs/sources.md, "The S3 source".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from rag_ingest.sources.connector import ItemUnavailableError, SourceItem

#: The version id S3 gives an object written while versioning was never on (or suspended).
NULL_VERSION = "null"


class SourceCode(StrEnum):
    """Failure codes of a source item or listing (besides rag_ingest.core.errors.ErrorCode's)."""

    # The stack's role may not read the bucket, an object or its KMS key (the message names the action).
    SOURCE_ACCESS_DENIED = "SOURCE_ACCESS_DENIED"
    SOURCE_BUCKET_NOT_FOUND = "SOURCE_BUCKET_NOT_FOUND"
    # The version the listing saw is gone (deleted or overwritten since): the next sync takes the new one.
    SOURCE_ITEM_CHANGED = "SOURCE_ITEM_CHANGED"
    # Archived (Glacier Flexible Retrieval, Deep Archive, an archive tier): not readable without a restore.
    SOURCE_OBJECT_ARCHIVED = "SOURCE_OBJECT_ARCHIVED"


@dataclass(frozen=True)
class ObjectVersion:
    """One entry of a version listing: an object version or a delete marker (no etag, no size)."""

    key: str
    version_id: str
    is_latest: bool
    is_delete_marker: bool = False
    etag: str = ""
    size: int = 0
    storage_class: str = "STANDARD"


@dataclass(frozen=True)
class VersionListing:
    """One ListObjectVersions page, versions and delete markers merged back into key order (newest
    first within a key); the markers of the next page, both None when this page is the last."""

    entries: tuple[ObjectVersion, ...]
    next_key_marker: str | None = None
    next_version_id_marker: str | None = None

    @property
    def truncated(self) -> bool:
        return self.next_key_marker is not None


@dataclass(frozen=True)
class ObjectPin:
    """Exactly one version of an object: by version id, or by ETag where the version id is ``null``
    (an unversioned bucket, where a version id names nothing that stays)."""

    bucket: str
    key: str
    version_id: str
    etag: str

    @property
    def by_etag(self) -> bool:
        return self.version_id == NULL_VERSION


class BucketReader(Protocol):
    def list_versions(
        self, bucket: str, prefix: str, *, key_marker: str | None, version_id_marker: str | None, max_keys: int
    ) -> VersionListing:
        """One page of ListObjectVersions. Raises ``SourceAccessDenied`` or ``SourceBucketMissing``;
        transient errors as ``rag_ingest.core.errors.TransientError``."""
        ...

    def read_version(self, pin: ObjectPin, max_bytes: int) -> bytes:
        """The pinned version's bytes, at most ``max_bytes`` + 1 of them (more means too large).
        Raises ``ItemUnavailableError`` (``SourceCode``) when that version cannot be read."""
        ...


class ObjectCopier(Protocol):
    def copy_version(self, pin: ObjectPin, bucket: str, key: str, metadata: Mapping[str, str]) -> str:
        """Copy the pinned version to ``bucket``/``key`` with ``metadata`` (replacing the source's);
        returns the new object's version id (``null`` in an unversioned bucket)."""
        ...


@runtime_checkable
class ServerSideCopy(Protocol):
    """A connector whose items the engine can copy into the stack's bucket, bytes never in Lambda."""

    def copy_into(self, item: SourceItem, bucket: str, key: str, metadata: Mapping[str, str]) -> str:
        """Copy ``item`` exactly as listed to ``bucket``/``key``; returns the copy's version id."""
        ...


class SourceAccessDenied(ItemUnavailableError):
    """S3 answered AccessDenied; ``permission`` is the action and resource the stack's role lacks."""

    def __init__(self, permission: str, message: str) -> None:
        super().__init__(SourceCode.SOURCE_ACCESS_DENIED, message)
        self.permission = permission


class SourceBucketMissing(ItemUnavailableError):
    def __init__(self, bucket: str) -> None:
        super().__init__(SourceCode.SOURCE_BUCKET_NOT_FOUND, f"the bucket {bucket!r} does not exist")
        self.bucket = bucket
