"""The API's domain: issue an upload (presigned POST) and report a document's state."""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_ingest.adapters.status_repository import DocumentRecord, StatusRepository
from rag_ingest.config import ApiEnv
from rag_ingest.errors import ErrorCode, PermanentError
from rag_ingest.ids import new_document_id

PDF_CONTENT_TYPE = "application/pdf"
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._ -]")


class UploadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    filename: str = Field(min_length=1, max_length=200)
    content_type: str = PDF_CONTENT_TYPE

    @field_validator("filename")
    @classmethod
    def _safe_filename(cls, value: str) -> str:
        # The filename becomes part of the S3 key: keep it to a plain, readable subset.
        cleaned = _UNSAFE_FILENAME.sub("_", value.strip().rsplit("/", 1)[-1]).strip(". ")
        if not cleaned:
            raise ValueError("filename is empty after removing unsafe characters")
        return cleaned


class UploadTicket(BaseModel):
    document_id: str
    status: str
    upload: dict[str, Any]
    expires_at: int
    max_bytes: int


class DocumentView(BaseModel):
    """What the frontend sees: state, stage, progress, counts and the error, never internals."""

    document_id: str
    status: str
    filename: str | None
    stage: str | None
    progress: dict[str, int] | None
    attempts: dict[str, int]
    error_code: str | None
    error_detail: str | None
    page_count: int | None
    failed_pages: list[int]
    chunk_count: int | None
    timings_ms: dict[str, int]
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, record: DocumentRecord) -> DocumentView:
        return cls(
            document_id=record.document_id,
            status=record.status.value,
            filename=record.filename,
            stage=record.stage.value if record.stage else None,
            progress=record.progress.model_dump() if record.progress else None,
            attempts=record.attempts,
            error_code=record.error_code.value if record.error_code else None,
            error_detail=record.error_detail,
            page_count=record.page_count,
            failed_pages=record.failed_pages,
            chunk_count=record.chunk_count,
            timings_ms=record.timings_ms,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )


class DocumentNotFoundError(LookupError):
    pass


class DocumentService:
    def __init__(self, env: ApiEnv, status: StatusRepository, s3_client: Any) -> None:
        self._env = env
        self._status = status
        self._s3 = s3_client

    def create_upload(self, tenant_id: str, request: UploadRequest) -> UploadTicket:
        if request.content_type != PDF_CONTENT_TYPE:
            raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, f"only {PDF_CONTENT_TYPE} is accepted")
        if not request.filename.lower().endswith(".pdf"):
            raise PermanentError(ErrorCode.UNSUPPORTED_TYPE, "the filename must end in .pdf")
        document_id = new_document_id()
        key = f"{self._env.raw_prefix}{tenant_id}/{document_id}/{request.filename}"
        self._status.create_awaiting_upload(
            document_id=document_id,
            tenant_id=tenant_id,
            filename=request.filename,
            bucket=self._env.bucket_name,
            key=key,
        )
        expires_in = self._env.upload_url_expiry_seconds
        # S3 enforces these conditions on the POST itself: exact key, PDF type, size range, expiry.
        post = self._s3.generate_presigned_post(
            Bucket=self._env.bucket_name,
            Key=key,
            Fields={"Content-Type": PDF_CONTENT_TYPE},
            Conditions=[
                {"Content-Type": PDF_CONTENT_TYPE},
                ["content-length-range", 1, self._env.max_upload_bytes],
            ],
            ExpiresIn=expires_in,
        )
        return UploadTicket(
            document_id=document_id,
            status="AWAITING_UPLOAD",
            upload={"url": post["url"], "fields": post["fields"]},
            expires_at=int(time.time()) + expires_in,
            max_bytes=self._env.max_upload_bytes,
        )

    def get(self, tenant_id: str, document_id: str) -> DocumentView:
        record = self._status.get(document_id)
        # Another tenant's document is reported exactly like a missing one.
        if record is None or record.tenant_id != tenant_id:
            raise DocumentNotFoundError(document_id)
        return DocumentView.of(record)
