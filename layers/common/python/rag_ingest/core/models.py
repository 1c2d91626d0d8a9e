"""The domain's data: the document record, the workflow's job, and what the ports exchange.

Step Functions state (``DocumentJob``) stays small: ids, counts, S3 pointers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_ingest.core.access import OPEN_ACCESS, DocumentAccess
from rag_ingest.core.errors import ErrorCode


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


class TextSource(StrEnum):
    """How a page's text was obtained."""

    TEXT_LAYER = "text_layer"  # extracted from the PDF's own text operators
    OCR = "ocr"  # recognised on an image of the page (it has no usable text layer)


class DocumentFormat(StrEnum):
    """What an upload is, decided by its bytes (rag_ingest.ingest.formats), never by its name."""

    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    HTML = "html"
    MARKDOWN = "markdown"
    TEXT = "text"

    @property
    def content_type(self) -> str:
        """The media type of the format (the chunks' ``content_type``, the download's header)."""
        return FORMAT_CONTENT_TYPES[self]


FORMAT_CONTENT_TYPES: dict[DocumentFormat, str] = {
    DocumentFormat.PDF: "application/pdf",
    DocumentFormat.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    DocumentFormat.PPTX: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    DocumentFormat.HTML: "text/html",
    DocumentFormat.MARKDOWN: "text/markdown",
    DocumentFormat.TEXT: "text/plain",
}


class BlockKind(StrEnum):
    HEADING = "heading"
    PARAGRAPH = "paragraph"  # a paragraph, a list item, a code block, a slide's text frame
    TABLE = "table"


