"""S3: a source bucket read for a sync (rag_ingest.sources.buckets' ``BucketReader`` and ``ObjectCopier``).

One ListObjectVersions page per call; a GET or a CopyObject pinned to one version (by version id,
or by ETag where it is ``null``). A refusal becomes the typed error the sync reports: AccessDenied
names the action and resource the stack's role lacks, a missing bucket and a gone version have their
own codes, transient errors become ``TransientError`` (rag_ingest.adapters.aws.translated).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from rag_ingest.adapters.aws import client, error_code, error_message, translated
from rag_ingest.core.tracing import traced
from rag_ingest.sources.buckets import (
    ObjectPin,
    ObjectVersion,
    SourceAccessDenied,
    SourceBucketMissing,
    SourceCode,
    VersionListing,
)
from rag_ingest.sources.connector import ItemUnavailableError

_DENIED = frozenset({"AccessDenied", "403", "AllAccessDisabled", "KMS.AccessDeniedException"})
_NO_BUCKET = frozenset({"NoSuchBucket"})
_GONE = frozenset({"NoSuchKey", "NoSuchVersion", "404", "NotFound", "PreconditionFailed", "412"})
_ARCHIVED = frozenset({"InvalidObjectState"})
_EMPTY = "InvalidRange"  # a Range GET of a zero-byte object


def arn(bucket: str, key: str | None = None) -> str:
    return f"arn:aws:s3:::{bucket}" if key is None else f"arn:aws:s3:::{bucket}/{key}"


@traced
class SourceBucket:
    def __init__(self, s3_client: Any | None = None) -> None:
        self._s3 = s3_client if s3_client is not None else client("s3")

    def list_versions(
        self, bucket: str, prefix: str, *, key_marker: str | None, version_id_marker: str | None, max_keys: int
    ) -> VersionListing:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if key_marker is not None:
            kwargs["KeyMarker"] = key_marker
            if version_id_marker is not None:
                kwargs["VersionIdMarker"] = version_id_marker
        with translated(f"list versions of s3://{bucket}/{prefix}", expect=_DENIED | _NO_BUCKET) as refusal:
            page = self._s3.list_object_versions(**kwargs)
        if refusal.refused:
            _raise_for_bucket(refusal.error, refusal.code, bucket, f"s3:ListBucketVersions on {arn(bucket)}")
        entries = [_entry(entry, marker=False) for entry in page.get("Versions", [])]
        entries += [_entry(entry, marker=True) for entry in page.get("DeleteMarkers", [])]
        # One key's entries newest first, as S3 lists them; the response keeps the two kinds apart.
        entries.sort(key=lambda pair: (pair[0].key, not pair[0].is_latest, -pair[1]))
        if not page.get("IsTruncated"):
            return VersionListing(tuple(entry for entry, _ in entries))
        return VersionListing(
            tuple(entry for entry, _ in entries),
            next_key_marker=str(page.get("NextKeyMarker") or entries[-1][0].key),
            next_version_id_marker=page.get("NextVersionIdMarker"),
        )

    def read_version(self, pin: ObjectPin, max_bytes: int) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": pin.bucket, "Key": pin.key, "Range": f"bytes=0-{max_bytes}"}
        action = _pin(pin, kwargs, if_match="IfMatch")
        expect = _DENIED | _NO_BUCKET | _GONE | _ARCHIVED | {_EMPTY}
        with translated(f"read s3://{pin.bucket}/{pin.key}", expect=expect) as refusal:
            response = self._s3.get_object(**kwargs)
        if refusal.code == _EMPTY:
            return b""
        if refusal.refused:
            _raise_for_object(refusal.error, refusal.code, pin, f"{action} on {arn(pin.bucket, pin.key)}")
        return bytes(response["Body"].read())

    def copy_version(self, pin: ObjectPin, bucket: str, key: str, metadata: Mapping[str, str]) -> str:
        source: dict[str, str] = {"Bucket": pin.bucket, "Key": pin.key}
        kwargs: dict[str, Any] = {
            "Bucket": bucket,
            "Key": key,
            "CopySource": source,
            "MetadataDirective": "REPLACE",
            "Metadata": dict(metadata),
        }
        if pin.by_etag:
            kwargs["CopySourceIfMatch"] = f'"{pin.etag.strip(chr(34))}"'
            action = "s3:GetObject"
        else:
            source["VersionId"] = pin.version_id
            action = "s3:GetObjectVersion"
        needs = f"{action} on {arn(pin.bucket, pin.key)} and s3:PutObject on {arn(bucket, key)}"
        expect = _DENIED | _NO_BUCKET | _GONE | _ARCHIVED
        with translated(f"copy s3://{pin.bucket}/{pin.key} to s3://{bucket}/{key}", expect=expect) as refusal:
            response = self._s3.copy_object(**kwargs)
        if refusal.refused:
            _raise_for_object(refusal.error, refusal.code, pin, needs)
        return str(response.get("VersionId") or "null")


def _entry(entry: Mapping[str, Any], *, marker: bool) -> tuple[ObjectVersion, float]:
    modified = entry.get("LastModified")
    stamp = modified.astimezone(UTC).timestamp() if isinstance(modified, datetime) else 0.0
    version = ObjectVersion(
        key=str(entry["Key"]),
        version_id=str(entry.get("VersionId") or "null"),
        is_latest=bool(entry.get("IsLatest")),
        is_delete_marker=marker,
        etag="" if marker else str(entry.get("ETag", "")),
        size=0 if marker else int(entry.get("Size", 0)),
        storage_class="" if marker else str(entry.get("StorageClass") or "STANDARD"),
    )
    return version, stamp


def _pin(pin: ObjectPin, kwargs: dict[str, Any], *, if_match: str) -> str:
    """Pins ``kwargs`` to the version; returns the IAM action such a read needs."""
    if pin.by_etag:
        kwargs[if_match] = f'"{pin.etag.strip(chr(34))}"'
        return "s3:GetObject"
    kwargs["VersionId"] = pin.version_id
    return "s3:GetObjectVersion"


def _denied(error: BaseException | None, needs: str, what: str) -> SourceAccessDenied:
    said = error_message(error)
    if "kms" in said.lower() or error_code(error).startswith("KMS"):
        needs = f"kms:Decrypt on the KMS key that encrypts it (and {needs})"
    return SourceAccessDenied(
        needs, f"access denied to {what}: the stack's sync role needs {needs} (S3 said: {said or 'AccessDenied'})"
    )


def _raise_for_bucket(error: BaseException | None, code: str, bucket: str, needs: str) -> None:
    if code in _NO_BUCKET:
        raise SourceBucketMissing(bucket) from error
    raise _denied(error, needs, f"s3://{bucket}") from error


def _raise_for_object(error: BaseException | None, code: str, pin: ObjectPin, needs: str) -> None:
    where = f"s3://{pin.bucket}/{pin.key}"
    if code in _NO_BUCKET:
        raise SourceBucketMissing(_bucket_named(error) or pin.bucket) from error
    if code in _DENIED:
        raise _denied(error, needs, where) from error
    if code in _ARCHIVED:
        archived = f"{where} is archived: restore it to sync it"
        raise ItemUnavailableError(SourceCode.SOURCE_OBJECT_ARCHIVED, archived) from error
    version = f"ETag {pin.etag}" if pin.by_etag else f"version {pin.version_id}"
    raise ItemUnavailableError(
        SourceCode.SOURCE_ITEM_CHANGED, f"{where} {version} is gone or changed since it was listed ({code})"
    ) from error


def _bucket_named(error: BaseException | None) -> str:
    response = getattr(error, "response", None)
    return str(response.get("Error", {}).get("BucketName", "")) if isinstance(response, Mapping) else ""
