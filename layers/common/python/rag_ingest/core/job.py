"""The workflow's job: what Step Functions carries between stages, and how a document is planned.

``DocumentJob`` stays small (ids, counts, S3 pointers: state payloads are capped at 256 KB).
Imports only ``rag_ingest.core``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from rag_ingest.core.parsed import DocumentFormat


class Stage(StrEnum):
    VALIDATE = "VALIDATE"
    PARSE = "PARSE"
    CHUNK = "CHUNK"
    EMBED = "EMBED"
    INDEX = "INDEX"
    FINALIZE = "FINALIZE"


class ObjectRef(BaseModel):
    """One version of one S3 object: ``version`` is the S3 versionId, or ``etag:<ETag>`` when unversioned."""

    model_config = ConfigDict(frozen=True)

    bucket: str
    key: str
    version: str


class PageRange(BaseModel):
    """One item of the Parse Map (planned by Validate): pages ``first_page``..``last_page``
    (1-based, inclusive) and how many of them may be OCR'd (its share of the document's cap)."""

    model_config = ConfigDict(frozen=True)

    first_page: int = Field(ge=1)
    last_page: int = Field(ge=1)
    max_ocr_pages: int = Field(default=0, ge=0)

    @property
    def pages(self) -> int:
        return self.last_page - self.first_page + 1


#: Pages per Parse Map task unless configured (cdk.json parsing.rangePages, env PARSE_RANGE_PAGES).
DEFAULT_PARSE_RANGE_PAGES = 50


#: Documents of more pages go to the bulk lane unless configured (cdk.json lanes.bulkAbovePages, env BULK_ABOVE_PAGES).
DEFAULT_BULK_ABOVE_PAGES = 200


class Lane(StrEnum):
    """Which copies of the heavy stage functions run a document (docs/architecture.md, "Lanes")."""

    STANDARD = "standard"
    BULK = "bulk"


# The tag naming a stage function's lane: cost allocation per lane in AWS; the local runtime runs
# the bulk lane's workers at a lower CPU priority (both lanes share the machine's cores there).
LANE_TAG = "rag-ingest:lane"


def lane_for(page_count: int, bulk_above_pages: int) -> Lane:
    return Lane.BULK if page_count > bulk_above_pages else Lane.STANDARD


def plan_page_ranges(page_count: int, range_pages: int, max_ocr_pages: int) -> list[PageRange]:
    """The Parse Map's items: ``page_count`` pages in ranges of ``range_pages`` (the last one
    shorter), each with its share of the document's OCR cap, proportional to its pages and summing
    to ``max_ocr_pages`` exactly (ranges run in parallel: none can know what the others used).

    A document without pages gets one range of one page: parsing it reports EMPTY_DOCUMENT.
    """
    if range_pages < 1:
        raise ValueError(f"range_pages must be at least 1, got {range_pages}")
    if page_count < 1:
        return [PageRange(first_page=1, last_page=1, max_ocr_pages=max_ocr_pages)]
    ranges = []
    for first in range(1, page_count + 1, range_pages):
        last = min(first + range_pages - 1, page_count)
        share = max_ocr_pages * last // page_count - max_ocr_pages * (first - 1) // page_count
        ranges.append(PageRange(first_page=first, last_page=last, max_ocr_pages=share))
    return ranges


class BatchPhase(StrEnum):
    """What the workflow's Choice after an ``advance`` does: embed on demand (the Embed Map), wait
    and advance again, or go on to Index."""

    ON_DEMAND = "ON_DEMAND"
    WAITING = "WAITING"
    DONE = "DONE"


class EmbedBatchState(BaseModel):
    """The bulk lane's batch inference job in the Step Functions state (small: ids and counts;
    rag_ingest.ingest.batch_embedding)."""

    phase: BatchPhase = BatchPhase.WAITING
    job_arn: str | None = None
    job_name: str | None = None
    status: str | None = None
    records: int = Field(default=0, ge=0)
    polls: int = Field(default=0, ge=0)
    # The Wait state's SecondsPath: how long before the next advance.
    wait_seconds: int = Field(default=0, ge=0)
    # When the job was created (ISO 8601, UTC): past it plus the job's timeout, the document fails.
    submitted_at: str | None = None
    reason: str | None = None


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
    # Decided by Validate from the object's bytes; Parse reads the object as this format.
    document_format: DocumentFormat = DocumentFormat.PDF
    page_count: int | None = None
    failed_pages: list[int] = Field(default_factory=list)
    # Map items of Parse, one per page range; the range artifacts are under pages_key (a folder).
    parse_tasks: list[PageRange] = Field(default_factory=list)
    # Set by Parse's first task from the page count; the workflow's Lane choice reads it.
    lane: Lane = Lane.STANDARD
    pages_key: str | None = None
    chunk_count: int | None = None
    chunks_key: str | None = None
    embeddings_prefix: str | None = None
    embed_tasks: list[int] = Field(default_factory=list)  # Map items: one Embed task each
    # The bulk lane's Embed by Bedrock batch inference (embedding.batchInference), when it is on.
    embed_batch: EmbedBatchState | None = None
    content_sha256: str | None = None
    indexed_count: int | None = None
    # The record's revision whose metadata Index wrote onto the chunks: Finalize rewrites them when a
    # PATCH changed the record since (rag_ingest.ingest.chunk_rewrite).
    indexed_revision: int | None = None
    stale_chunks_deleted: int | None = None

    @property
    def object_ref(self) -> ObjectRef:
        return ObjectRef(bucket=self.bucket, key=self.key, version=self.version)


class EmbedTask(BaseModel):
    """One iteration of the Embed Map: the job and which slice of its chunks to embed."""

    job: DocumentJob
    task: int = Field(ge=0)


class ParseTask(BaseModel):
    """One iteration of the Parse Map: the job and which page range to parse."""

    job: DocumentJob
    range: PageRange


class FailedJob(DocumentJob):
    """MarkFailed's input: the job plus Step Functions' Catch output under ``error``."""

    error: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class CacheKey:
    """Where one embedded text's vector lives for one tenant, model and dimension."""

    tenant_id: str
    model_id: str
    dimension: int
    text_sha256: str

    @classmethod
    def of(cls, tenant_id: str, model_id: str, dimension: int, text: str) -> CacheKey:
        return cls(tenant_id, model_id, dimension, hashlib.sha256(text.encode("utf-8")).hexdigest())

    @property
    def id(self) -> str:
        """The stored key: tenant first, so every entry sits in its tenant's key space."""
        return f"{self.tenant_id}#{self.model_id}#{self.dimension}#{self.text_sha256}"
