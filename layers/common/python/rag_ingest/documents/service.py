"""The API's domain: issue an upload (presigned POST), report, list, retry and download documents.

Every operation takes the caller's tenant, already validated (``rag_ingest.core.auth.tenant_of``), and
answers another tenant's document exactly like a missing one. Given the caller's
:class:`rag_ingest.core.access.Principal` (the API always passes it), a document the caller may not
read (``rag_ingest.core.access.can_read``) is answered the same way, and the listing leaves it out.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_ingest.core.access import (
    AccessError,
    DocumentAccess,
    Principal,
    can_manage_access,
    can_read,
    parse_access,
)
from rag_ingest.core.auth import TENANT_ID_PATTERN
from rag_ingest.core.config import ApiEnv
from rag_ingest.core.errors import ErrorCode, IndexArtifactsMissingError, PermanentError, StaleWriteError
from rag_ingest.core.filters import Filter, FilterError, matches, parse_filter
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import Stage
from rag_ingest.core.metadata import MetadataError, validate_metadata
from rag_ingest.core.parsed import DocumentFormat, PageText, ParsedRange, section_paragraphs
from rag_ingest.core.ports import ApiDocuments, ArtifactReader, ChunkFieldsRefresher, DocumentReplayer, UploadPresigner
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.s3_keys import PAGES_FOLDER, artifact_key, filename_of, page_range_key, upload_key
from rag_ingest.core.upload_types import max_bytes_for, upload_format

PDF_CONTENT_TYPE = "application/pdf"
#: DocumentView.waiting_for of a document whose Embed tasks gave way to the shared embedding quota.
WAITING_FOR_EMBEDDING_CAPACITY = "EMBEDDING_CAPACITY"
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._ -]")
# A ULID from the API, or the id of an object put straight into the bucket (rag_ingest.core.ids).
_DOCUMENT_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}|obj-[0-9a-f]{32}")
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_CURSOR_CHARS = 1024
DOWNLOAD_URL_SECONDS = 300
# Each retry is a paid workflow run; past this many a person should look at the document.
MAX_RETRIES = 10
# A filtered listing reads at most this many pages of the tenant's documents per request: the
# filter runs in code over the tenant index's pages (docs/api.md, "Listing with a filter").
MAX_FILTERED_LIST_READS = 10
MAX_LIST_FILTER_CHARS = 8 * 1024
MAX_IF_MATCH_CHARS = 512
# A PATCH whose conditional write lost only to a status change (not to another PATCH) reads again.
MAX_PATCH_ATTEMPTS = 3


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
            "groups (cognito:groups). Absent or both empty: the whole tenant. Later versions keep it "
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
        cleaned = _UNSAFE_FILENAME.sub("_", value.strip().rsplit("/", 1)[-1]).strip(". ")
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
            'Replaces who may read the document besides its uploader and tenant admins ({"users": [], '
            '"groups": []} opens it to the tenant); only the uploader or a tenant admin may change it (else 403 '
            'ACCESS_CHANGE_FORBIDDEN). Written onto every passage like metadata (docs/api.md, "Per-document access").'
        ),
        json_schema_extra={"example": {"users": [], "groups": ["legal"]}},
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
    # "EMBEDDING_CAPACITY" while the document waits for the shared embedding quota (its Embed tasks
    # gave way to other documents' and are called again; not stuck), with when the quota is booked
    # until; None otherwise.
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
            lane=record.lane.value if record.lane else None,
            chunk_count=record.chunk_count,
            embedding_cache=record.embedding_cache.model_dump() if record.embedding_cache else None,
            duplicate_of=record.duplicate_of,
            timings_ms=record.timings_ms,
            metadata=record.metadata,
            access=record.access,
            uploaded_by=record.uploaded_by,
            revision=record.revision,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """The one body of every 4xx/5xx answer of the API."""

    error: ErrorDetail


class GatewayError(BaseModel):
    """API Gateway's own answers, before the function runs: 401 from the JWT authorizer, 429 throttling."""

    message: str


class DocumentNotFoundError(LookupError):
    """No such document for this tenant (missing, another tenant's, or not servable): answer 404."""


class AccessChangeForbiddenError(Exception):
    """A PATCH of ``access`` by someone who may read the document but not manage its access: answer 403."""


