"""The cost arithmetic: measured usage, the configuration and prices give dollars per 1,000 pages.

Pure functions of their inputs (no I/O), so the unit tests pin them with known figures. The usage
comes from one measured run (``bench.cost.measure``); the configuration is the validated
``cdk.json`` context (memory per function, architecture, chunk size, batch size, dimension).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from bench.cost import prices

Architecture = Literal["x86_64", "arm64"]
PER_PAGES = 1000

# A documents-table write is also written to its two ALL-projected GSIs: by_status's sort key (updated_at)
# changes on every update, billed as a delete plus a put there; by_tenant's keys never change.
DOCUMENTS_PUT_WRITES = 1 + 1 + 1  # table, by_status, by_tenant
DOCUMENTS_UPDATE_WRITES = 1 + 2 + 1
DYNAMODB_WRITE_UNIT_BYTES = 1024
DYNAMODB_READ_UNIT_BYTES = 4096
# An embedding cache entry of the first format (float32 bytes unpacked) besides its vector: key id,
# checksum, dimension, attribute names (the bytes of each: docs/cost.md, How it is measured).
EMBEDDING_CACHE_ENTRY_OVERHEAD_BYTES = 220
# A packed entry (rag_ingest.ingest.embedding_cache) besides its payload: "cache_key" and a Titan v2 key
# id, then "v" and the value's format, kind and digest (the bytes of each: docs/cost.md).
EMBEDDING_CACHE_PACKED_OVERHEAD_BYTES = 9 + 135 + 1 + 2 + 8
# SQS per upload: S3's SendMessage, the mapping's ReceiveMessage and DeleteMessageBatch (an upper bound:
# a batch shares them); the mapping's idle polling is a fixed monthly cost, not a per-page one.
SQS_REQUESTS_PER_DOCUMENT = 3
# Events the pipeline publishes to EventBridge per document (DocumentReady or DocumentFailed).
EVENTS_PER_DOCUMENT = 1
# Live status in AWS (not run locally): each status write reaches the pusher function through the
# table's stream and becomes one WebSocket message per connected page. Assumed, not measured.
PUSHER_MS_PER_STATUS_WRITE = 100.0


# The cost table's Textract line, by parsing.textractTables (its price: ocr_page_price).
OCR_LINES = {False: "Textract DetectDocumentText (OCR)", True: "Textract AnalyzeDocument TABLES (OCR)"}


def ocr_page_price(textract_tables: bool) -> prices.Price:
    """What Textract bills per OCR'd page: DetectDocumentText, or AnalyzeDocument with TABLES."""
    return prices.TEXTRACT_ANALYZE_TABLES_PAGE if textract_tables else prices.TEXTRACT_DETECT_TEXT_PAGE


@dataclass(frozen=True)
class DocumentUsage:
    """One document of the measured run."""

    pages: int
    chunks: int
    chunk_tokens: int
    state_transitions: int
    stored_bytes: int  # the PDF and every artifact, as stored after the run
    embedding_bytes: int  # the part of stored_bytes that is embedding checkpoints
    # Pages without a text layer, read by OCR (Textract in AWS); a share of the pages is an expected
    # count, so it need not be whole.
    ocr_pages: float = 0


@dataclass(frozen=True)
class RunUsage:
    """What a measured run used, summed over its documents."""

    documents: tuple[DocumentUsage, ...]
    lambda_ms: Mapping[str, float]  # function (display name) -> summed invocation milliseconds
    lambda_invocations: Mapping[str, int]
    s3_write_requests: int
    s3_read_requests: int
    dynamodb_puts: int  # PutItem on the documents table
    dynamodb_updates: int  # UpdateItem on the documents table
    dynamodb_other_writes: int  # other tables (idempotency): small items, one unit each
    dynamodb_read_units: float  # the documents and idempotency tables' reads
    status_item_bytes: int  # mean size of a document's status item
    log_bytes: int
    embedding_dimension: int  # of the embedder that produced embedding_bytes
    # The embedding cache table: entries written (PutItem, one per chunk embedded) and keys looked
    # up (BatchGetItem items). Priced at the entry's size for the configured dimension.
    embedding_cache_writes: int = 0
    embedding_cache_lookups: int = 0
    # Packed entries: the largest payload measured per float (sign-and-exponent bytes deflated), which an
    # entry's size at another dimension scales with. None: the run wrote the first, unpacked format.
    embedding_cache_payload_bytes_per_float: float | None = None

    @property
    def pages(self) -> int:
        return sum(d.pages for d in self.documents)

    @property
    def ocr_pages(self) -> float:
        return sum(d.ocr_pages for d in self.documents)