class TextBlock(BaseModel):
    """A block of a structured document (DOCX, PPTX, HTML, Markdown, text): ``text[start:end]`` of
    its page. Headings carry their level (1 = outermost) and the anchor the rendered view gives them."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    kind: BlockKind
    level: int = Field(default=0, ge=0)
    anchor: str | None = None
    #: A PDF text layer's table: the x of its column edges (left edge of each column, then the right
    #: edge of the last), as fractions of the page's width; what tells a table continued on the next
    #: page from another one (rag_ingest.ingest.pdf_tables.continues_table).
    columns: list[float] | None = None
    #: A table that continues the previous page's last table (its rows read under that table's
    #: header; a repeated header row was dropped from the text).
    continues: bool = False


class PageLayout(BaseModel):
    """Where a PDF page's words stand, as its source read them (pdfium's text layer, or the OCR
    engine's words), for a passage's rectangles (``rag_ingest.ingest.geometry``).

    ``words``: the words in the source's order, joined by single spaces (no word holds a space).
    ``boxes``: per word a rectangle on the page *as displayed* (its ``/Rotate`` applied), in
    fractions of the page's width and height from the top-left corner: four little-endian uint16
    (x0, y0, x1, y1; 65535 = 1), base64. Packed because the Chunk stage holds every page of a
    2,000-page document at once: about 14 bytes a word this way, against ~150 as Python floats.
    """

    words: str
    boxes: str


class PassageBox(BaseModel):
    """One rectangle of a passage on a page, as fractions of the displayed page (origin top-left):
    Textract's convention, so a viewer multiplies by the rendered page's width and height."""

    page: int = Field(ge=1)
    x0: float = Field(ge=0.0, le=1.0)
    y0: float = Field(ge=0.0, le=1.0)
    x1: float = Field(ge=0.0, le=1.0)
    y1: float = Field(ge=0.0, le=1.0)


class PageText(BaseModel):
    """Text of one PDF page (or PPTX slide; the one "page" of a DOCX, HTML, Markdown or text
    file); ``page_number`` is 1-based as a reader counts.

    ``ocr_confidence`` is the OCR engine's mean confidence over the page's lines (0..1), only
    for ``source == ocr``. ``blocks``: the structure a structured format states (headings,
    paragraphs, tables), in order; empty for PDF pages, whose headings the chunker detects.
    """

    page_number: int = Field(ge=1)
    text: str
    source: TextSource = TextSource.TEXT_LAYER
    ocr_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    blocks: list[TextBlock] = Field(default_factory=list)
    #: PDF pages: where each word stands (None: a structured format, or no geometry was read).
    layout: PageLayout | None = None


def section_paragraphs(pages: Iterable[PageText]) -> Iterator[tuple[PageText, TextBlock, str | None, int | None]]:
    """Each block of ``pages`` with its page, the anchor of the section it is in and, for a
    non-heading block, its 1-based number in that section (None for a heading). The one rule a
    passage's ``anchor`` and ``paragraph_index`` (the chunker) and the rendered view's block ids
    (the API) both follow."""
    section: str | None = None
    number = 0
    for page in pages:
        for block in page.blocks:
            if block.kind is BlockKind.HEADING:
                section, number = block.anchor, 0
                yield page, block, section, None
            else:
                number += 1
                yield page, block, section, number


class ParsedDocument(BaseModel):
    """The Parse stage's artifact (stored in S3; Step Functions only carries its key and counts).

    ``failure_reasons`` says why a page in ``failed_pages`` failed, where a reason is known
    (e.g. over the OCR page cap).
    """

    page_count: int = Field(ge=0)
    pages: list[PageText]
    failed_pages: list[int] = Field(default_factory=list)
    # sha256 of the uploaded bytes (hex): the same bytes uploaded again are the same document's copy.
    content_sha256: str | None = None
    #: The PDF's metadata title as written (often empty or a placeholder; see retrieval_text).
    metadata_title: str | None = None
    failure_reasons: dict[int, str] = Field(default_factory=dict)

    @property
    def ocr_pages(self) -> int:
        """Pages whose text came from OCR."""
        return sum(1 for page in self.pages if page.source is TextSource.OCR)


class ParsedRange(BaseModel):
    """One Parse Map task's artifact: the raw (not yet cleaned) text of a page range and what the
    join needs for the document-level verdicts (``rag_ingest.ingest.pdf.join_page_ranges``)."""

    # The format the range was read as: the join cleans PDF text only (structured formats' text
    # is clean as extracted, and their block offsets must stay valid).
    document_format: DocumentFormat = DocumentFormat.PDF
    page_count: int = Field(ge=1)  # the document's
    first_page: int = Field(ge=1)
    last_page: int = Field(ge=1)
    pages: list[PageText]
    failed_pages: list[int] = Field(default_factory=list)
    failure_reasons: dict[int, str] = Field(default_factory=dict)
    # Pages whose extraction failed (over budget or broken), before OCR: all of them failing is CORRUPT_PDF.
    extraction_failures: int = Field(default=0, ge=0)
    over_budget: list[str] = Field(default_factory=list)
    ocr_requested: int = Field(default=0, ge=0)  # pages without a text layer that draw an image
    ocr_on: bool = False
    # Some page draws something (text, image, path): no text anywhere is then NO_TEXT_LAYER, not EMPTY_DOCUMENT.
    draws_marks: bool = False
    metadata_title: str | None = None  # read by the range holding page 1
    # sha256 of the uploaded bytes (hex), on the first range: Parse's first task reads them whole.
    content_sha256: str | None = None

    @property
    def ocr_pages(self) -> int:
        return sum(1 for page in self.pages if page.source is TextSource.OCR)

    @property
    def pages_parsed(self) -> int:
        return self.last_page - self.first_page + 1


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
    #: The document's title (retrieval_text.document_title): part of the text it is found by.
    document_title: str = ""
    #: Structured formats: the anchor of the section the chunk starts in (the rendered view's id)
    #: and the 1-based number of its first paragraph inside that section.
    anchor: str | None = None
    paragraph_index: int | None = Field(default=None, ge=1)
    #: The format of the document (a PDF's page, a PPTX's slide, a section of the others).
    document_format: DocumentFormat = DocumentFormat.PDF
    #: PDF: where the passage stands, one rectangle per line it covers on each of its pages.
    boxes: list[PassageBox] = Field(default_factory=list)


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
    # PATCH changed the record since (rag_ingest.ingest.refresh).
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


# -- the document record (the documents table) --------------------------------------------------
class Progress(BaseModel):
    done: int = 0
    total: int = 0


class CacheCounts(BaseModel):
    """The Embed stage's embedding-cache lookups for a document version: chunks found, chunks embedded."""

    hits: int = 0
    misses: int = 0


def embed_cache_part(task: int, hits: int, misses: int) -> str:
    """One Embed task's cache counts as stored in the record's set (a retried task adds the same element)."""
    return f"{task}:{hits}:{misses}"


def content_key(tenant_id: str, content_sha256: str) -> str:
    """The content index's partition: a tenant's uploads with the same bytes, never another tenant's."""
    return f"{tenant_id}#{content_sha256}"


def awaiting_upload_item(
    *,
    document_id: str,
    tenant_id: str,
    filename: str,
    bucket: str,
    key: str,
    now: str,
    metadata: Mapping[str, Any] | None = None,
    uploaded_by: str | None = None,
    access: DocumentAccess | None = None,
) -> dict[str, Any]:
    """A new document's stored item, before its upload arrives (the documents table's and its fakes').
    ``metadata`` is already valid (rag_ingest.core.metadata.validate_metadata); ``uploaded_by`` is the
    caller's ``sub``, ``access`` who else reads it (rag_ingest.core.access; None or open: the tenant)."""
    item: dict[str, Any] = {
        "document_id": document_id,
        "tenant_id": tenant_id,
        "status": DocumentStatus.AWAITING_UPLOAD.value,
        "filename": filename,
        "bucket": bucket,
        "key": key,
        "attempts": {},
        "timings_ms": {},
        "created_at": now,
        "updated_at": now,
        "metadata": dict(metadata or {}),
    }
    if uploaded_by:
        item["uploaded_by"] = uploaded_by
    if access is not None and not access.is_open:
        item["access"] = access.model_dump()
    return item