class NotRetryableError(Exception):
    """Retry asked for a document that is not FAILED (or cannot be replayed): answer 409."""


class RevisionMismatchError(Exception):
    """PATCH's If-Match names another revision than the record's: answer 412 REVISION_MISMATCH."""


class ConcurrentUpdateError(Exception):
    """Another PATCH changed the record between this one's read and write: answer 409 CONCURRENT_UPDATE."""


class ReindexUnavailableError(Exception):
    """The document's chunks cannot be rewritten in place (their artifacts are gone): answer 409
    REINDEX_UNAVAILABLE."""


class ContentUnavailableError(Exception):
    """GET /documents/{id}/content for a document without a rendered view: a PDF (it opens at its
    page), or one whose extraction has not run or was not kept."""


class ContentBlockView(BaseModel):
    kind: str  # heading, paragraph or table
    text: str
    level: int = 0  # headings: 1 is the outermost
    #: Headings: the section's id in the view (a passage's ``anchor``); others: ``<anchor>-p<n>``
    #: (``p<n>`` before the first heading), ``n`` the passage's ``paragraph_index``.
    anchor: str


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
            views[page.page_number].blocks.append(
                ContentBlockView(kind=block.kind.value, text=text, level=block.level, anchor=anchor)
            )
        return cls(
            document_id=record.document_id,
            document_format=document_format.value,
            filename=record.filename,
            pages=list(views.values()),
        )


class InvalidCursorError(ValueError):
    """A list cursor that this API did not issue for this tenant: answer 400."""


class DocumentPage(BaseModel):
    """``GET /documents``: the tenant's documents, newest first; ``next_cursor`` is null on the last page."""

    items: list[DocumentView]
    next_cursor: str | None


class DownloadLink(BaseModel):
    url: str
    expires_in: int


def is_document_id(value: str) -> bool:
    """Ids the system issues: a ULID from the API, or ``obj-<hash>`` for an object put without it."""
    return bool(_DOCUMENT_ID.fullmatch(value))


# -- the list cursor ---------------------------------------------------------------------------
# Opaque to clients: base64url of the tenant index's key of the last item returned. It is checked
# on the way back in (shape, types, and the caller's own tenant), so a forged or garbled cursor is
# a 400 and can never start a query in another tenant's partition.
_CURSOR_KEYS = frozenset({"document_id", "tenant_id", "created_at"})
_CREATED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T[0-9:.+Z-]{1,40}$")


def encode_cursor(key: Mapping[str, str]) -> str:
    raw = json.dumps(dict(key), sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, tenant_id: str) -> dict[str, str]:
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidCursorError("the cursor is too long")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw.decode())
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidCursorError("the cursor is not one this API issued") from None
    if (
        not isinstance(key, dict)
        or set(key) != _CURSOR_KEYS
        or not all(isinstance(value, str) for value in key.values())
    ):
        raise InvalidCursorError("the cursor is not one this API issued")
    if key["tenant_id"] != tenant_id or not TENANT_ID_PATTERN.fullmatch(key["tenant_id"]):
        raise InvalidCursorError("the cursor belongs to another listing")
    if not is_document_id(key["document_id"]) or not _CREATED_AT.fullmatch(key["created_at"]):
        raise InvalidCursorError("the cursor is not one this API issued")
    return key


