"""The S3 source: its configuration, its globs, and its connector (rag_ingest.sources.connector).

An item is the latest version of an object below the prefix that the globs select; a
``<name>.metadata.json`` sidecar is never an item but puts its metadata on ``<name>`` and its own
version in ``<name>``'s change token. Keys are data, never paths. Reads go through the
``BucketReader`` port (rag_ingest.sources.buckets); no boto3 here. May import ``rag_ingest.core``
and ``rag_ingest.sources``. The rules and why: docs/sources.md, "The S3 source".
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.metadata import MAX_SIDECAR_BYTES, SIDECAR_SUFFIX, MetadataError, metadata_from_sidecar
from rag_ingest.sources.buckets import (
    NULL_VERSION,
    BucketReader,
    ObjectCopier,
    ObjectPin,
    ObjectVersion,
    SourceCode,
)
from rag_ingest.sources.connector import ItemFailure, ItemUnavailableError, KnownLookup, ListingPage, SourceItem

MAX_KEY_BYTES = 1024  # S3's longest key, in UTF-8 bytes
MAX_GLOBS = 50
#: ListObjectVersions answers at most 1,000 entries (versions and delete markers) a call.
MAX_PAGE_SIZE = 1000
#: CopyObject copies at most 5 GB in one call; a larger object needs a multipart copy.
MAX_COPY_BYTES = 5 * 1024**3
#: Storage classes whose objects must be restored before a GET (Glacier Instant Retrieval reads at once).
ARCHIVED_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class S3SourceConfig(BaseModel):
    """``config`` of a source of kind ``s3``. Globs match the key with ``prefix`` removed: ``*`` and
    ``?`` stay within a folder, ``**`` (a whole segment) crosses folders, anything else is literal."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str = Field(description="The bucket's name (not an ARN, not a URL)")
    prefix: str = Field(default="", description="Only keys that start with it; end it with / to name a folder")
    include: tuple[str, ...] = Field(default=("**",), description="Keys to sync (any glob matches)")
    exclude: tuple[str, ...] = Field(default=(), description="Keys to leave out (wins over include)")

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, value: str) -> str:
        if value.startswith(("arn:", "s3://")):
            raise ValueError(f"give the bucket's name alone, as in 'team-docs' (got {value[:80]!r})")
        if not _BUCKET.fullmatch(value) or ".." in value or _is_ip_address(value):
            raise ValueError(
                "a bucket name is 3 to 63 lowercase letters, digits, dots and hyphens, begins and ends with a "
                f"letter or digit, has no '..' and is no IP address (got {value[:80]!r})"
            )
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if len(value.encode()) > MAX_KEY_BYTES:
            raise ValueError(f"a prefix is at most {MAX_KEY_BYTES} bytes as UTF-8")
        return value

    @field_validator("include", "exclude")
    @classmethod
    def _globs(cls, value: Sequence[str]) -> tuple[str, ...]:
        if len(value) > MAX_GLOBS:
            raise ValueError(f"at most {MAX_GLOBS} globs (got {len(value)})")
        for index, pattern in enumerate(value):
            try:
                glob_regex(pattern)
            except ValueError as error:
                raise ValueError(f"[{index}] {error}") from None
        return tuple(value)

    def selects(self, key: str) -> bool:
        """Whether ``key`` (a full key, under ``prefix``) is one the globs select."""
        relative = key[len(self.prefix) :]
        return any(_compiled(g).fullmatch(relative) for g in self.include) and not any(
            _compiled(g).fullmatch(relative) for g in self.exclude
        )


