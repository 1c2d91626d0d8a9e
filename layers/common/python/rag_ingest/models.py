"""Data models shared across stages. Step Functions state stays small: ids, counts, S3 pointers."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class DocumentStatus(StrEnum):
    AWAITING_UPLOAD = "AWAITING_UPLOAD"
    # The upload URL expired (plus a grace period) and no file came: set by the reaper.
    EXPIRED = "EXPIRED"
    QUEUED = "QUEUED"
    PROCESSING = "PROCESSING"
    READY = "READY"
    FAILED = "FAILED"
    DELETING = "DELETING"
    DELETED = "DELETED"


class Stage(StrEnum):
    VALIDATE = "VALIDATE"
    PARSE = "PARSE"
    CHUNK = "CHUNK"
    EMBED = "EMBED"
    INDEX = "INDEX"
    FINALIZE = "FINALIZE"


# Without bucket versioning a document version is its ETag, marked so it is never sent as a VersionId.
ETAG_VERSION_PREFIX = "etag:"


class ObjectRef(BaseModel):
    """One version of one S3 object: ``version`` is the S3 versionId, or ``etag:<ETag>`` when unversioned."""

    model_config = ConfigDict(frozen=True)

    bucket: str
    key: str
    version: str


class PageText(BaseModel):
    """Text of one PDF page; ``page_number`` is 1-based as a reader counts."""

    page_number: int = Field(ge=1)
    text: str


class ParsedDocument(BaseModel):
    page_count: int = Field(ge=0)
    pages: list[PageText]
    failed_pages: list[int] = Field(default_factory=list)


class Chunk(BaseModel):
    """A passage to embed and index, with its provenance in the document."""

    chunk_index: int = Field(ge=0)
    text: str
    page_start: int = Field(ge=1)
    page_end: int = Field(ge=1)
    heading_path: list[str] = Field(default_factory=list)
    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    token_count: int = Field(ge=0)


class DocumentJob(BaseModel):
    """The Step Functions state: ids, counts and S3 pointers only (state is capped at 256 KB).

    Each stage receives the whole job and returns it with its own fields filled in.
    """

    model_config = ConfigDict(extra="ignore")

    document_id: str
    tenant_id: str
    bucket: str
    key: str
    version: str
    size_bytes: int | None = None
    page_count: int | None = None
    failed_pages: list[int] = Field(default_factory=list)
    pages_key: str | None = None
    chunk_count: int | None = None
    chunks_key: str | None = None
    embeddings_prefix: str | None = None
    embed_tasks: list[int] = Field(default_factory=list)  # Map items: one Embed task each
    indexed_count: int | None = None
    stale_chunks_deleted: int | None = None

    @property
    def object_ref(self) -> ObjectRef:
        return ObjectRef(bucket=self.bucket, key=self.key, version=self.version)


class EmbedTask(BaseModel):
    """One iteration of the Embed Map: the job and which slice of its chunks to embed."""

    job: DocumentJob
    task: int = Field(ge=0)


class FailedJob(DocumentJob):
    """MarkFailed's input: the job plus Step Functions' Catch output under ``error``."""

    error: dict[str, str] = Field(default_factory=dict)