@dataclass(frozen=True)
class CostSettings:
    """The configuration the cost depends on."""

    memory_mb: Mapping[str, int]  # function (display name) -> configured memory
    architecture: Architecture = "x86_64"
    embedding_dimension: int = 1024
    workflow_type: Literal["STANDARD", "EXPRESS"] = "STANDARD"
    # Express only: the workflow's billed memory (64 MB steps) and duration per document.
    express_memory_mb: int = 64
    express_seconds_per_document: float = 0.0
    pusher_memory_mb: int = 256
    storage_months: float = 1.0
    # cdk.json parsing.textractTables: OCR'd pages go to AnalyzeDocument TABLES, not DetectDocumentText.
    textract_tables: bool = False

    @property
    def ocr_line(self) -> str:
        """The name of the cost table's Textract line for this setting."""
        return OCR_LINES[self.textract_tables]

    # Titan's tokens at the batch inference price (the bulk lane's Embed by batch jobs, bench.cost.batch).
    bedrock_batch: bool = False


@dataclass(frozen=True)
class CostLine:
    item: str
    usd: float  # for the whole measured run
    detail: str = ""


@dataclass(frozen=True)
class CostTable:
    lines: tuple[CostLine, ...]
    pages: int
    documents: int

    @property
    def total_usd(self) -> float:
        return sum(line.usd for line in self.lines)

    def per_thousand_pages(self, usd: float) -> float:
        return usd * PER_PAGES / self.pages if self.pages else 0.0

    @property
    def total_per_thousand_pages(self) -> float:
        return self.per_thousand_pages(self.total_usd)

    def line(self, item: str) -> CostLine:
        return next(line for line in self.lines if line.item == item)


def lambda_gb_seconds(ms: float, memory_mb: int) -> float:
    """Lambda bills duration times configured memory (GB = 1,024 MB)."""
    return ms / 1000 * memory_mb / 1024


def dynamodb_write_units(item_bytes: int, writes_per_request: int) -> int:
    return max(1, math.ceil(item_bytes / DYNAMODB_WRITE_UNIT_BYTES)) * writes_per_request


def express_billed_gb_seconds(memory_mb: int, seconds: float) -> float:
    """Express workflows bill memory in 64 MB steps and duration in 100 ms steps."""
    billed_mb = max(64, math.ceil(memory_mb / 64) * 64)
    billed_seconds = max(0.1, math.ceil(round(seconds * 10, 6)) / 10)
    return billed_mb / 1024 * billed_seconds


