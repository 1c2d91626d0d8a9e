"""The API's request and response bodies for documents: what ``POST``, ``GET`` and ``PATCH``
``/documents`` take and answer (pydantic models, also the OpenAPI document's schemas).

A view never shows internals: ``DocumentView.of`` picks what a caller may see of a record.
May import: ``core``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_ingest.core.access import AccessError, DocumentAccess, parse_access
from rag_ingest.core.cell_refs import cell_range
from rag_ingest.core.errors import ErrorCode, PermanentError
from rag_ingest.core.job import Stage
from rag_ingest.core.metadata import MetadataError, validate_metadata
from rag_ingest.core.parsed import DocumentFormat, FigureCounts, PageText, TextBlock, section_paragraphs
from rag_ingest.core.record import DocumentRecord, DocumentStatus

PDF_CONTENT_TYPE = "application/pdf"
#: DocumentView.waiting_for of a document whose Embed tasks gave way to the shared embedding quota.
WAITING_FOR_EMBEDDING_CAPACITY = "EMBEDDING_CAPACITY"
#: What a filename may keep: it becomes part of the S3 key and of Content-Disposition.
UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._ -]")


class UploadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    filename: str = Field(min_length=1, max_length=200)
    content_type: str = PDF_CONTENT_TYPE
    metadata: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The document's metadata, kept by its later versions and written onto every passage: up to 32 keys "
            "matching ^[a-z][a-z0-9_]{0,63}$ (not a built-in name), each a string (up to 1,024 characters; an ISO "
            "8601 date string is also a date), a number, a boolean, or a list of up to 50 strings; 8 KB in all "
            '(docs/api.md, "Metadata").'
        ),
        json_schema_extra={"example": {"customer": "acme", "year": 2024, "signed": "2024-03-01", "tags": ["nda"]}},
    )

    access: DocumentAccess | None = Field(
        default=None,
        description=(
            "Who may read the document besides its uploader and tenant admins: token subjects (users) and "
            "groups (cognito:groups); absent or both empty: the whole tenant. editors may also change, retry "
            "and delete it; deny may do nothing, whoever else they are. Later versions keep it "
            '(docs/api.md, "Per-document access").'
        ),
        json_schema_extra={"example": {"users": [], "groups": ["legal"]}},
    )

    @field_validator("access", mode="before")
    @classmethod
    def _checked_access(cls, value: Any) -> Any:
        return _access_or_none(value)

    @field_validator("filename")
    @classmethod
    def _safe_filename(cls, value: str) -> str:
        # The filename becomes part of the S3 key: keep it to a plain, readable subset.
        cleaned = UNSAFE_FILENAME.sub("_", value.strip().rsplit("/", 1)[-1]).strip(". ")
        if not cleaned:
            raise ValueError("filename is empty after removing unsafe characters")
        return cleaned


def _access_or_none(value: Any) -> DocumentAccess | None:
    """A request's ``access`` checked by the rules of rag_ingest.core.access (a ValueError names the bad part)."""
    try:
        return None if value is None else parse_access(value)
    except AccessError as exc:
        raise ValueError(str(exc)) from None


