"""S3: remove every version (and delete marker) of a document's objects.

The bucket is versioned, so a plain DeleteObject only hides an object behind a delete marker;
erasing a document means deleting each version by id.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC
from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.operations import StoredObjectVersion
from rag_ingest.core.tracing import traced

_DELETE_BATCH = 1000  # DeleteObjects' maximum


@traced
class ObjectVersions:
    def __init__(self, s3_client: Any | None = None) -> None:
        self._s3 = s3_client if s3_client is not None else client("s3")

    def delete_all(self, bucket: str, prefix: str, *, exact_key: str | None = None) -> int:
        """Delete every version under ``prefix`` (only of ``exact_key`` when given); returns how many."""
        deleted = 0
        batch: list[dict[str, str]] = []
        for key, version_id in self._versions(bucket, prefix):
            if exact_key is not None and key != exact_key:
                continue
            batch.append({"Key": key, "VersionId": version_id})
            if len(batch) == _DELETE_BATCH:
                deleted += self._delete(bucket, batch)
                batch = []
        if batch:
            deleted += self._delete(bucket, batch)
        return deleted

    def list_versions(self, bucket: str, prefix: str) -> Iterator[StoredObjectVersion]:
        """Every version and delete marker under ``prefix``, one page (up to 1,000) at a time, by key
        and newest first within a key: "ordered first by key and then by version ... versions are
        sorted from most to least recent. Both versions with data and delete markers are included"
        (https://docs.aws.amazon.com/sdkfornet1/latest/apidocs/html/M_Amazon_S3_AmazonS3Client_ListVersions.htm;
        the API, s3:ListBucketVersions: https://docs.aws.amazon.com/AmazonS3/latest/API/RESTBucketGETVersion.html).
        Each page's versions and markers are merged back into that order (the response has two lists)."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        while True:
            with translated(f"list versions of {prefix}"):
                page = self._s3.list_object_versions(**kwargs)
            entries = [
                StoredObjectVersion(
                    key=str(entry["Key"]),
                    version_id=str(entry.get("VersionId") or "null"),
                    etag=str(entry["ETag"]) if "ETag" in entry else None,
                    is_latest=bool(entry.get("IsLatest")),
                    is_delete_marker=marker,
                    last_modified=entry["LastModified"].astimezone(UTC).isoformat(timespec="milliseconds"),
                )
                for marker, listed in ((False, page.get("Versions", [])), (True, page.get("DeleteMarkers", [])))
                for entry in listed
            ]
            entries.sort(key=lambda e: (e.key, not e.is_latest, _descending(e.last_modified)))
            yield from entries
            if not page.get("IsTruncated"):
                return
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker")

    def _versions(self, bucket: str, prefix: str) -> Iterator[tuple[str, str]]:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        while True:
            with translated(f"list versions of {prefix}"):
                page = self._s3.list_object_versions(**kwargs)
            for entry in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                yield str(entry["Key"]), str(entry.get("VersionId") or "null")
            if not page.get("IsTruncated"):
                return
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker")

    def _delete(self, bucket: str, objects: list[dict[str, str]]) -> int:
        with translated("delete object versions"):
            response = self._s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
        errors = response.get("Errors", [])
        if errors:
            first = errors[0]
            raise RuntimeError(
                f"{len(errors)} of {len(objects)} object versions not deleted, e.g. {first.get('Key')}: "
                f"{first.get('Code')} {first.get('Message')}"
            )
        return len(objects)


def _descending(iso: str) -> tuple[int, ...]:
    """Sorts ISO timestamps newest first."""
    return tuple(-ord(character) for character in iso)