def glob_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` as a regular expression for ``fullmatch``; ``ValueError`` saying what is wrong."""
    if not pattern:
        raise ValueError("a glob is not empty")
    if len(pattern.encode()) > MAX_KEY_BYTES:
        raise ValueError(f"a glob is at most {MAX_KEY_BYTES} bytes as UTF-8")
    segments = pattern.split("/")
    parts: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            # "**/" is zero or more whole folders; a final "**" is anything at all.
            parts.append(".*" if last else "(?:.*/)?")
            continue
        if "**" in segment:
            raise ValueError(f"'**' is a whole path segment, as in '**/*.pdf' or 'docs/**' (got {pattern[:80]!r})")
        body = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in segment)
        parts.append(body if last else body + "/")
    return re.compile("".join(parts), re.DOTALL)


_GLOBS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _GLOBS:
        _GLOBS[pattern] = glob_regex(pattern)
    return _GLOBS[pattern]


def _is_ip_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def version_token(version: ObjectVersion) -> str:
    """One object version's part of a change token: its version id, or its ETag where that is ``null``."""
    if version.version_id == NULL_VERSION:
        return f"etag:{version.etag.strip(chr(34))}"
    return f"v:{version.version_id}"


def change_token(document: ObjectVersion, sidecar: ObjectVersion | None) -> str:
    """The item's change token: the document's version, and its sidecar's when it has one."""
    token = version_token(document)
    return f"{token}|sidecar={version_token(sidecar)}" if sidecar is not None else token


def s3_uri(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


class S3Connector:
    """A bucket and prefix as a connector, and a ``ServerSideCopy`` when given a ``copier``.
    ``max_object_bytes`` is the largest object synced (at most 5 GB, CopyObject's limit);
    ``page_size`` the ListObjectVersions entries one page asks for."""

    def __init__(
        self,
        config: S3SourceConfig,
        bucket_reader: BucketReader,
        *,
        max_object_bytes: int,
        copier: ObjectCopier | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> None:
        if not 0 < max_object_bytes <= MAX_COPY_BYTES:
            raise ValueError(f"max_object_bytes is between 1 and {MAX_COPY_BYTES} (got {max_object_bytes})")
        if not 0 < page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size is between 1 and {MAX_PAGE_SIZE} (got {page_size})")
        self.config = config
        self._reader = bucket_reader
        self._copier = copier
        self._max_bytes = max_object_bytes
        self._page_size = page_size

    # -- Connector ---------------------------------------------------------------------------
    def list_page(self, cursor: str | None, known: KnownLookup) -> ListingPage:
        key_marker, version_marker = _markers(cursor)
        listing = self._reader.list_versions(
            self.config.bucket,
            self.config.prefix,
            key_marker=key_marker,
            version_id_marker=version_marker,
            max_keys=self._page_size,
        )
        # A key's newest entry comes first; a page that starts within a key shows only older ones.
        newest: dict[str, ObjectVersion] = {}
        for entry in listing.entries:
            if entry.key not in newest:
                newest[entry.key] = entry
        last_key = listing.entries[-1].key if listing.entries else ""
        items: list[SourceItem] = []
        failures: list[ItemFailure] = []
        for key, entry in newest.items():
            if not entry.is_latest or entry.is_delete_marker or key.endswith(SIDECAR_SUFFIX):
                continue
            if key.endswith("/") and entry.size == 0:
                continue  # a console "folder": no document, no failure
            if not self.config.selects(key):
                continue
            sidecar_key = key + SIDECAR_SUFFIX
            if sidecar_key in newest:
                sidecar = _live(newest[sidecar_key])
            elif listing.truncated and sidecar_key > last_key:
                sidecar = self._sidecar_beyond_page(sidecar_key)  # the page ended between the two
            else:
                sidecar = None
            outcome = self._item(entry, sidecar, known)
            if isinstance(outcome, SourceItem):
                items.append(outcome)
            else:
                failures.append(outcome)
        next_cursor = None
        if listing.truncated:
            next_cursor = json.dumps(
                {"key_marker": listing.next_key_marker, "version_id_marker": listing.next_version_id_marker},
                ensure_ascii=False,
            )
        return ListingPage(items=tuple(items), cursor=next_cursor, failures=tuple(failures))

    def fetch(self, item: SourceItem) -> bytes:
        content = self._reader.read_version(self.pin(item), self._max_bytes)
        if len(content) > self._max_bytes:
            raise ItemUnavailableError(ErrorCode.FILE_TOO_LARGE, f"{item.uri} is over {self._max_bytes} bytes")
        return content

    def describe(self, key: str, known: KnownLookup) -> SourceItem | ItemFailure | None:
        """The item ``key`` is now, as a listing would give it (an object event's check); None when
        it is no item: gone, a delete marker, a sidecar, a folder, or outside the globs."""
        if not key.startswith(self.config.prefix) or key.endswith(SIDECAR_SUFFIX) or not self.config.selects(key):
            return None
        found = self._reader.list_versions(self.config.bucket, key, key_marker=None, version_id_marker=None, max_keys=1)
        entry = found.entries[0] if found.entries else None
        if entry is None or entry.key != key or _live(entry) is None or (key.endswith("/") and entry.size == 0):
            return None
        return self._item(entry, self._sidecar_beyond_page(key + SIDECAR_SUFFIX), known)

    # -- ServerSideCopy ----------------------------------------------------------------------
    def copy_into(self, item: SourceItem, bucket: str, key: str, metadata: Mapping[str, str]) -> str:
        if self._copier is None:
            raise NotImplementedError("this S3Connector was built without a copier")
        return self._copier.copy_version(self.pin(item), bucket, key, metadata)

    def pin(self, item: SourceItem) -> ObjectPin:
        """The exact version ``item`` was listed at (its validators keep it)."""
        try:
            return ObjectPin(self.config.bucket, item.key, item.validators["version_id"], item.validators["etag"])
        except KeyError:
            raise ValueError(f"{item.uri} was not listed by an S3Connector (no version_id and etag)") from None

    # -- one object ----------------------------------------------------------------------------
    def _item(
        self, entry: ObjectVersion, sidecar: ObjectVersion | None, known: KnownLookup
    ) -> SourceItem | ItemFailure:
        uri = s3_uri(self.config.bucket, entry.key)

        def failure(code: str, reason: str) -> ItemFailure:
            return ItemFailure(key=entry.key, uri=uri, code=code, reason=reason)

        if entry.key.endswith("/"):
            return failure(
                ErrorCode.INVALID_OBJECT_KEY, "a key that ends in '/' names a folder, yet this one holds bytes"
            )
        if entry.storage_class in ARCHIVED_CLASSES:
            return failure(SourceCode.SOURCE_OBJECT_ARCHIVED, f"stored as {entry.storage_class}: restore it to sync it")
        if entry.size > self._max_bytes:
            return failure(ErrorCode.FILE_TOO_LARGE, f"{entry.size} bytes, over the limit of {self._max_bytes}")
        if entry.size == 0:
            return failure(ErrorCode.EMPTY_FILE, "the object is empty")
        token = change_token(entry, sidecar)
        metadata: dict[str, Any] | None = None
        previous = known(entry.key)
        if sidecar is not None and (previous is None or previous.change_token != token):
            try:
                metadata = self._sidecar_metadata(sidecar)
            except MetadataError as error:
                return failure(ErrorCode.INVALID_REQUEST, f"sidecar {sidecar.key}: {error}")
            except ItemUnavailableError as error:
                return failure(error.code, f"sidecar {sidecar.key}: {error}")
        return SourceItem(
            key=entry.key,
            change_token=token,
            uri=uri,
            filename=entry.key.rsplit("/", 1)[-1],
            size_bytes=entry.size,
            validators={"version_id": entry.version_id, "etag": entry.etag},
            metadata=metadata,
        )

    def _sidecar_metadata(self, sidecar: ObjectVersion) -> dict[str, Any]:
        if sidecar.size > MAX_SIDECAR_BYTES:
            raise MetadataError("metadataAttributes", f"the sidecar is over {MAX_SIDECAR_BYTES} bytes")
        pin = ObjectPin(self.config.bucket, sidecar.key, sidecar.version_id, sidecar.etag)
        return metadata_from_sidecar(self._reader.read_version(pin, MAX_SIDECAR_BYTES))

    def _sidecar_beyond_page(self, sidecar_key: str) -> ObjectVersion | None:
        # The key itself as the prefix: its newest entry, if any, is the first one listed.
        found = self._reader.list_versions(
            self.config.bucket, sidecar_key, key_marker=None, version_id_marker=None, max_keys=1
        )
        first = found.entries[0] if found.entries else None
        return _live(first) if first is not None and first.key == sidecar_key else None


def _live(entry: ObjectVersion) -> ObjectVersion | None:
    return entry if entry.is_latest and not entry.is_delete_marker else None


def _markers(cursor: str | None) -> tuple[str | None, str | None]:
    if cursor is None:
        return None, None
    try:
        decoded = json.loads(cursor)
        key_marker, version_marker = decoded["key_marker"], decoded["version_id_marker"]
    except (ValueError, TypeError, KeyError):
        raise ValueError(f"not an S3 listing cursor: {cursor[:120]!r}") from None
    if not isinstance(key_marker, str) or not (version_marker is None or isinstance(version_marker, str)):
        raise ValueError(f"not an S3 listing cursor: {cursor[:120]!r}")
    return key_marker, version_marker