class DocumentPatch(BaseModel):
    """``PATCH /documents/{id}``: the fields to replace, each optional; at least one is given."""

    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Replaces the document's metadata as a whole ({} clears it), under the rules of POST /documents' "
            "metadata; written onto every passage of the current version without parsing or embedding again "
            '(docs/api.md, "Changing a document").'
        ),
        json_schema_extra={"example": {"customer": "acme", "year": 2025}},
    )
    access: DocumentAccess | None = Field(
        default=None,
        description=(
            'Replaces, as a whole, who may read the document besides its uploader and tenant admins ({"users": [], '
            '"groups": []} opens it to the tenant), its editors and its deny list; only the uploader or a tenant '
            "admin may change it (else 403 ACCESS_CHANGE_FORBIDDEN). Written onto every passage like metadata "
            '(docs/api.md, "Per-document access").'
        ),
        json_schema_extra={
            "example": {"users": [], "groups": ["legal"], "editors": {"users": [], "groups": ["legal-leads"]}}
        },
    )

    @field_validator("access", mode="before")
    @classmethod
    def _checked_access(cls, value: Any) -> Any:
        return _access_or_none(value)

    def record_fields(self) -> dict[str, Any]:
        """The record's fields this patch sets, validated (``PermanentError(INVALID_REQUEST)`` naming
        the bad part). A field added to the model (e.g. ``access``) adds its line here."""
        fields: dict[str, Any] = {}
        try:
            if self.metadata is not None:
                fields["metadata"] = validate_metadata(self.metadata)
        except MetadataError as exc:
            raise PermanentError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        if self.access is not None:
            fields["access"] = self.access.model_dump()
        if not fields:
            raise PermanentError(ErrorCode.INVALID_REQUEST, "nothing to change: give metadata or access")
        return fields


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
    # Pages the Parse Map has parsed so far, of page_count (None before Parse started).
    pages_parsed: int | None
    # "EMBEDDING_CAPACITY" while its Embed tasks give way to the shared embedding quota (not stuck),
    # and until when the quota is booked; None otherwise.
    waiting_for: str | None = None
    waiting_until: str | None = None
    attempts: dict[str, int]
    error_code: str | None
    error_detail: str | None
    # What Validate found the bytes to be (pdf, docx, pptx, html, markdown, text); None before it ran.
    document_format: str | None = None
    # Pages of a PDF, slides of a PPTX; 1 for the other formats.
    page_count: int | None
    failed_pages: list[int]
    ocr_pages: int | None
    # Figures indexed as passages, skipped as decoration (tiny, or the same image on many pages),
    # and indexed by their caption alone past the document's reading cap; null before Chunk ran.
    figures: FigureCounts | None = None
    # "standard" or "bulk" (documents above lanes.bulkAbovePages pages); None before Parse counted the pages.
    lane: str | None
    chunk_count: int | None
    # Chunks whose vectors came from the embedding cache (hits) and chunks embedded (misses).
    embedding_cache: dict[str, int] | None
    # The tenant's earlier READY document with the same bytes, when this upload is a copy of it.
    duplicate_of: str | None
    timings_ms: dict[str, int]
    # The metadata given at upload or by PATCH (kept by later versions).
    metadata: dict[str, Any]
    # Who reads it besides the uploader and tenant admins (both empty: the whole tenant).
    access: DocumentAccess
    # The uploader's sub; null for a document put straight into the bucket.
    uploaded_by: str | None
    # A source's item: the source and where the item lives (docs/sources.md); null for an upload.
    source_id: str | None = None
    source_uri: str | None = None
    # +1 on every PATCH; the ETag of GET and PATCH, and what If-Match compares.
    revision: int
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, record: DocumentRecord) -> DocumentView:
        waiting = (
            record.capacity_wait_until is not None
            and record.status == DocumentStatus.PROCESSING
            and record.stage == Stage.EMBED
        )
        return cls(
            document_id=record.document_id,
            status=record.status.value,
            filename=record.filename,
            stage=record.stage.value if record.stage else None,
            progress=record.progress.model_dump() if record.progress else None,
            pages_parsed=record.pages_parsed,
            waiting_for=WAITING_FOR_EMBEDDING_CAPACITY if waiting else None,
            waiting_until=record.capacity_wait_until if waiting else None,
            attempts=record.attempts,
            error_code=record.error_code.value if record.error_code else None,
            error_detail=record.error_detail,
            document_format=record.document_format.value if record.document_format else None,
            page_count=record.page_count,
            failed_pages=record.failed_pages,
            ocr_pages=record.ocr_pages,
            figures=record.figures,
            lane=record.lane.value if record.lane else None,
            chunk_count=record.chunk_count,
            embedding_cache=record.embedding_cache.model_dump() if record.embedding_cache else None,
            duplicate_of=record.duplicate_of,
            timings_ms=record.timings_ms,
            source_id=record.source_id,
            source_uri=record.source_uri,
            metadata=record.metadata,
            access=record.access,
            uploaded_by=record.uploaded_by,
            revision=record.revision,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )


class ContentBlockView(BaseModel):
    kind: str  # heading, paragraph, table or figure
    text: str
    level: int = 0  # headings: 1 is the outermost
    #: Headings: the section's id in the view (a passage's ``anchor``); others: ``<anchor>-p<n>``
    #: (``p<n>`` before the first heading), ``n`` the passage's ``paragraph_index``.
    anchor: str
    #: Figures: what their text came from, in its order (caption, alt_text, ocr, vision).
    figure_sources: list[str] | None = None
    #: An XLSX or CSV block's cells as a spreadsheet names them (``Budget!A1:F40``); null otherwise.
    cell_range: str | None = None


class ContentPageView(BaseModel):
    page_number: int  # a PPTX's slide number; 1 for the other formats
    blocks: list[ContentBlockView]


class DocumentContent(BaseModel):
    """The text of a DOCX, PPTX, HTML, Markdown or text document as the pipeline extracted it, block
    by block: what a search hit's ``anchor`` and ``paragraph_index`` point into."""

    document_id: str
    document_format: str
    filename: str | None
    pages: list[ContentPageView]

    @classmethod
    def of(cls, record: DocumentRecord, document_format: DocumentFormat, pages: list[PageText]) -> DocumentContent:
        views = {page.page_number: ContentPageView(page_number=page.page_number, blocks=[]) for page in pages}
        for page, block, section, number in section_paragraphs(pages):
            paragraph = f"{section}-p{number}" if section else f"p{number}"
            anchor = (block.anchor or "") if number is None else paragraph
            text = page.text[block.start : block.end]
            sources = [source.value for source in block.figure.sources] if block.figure is not None else None
            views[page.page_number].blocks.append(
                ContentBlockView(
                    kind=block.kind.value,
                    text=text,
                    level=block.level,
                    anchor=anchor,
                    figure_sources=sources,
                    cell_range=_block_cells(block),
                )
            )
        return cls(
            document_id=record.document_id,
            document_format=document_format.value,
            filename=record.filename,
            pages=list(views.values()),
        )


class DocumentPage(BaseModel):
    """``GET /documents``: the tenant's documents, newest first; ``next_cursor`` is null on the last page."""

    items: list[DocumentView]
    next_cursor: str | None


class DownloadLink(BaseModel):
    url: str
    expires_in: int


def _block_cells(block: TextBlock) -> str | None:
    """The cells a spreadsheet block's lines come from (a made-up header row aside), else None."""
    rows = [row for row in block.cells.rows if row] if block.cells else []
    if not block.cells or not rows:
        return None
    return cell_range(block.cells.sheet, block.cells.first_column, block.cells.last_column, min(rows), max(rows))
