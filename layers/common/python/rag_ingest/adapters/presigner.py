"""S3 presigned URLs for browsers: the upload's POST (its policy pins key, type and size) and a download's GET."""

from __future__ import annotations

from typing import Any

from rag_ingest.adapters.aws import presigning_s3_client
from rag_ingest.core.record import ETAG_VERSION_PREFIX


class S3Presigner:
    """Presigning is local computation (no request is sent): it only needs credentials."""

    def __init__(self, s3_client: Any | None = None) -> None:
        self._s3 = s3_client if s3_client is not None else presigning_s3_client()

    def presign_upload(
        self, *, bucket: str, key: str, content_type: str, max_bytes: int, expires_in: int
    ) -> dict[str, Any]:
        post = self._s3.generate_presigned_post(
            Bucket=bucket,
            Key=key,
            Fields={"Content-Type": content_type},
            Conditions=[{"Content-Type": content_type}, ["content-length-range", 1, max_bytes]],
            ExpiresIn=expires_in,
        )
        return {"url": post["url"], "fields": post["fields"]}

    def presign_download(
        self,
        *,
        bucket: str,
        key: str,
        version: str,
        content_type: str,
        content_disposition: str,
        expires_in: int,
    ) -> str:
        params: dict[str, Any] = {
            "Bucket": bucket,
            "Key": key,
            "ResponseContentType": content_type,
            "ResponseContentDisposition": content_disposition,
        }
        # Unversioned buckets identify a version by its ETag, which is never a VersionId.
        if not version.startswith(ETAG_VERSION_PREFIX):
            params["VersionId"] = version
        return str(self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_in))