def cost_table(usage: RunUsage, settings: CostSettings) -> CostTable:
    """Every cost line of the measured run under ``settings``."""
    documents = len(usage.documents)
    lines: list[CostLine] = []

    gb_seconds = sum(lambda_gb_seconds(ms, settings.memory_mb[function]) for function, ms in usage.lambda_ms.items())
    gb_second = prices.LAMBDA_GB_SECOND[settings.architecture]
    lines.append(
        CostLine("Lambda duration", gb_seconds * gb_second.usd, f"{gb_seconds:.1f} GB-s, {settings.architecture}")
    )
    invocations = sum(usage.lambda_invocations.values())
    lines.append(CostLine("Lambda requests", invocations * prices.LAMBDA_REQUEST.usd, f"{invocations} invocations"))

    transitions = sum(d.state_transitions for d in usage.documents)
    if settings.workflow_type == "STANDARD":
        lines.append(
            CostLine(
                "Step Functions (Standard)",
                transitions * prices.SFN_STANDARD_TRANSITION.usd,
                f"{transitions} state transitions",
            )
        )
    else:
        express = express_billed_gb_seconds(settings.express_memory_mb, settings.express_seconds_per_document)
        usd = documents * (prices.SFN_EXPRESS_REQUEST.usd + express * prices.SFN_EXPRESS_GB_SECOND.usd)
        lines.append(CostLine("Step Functions (Express)", usd, f"{documents} requests, {express:.3f} GB-s each"))

    ocr_pages = usage.ocr_pages
    share = ocr_pages / usage.pages if usage.pages else 0.0
    lines.append(
        CostLine(
            settings.ocr_line,
            ocr_pages * ocr_page_price(settings.textract_tables).usd,
            f"{ocr_pages:g} pages OCR'd ({share:.0%} of pages)",
        )
    )

    tokens = sum(d.chunk_tokens for d in usage.documents)
    token_price = prices.TITAN_V2_BATCH_INPUT_TOKEN if settings.bedrock_batch else prices.TITAN_V2_INPUT_TOKEN
    lines.append(
        CostLine(
            "Bedrock Titan v2 input tokens",
            tokens * token_price.usd,
            f"{tokens} tokens" + (", batch price" if settings.bedrock_batch else ""),
        )
    )

    s3_requests = (
        usage.s3_write_requests * prices.S3_WRITE_REQUEST.usd + usage.s3_read_requests * prices.S3_READ_REQUEST.usd
    )
    lines.append(
        CostLine(
            "S3 requests", s3_requests, f"{usage.s3_write_requests} PUT/POST/LIST, {usage.s3_read_requests} GET/HEAD"
        )
    )
    stored = stored_bytes(usage, settings.embedding_dimension)
    storage = stored / prices.GIB * prices.S3_STORAGE_GB_MONTH.usd * settings.storage_months
    lines.append(CostLine("S3 storage", storage, f"{stored / 1e6:.2f} MB for {settings.storage_months:g} month"))

    cache_writes, cache_reads = embedding_cache_units(
        usage, settings.embedding_dimension, usage.embedding_cache_payload_bytes_per_float
    )
    write_units = (
        usage.dynamodb_puts * dynamodb_write_units(usage.status_item_bytes, DOCUMENTS_PUT_WRITES)
        + usage.dynamodb_updates * dynamodb_write_units(usage.status_item_bytes, DOCUMENTS_UPDATE_WRITES)
        + usage.dynamodb_other_writes
        + cache_writes
    )
    read_units = usage.dynamodb_read_units + cache_reads
    dynamodb = write_units * prices.DYNAMODB_WRITE_UNIT.usd + read_units * prices.DYNAMODB_READ_UNIT.usd
    lines.append(
        CostLine(
            "DynamoDB on-demand",
            dynamodb,
            f"{write_units} WRU ({cache_writes} of them embedding-cache entries), {read_units:g} RRU",
        )
    )

    sqs = documents * SQS_REQUESTS_PER_DOCUMENT
    lines.append(CostLine("SQS", sqs * prices.SQS_REQUEST.usd, f"{sqs} requests"))
    lines.append(
        CostLine(
            "CloudWatch Logs (incl. EMF metrics)",
            usage.log_bytes / prices.GIB * prices.CLOUDWATCH_LOGS_INGESTED_GB.usd,
            f"{usage.log_bytes / 1e6:.2f} MB ingested",
        )
    )
    events = documents * EVENTS_PER_DOCUMENT
    lines.append(CostLine("EventBridge", events * prices.EVENTBRIDGE_EVENT.usd, f"{events} events"))
    lines.append(
        CostLine(
            "X-Ray traces (upper bound)", invocations * prices.XRAY_TRACE.usd, f"{invocations} traces, all sampled"
        )
    )
    status_writes = usage.dynamodb_puts + usage.dynamodb_updates
    pusher_gb_seconds = lambda_gb_seconds(status_writes * PUSHER_MS_PER_STATUS_WRITE, settings.pusher_memory_mb)
    live = (
        status_writes * (prices.LAMBDA_REQUEST.usd + prices.WEBSOCKET_MESSAGE.usd) + pusher_gb_seconds * gb_second.usd
    )
    lines.append(CostLine("Live status push (estimate)", live, f"{status_writes} status writes pushed"))
    return CostTable(tuple(lines), pages=usage.pages, documents=documents)


def embedding_cache_entry_bytes(dimension: int, payload_bytes_per_float: float | None = None) -> int:
    """A cache entry's DynamoDB item size (rag_ingest.ingest.embedding_cache.encode_entry).

    Packed (``payload_bytes_per_float`` measured): the key, and one binary value of the payload at
    that many bytes a float, its format, kind and digest. The first format (None): the float32
    vector unpacked, the sha256 key id and checksum, the dimension, and the attribute names."""
    if payload_bytes_per_float is None:
        return 4 * dimension + EMBEDDING_CACHE_ENTRY_OVERHEAD_BYTES
    return math.ceil(payload_bytes_per_float * dimension) + EMBEDDING_CACHE_PACKED_OVERHEAD_BYTES


