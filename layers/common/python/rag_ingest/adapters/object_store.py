"""S3: the uploaded documents (by version) and the stages' artifacts (checkpoints)."""

from __future__ import annotations

import json
from typing import Any

from rag_ingest.adapters.aws import client, translated
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.job import ObjectRef
from rag_ingest.core.record import ETAG_VERSION_PREFIX
from rag_ingest.core.tracing import traced

_MISSING = frozenset({"NoSuchKey", "NoSuchVersion", "404", "NotFound", "NoSuchBucket", "PreconditionFailed", "412"})


@traced
class ObjectStore:
    def __init__(self, s3_client: Any | None = None) -> None:
        self._s3 = s3_client if s3_client is not None else client("s3")

    # -- uploaded documents ----------------------------------------------------------------
    def size(self, ref: ObjectRef) -> int:
        head = self._call(self._s3.head_object, ref, "head object", Bucket=ref.bucket, Key=ref.key)
        return int(head["ContentLength"])

    def read_range(self, ref: ObjectRef, length: int) -> bytes:
        response = self._call(
            self._s3.get_object, ref, "read object", Bucket=ref.bucket, Key=ref.key, Range=f"bytes=0-{length - 1}"
        )
        return bytes(response["Body"].read())

    def read(self, ref: ObjectRef) -> bytes:
        response = self._call(self._s3.get_object, ref, "read object", Bucket=ref.bucket, Key=ref.key)
        return bytes(response["Body"].read())

    # -- artifacts -------------------------------------------------------------------------
    def put_json(self, bucket: str, key: str, payload: Any) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        with translated(f"put {key}"):
            self._s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")

    def get_json(self, bucket: str, key: str) -> Any:
        with translated(f"get {key}"):
            response = self._s3.get_object(Bucket=bucket, Key=key)
        return json.loads(response["Body"].read())

    def read_current(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        """An S3 sidecar (rag_ingest.documents.intake): the current version, None when absent."""
        with translated(f"get {key}", expect={*_MISSING, "InvalidRange"}) as refusal:
            response = self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{max_bytes}")
        if refusal.code == "InvalidRange":  # an empty object
            return b""
        if refusal.refused:
            return None
        return bytes(response["Body"].read())

    def exists(self, bucket: str, key: str) -> bool:
        with translated(f"head {key}", expect=_MISSING) as refusal:
            self._s3.head_object(Bucket=bucket, Key=key)
        return not refusal.refused

    def _call(self, operation: Any, ref: ObjectRef, what: str, **kwargs: Any) -> Any:
        # Pin the exact version that was uploaded: by versionId, or by ETag on an unversioned bucket.
        if ref.version.startswith(ETAG_VERSION_PREFIX):
            kwargs["IfMatch"] = f'"{ref.version.removeprefix(ETAG_VERSION_PREFIX)}"'
        else:
            kwargs["VersionId"] = ref.version
        with translated(what, expect=_MISSING) as refusal:
            return operation(**kwargs)
        raise PermanentError(
            ErrorCode.OBJECT_NOT_FOUND, f"s3://{ref.bucket}/{ref.key} version {ref.version} is gone"
        ) from refusal.error