def parse_list_filter(filter_json: str) -> Filter:
    """``GET /documents``'s ``filter`` parameter: a RetrievalFilter as JSON, without ``page``
    (documents have none); a bad one is ``PermanentError(INVALID_REQUEST)`` naming its JSON path."""
    if len(filter_json) > MAX_LIST_FILTER_CHARS:
        raise PermanentError(ErrorCode.INVALID_REQUEST, f"filter: at most {MAX_LIST_FILTER_CHARS} characters")
    try:
        raw = json.loads(filter_json, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise PermanentError(ErrorCode.INVALID_REQUEST, "filter: not valid JSON") from None
    try:
        return parse_filter(raw, "filter", allow_page=False)
    except FilterError as exc:
        raise PermanentError(ErrorCode.INVALID_REQUEST, str(exc)) from None


def etag(revision: int) -> str:
    """A document's ETag: its revision, quoted (a strong entity tag, RFC 9110 8.8.3)."""
    return f'"{revision}"'


def if_match_revisions(header: str) -> set[int] | None:
    """The revisions an If-Match header accepts: None for ``*`` (any), else those of its strong tags
    (a weak tag, or anything else, matches none: RFC 9110 13.1.1 compares strongly)."""
    if header.strip() == "*":
        return None
    revisions: set[int] = set()
    for tag in header[:MAX_IF_MATCH_CHARS].split(","):
        tag = tag.strip()
        if len(tag) >= 3 and tag[0] == tag[-1] == '"' and tag[1:-1].isdigit() and len(tag) <= 22:
            revisions.add(int(tag[1:-1]))
    return revisions


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _ownership(principal: Principal | None, access: DocumentAccess | None) -> dict[str, Any]:
    """A new record's ``uploaded_by`` (the caller's sub) and ``access`` arguments, only those given."""
    fields: dict[str, Any] = {}
    if principal is not None and principal.subject:
        fields["uploaded_by"] = principal.subject
    if access is not None and not access.is_open:
        fields["access"] = access
    return fields


def _index_key(record: DocumentRecord) -> dict[str, str]:
    """The tenant index's key of a record: what a cursor continues after."""
    return {"document_id": record.document_id, "tenant_id": record.tenant_id, "created_at": record.created_at}


def _header_filename(filename: str) -> str:
    """Content-Disposition value: an ASCII fallback plus the exact name (RFC 6266 / 5987)."""
    fallback = _UNSAFE_FILENAME.sub("_", filename) or "document.pdf"
    return f"inline; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


class DocumentService:
    def __init__(
        self,
        env: ApiEnv,
        documents: ApiDocuments,
        presigner: UploadPresigner,
        *,
        replayer: DocumentReplayer | None = None,
        refresher: ChunkFieldsRefresher | None = None,
        artifacts: ArtifactReader | None = None,
    ) -> None:
        self._env = env
        self._documents = documents
        self._presigner = presigner
        self._replayer = replayer
        self._refresher = refresher
        self._artifacts = artifacts

    def create_upload(self, tenant_id: str, request: UploadRequest, principal: Principal | None = None) -> UploadTicket:
        """An AWAITING_UPLOAD record (with the caller as its uploader and ``request.access``) and
        the presigned POST for its file: the declared type (rag_ingest.core.upload_types) sets the
        POST's Content-Type and size limit. The name decides nothing: Validate reads the bytes."""
        declared_format = upload_format(request.content_type)
        max_bytes = max_bytes_for(declared_format, self._env.max_upload_bytes)
        try:
            metadata = validate_metadata(request.metadata) if request.metadata is not None else {}
        except MetadataError as exc:
            raise PermanentError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        document_id = new_document_id()
        key = upload_key(tenant_id, document_id, request.filename, self._env.raw_prefix)
        self._documents.create_awaiting_upload(
            document_id=document_id,
            tenant_id=tenant_id,
            filename=request.filename,
            bucket=self._env.bucket_name,
            key=key,
            metadata=metadata,
            **_ownership(principal, request.access),
        )
        expires_in = self._env.upload_url_expiry_seconds
        # S3 enforces these conditions on the POST itself: exact key, declared type, size range, expiry.
        upload = self._presigner.presign_upload(
            bucket=self._env.bucket_name,
            key=key,
            content_type=declared_format.content_type,
            max_bytes=max_bytes,
            expires_in=expires_in,
        )
        return UploadTicket(
            document_id=document_id,
            status="AWAITING_UPLOAD",
            upload=upload,
            expires_at=int(time.time()) + expires_in,
            max_bytes=max_bytes,
        )

    def get(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentView:
        return DocumentView.of(self._record(tenant_id, document_id, principal))

    def list(
        self,
        tenant_id: str,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
        filter_json: str | None = None,
        principal: Principal | None = None,
    ) -> DocumentPage:
        """One page of the tenant's documents, newest first (DELETED ones are left out); with
        ``filter_json`` (a RetrievalFilter as JSON), only those that match it; with ``principal``,
        only those it may read (a tenant admin reads them all)."""
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise PermanentError(ErrorCode.INVALID_REQUEST, f"limit must be between 1 and {MAX_PAGE_SIZE}")
        start_key = decode_cursor(cursor, tenant_id) if cursor else None
        where = parse_list_filter(filter_json) if filter_json is not None else None
        readable = principal is not None and not principal.is_tenant_admin
        if where is not None or readable:

            def wanted(record: DocumentRecord) -> bool:
                if principal is not None and not can_read(principal, record):
                    return False
                return where is None or matches(where, record.filter_fields)

            return self._list_filtered(tenant_id, limit, start_key, wanted)
        records, last_key = self._documents.list_by_tenant(tenant_id, limit=limit, start_key=start_key)
        return DocumentPage(
            items=[DocumentView.of(record) for record in records if record.tenant_id == tenant_id],
            next_cursor=encode_cursor(last_key) if last_key else None,
        )

    def _list_filtered(
        self,
        tenant_id: str,
        limit: int,
        start_key: dict[str, str] | None,
        wanted: Callable[[DocumentRecord], bool],
    ) -> DocumentPage:
        """The filter runs here, over pages of the tenant index (a DynamoDB query of the tenant's
        partition, never a scan): fine at the documents a tenant has today, and bounded per request
        (``MAX_FILTERED_LIST_READS`` pages). A page may then hold fewer than ``limit`` items and still
        a ``next_cursor`` (the last document read): follow it until it is null."""
        items: list[DocumentView] = []
        key = start_key
        for _ in range(MAX_FILTERED_LIST_READS):
            records, last_key = self._documents.list_by_tenant(tenant_id, limit=limit, start_key=key)
            for record in records:
                if record.tenant_id == tenant_id and wanted(record):
                    items.append(DocumentView.of(record))
                    if len(items) == limit:
                        more = last_key is not None or record is not records[-1]
                        return DocumentPage(
                            items=items, next_cursor=encode_cursor(_index_key(record)) if more else None
                        )
            if last_key is None:
                return DocumentPage(items=items, next_cursor=None)
            key = dict(last_key)
        return DocumentPage(items=items, next_cursor=encode_cursor(key) if key else None)

    def retry(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentView:
        """Replay a FAILED document from its first unfinished stage (the stages' checkpoints skip
        the finished ones); anything else is ``NotRetryableError``."""
        if self._replayer is None:
            raise RuntimeError("retry is not configured for this service")
        if not is_document_id(document_id):
            raise DocumentNotFoundError(document_id)
        record = self._documents.get(document_id)
        if record is None or record.tenant_id != tenant_id or record.status is DocumentStatus.DELETED:
            raise DocumentNotFoundError(document_id)
        if principal is not None and not can_read(principal, record):
            raise DocumentNotFoundError(document_id)
        if record.status is not DocumentStatus.FAILED:
            raise NotRetryableError(f"only a FAILED document can be retried; this one is {record.status.value}")
        if not (record.version and record.key and record.bucket):
            raise NotRetryableError("the document's upload never arrived: upload it again")
        if record.replays >= MAX_RETRIES:
            raise NotRetryableError(f"the document was already retried {record.replays} times")
        try:
            self._replayer.replay(record)
        except StaleWriteError:
            raise NotRetryableError("the document changed while retrying; reload it") from None
        return self.get(tenant_id, document_id, principal)

    def update(
        self,
        tenant_id: str,
        document_id: str,
        patch: DocumentPatch,
        *,
        if_match: str | None = None,
        principal: Principal | None = None,
    ) -> DocumentView:
        """Replace the patch's fields on the record (compare-and-set on its revision, +1), then, for a
        READY document, rewrite its current version's chunks with them (nothing parsed or embedded).
        A document in flight or FAILED: the record only (its workflow's Index and Finalize write the
        record's fields as they find them). ``if_match``: the If-Match header (412 when stale)."""
        if self._refresher is None:
            raise RuntimeError("PATCH is not configured for this service")
        fields = patch.record_fields()
        accepted = if_match_revisions(if_match) if if_match is not None else None
        for _ in range(MAX_PATCH_ATTEMPTS):
            record = self._record(tenant_id, document_id, principal)
            if record.status in (DocumentStatus.DELETING, DocumentStatus.DELETED):
                raise DocumentNotFoundError(document_id)
            if "access" in fields and principal is not None and not can_manage_access(principal, record):
                raise AccessChangeForbiddenError("only the uploader or a tenant admin may change who reads it")
            if accepted is not None and record.revision not in accepted:
                raise RevisionMismatchError(f"the document is at revision {record.revision}")
            ready = record.status is DocumentStatus.READY
            if ready:
                self._check_rewritable(record)
            try:
                updated = self._documents.update_fields(record, fields)
            except StaleWriteError:
                current = self._documents.get(document_id)
                if current is not None and current.revision == record.revision:
                    continue  # its status or version moved (the workflow), not its fields: read again
                if accepted is not None:
                    raise RevisionMismatchError("the document changed since it was read") from None
                raise ConcurrentUpdateError("the document changed while updating it; read it and try again") from None
            if updated.status is DocumentStatus.READY:
                try:
                    self._refresher.refresh(document_id)
                except IndexArtifactsMissingError as exc:
                    raise ReindexUnavailableError(
                        f"revision {updated.revision} is saved, but its passages could not be rewritten ({exc}); "
                        "upload the document again"
                    ) from None
            return self.get(tenant_id, document_id, principal)
        raise ConcurrentUpdateError("the document kept changing while updating it; try again")

    def _check_rewritable(self, record: DocumentRecord) -> None:
        assert self._refresher is not None
        try:
            self._refresher.check(record)
        except IndexArtifactsMissingError as exc:
            message = f"the passages cannot be rewritten in place ({exc}); nothing changed"
            raise ReindexUnavailableError(message) from None

    def download(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DownloadLink:
        """A short-lived GET of the current version of the original upload, shown inline with the
        media type of what its bytes are (a PDF opens in the browser's viewer)."""
        record = self._record(tenant_id, document_id, principal)
        if record.status in (DocumentStatus.DELETING, DocumentStatus.DELETED) or not (record.version and record.key):
            raise DocumentNotFoundError(document_id)
        url = self._presigner.presign_download(
            bucket=record.bucket or self._env.bucket_name,
            key=record.key,
            version=record.version,
            content_type=(record.document_format or DocumentFormat.PDF).content_type,
            content_disposition=_header_filename(record.filename or filename_of(record.key)),
            expires_in=DOWNLOAD_URL_SECONDS,
        )
        return DownloadLink(url=url, expires_in=DOWNLOAD_URL_SECONDS)

    def content(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentContent:
        """The extracted blocks of a structured document's current version (its Parse artifact): the
        page's rendered view of a DOCX, PPTX, HTML, Markdown or text hit."""
        record = self._record(tenant_id, document_id, principal)
        if record.status in (DocumentStatus.DELETING, DocumentStatus.DELETED) or not record.version:
            raise DocumentNotFoundError(document_id)
        document_format = record.document_format or DocumentFormat.PDF
        if document_format is DocumentFormat.PDF:
            raise ContentUnavailableError("a PDF has no rendered view: open it at its page (GET .../download)")
        assert self._artifacts is not None
        pages_prefix = artifact_key(document_id, record.version, PAGES_FOLDER, self._env.artifacts_prefix)
        key = page_range_key(pages_prefix, 1)
        if not self._artifacts.exists(self._env.bucket_name, key):
            raise ContentUnavailableError(f"the document's text is not extracted (status {record.status.value})")
        parsed = ParsedRange.model_validate(self._artifacts.get_json(self._env.bucket_name, key))
        return DocumentContent.of(record, document_format, parsed.pages)

    def readable(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentRecord:
        """The record of a document the caller may see, else ``DocumentNotFoundError`` (a route that
        acts on a document checks this first: delete)."""
        return self._record(tenant_id, document_id, principal)

    def _record(self, tenant_id: str, document_id: str, principal: Principal | None = None) -> DocumentRecord:
        # An id the system never issues cannot exist: no table read (and no oversized key) for it.
        if not is_document_id(document_id):
            raise DocumentNotFoundError(document_id)
        record = self._documents.get(document_id)
        # Another tenant's document is reported exactly like a missing one.
        if record is None or record.tenant_id != tenant_id:
            raise DocumentNotFoundError(document_id)
        # So is a document the caller may not read: the same 404, nothing to tell it exists.
        if principal is not None and not can_read(principal, record):
            raise DocumentNotFoundError(document_id)
        return record
