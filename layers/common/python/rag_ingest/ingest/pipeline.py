"""The workflow's stages: Validate → Parse → Chunk → Embed → Index → Finalize, and MarkFailed.

Each stage takes the job (Step Functions state), does one thing, records it in the status
table, and returns the job with its pointers filled in. Artifacts are keyed by document and
version, and a stage whose artifact exists returns it without redoing the work (checkpoints):
a retry after a failure in Index does not pay for embeddings again.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

from rag_ingest.core.config import StagesEnv
from rag_ingest.core.errors import (
    EmbeddingCapacityWait,
    ErrorCode,
    PermanentError,
    StaleWriteError,
    TransientError,
    parse_failure,
)
from rag_ingest.core.job import (
    CacheKey,
    DocumentJob,
    EmbedTask,
    FailedJob,
    PageRange,
    ParseTask,
    Stage,
    lane_for,
    plan_page_ranges,
)
from rag_ingest.core.limits import UsageCounter
from rag_ingest.core.logs import logger, run_keys
from rag_ingest.core.parsed import IMAGE_FORMATS, Chunk, DocumentFormat, ParsedDocument, ParsedRange
from rag_ingest.core.ports import ChunkIndex, EmbeddingCache, PipelineDocuments, StageObjects
from rag_ingest.core.record import DocumentRecord, DocumentStamp, DocumentStatus, content_key
from rag_ingest.core.retrieval_text import document_title
from rag_ingest.core.s3_keys import (
    CHUNKS_ARTIFACT,
    EMBEDDINGS_FOLDER,
    PAGES_FOLDER,
    artifact_key,
    embedding_batch_key,
    filename_of,
    page_range_key,
)
from rag_ingest.core.telemetry import NoTelemetry, Telemetry
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.capacity import booking_for
from rag_ingest.ingest.batch_embedding import BatchEmbedding
from rag_ingest.ingest.cell_ranges import with_cell_ranges
from rag_ingest.ingest.chunk_rewrite import MAX_REWRITES, ChunkRewriter
from rag_ingest.ingest.chunking import chunk_pages
from rag_ingest.ingest.embedding_cache import NoEmbeddingCache
from rag_ingest.ingest.passage_boxes import passage_boxes
from rag_ingest.parsing.figures import CaptionsOnly, ImageReader
from rag_ingest.parsing.formats import SNIFF_BYTES, FormatLimits, detect_format, read_structured
from rag_ingest.parsing.image_document import read_image_document
from rag_ingest.parsing.ocr.engine import OcrEngine, PageOcr
from rag_ingest.parsing.pdf.extract import count_pdf_pages, join_page_ranges, parse_page_range
from rag_ingest.parsing.pdf.figures import PdfFigures

_Method = TypeVar("_Method", bound=Callable[..., Any])


def texts_to_embed(chunks: Sequence[Chunk]) -> list[str]:
    """What the model embeds for each chunk, in order: the one place that says so. The embedding
    cache is keyed on exactly these texts, so changing them here changes the keys with them."""
    return [chunk.text for chunk in chunks]


def _logged(stage: Stage | None) -> Callable[[_Method], _Method]:
    """Every line logged while the stage runs carries the job's document_id, tenant_id and stage."""

    def decorate(method: _Method) -> _Method:
        @functools.wraps(method)
        def run(self: Pipeline, item: DocumentJob | EmbedTask | ParseTask) -> Any:
            job = item.job if isinstance(item, EmbedTask | ParseTask) else item
            with run_keys(document_id=job.document_id, tenant_id=job.tenant_id, stage=stage.value if stage else None):
                return method(self, item)

        return cast(_Method, run)

    return decorate