def embedding_cache_units(
    usage: RunUsage, dimension: int, payload_bytes_per_float: float | None = None
) -> tuple[int, float]:
    """(write units, read units) of the embedding cache: each entry written once, each key looked
    up once with an eventually consistent BatchGetItem (half a unit per 4 KB, the entry's size
    counted even for a miss: an upper bound)."""
    entry = embedding_cache_entry_bytes(dimension, payload_bytes_per_float)
    writes = usage.embedding_cache_writes * dynamodb_write_units(entry, 1)
    reads = usage.embedding_cache_lookups * 0.5 * max(1, math.ceil(entry / DYNAMODB_READ_UNIT_BYTES))
    return writes, reads


def stored_bytes(usage: RunUsage, dimension: int) -> int:
    """Bytes kept in S3, the embedding checkpoints scaled from the measured dimension to ``dimension``."""
    scale = dimension / usage.embedding_dimension
    return sum(d.stored_bytes - d.embedding_bytes + round(d.embedding_bytes * scale) for d in usage.documents)


# -- the knobs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkingChange:
    """Re-chunk the measured text at another size: tokens billed, chunks and batches follow."""

    measured_tokens: int
    measured_overlap: int
    tokens: int
    overlap: int

    def token_factor(self) -> float:
        # Each chunk repeats `overlap` tokens of its neighbour: the text's own tokens are the
        # billed tokens * (size - overlap) / size, and re-chunking scales them by the inverse.
        measured = self.measured_tokens / (self.measured_tokens - self.measured_overlap)
        return (self.tokens / (self.tokens - self.overlap)) / measured

    def chunk_factor(self) -> float:
        return (self.measured_tokens - self.measured_overlap) / (self.tokens - self.overlap)


def rechunked(usage: RunUsage, change: ChunkingChange, embed_batch_size: int, measured_batch_size: int) -> RunUsage:
    """The run as it would be with another chunk size and embedding batch size.

    Bedrock tokens scale with the overlap share; the embedding checkpoints (one S3 PUT in Embed, one
    HEAD and one GET in Index, per batch) scale with the number of batches. Durations are kept.
    """
    documents = tuple(
        replace(
            d,
            chunks=max(1, round(d.chunks * change.chunk_factor())),
            chunk_tokens=round(d.chunk_tokens * change.token_factor()),
        )
        for d in usage.documents
    )
    batches_before = sum(math.ceil(d.chunks / measured_batch_size) for d in usage.documents)
    batches_after = sum(math.ceil(d.chunks / embed_batch_size) for d in documents)
    delta = batches_after - batches_before
    return replace(
        usage,
        documents=documents,
        s3_write_requests=max(0, usage.s3_write_requests + delta),
        s3_read_requests=max(0, usage.s3_read_requests + 2 * delta),
    )


def with_scanned_share(usage: RunUsage, share: float, parse_function: str, ms_per_ocr_page: float) -> RunUsage:
    """The run as if ``share`` (0..1) of every document's pages had no text layer.

    Each such page is OCR'd (Textract bills it) and costs the Parse function ``ms_per_ocr_page``
    more: rasterising it and waiting on the synchronous Textract call. Pages OCR'd in the measured
    run already count; the text they yield is taken as the text layer's (same chunks and tokens).
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share of scanned pages must be within 0..1, not {share}")
    documents = tuple(replace(d, ocr_pages=d.pages * share) for d in usage.documents)
    added = sum(d.ocr_pages for d in documents) - usage.ocr_pages
    parse_ms = max(0.0, usage.lambda_ms.get(parse_function, 0.0) + added * ms_per_ocr_page)
    return replace(usage, documents=documents, lambda_ms={**usage.lambda_ms, parse_function: parse_ms})


@dataclass(frozen=True)
class Knob:
    name: str
    change: str
    per_thousand_pages: float
    delta_percent: float


@dataclass
class KnobStudy:
    base: CostTable
    knobs: list[Knob] = field(default_factory=list)

    def add(self, name: str, change: str, table: CostTable) -> None:
        base = self.base.total_per_thousand_pages
        value = table.total_per_thousand_pages
        self.knobs.append(Knob(name, change, value, 100 * (value - base) / base if base else 0.0))


def scaled_memory(
    memory_mb: Mapping[str, int], factor: float, functions: Sequence[str] | None = None
) -> dict[str, int]:
    """Memory times ``factor`` (within Lambda's 128-10,240 MB) for ``functions`` (all when None)."""
    return {
        name: min(10240, max(128, round(mb * factor))) if functions is None or name in functions else mb
        for name, mb in memory_mb.items()
    }
