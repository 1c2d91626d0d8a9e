"""S3 keys in the kept state: every version and delete marker of a key, its bodies as blobs.

Hooked at ``S3Backend.put_object`` and ``delete_object``. A record is the list of the key's
versions (moto's ``FakeKey`` state without its body, or a marker); restoring sets the list back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from local.runtime.persistence.base import EntityKey, Patches, Touch
from local.runtime.persistence.blobs import BlobStore


class S3Entities:
    kind = "s3"

    def __init__(self, account_id: str) -> None:
        self.account_id = account_id
        # (bucket, key, version id, etag) -> body digest: a version's body never changes.
        self._digests: dict[tuple[str, str, str, str], str] = {}

    def backend(self) -> Any:
        from moto.s3.models import s3_backends

        return s3_backends[self.account_id]["aws"]

    def read(self, key: EntityKey, blobs: BlobStore) -> list[dict[str, Any]] | None:
        return self._read(key[1], key[2], blobs)

    def _read(self, bucket_name: str, key_name: str, blobs: BlobStore) -> list[dict[str, Any]] | None:
        from moto.s3.models import FakeDeleteMarker

        bucket = self.backend().buckets.get(bucket_name)
        if bucket is None:
            return None
        versions = list(bucket.keys.getlist(key_name, None) or [])
        if not versions:
            return None
        records: list[dict[str, Any]] = []
        for version in versions:
            if isinstance(version, FakeDeleteMarker):
                records.append(
                    {
                        "marker": True,
                        "name": version.name,
                        "version_id": version.version_id,
                        "last_modified": version.last_modified,
                    }
                )
                continue
            cache_key = (bucket_name, key_name, str(version.version_id), str(version.etag))
            digest = self._digests.get(cache_key)
            if digest is None:
                digest = blobs.put(version.value)
                self._digests[cache_key] = digest
            state = {
                name: value
                for name, value in version.__dict__.items()
                if name not in ("_value_buffer", "lock", "multipart")  # the body is a blob; parts are not kept
            }
            records.append({"marker": False, "state": state, "blob": digest})
        return records

    def all_entities(self, blobs: BlobStore) -> Iterator[tuple[EntityKey, Any]]:
        for bucket_name, bucket in list(self.backend().buckets.items()):
            for key_name in list(bucket.keys.keys()):
                record = self._read(bucket_name, key_name, blobs)
                if record is not None:
                    yield ("s3", bucket_name, key_name), record

    def containers(self) -> set[str]:
        return set(self.backend().buckets)

    def write(self, key: EntityKey, record: list[dict[str, Any]], blobs: BlobStore) -> None:
        from moto.s3.models import FakeDeleteMarker, FakeKey

        bucket_name, key_name = key[1], key[2]
        versions: list[Any] = []
        for version in record:
            if version["marker"]:
                marker: Any = FakeDeleteMarker.__new__(FakeDeleteMarker)
                # A marker points at the version it hid (moto reads it when the marker is deleted).
                marker.key = versions[-1] if versions else None
                marker.name = version["name"]
                marker.last_modified = version["last_modified"]
                marker._version_id = version["version_id"]
                versions.append(marker)
                continue
            restored: Any = FakeKey.__new__(FakeKey)
            restored.__setstate__({**version["state"], "multipart": None, "value": blobs.get(version["blob"])})
            state = version["state"]
            self._digests[(bucket_name, key_name, str(state["_version_id"]), str(restored.etag))] = version["blob"]
            versions.append(restored)
        self.backend().buckets[bucket_name].keys.setlist(key_name, versions)

    def hook(self, patches: Patches, touch: Touch) -> None:
        from moto.s3.models import S3Backend

        def key_change(original: Callable[..., Any]) -> Callable[..., Any]:
            def changed(backend: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
                try:
                    return original(backend, bucket_name, key_name, *args, **kwargs)
                finally:
                    touch(("s3", bucket_name, key_name))

            return changed

        patches.wrap(S3Backend, "put_object", key_change)
        patches.wrap(S3Backend, "delete_object", key_change)