@dataclass
class StageDependencies:
    env: StagesEnv
    status: PipelineDocuments
    objects: StageObjects
    vector_store: Callable[[], ChunkIndex]  # lazy: only Index/Finalize connect to OpenSearch
    embedder: Callable[[], Embedder]  # lazy: loading a model is only Embed's cost
    count_tokens: Callable[[str], int]
    telemetry: Telemetry = field(default_factory=NoTelemetry)
    embedding_cache: EmbeddingCache = field(default_factory=NoEmbeddingCache)
    # Reads pages without a text layer (None: OCR off, such pages are failed pages).
    ocr_engine: OcrEngine | None = None
    # Reads the figures found (the OCR engine, with a vision model when on; None: captions only),
    # made per page range from the range's share of the document (a per-document cap is per range).
    image_reader: Callable[[float], ImageReader] | None = None
    # The bulk lane's Embed by Bedrock batch inference (None: off; rag_ingest.ingest.batch_embedding).
    batch_embedding: BatchEmbedding | None = None
    # The tenant's pages per day (rag_ingest.core.limits): Parse counts a version's pages once (None: off).
    usage: UsageCounter | None = None


class Pipeline:
    def __init__(self, deps: StageDependencies) -> None:
        self._deps = deps
        self._env = deps.env

    # -- the stages ------------------------------------------------------------------------
    @_logged(Stage.VALIDATE)
    def validate(self, job: DocumentJob) -> DocumentJob:
        """Decide what the object is from its bytes (rag_ingest.parsing.formats): a ranged GET of its
        start; a zip (an Office document) is read whole to find its main part."""
        with self._stage(job, Stage.VALIDATE) as record:
            size = self._deps.objects.size(job.object_ref)
            # A ranged GET of an empty object fails (InvalidRange): an empty file is checked on its size alone.
            head = self._deps.objects.read_range(job.object_ref, min(SNIFF_BYTES, size)) if size else b""
            # The stored object is checked, not the upload policy: objects can arrive without the API.
            job.document_format = detect_format(
                head,
                size=size,
                max_bytes=self._env.max_file_bytes,
                read_all=lambda: self._deps.objects.read(job.object_ref),
            )
            job.size_bytes = size
            record.update(size_bytes=size, document_format=job.document_format.value)
        return job

    @_logged(Stage.PARSE)
    def parse(self, job: DocumentJob) -> DocumentJob:
        """Parse's first task: open the PDF, count its pages, parse the first page range and plan
        the others (``job.parse_tasks``, the Parse Map's items). A document of one range is done
        here, and judged here as before (NO_TEXT_LAYER, EMPTY_DOCUMENT, ...); a longer one is
        judged by Chunk, which joins the ranges."""
        pages_prefix = self._artifact_key(job, PAGES_FOLDER)
        first_key = page_range_key(pages_prefix, 1)
        with self._stage(job, Stage.PARSE) as record:
            if self._deps.objects.exists(self._env.bucket_name, first_key):
                first = ParsedRange.model_validate(self._deps.objects.get_json(self._env.bucket_name, first_key))
                logger.info("parse checkpoint reused", extra={"key": first_key})
            else:
                data = self._deps.objects.read(job.object_ref)
                if job.document_format is DocumentFormat.PDF:
                    page_count = count_pdf_pages(
                        data, max_bytes=self._env.max_file_bytes, max_pages=self._env.max_pages
                    )
                    ranges = plan_page_ranges(page_count, self._env.parse_range_pages, self._env.max_ocr_pages)
                    first = self._parse_range(data, ranges[0], page_count)
                elif job.document_format in IMAGE_FORMATS:
                    first = read_image_document(
                        data, job.document_format, max_pages=self._env.max_pages, ocr=self._page_ocr()
                    )
                else:
                    # Structured formats are read whole in this one task (no Parse Map).
                    first = self._parse_structured(data, job.document_format)
                # The bytes are in hand here anyway: their hash finds the same upload under another name.
                first.content_sha256 = hashlib.sha256(data).hexdigest()
                self._deps.objects.put_json(self._env.bucket_name, first_key, first.model_dump())
                # Counted once: a retry finds the checkpoint above and skips this branch.
                self._count_pages(job, first.page_count)
            planned = plan_page_ranges(first.page_count, self._env.parse_range_pages, self._env.max_ocr_pages)
            job.parse_tasks = planned[1:] if first.last_page < first.page_count else []
            job.page_count = first.page_count
            job.lane = lane_for(first.page_count, self._env.bulk_above_pages)
            job.failed_pages = first.failed_pages
            job.pages_key = pages_prefix
            job.content_sha256 = first.content_sha256
            if not job.parse_tasks:
                join_page_ranges([first])  # the whole document: its verdict, as parse_pdf gives it
            record.update(
                page_count=first.page_count,
                failed_pages=first.failed_pages,
                ocr_pages=first.ocr_pages,
                lane=job.lane.value,
            )
            if first.content_sha256:
                record.update(self._content_fields(job, first.content_sha256))
            self._deps.status.record_parsed_range(job.document_id, job.version, first.first_page, first.pages_parsed)
        return job

    def _count_pages(self, job: DocumentJob, pages: int) -> None:
        """Toward the tenant's pages today; never holds the document back (it was accepted)."""
        if self._deps.usage is None:
            return
        try:
            self._deps.usage.pages_parsed(job.tenant_id, pages)
        except Exception:
            logger.warning("pages not counted", exc_info=True, extra={"pages": pages})

    @_logged(Stage.PARSE)
    def parse_range(self, item: ParseTask) -> dict[str, Any]:
        """One Parse Map task: its page range, checkpointed under the version's ``pages/`` folder,
        so a retry of this range redoes only this range (and nothing once its artifact exists).
        Returns only counts: the Map discards them, and the state never carries page text."""
        job = item.job
        key = page_range_key(self._require(job.pages_key, "pages_key"), item.range.first_page)
        with self._stage(job, Stage.PARSE, accumulate=True):
            if self._deps.objects.exists(self._env.bucket_name, key):
                parsed = ParsedRange.model_validate(self._deps.objects.get_json(self._env.bucket_name, key))
                logger.info("parse checkpoint reused", extra={"key": key})
            else:
                parsed = self._parse_range(self._deps.objects.read(job.object_ref), item.range, job.page_count)
                self._deps.objects.put_json(self._env.bucket_name, key, parsed.model_dump())
            logger.info(
                "page range parsed",
                extra={
                    "first_page": parsed.first_page,
                    "last_page": parsed.last_page,
                    "failed_pages": parsed.failed_pages,
                },
            )
            self._deps.status.record_parsed_range(job.document_id, job.version, parsed.first_page, parsed.pages_parsed)
        return {"first_page": parsed.first_page, "pages": parsed.pages_parsed, "failed_pages": len(parsed.failed_pages)}

    def _parse_range(self, data: bytes, page_range: PageRange, page_count: int | None) -> ParsedRange:
        ocr = self._page_ocr()
        cap = self._env.max_figures_read
        # The range's share of the document's caps, as for OCR pages (ranges run in parallel).
        pages = page_count or page_range.last_page
        share = cap * page_range.last_page // pages - cap * (page_range.first_page - 1) // pages
        reader = self._deps.image_reader(page_range.pages / pages) if self._deps.image_reader else CaptionsOnly()
        figures = PdfFigures(reader, cap, self._env.ocr_dpi)
        return parse_page_range(
            data,
            first_page=page_range.first_page,
            last_page=page_range.last_page,
            max_bytes=self._env.max_file_bytes,
            max_pages=self._env.max_pages,
            ocr=ocr,
            ocr_page_cap=page_range.max_ocr_pages,
            figures=figures,
            figure_read_cap=share,
        )

    def _page_ocr(self) -> PageOcr | None:
        engine = self._deps.ocr_engine
        return PageOcr(engine, self._env.max_ocr_pages, self._env.ocr_dpi) if engine is not None else None

    def _parse_structured(self, data: bytes, document_format: DocumentFormat) -> ParsedRange:
        """A structured file (not a PDF) read whole into one range of pages of blocks."""
        images = self._deps.image_reader(1.0) if self._deps.image_reader else CaptionsOnly()
        limits = FormatLimits(max_pages=self._env.max_pages, read_hidden_sheets=self._env.index_hidden_sheets)
        document = read_structured(data, document_format, limits, images)
        pages = document.pages
        return ParsedRange(
            page_count=len(pages),
            first_page=1,
            last_page=len(pages),
            pages=pages,
            document_format=document_format,
            # No text anywhere is EMPTY_DOCUMENT (nothing to read), never NO_TEXT_LAYER (OCR is for PDFs).
            draws_marks=False,
            metadata_title=document.title,
            figures=document.figure_counts,
        )

    def _joined_pages(self, job: DocumentJob) -> ParsedDocument:
        """The document's pages from its range artifacts, in order, cleaned as one document."""
        prefix = self._require(job.pages_key, "pages_key")
        first_pages = [1, *(task.first_page for task in job.parse_tasks)]
        ranges = [
            ParsedRange.model_validate(self._deps.objects.get_json(self._env.bucket_name, page_range_key(prefix, page)))
            for page in first_pages
        ]
        return join_page_ranges(ranges, clean=job.document_format is DocumentFormat.PDF)

    def _content_fields(self, job: DocumentJob, sha256: str) -> dict[str, Any]:
        """The bytes' hash on the record (the content index's key), and the tenant's earlier READY
        document with the same bytes. It is named only: the cache makes the copy embed nothing."""
        fields: dict[str, Any] = {"content_sha256": sha256, "content_key": content_key(job.tenant_id, sha256)}
        duplicate_of = self._deps.status.find_ready_copy(
            tenant_id=job.tenant_id, content_sha256=sha256, document_id=job.document_id
        )
        if duplicate_of:
            fields["duplicate_of"] = duplicate_of
            logger.info("duplicate upload", extra={"duplicate_of": duplicate_of})
        return fields

    @_logged(Stage.CHUNK)
    def chunk(self, job: DocumentJob) -> DocumentJob:
        """Join the parsed page ranges (a heading or a sentence that crosses a range border is
        chunked as if the document had been parsed whole), chunk them, and plan the Embed Map."""
        chunks_key = self._artifact_key(job, CHUNKS_ARTIFACT)
        with self._stage(job, Stage.CHUNK) as record:
            parsed = self._joined_pages(job)
            job.page_count = parsed.page_count
            job.failed_pages = parsed.failed_pages
            record.update(
                failed_pages=parsed.failed_pages, ocr_pages=parsed.ocr_pages, figures=parsed.figures.model_dump()
            )
            if self._deps.objects.exists(self._env.bucket_name, chunks_key):
                chunk_count = len(self._deps.objects.get_json(self._env.bucket_name, chunks_key))
            else:
                chunks = chunk_pages(
                    parsed.pages,
                    count_tokens=self._deps.count_tokens,
                    target_tokens=self._env.chunk_tokens,
                    overlap_tokens=self._env.chunk_overlap_tokens,
                )
                if not chunks:
                    raise PermanentError(ErrorCode.EMPTY_DOCUMENT, "the document has no text to chunk")
                chunks = passage_boxes(chunks, parsed.pages)
                chunks = with_cell_ranges(chunks, parsed.pages)
                title = document_title(parsed.metadata_title, filename_of(job.key))
                chunks = [
                    chunk.model_copy(update={"document_title": title, "document_format": job.document_format})
                    for chunk in chunks
                ]
                self._deps.objects.put_json(self._env.bucket_name, chunks_key, [chunk.model_dump() for chunk in chunks])
                chunk_count = len(chunks)
            job.chunks_key = chunks_key
            job.chunk_count = chunk_count
            # Plan the Embed Map: one task per slice of whole batches.
            job.embeddings_prefix = self._artifact_key(job, EMBEDDINGS_FOLDER)
            task_chunks = self._env.batches_per_embed_task * self._env.embed_batch_size
            job.embed_tasks = list(range(-(-chunk_count // task_chunks)))
            record["chunk_count"] = chunk_count
        self._deps.status.record_embed_plan(job.document_id, job.version, chunk_count)
        return job

    @_logged(Stage.EMBED)
    def embed(self, item: EmbedTask) -> dict[str, int]:
        """One Embed Map task: its slice of batches, each checkpointed, so a retry resumes at the
        first batch not yet embedded and never pays for the same tokens twice.

        Before the model is called, the task's texts are looked up in the embedding cache in one
        batch; only the misses are embedded, and their vectors are written to the cache after the
        model returned them (a failed call leaves no entry)."""
        job = item.job
        prefix = self._require(job.embeddings_prefix, "embeddings_prefix")
        batch_size = self._env.embed_batch_size
        first_batch = item.task * self._env.batches_per_embed_task
        with self._stage(job, Stage.EMBED, accumulate=True):
            chunks = self._load_chunks(job)
            embedded = 0
            pending: dict[int, list[str]] = {}  # batch number -> its texts, for batches not checkpointed
            for number in range(first_batch, first_batch + self._env.batches_per_embed_task):
                batch = chunks[number * batch_size : (number + 1) * batch_size]
                if not batch:
                    break
                embedded += len(batch)
                if not self._deps.objects.exists(self._env.bucket_name, embedding_batch_key(prefix, number)):
                    pending[number] = texts_to_embed(batch)
            keys = {text: self._cache_key(job, text) for texts in pending.values() for text in texts}
            cached = self._look_up_cache(list(dict.fromkeys(keys.values()))) if keys else {}
            hits = misses = 0
            embedder: Embedder | None = None
            for number, texts in pending.items():
                found = [cached.get(keys[text]) for text in texts]
                # A text the batch repeats (a page printed twice) is paid for once.
                missing = list(dict.fromkeys(text for text, vector in zip(texts, found, strict=True) if vector is None))
                fresh: dict[str, list[float]] = {}
                if missing:
                    embedder = embedder or self._deps.embedder()
                    fresh = dict(zip(missing, self._embed_or_wait(job, embedder, missing), strict=True))
                vectors = [fresh[text] if vector is None else vector for text, vector in zip(texts, found, strict=True)]
                self._deps.objects.put_json(self._env.bucket_name, embedding_batch_key(prefix, number), vectors)
                self._store_in_cache({keys[text]: vector for text, vector in fresh.items()})
                hits += len(texts) - len(missing)
                misses += len(missing)
            self._deps.status.record_embedded_part(
                job.document_id, job.version, item.task, embedded, cache_hits=hits, cache_misses=misses
            )
            self._deps.telemetry.embedding_cache_used(job.document_id, hits, misses)
        return {"task": item.task, "chunks": embedded}

    def _embed_or_wait(self, job: DocumentJob, embedder: Embedder, texts: list[str]) -> list[list[float]]:
        """The texts' vectors; when the shared quota is booked too far ahead, the document's record
        says it is waiting for capacity (and until when) before the task gives way. The quota is
        booked for the document's tenant (its fair share: rag_ingest.embeddings.capacity)."""
        try:
            with booking_for(job.tenant_id):
                return embedder.embed(texts)
        except EmbeddingCapacityWait as wait:
            until = datetime.now(UTC) + timedelta(seconds=wait.booked_ahead_seconds)
            self._deps.status.record_capacity_wait(
                job.document_id, job.version, until.isoformat(timespec="seconds").replace("+00:00", "Z")
            )
            logger.info("waiting for embedding capacity", extra={"booked_ahead_seconds": wait.booked_ahead_seconds})
            raise

    def _cache_key(self, job: DocumentJob, text: str) -> CacheKey:
        return CacheKey.of(job.tenant_id, self._env.embedding_model_id, self._env.embedding_dimension, text)

    def _look_up_cache(self, keys: list[CacheKey]) -> dict[CacheKey, list[float]]:
        """The cache saves money, it is never needed: a lookup that fails is all misses."""
        try:
            return self._deps.embedding_cache.lookup(keys)
        except TransientError as exc:
            logger.warning("embedding cache lookup failed: embedding every text", extra={"error": str(exc)})
            return {}

    def _store_in_cache(self, entries: dict[CacheKey, list[float]]) -> None:
        """Vectors the model just returned (and the batch checkpoint already holds). A write that
        fails costs a later document its hits, not this one its progress."""
        if not entries:
            return
        try:
            self._deps.embedding_cache.store(
                {key: vector for key, vector in entries.items() if len(vector) == key.dimension}
            )
        except TransientError as exc:
            logger.warning("embedding cache write failed", extra={"error": str(exc), "entries": len(entries)})

    @_logged(Stage.INDEX)
    def index(self, job: DocumentJob) -> DocumentJob:
        try:
            with self._stage(job, Stage.INDEX) as record:
                chunks = self._load_chunks(job)
                store = self._deps.vector_store()
                store.ensure_index()
                written, record_state = 0, None  # the loop runs at least once
                for record_state in self._records_to_stamp(job):
                    stamp = DocumentStamp.for_version(job.tenant_id, job.document_id, job.version, record_state)
                    written = store.write_chunks(stamp, chunks, self._checkpointed_vectors(job, len(chunks)))
                    # A slow write can land after a newer version took over and its Finalize swept
                    # "other versions": check ownership again now that this version's chunks are in.
                    self._deps.status.confirm_current(job.document_id, job.version)
                job.indexed_revision = record_state.revision if record_state else None
                job.indexed_count = written
                record["indexed_count"] = written
        except StaleWriteError as exc:
            self._withdraw(job)
            raise PermanentError(ErrorCode.SUPERSEDED, str(exc)) from exc
        except PermanentError as exc:
            if exc.code is ErrorCode.SUPERSEDED:
                self._withdraw(job)  # a retry that finds itself superseded cleans up what it wrote before
            raise
        return job

    def _records_to_stamp(self, job: DocumentJob) -> Iterator[DocumentRecord | None]:
        """The record Index stamps the chunks from, then each newer revision a PATCH wrote while
        they were written (at most ``MAX_REWRITES``); Finalize checks once more (see finalize)."""
        # The metadata (up to 8 KB) is read from the record, not carried in the Step Functions state
        # (ids, counts and pointers only); a record of another version makes confirm_current refuse.
        record = self._deps.status.get(job.document_id)
        yield record
        for _ in range(MAX_REWRITES):
            latest = self._deps.status.get(job.document_id)
            if latest is None or record is None or latest.revision == record.revision:
                return
            record = latest
            yield record

    def _checkpointed_vectors(self, job: DocumentJob, chunk_count: int) -> Iterator[list[float]]:
        """The Embed checkpoints' vectors in chunk order, one batch in memory at a time (a 5,000-page
        document's 22,500 vectors of 1,024 floats would be about 700 MB as Python lists)."""
        prefix = self._require(job.embeddings_prefix, "embeddings_prefix")
        batch_size = self._env.embed_batch_size
        for number in range((chunk_count + batch_size - 1) // batch_size):
            batch = self._deps.objects.get_json(self._env.bucket_name, embedding_batch_key(prefix, number))
            expected = min(batch_size, chunk_count - number * batch_size)
            if not isinstance(batch, list) or len(batch) != expected:
                found = len(batch) if isinstance(batch, list) else type(batch).__name__
                raise ValueError(f"embedding checkpoint {number} holds {found} vectors, expected {expected}")
            yield from batch

    def _withdraw(self, job: DocumentJob) -> None:
        removed = self._deps.vector_store().delete_version(job.document_id, job.version)
        logger.warning(
            "superseded index run withdrew its chunks", extra={"document_id": job.document_id, "removed": removed}
        )

    @_logged(Stage.FINALIZE)
    def finalize(self, job: DocumentJob) -> DocumentJob:
        current = self._deps.status.get(job.document_id)
        if current and current.version == job.version and current.status == DocumentStatus.READY:
            self._rewrite_if_patched(job)
            return job  # a retry after READY was written: done already
        with self._stage(job, Stage.FINALIZE) as record:
            # This version is now the active one: remove what older versions left in the index.
            deleted = self._deps.vector_store().delete_other_versions(job.document_id, job.version)
            job.stale_chunks_deleted = deleted
            record["stale_chunks_deleted"] = deleted
        final = self._deps.status.get(job.document_id)
        # Publish, then mark: a retry may publish twice, but the event is never lost.
        self._deps.telemetry.document_ready(
            {
                "document_id": job.document_id,
                "tenant_id": job.tenant_id,
                "version": job.version,
                "page_count": job.page_count,
                "chunk_count": job.chunk_count,
                "failed_pages": job.failed_pages,
                "timings_ms": final.timings_ms if final else {},
            }
        )
        self._deps.status.mark_ready(job.document_id, job.version)
        logger.info("document ready", extra={"document_id": job.document_id, "chunks": job.chunk_count})
        self._rewrite_if_patched(job)
        return job

    def _rewrite_if_patched(self, job: DocumentJob) -> None:
        """A PATCH that landed after Index's last look wrote the record only (it was not READY then);
        one landing from READY on rewrites the chunks itself (rag_ingest.ingest.chunk_rewrite)."""
        ready = self._deps.status.get(job.document_id)
        if ready is not None and job.indexed_revision is not None and ready.revision != job.indexed_revision:
            rewritten = self._rewriter().refresh(job.document_id)
            logger.info("metadata changed during the run: chunks rewritten", extra={"chunks": rewritten})

    def _rewriter(self) -> ChunkRewriter:
        return ChunkRewriter(
            documents=self._deps.status,
            objects=self._deps.objects,
            vector_store=self._deps.vector_store,
            bucket=self._env.bucket_name,
            artifacts_prefix=self._env.artifacts_prefix,
        )

    @_logged(None)
    def mark_failed(self, job: FailedJob) -> dict[str, Any]:
        code, detail = parse_failure(job.error.get("Error", "Unknown"), job.error.get("Cause", ""))
        current = self._deps.status.get(job.document_id)
        in_flight = (DocumentStatus.QUEUED, DocumentStatus.PROCESSING)
        if current is None or current.version != job.version or current.status not in in_flight:
            # A newer version took over, or a duplicate already closed it: its state stands.
            logger.warning("late failure not applied", extra={"document_id": job.document_id, "error_code": code})
            return {"document_id": job.document_id, "error_code": code.value, "applied": False}
        self._deps.telemetry.document_failed(
            code,
            {
                "document_id": job.document_id,
                "tenant_id": job.tenant_id,
                "version": job.version,
                "stage": current.stage.value if current.stage else None,
                "error_code": code.value,
                "error_detail": detail[:2000],
            },
        )
        try:
            self._deps.status.mark_failed(job.document_id, job.version, code, detail)
        except StaleWriteError:
            logger.warning("late failure not applied", extra={"document_id": job.document_id, "error_code": code})
            return {"document_id": job.document_id, "error_code": code.value, "applied": False}
        logger.warning(
            "document failed", extra={"document_id": job.document_id, "error_code": code.value, "detail": detail}
        )
        return {"document_id": job.document_id, "error_code": code.value, "applied": True}

    @_logged(Stage.EMBED)
    def embed_batch(self, job: DocumentJob) -> DocumentJob:
        """The bulk lane's Embed by batch inference: one turn of its wait loop (submit, look, or
        collect into the same checkpoints the Embed Map writes); ``job.embed_batch.phase`` tells the
        workflow what comes next (rag_ingest.ingest.batch_embedding)."""
        batch = self._deps.batch_embedding
        if batch is None:
            raise ValueError("batch inference is off: BATCH_INFERENCE_ROLE_ARN is not set")
        with self._stage(job, Stage.EMBED, accumulate=True):
            chunks = self._load_chunks(job)
            job.embed_batch = batch.advance(job, texts_to_embed(chunks))
        return job

    # -- helpers ---------------------------------------------------------------------------
    @contextmanager
    def _stage(self, job: DocumentJob, stage: Stage, *, accumulate: bool = False) -> Iterator[dict[str, Any]]:
        try:
            self._deps.status.start_stage(job.document_id, job.version, stage)
        except StaleWriteError as exc:
            # A newer version (or a delete) owns the document now: stop this run for good.
            raise PermanentError(ErrorCode.SUPERSEDED, str(exc)) from exc
        self._deps.telemetry.stage_started(stage)
        started = time.monotonic()
        record: dict[str, Any] = {}
        yield record
        elapsed_ms = int((time.monotonic() - started) * 1000)
        logger.info("stage finished", extra={"elapsed_ms": elapsed_ms, **record})
        self._deps.telemetry.stage_finished(stage, elapsed_ms)
        self._deps.status.record_stage(job.document_id, job.version, stage, elapsed_ms, accumulate=accumulate, **record)

    def _artifact_key(self, job: DocumentJob, name: str) -> str:
        return artifact_key(job.document_id, job.version, name, self._env.artifacts_prefix)

    def _load_chunks(self, job: DocumentJob) -> list[Chunk]:
        raw = self._deps.objects.get_json(self._env.bucket_name, self._require(job.chunks_key, "chunks_key"))
        return [Chunk.model_validate(item) for item in raw]

    @staticmethod
    def _require(value: str | None, name: str) -> str:
        if not value:
            raise ValueError(f"job has no {name}: the previous stage did not run")
        return value