class DocumentRecord(BaseModel):
    """A document's state as the documents table holds it: the source of truth for its status."""

    model_config = ConfigDict(extra="ignore")

    document_id: str
    tenant_id: str
    status: DocumentStatus
    filename: str | None = None
    bucket: str | None = None
    key: str | None = None
    version: str | None = None
    stage: Stage | None = None
    # Embed tasks done, as "task:chunks" (a set, so a retried task is counted once), of embed_total.
    embedded_parts: set[str] = Field(default_factory=set)
    embed_total: int | None = None
    # Set when an Embed task gave way to the shared embedding quota (ISO 8601: when the quota is
    # booked until); removed when an Embed task starts or finishes (rag_ingest.embeddings.capacity).
    capacity_wait_until: str | None = None
    # Parse ranges done, as "first_page:pages" (a set, so a retried range is counted once), of page_count.
    parsed_parts: set[str] = Field(default_factory=set)
    # Embed tasks' cache counts as "task:hits:misses" (a set, like embedded_parts). Batches a retry
    # resumed from their checkpoints are in neither count: they were looked up by the attempt that failed.
    embed_cache_parts: set[str] = Field(default_factory=set)
    # sha256 of this version's bytes, and the tenant's earlier READY document with the same bytes.
    content_sha256: str | None = None
    duplicate_of: str | None = None
    attempts: dict[str, int] = Field(default_factory=dict)
    error_code: ErrorCode | None = None
    error_detail: str | None = None
    page_count: int | None = None
    failed_pages: list[int] = Field(default_factory=list)
    # Pages read by OCR (they had no text layer); set by Parse.
    ocr_pages: int | None = None
    # The lane the workflow runs the document in; set by Parse once the page count is known.
    lane: Lane | None = None
    chunk_count: int | None = None
    # Chunks the Index stage wrote for this version (the reconciler compares the index with it).
    indexed_count: int | None = None
    size_bytes: int | None = None
    # What the bytes are (set by Validate; None before it ran).
    document_format: DocumentFormat | None = None
    timings_ms: dict[str, int] = Field(default_factory=dict)
    execution_arn: str | None = None
    # Deliberate re-runs so far (replays and the reaper's re-drives); the next is named replay=replays + 1.
    replays: int = 0
    # The user's metadata (rag_ingest.core.metadata), set at upload; later versions keep it
    # (mark_queued leaves it as it is). Numbers come back from DynamoDB as Decimal: see below.
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Who uploaded it through the API (the token's sub; None for an object put straight into the
    # bucket) and who else reads it (rag_ingest.core.access); later versions keep both, as metadata.
    uploaded_by: str | None = None
    access: DocumentAccess = OPEN_ACCESS
    # +1 on every PATCH /documents/{id} (compare-and-set on it; the API's ETag); records written
    # before it existed read as 1.
    revision: int = Field(default=1, ge=1)
    created_at: str
    updated_at: str

    @field_validator("revision", mode="before")
    @classmethod
    def _revision(cls, value: Any) -> Any:
        return 1 if value is None else int(value) if isinstance(value, Decimal) else value

    @field_validator("access", mode="before")
    @classmethod
    def _stored_access(cls, value: Any) -> Any:
        """A missing attribute (older records, open documents) is open access."""
        return OPEN_ACCESS if value is None else value

    @field_validator("metadata", mode="before")
    @classmethod
    def _plain_numbers(cls, value: Any) -> Any:
        """DynamoDB's numbers (Decimal) as int or float again; a missing attribute (older records) as {}."""
        if value is None:
            return {}
        if isinstance(value, dict):
            return {key: _plain(item) for key, item in value.items()}
        return value

    @property
    def filter_fields(self) -> dict[str, Any]:
        """What a document-listing filter matches (rag_ingest.core.filters.matches)."""
        return {
            "document_id": self.document_id,
            "filename": self.filename,
            "created_at": self.created_at,
            "content_type": (self.document_format or DocumentFormat.PDF).content_type,
            "metadata": self.metadata,
        }

    @property
    def progress(self) -> Progress | None:
        if self.embed_total is None:
            return None
        done = sum(int(part.partition(":")[2] or 0) for part in self.embedded_parts)
        return Progress(done=done, total=self.embed_total)

    @property
    def pages_parsed(self) -> int | None:
        """Pages the Parse Map has parsed so far (of ``page_count``); None before it started."""
        if not self.parsed_parts:
            return None
        return sum(int(part.partition(":")[2] or 0) for part in self.parsed_parts)

    @property
    def embedding_cache(self) -> CacheCounts | None:
        if not self.embed_cache_parts:
            return None
        counts = [part.split(":") for part in self.embed_cache_parts]
        return CacheCounts(hits=sum(int(c[1]) for c in counts), misses=sum(int(c[2]) for c in counts))


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class QueueOutcome(StrEnum):
    QUEUED = "QUEUED"  # this version is now the document's current version
    RESUME = "RESUME"  # already QUEUED for this version: (re)start its workflow, a no-op if it runs
    DUPLICATE = "DUPLICATE"  # this version is already processing or done
    REJECTED = "REJECTED"  # deleted, another tenant's, or older than the current version


@dataclass(frozen=True)
class QueueResult:
    outcome: QueueOutcome
    record: DocumentRecord | None
    reason: str = ""

    @classmethod
    def not_queued(cls, current: DocumentRecord | None, tenant_id: str, ref: ObjectRef) -> QueueResult:
        """Why a version was not queued, read from the record that refused the conditional write
        (every documents store, real or fake, explains a refusal the same way)."""
        if current is None:  # deleted in between: nothing to queue
            return cls(QueueOutcome.REJECTED, None, "document vanished during the update")
        if current.tenant_id != tenant_id:
            return cls(QueueOutcome.REJECTED, current, "object key names another tenant")
        if current.status in (DocumentStatus.DELETING, DocumentStatus.DELETED):
            return cls(QueueOutcome.REJECTED, current, f"document is {current.status.value}")
        if current.version == ref.version:
            if current.status == DocumentStatus.QUEUED:
                return cls(QueueOutcome.RESUME, current)
            return cls(QueueOutcome.DUPLICATE, current, f"version already {current.status.value}")
        return cls(QueueOutcome.REJECTED, current, "a newer version is already current")


@dataclass(frozen=True)
class StoredObjectVersion:
    """One entry of a versioned bucket's listing (S3 ListObjectVersions): a version or a delete marker."""

    key: str
    version_id: str
    etag: str | None
    is_latest: bool
    is_delete_marker: bool
    last_modified: str  # ISO 8601, UTC


@dataclass(frozen=True)
class IndexedVersion:
    """How many chunks the index holds for one (tenant, document, version hash)."""

    tenant_id: str
    document_id: str
    version_hash: str
    chunks: int


# -- search ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PassageCopy:
    """Another indexed passage with the same text as a search result (the same PDF uploaded twice,
    or a page repeated inside one document): named, so the result can say where else it is."""

    chunk_id: str
    document_id: str
    filename: str | None
    page_start: int
    page_end: int


@dataclass(frozen=True)
class SearchHit:
    """One indexed passage a retriever returned for a query."""

    chunk_id: str
    score: float
    document_id: str
    page_start: int
    page_end: int
    text: str
    filename: str | None = None
    heading_path: tuple[str, ...] = ()
    document_format: DocumentFormat = DocumentFormat.PDF
    anchor: str | None = None
    paragraph_index: int | None = None
    boxes: tuple[PassageBox, ...] = field(default=(), hash=False)
    highlights: tuple[str, ...] = ()
    #: The retrievers that found it ("knn", "bm25"); a hybrid hit may have both.
    retrieved_by: tuple[str, ...] = ()
    #: Lower-ranked passages with the same text, folded into this one (search never repeats a text).
    copies: tuple[PassageCopy, ...] = ()
    #: The document's metadata as its chunk holds it (rag_ingest.core.metadata); None: none indexed.
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)

    def as_copy(self) -> PassageCopy:
        return PassageCopy(self.chunk_id, self.document_id, self.filename, self.page_start, self.page_end)


# -- the workflow's executions and the queues -----------------------------------------------------
class ExecutionState(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABORTED = "ABORTED"
    PENDING_REDRIVE = "PENDING_REDRIVE"
    # Never started, or past Step Functions' 90-day retention of closed executions.
    MISSING = "MISSING"


@dataclass(frozen=True)
class QueueMessage:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    sent_timestamp_ms: int


# The embedding cache's key (rag_ingest.ingest.embedding_cache) and a replay's record
# (rag_ingest.operations.replay): here because the ports name them.
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


class ReplayedDocument(BaseModel):
    document_id: str
    replay: int
    execution_name: str
    execution_arn: str
    previous_error_code: str | None = None
