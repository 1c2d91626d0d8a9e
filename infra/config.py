"""Deployment configuration: the ``rag-ingest`` object of ``cdk.json`` context, validated.

Keys are camelCase in ``cdk.json`` (like the rest of CDK context) and snake_case in Python.
Every field has a default, so an empty object deploys a working stack; ``cdk.json`` spells the
defaults out so they can be reviewed and overridden per environment with ``-c``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from rag_ingest.core.auth import TENANT_ID_PATTERN
from rag_ingest.core.config import (
    DEFAULT_BOOK_AHEAD_SECONDS,
    REAPER_MAX_DOCUMENTS_PER_RUN,
    REAPER_MAX_REDRIVES,
    REAPER_STUCK_AFTER_MINUTES,
    SHIPPED_VECTOR_ENCODING,
    ConcurrentSegmentSearchSetting,
    MergeFloorSegmentMb,
    MergeSegmentsPerTier,
    StoredVectorEncoding,
    TenantWeights,
)
from rag_ingest.core.job import DEFAULT_BULK_ABOVE_PAGES, DEFAULT_PARSE_RANGE_PAGES
from rag_ingest.core.limits import LimitsTable
from rag_ingest.core.settings import (
    ANSWER_MODEL_ID_PATTERN,
    DEFAULT_ANSWER_MAX_TOKENS,
    DEFAULT_ANSWER_MIN_RELEVANCE,
    DEFAULT_ANSWER_MODEL_ID,
    DEFAULT_FIGURE_VISION_MODEL_ID,
    DEFAULT_FIGURE_VISION_PROMPT,
    DEFAULT_MAX_FIGURES_READ,
    DEFAULT_RERANK_MODEL_ID,
    MAX_ANSWER_TOKENS,
    RERANK_CANDIDATES,
    RERANK_MAX_CANDIDATES,
    CapacityMode,
    RerankModelId,
)
from rag_ingest.embeddings.bedrock import TITAN_V2_DIMENSIONS, TITAN_V2_MODEL_ID
from rag_ingest.ingest.batch_embedding import (
    BATCH_MAX_RECORDS,
    BATCH_MAX_TIMEOUT_HOURS,
    BATCH_MIN_RECORDS,
    BATCH_MIN_TIMEOUT_HOURS,
)
from rag_ingest.parsing.ocr.engine import DEFAULT_MAX_OCR_PAGES
from rag_ingest.retrieval.search import DEFAULT_FUSION, HYBRID_MAX_CANDIDATES

CONTEXT_KEY = "rag-ingest"

# The Bedrock models the embedder accepts, and their output dimensions: the embedder's own constants
# (rag_ingest.embeddings.bedrock), so synth rejects exactly what the Embed function would.
BEDROCK_EMBEDDING_DIMENSIONS: dict[str, tuple[int, ...]] = {TITAN_V2_MODEL_ID: TITAN_V2_DIMENSIONS}

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)  # fmt: skip

_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?$")
# Plain http is for a developer's own machine only: a page on any other http origin could be
# read or altered on the way, and the browser would hand it the user's ID token.
_LOOPBACK_ORIGIN = re.compile(r"^http://(localhost|127\.0\.0\.1)(:\d{1,5})?$")
# Cognito accepts https callback/logout URLs, and http only for localhost (no fragment).
_SIGN_IN_URL = re.compile(r"^(https://[A-Za-z0-9.-]+|http://localhost)(:\d{1,5})?(/[^#\s]*)?$")
# Cognito domain prefixes: lowercase letters, digits and inner hyphens, without reserved words.
_DOMAIN_PREFIX = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
RESERVED_IN_DOMAIN_PREFIX = ("aws", "amazon", "cognito")
# The CLI's loopback sign-in (`rag-ingest login --stack`, RFC 8252) receives the authorization code
# here: an allowed callback/logout URL of the app client in every deployment.
CLI_LOOPBACK_URL = "http://localhost:8765/callback"
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
_DOMAIN_NAME = re.compile(r"^[a-z][a-z0-9-]{2,27}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# S3 bucket names: 3-63 lower-case letters, digits, dots and hyphens, starting and ending alphanumeric.
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}$")
# Page ranges of the largest document (maxPages / rangePages): 7 history events each (14 with a retry)
# keeps one execution far below Step Functions' 25,000 events (docs/architecture.md, "Big documents").
MAX_PARSE_RANGES = 500


class ConfigError(ValueError):
    """The ``rag-ingest`` context is invalid; the message lists every problem."""


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, validate_default=True
    )


class FunctionSettings(_Model):
    memory_mb: int = Field(default=512, ge=128, le=10240)
    timeout_seconds: int = Field(default=60, ge=1, le=900)


class StageFunctions(_Model):
    """One entry per workflow stage: parsing and embedding need more memory and time."""

    validate_: FunctionSettings = Field(default=FunctionSettings(memory_mb=512, timeout_seconds=60), alias="validate")
    parse: FunctionSettings = FunctionSettings(memory_mb=2048, timeout_seconds=600)
    chunk: FunctionSettings = FunctionSettings(memory_mb=1024, timeout_seconds=300)
    embed: FunctionSettings = FunctionSettings(memory_mb=1024, timeout_seconds=900)
    index: FunctionSettings = FunctionSettings(memory_mb=1024, timeout_seconds=600)
    finalize: FunctionSettings = FunctionSettings(memory_mb=512, timeout_seconds=300)
    mark_failed: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=60)


LambdaArchitecture = Literal["x86_64", "arm64"]


class FunctionsConfig(_Model):
    # Every function and the shared layer: tools/build_layer.py fetches the layer's wheels for this
    # architecture (manylinux2014_aarch64 for arm64, whose GB-second is about 20 % cheaper).
    architecture: LambdaArchitecture = "x86_64"
    # An HTTP API integration times out at 30 s, so the API function must finish sooner.
    api: FunctionSettings = FunctionSettings(memory_mb=512, timeout_seconds=29)
    # The MCP server over streamable HTTP (docs/mcp.md), behind the same HTTP API: the same bound.
    mcp: FunctionSettings = FunctionSettings(memory_mb=512, timeout_seconds=29)
    intake: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=30)
    redrive: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=300)
    reaper: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=300)
    # Pages through the whole table, the uploads' versions and the index's counts: Lambda's longest timeout.
    reconciler: FunctionSettings = FunctionSettings(memory_mb=512, timeout_seconds=900)
    # Webhooks: the fan-out reads a tenant's endpoints and enqueues; the delivery POSTs a batch in
    # parallel, each with webhooks.timeoutSeconds (so its timeout must be longer).
    webhook_fan_out: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=30)
    webhook_delivery: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=30)
    # A sync step lists and writes until its budget (sources.stepSeconds) and checkpoints.
    source_sync: FunctionSettings = FunctionSettings(memory_mb=1024, timeout_seconds=900)
    stages: StageFunctions = StageFunctions()

    @field_validator("api", "mcp")
    @classmethod
    def _api_within_gateway_timeout(cls, value: FunctionSettings) -> FunctionSettings:
        if value.timeout_seconds > 29:
            raise ValueError("a function behind the HTTP API must time out in at most 29 s (integrations stop at 30 s)")
        return value


class StorageConfig(_Model):
    artifacts_noncurrent_expiration_days: int = Field(default=7, ge=1)
    abort_incomplete_multipart_upload_days: int = Field(default=1, ge=1)
    access_logs_expiration_days: int = Field(default=90, ge=1)


class UploadConfig(_Model):
    max_upload_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
    url_expiry_seconds: int = Field(default=900, ge=60, le=3600)


class LimitsConfig(_Model):
    max_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
    max_pages: int = Field(default=5000, ge=1)
    # Pages without a text layer OCR'd per document (Textract, ~1-2 s each inside the Parse function's
    # 600 s timeout); the rest become failed pages with the reason (docs/ocr.md).
    max_ocr_pages: int = Field(default=DEFAULT_MAX_OCR_PAGES, ge=0, le=300)


class ParsingConfig(_Model):
    # Pages per Parse task: a task's memory and time are its range's (docs/architecture.md, "Big documents").
    range_pages: int = Field(default=DEFAULT_PARSE_RANGE_PAGES, ge=1, le=1000)
    # Parse Map iterations at once: each reads the PDF (at most maxFileBytes) into its own function.
    max_concurrency: int = Field(default=10, ge=1, le=40)
    # Scanned pages' tables in AWS (Textract AnalyzeDocument with TABLES): off by default, as it bills
    # about ten times DetectDocumentText per OCR'd page (docs/ocr.md, docs/cost.md).
    textract_tables: bool = False
    # Spreadsheets' hidden sheets (hidden or "very hidden" in Excel) are read and indexed: off by default,
    # as an author hides lookups and scratch work, and a search should find what a reader is shown.
    index_hidden_sheets: bool = False


class FigureVisionConfig(_Model):
    """A Bedrock vision model describing each figure read (docs/formats.md, "Figures"): off by
    default, as it is priced per figure (docs/cost.md); ``modelId`` a foundation model's id or a
    cross-Region inference profile's (Parse's only Bedrock grant when on); ``maxFigures`` per document."""

    enabled: bool = False
    model_id: str = Field(default=DEFAULT_FIGURE_VISION_MODEL_ID, pattern=ANSWER_MODEL_ID_PATTERN)
    prompt: str = Field(default=DEFAULT_FIGURE_VISION_PROMPT, min_length=1, max_length=4000)
    max_figures: int = Field(default=20, ge=1, le=1000)


class FiguresConfig(_Model):
    """Figures in PDFs (docs/formats.md, "Figures"): ``maxRead`` figures per document read by the OCR
    engine (Textract in AWS, billed per figure) and, when on, described by the vision model."""

    max_read: int = Field(default=DEFAULT_MAX_FIGURES_READ, ge=0, le=1000)
    vision: FigureVisionConfig = FigureVisionConfig()

    @model_validator(mode="after")
    def _described_figures_are_read(self) -> Self:
        if self.vision.enabled and self.vision.max_figures > self.max_read:
            raise ValueError(
                f"figures.vision.maxFigures ({self.vision.max_figures}) exceeds figures.maxRead ({self.max_read}): "
                "only figures read are described"
            )
        return self


class LanesConfig(_Model):
    """Documents of more than ``bulkAbovePages`` pages run in the bulk lane: their own copies of the
    Parse, Chunk, Embed and Index functions (own concurrency, own metrics) and their own Map
    concurrency, so a 2,000-page manual never holds the workers small uploads need
    (docs/architecture.md, "Lanes"). The lane is chosen once the page count is known (Parse's first task)."""

    bulk_above_pages: int = Field(default=DEFAULT_BULK_ABOVE_PAGES, ge=1)
    # Page ranges of one bulk document parsed at once, and its Embed tasks in flight at once (the
    # embedding model's quota is shared with the standard lane: the bulk lane takes the smaller share).
    bulk_parse_max_concurrency: int = Field(default=5, ge=1, le=40)
    bulk_embed_max_concurrency: int = Field(default=2, ge=1, le=40)
    # Reserved concurrency of each bulk function, a hard cap across documents: off by default, as a new
    # account's limit of 10 leaves no reservation possible (docs/architecture.md, "Lanes").
    bulk_reserved_concurrency: int | None = Field(default=None, ge=1, le=1000)


class ChunkingConfig(_Model):
    chunk_tokens: int = Field(default=300, ge=16, le=8192)
    chunk_overlap_tokens: int = Field(default=60, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Self:
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError("chunkOverlapTokens must be smaller than chunkTokens")
        return self


class BatchInferenceConfig(_Model):
    """The bulk lane's Embed by Bedrock batch inference (rag_ingest.ingest.batch_embedding): a job per
    bulk document instead of one InvokeModel per chunk, at Bedrock's batch price. Off by default: a
    job can take up to its timeout (24 h by default), so turning it on needs a workflow timeout as
    long. ``minRecords``: documents with fewer texts to embed take the on-demand Embed Map (Bedrock's
    default quota is 100 records per job; raise it to your account's if yours is higher);
    ``pollSeconds`` doubling up to ``maxPollSeconds``: the wait between looks at a job;
    ``writeCache``: store the job's vectors in the embedding cache too (DynamoDB writes)."""

    enabled: bool = False
    min_records: int = Field(default=BATCH_MIN_RECORDS, ge=BATCH_MIN_RECORDS, le=BATCH_MAX_RECORDS)
    timeout_hours: int = Field(default=BATCH_MIN_TIMEOUT_HOURS, ge=BATCH_MIN_TIMEOUT_HOURS, le=BATCH_MAX_TIMEOUT_HOURS)
    poll_seconds: int = Field(default=60, ge=10, le=3600)
    max_poll_seconds: int = Field(default=1800, ge=10, le=3600)
    write_cache: bool = False

    @model_validator(mode="after")
    def _poll_bounds(self) -> Self:
        if self.max_poll_seconds < self.poll_seconds:
            raise ValueError("embedding.batchInference.maxPollSeconds must not be below pollSeconds")
        return self


class EmbeddingCapacityConfig(_Model):
    """One budget for every Embed task of every document and both lanes (docs/architecture.md,
    "One limiter across all Embed work"). The quota defaults are Titan Text Embeddings V2's default
    on-demand quotas as AWS's quota table lists them (an account may have less: `make preflight`
    reads the account's own values from Service Quotas and says when these are above them)."""

    # "shared" (one DynamoDB ledger every Embed task books), "adaptive" (botocore's, per Lambda) or "off":
    # chosen by measurement (docs/architecture.md, "One limiter across all Embed work").
    mode: CapacityMode = "shared"
    requests_per_minute: int | None = Field(default=2000, ge=1)
    tokens_per_minute: int | None = Field(default=300_000, ge=1)
    # The share of the quota the limiter books: the rest is for search queries (not paced) and for
    # clock skew between Lambdas.
    headroom: float = Field(default=0.97, gt=0, le=1)
    # How long one batch waits for its turn inside an Embed task before the task gives way.
    max_wait_seconds: int = Field(default=30, ge=0, le=600)
    # How long a document's Embed tasks keep giving way before it fails with EMBEDDING_CAPACITY:
    # one Step Functions retry of about a minute each (below workflow.timeoutMinutes).
    wait_minutes: int = Field(default=50, ge=1, le=10_000)
    # How far ahead of now a task books: a tenant arriving behind a busy one waits about this long.
    book_ahead_seconds: float = Field(default=DEFAULT_BOOK_AHEAD_SECONDS, gt=0, le=600)
    # Weighted fair shares between tenants: {"tenant-id": weight}; a tenant not listed weighs 1.
    tenant_weights: TenantWeights = Field(default_factory=dict)

    @model_validator(mode="after")
    def _a_quota_when_limited(self) -> Self:
        if self.mode == "shared" and self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("embedding.capacity mode 'shared' needs requestsPerMinute or tokensPerMinute")
        return self


class EmbeddingConfig(_Model):
    # Only Bedrock runs in AWS; the local stack swaps in an offline model behind the same interface.
    provider: Literal["bedrock"] = "bedrock"
    model_id: str = Field(default="amazon.titan-embed-text-v2:0", pattern=r"^[A-Za-z0-9.:_-]+$")
    dimension: int = Field(default=1024, ge=1, le=16000)
    batch_size: int = Field(default=16, ge=1, le=256)
    # Chunks per Embed task (one Map iteration): big documents fan out into tasks, each well inside
    # the Lambda timeout, while the Map's MaxConcurrency keeps the total rate under the Bedrock quota.
    task_chunks: int = Field(default=256, ge=1, le=10_000)
    max_concurrency: int = Field(default=4, ge=1, le=40)
    capacity: EmbeddingCapacityConfig = EmbeddingCapacityConfig()
    # The content-addressed embedding cache: it pays when documents come back as new versions or
    # copies, not for a corpus ingested once (its cost: docs/deploy.md, "embedding.cache").
    cache: bool = True
    batch_inference: BatchInferenceConfig = BatchInferenceConfig()

    @field_validator("model_id")
    @classmethod
    def _supported_model(cls, value: str) -> str:
        if value not in BEDROCK_EMBEDDING_DIMENSIONS:
            supported = ", ".join(sorted(BEDROCK_EMBEDDING_DIMENSIONS))
            raise ValueError(f"embedding.modelId {value!r} is not supported by the Bedrock embedder (use {supported})")
        return value

    @field_validator("dimension")
    @classmethod
    def _dimension_of_the_model(cls, value: int, info: ValidationInfo) -> int:
        # A field validator (not a model one), so a bad dimension is listed beside a bad model id.
        model_id = info.data.get("model_id")
        allowed = BEDROCK_EMBEDDING_DIMENSIONS.get(model_id) if model_id else None
        if allowed is None:
            allowed = tuple(sorted({d for dims in BEDROCK_EMBEDDING_DIMENSIONS.values() for d in dims}))
        if value not in allowed:
            raise ValueError(
                f"embedding.dimension {value} is not one of {model_id or 'the supported models'}'s: "
                f"{', '.join(map(str, allowed))}"
            )
        return value


class OpenSearchConfig(_Model):
    # An existing endpoint (https URL): no domain is created and its access policy is yours.
    endpoint: str | None = None
    index: str = Field(default="rag-chunks", pattern=r"^[a-z0-9][a-z0-9_-]{0,254}$")
    domain_name: str | None = None
    instance_type: str = Field(default="t3.small.search", pattern=r"^[a-z0-9]+\.[a-z0-9]+\.search$")
    instance_count: int = Field(default=1, ge=1, le=80)
    volume_size_gb: int = Field(default=10, ge=10, le=3072)
    # k-NN index (lucene HNSW): space, graph degree and build beam apply when the index is created;
    # efSearch (the query beam: recall against latency) applies to every query.
    space_type: Literal["cosinesimil", "l2", "innerproduct"] = "cosinesimil"
    hnsw_m: int = Field(default=16, ge=2, le=100)
    ef_construction: int = Field(default=128, ge=2, le=4096)
    ef_search: int = Field(default=200, ge=1, le=10_000)
    # The index's concurrent segment search mode (OpenSearch >= 2.17), at index creation; "cluster"
    # sets nothing (an existing endpoint older than 2.17 refuses the setting).
    concurrent_segment_search: ConcurrentSegmentSearchSetting = "auto"
    # The tiered merge policy at index creation, 0 leaving either to the cluster: fewer, larger segments
    # answer k-NN faster, for more merging at ingest (docs/benchmarks.md, 110,000 chunks).
    merge_segments_per_tier: MergeSegmentsPerTier = 4
    merge_floor_segment_mb: MergeFloorSegmentMb = 256
    # How the index stores each vector, at index creation (an existing index keeps its own): 4-byte
    # floats, or Lucene's 7-bit scalar quantization, a quarter of the memory (docs/benchmarks.md).
    vector_encoding: StoredVectorEncoding = SHIPPED_VECTOR_ENCODING

    @field_validator("endpoint")
    @classmethod
    def _https_endpoint(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https://[A-Za-z0-9.-]+(:\d{1,5})?/?", value):
            raise ValueError(
                "opensearch.endpoint must be an https URL without a path, e.g. https://search-x.es.amazonaws.com"
            )
        return value.rstrip("/") if value else value

    @field_validator("domain_name")
    @classmethod
    def _valid_domain_name(cls, value: str | None) -> str | None:
        if value is not None and not _DOMAIN_NAME.fullmatch(value):
            raise ValueError("opensearch.domainName must be 3-28 chars of a-z, 0-9 and '-', starting with a letter")
        return value


class RerankConfig(_Model):
    """The optional rerank stage of POST /search (Bedrock's Rerank API; docs/retrieval.md, "Reranking").
    ``default``: on when a request says nothing (off: the evaluation showed no gain offline);
    ``modelId``: one of the two reranker models Bedrock offers
    (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-supported.html); ``candidates``:
    how many fused passages it scores (or k when larger), at most 100, one billed Rerank query
    (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-pricing.html)."""

    default: bool = False
    model_id: RerankModelId = DEFAULT_RERANK_MODEL_ID
    candidates: int = Field(default=RERANK_CANDIDATES, ge=1, le=RERANK_MAX_CANDIDATES)


class AnswerConfig(_Model):
    """POST /answer (docs/answers.md): ``modelId``, the Converse model, a foundation model's id or a
    cross-Region inference profile's (``eu.amazon.nova-lite-v1:0``; the only grant the API gets);
    ``minRelevance``, the reranked score a passage needs to be read (none reaching it: no model
    call); ``maxTokens``, the answer's cap; ``rerank``, whether an answer reranks by default."""

    model_id: str = Field(default=DEFAULT_ANSWER_MODEL_ID, pattern=ANSWER_MODEL_ID_PATTERN)
    min_relevance: float = Field(default=DEFAULT_ANSWER_MIN_RELEVANCE, ge=0, le=1)
    max_tokens: int = Field(default=DEFAULT_ANSWER_MAX_TOKENS, ge=1, le=MAX_ANSWER_TOKENS)
    rerank: bool = True


class SearchConfig(_Model):
    """Hybrid search: weighted reciprocal rank fusion of BM25 and k-NN, and the candidates each
    leg fetches first for k results (max(minCandidates, candidatesPerResult x k), at most 100; deeper
    when folded copies leave fewer than k). The defaults are rag_ingest.retrieval.search.DEFAULT_FUSION, tuned
    on the evaluation's dev split."""

    bm25_weight: float = Field(default=DEFAULT_FUSION.bm25_weight, ge=0, le=100)
    knn_weight: float = Field(default=DEFAULT_FUSION.knn_weight, ge=0, le=100)
    rrf_rank_constant: int = Field(default=DEFAULT_FUSION.rank_constant, ge=0, le=1000)
    min_candidates: int = Field(default=DEFAULT_FUSION.min_candidates, ge=1, le=HYBRID_MAX_CANDIDATES)
    candidates_per_result: int = Field(default=DEFAULT_FUSION.candidates_per_result, ge=1, le=100)
    rerank: RerankConfig = RerankConfig()
    answer: AnswerConfig = AnswerConfig()

    @model_validator(mode="after")
    def _one_weight_counts(self) -> Self:
        if self.bm25_weight + self.knn_weight <= 0:
            raise ValueError("search.bm25Weight and search.knnWeight cannot both be 0")
        return self


class IntakeConfig(_Model):
    batch_size: int = Field(default=10, ge=1, le=10000)
    # 0, Lambda's own default for SQS: an upload's workflow starts as soon as the poller reads it, not up to
    # a window later; a burst is still read up to 10 messages a batch (smaller batches cost only requests).
    max_batching_window_seconds: int = Field(default=0, ge=0, le=300)
    # Lambda's SQS maximum concurrency must be between 2 and 1000.
    max_concurrency: int = Field(default=5, ge=2, le=1000)
    max_receive_count: int = Field(default=3, ge=1, le=1000)
    queue_retention_days: int = Field(default=4, ge=1, le=14)
    idempotency_ttl_seconds: int = Field(default=86400, ge=60)

    @model_validator(mode="after")
    def _window_for_large_batches(self) -> Self:
        if self.batch_size > 10 and self.max_batching_window_seconds < 1:
            raise ValueError("intake.batchSize above 10 needs maxBatchingWindowSeconds of at least 1")
        return self


class RetryConfig(_Model):
    """Retry of TransientError and Lambda service errors (exponential backoff, full jitter)."""

    interval_seconds: int = Field(default=2, ge=1)
    backoff_rate: float = Field(default=2.0, ge=1.0)
    max_attempts: int = Field(default=6, ge=0, le=99999999)
    max_delay_seconds: int = Field(default=60, ge=1)

    @model_validator(mode="after")
    def _delay_above_interval(self) -> Self:
        if self.max_delay_seconds < self.interval_seconds:
            raise ValueError("workflow.retry.maxDelaySeconds must not be below intervalSeconds")
        return self


class WorkflowConfig(_Model):
    timeout_minutes: int = Field(default=60, ge=1, le=525600)
    retry: RetryConfig = RetryConfig()


class ApiConfig(_Model):
    throttling_rate_limit: int = Field(default=50, ge=1)
    throttling_burst_limit: int = Field(default=100, ge=1)


class AuthConfig(_Model):
    """Cognito: MFA, the managed login domain, and where the app client may send users back to."""

    # "required" satisfies AwsSolutions-COG2 but makes every user enrol TOTP before the first sign-in.
    mfa: Literal["off", "optional", "required"] = "optional"
    # <prefix>.auth.<region>.amazoncognito.com; unset: derived from the stack name and the account.
    domain_prefix: str | None = None
    # The page's own URL (CloudFront) is added by the stack; these are the others (CLI, dev pages).
    callback_urls: tuple[str, ...] = (CLI_LOOPBACK_URL,)
    logout_urls: tuple[str, ...] = (CLI_LOOPBACK_URL,)
    # Members of this Cognito group read every document of their tenant and set anyone's access
    # (docs/api.md, "Per-document access"); passed to the API and live-pusher functions.
    tenant_admin_group: str = "tenant-admins"

    @field_validator("tenant_admin_group")
    @classmethod
    def _valid_group_name(cls, value: str) -> str:
        # Cognito group names: 1-128 characters of [\p{L}\p{M}\p{S}\p{N}\p{P}] (no spaces or controls).
        if not 1 <= len(value) <= 128 or any(char.isspace() or ord(char) < 0x20 for char in value):
            raise ValueError("auth.tenantAdminGroup must be 1-128 characters without spaces")
        return value

    @field_validator("domain_prefix")
    @classmethod
    def _valid_domain_prefix(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not _DOMAIN_PREFIX.fullmatch(value):
            raise ValueError("auth.domainPrefix must be 1-63 chars of a-z, 0-9 and inner '-'")
        reserved = [word for word in RESERVED_IN_DOMAIN_PREFIX if word in value]
        if reserved:
            raise ValueError(f"auth.domainPrefix must not contain {', '.join(reserved)} (reserved by Cognito)")
        return value

    @field_validator("callback_urls", "logout_urls")
    @classmethod
    def _valid_sign_in_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [url for url in value if not _SIGN_IN_URL.fullmatch(url)]
        if bad:
            raise ValueError(f"sign-in URLs must be https (or http://localhost), without a fragment: {bad}")
        return value


class HostingConfig(_Model):
    """The page's CloudFront distribution. Without a domain it is served on its *.cloudfront.net name."""

    # A custom domain needs an ACM certificate in us-east-1 (CloudFront's region) that covers it.
    domain_name: str | None = Field(
        default=None, max_length=253, pattern=r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$"
    )
    certificate_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:acm:us-east-1:\d{12}:certificate/[A-Za-z0-9-]+$"
    )
    price_class: Literal["PriceClass_100", "PriceClass_200", "PriceClass_All"] = "PriceClass_100"
    cloudfront_logs_expiration_days: int = Field(default=90, ge=1)

    @model_validator(mode="after")
    def _domain_with_certificate(self) -> Self:
        if (self.domain_name is None) != (self.certificate_arn is None):
            raise ValueError("hosting.domainName and hosting.certificateArn go together (both or neither)")
        return self


class LiveConfig(_Model):
    """Live status in AWS: the WebSocket API, its functions and the documents-stream consumer."""

    authorizer: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=10)
    connections: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=10)
    pusher: FunctionSettings = FunctionSettings(memory_mb=256, timeout_seconds=60)
    # The answer route: a search, then the model's stream posted to the connection as it comes.
    answers: FunctionSettings = FunctionSettings(memory_mb=512, timeout_seconds=60)
    # WebSocket stage throttling (messages and connects per second across the stage).
    throttling_rate_limit: int = Field(default=50, ge=1)
    throttling_burst_limit: int = Field(default=100, ge=1)
    # API Gateway drops a WebSocket after 2 hours: a connection record outliving that is stale.
    connection_ttl_seconds: int = Field(default=7200, ge=60, le=7200)
    stream_batch_size: int = Field(default=100, ge=1, le=10000)
    stream_retry_attempts: int = Field(default=3, ge=0, le=10000)
    # A live update older than this is not live any more: alarm on the stream iterator age.
    iterator_age_threshold_seconds: int = Field(default=60, ge=1)


class ReaperConfig(_Model):
    """The stuck-document reaper: how often it runs, when a document counts as stuck, how hard it retries."""

    schedule_minutes: int = Field(default=5, ge=1, le=1440)
    # Only a suspect past this: the execution's real state decides (a running one is left alone).
    stuck_after_minutes: int = Field(default=REAPER_STUCK_AFTER_MINUTES, ge=5)
    # Re-drives per document before the reaper gives up and marks it FAILED (STUCK).
    max_redrives: int = Field(default=REAPER_MAX_REDRIVES, ge=0, le=10)
    max_documents_per_run: int = Field(default=REAPER_MAX_DOCUMENTS_PER_RUN, ge=1, le=5000)
    # An AWAITING_UPLOAD document whose upload URL expired this long ago (and no file came) becomes EXPIRED.
    upload_grace_minutes: int = Field(default=60, ge=0, le=1440)


class ReconcilerConfig(_Model):
    """The reconciler (docs/operations.md#the-reconciler): how often it compares the table, the
    uploads and the index, whether the scheduled run repairs, and when an object is old enough."""

    # An EventBridge rate in hours (1 to 7 days): each run reads every record, listing and count.
    schedule_hours: int = Field(default=6, ge=1, le=168)
    # The scheduled run repairs what is safe (every repair idempotent); false: it only reports.
    repair: bool = True
    # An upload younger than this may still be on its way to intake: not yet "an object with no record".
    object_grace_minutes: int = Field(default=15, ge=0, le=1440)


class WebhooksConfig(_Model):
    """Signed webhooks (docs/webhooks.md): how long a delivery is retried, each attempt's timeout."""

    # Failed deliveries are retried with exponential backoff for this long, then dead-lettered.
    retry_hours: int = Field(default=24, ge=1, le=72)
    # One POST's timeout; the delivery function's timeout must be longer.
    timeout_seconds: int = Field(default=10, ge=1, le=30)
    # The first retry waits about this long, doubling up to retryMaxDelaySeconds.
    retry_base_seconds: int = Field(default=30, ge=1, le=3600)
    retry_max_delay_seconds: int = Field(default=3600, ge=60, le=43_200)
    max_endpoints_per_tenant: int = Field(default=10, ge=1, le=100)
    # Messages a delivery invocation POSTs (in parallel) and the most invocations at once.
    delivery_batch_size: int = Field(default=10, ge=1, le=10)
    delivery_max_concurrency: int = Field(default=10, ge=2, le=1000)


class SourcesConfig(_Model):
    """Sources kept in sync (docs/sources.md): what a sync may read, and its bounds."""

    # Buckets an S3 source may name: the sync function is granted read on these only (names, or
    # "*" for any bucket whose owner's policy lets the stack read: docs/sources.md, "Another account").
    readable_buckets: tuple[str, ...] = ()
    # KMS keys (ARNs) that encrypt objects of those buckets (SSE-KMS): the sync function may decrypt
    # with them, through S3 only.
    readable_keys: tuple[str, ...] = ()
    max_per_tenant: int = Field(default=50, ge=1, le=1000)
    # One sync step's budget before it checkpoints; the function's timeout leaves room to save.
    step_seconds: int = Field(default=600, ge=30, le=840)
    # A sync runs at most this long (the state machine's timeout).
    timeout_hours: int = Field(default=24, ge=1, le=24 * 365)
    # A sync lists at most this many items (past it: truncated, nothing deleted, a clear failure).
    max_items_per_sync: int = Field(default=1_000_000, ge=1, le=100_000_000)
    # Syncs a source may start in an hour, on request or by its schedule (429 past it).
    max_syncs_per_hour: int = Field(default=12, ge=1, le=3600)
    # The sync workflow's Distributed Map over listed S3 objects: items per child workflow, and
    # children at once (docs/decisions/sync-at-scale.md).
    fan_out_batch_items: int = Field(default=100, ge=1, le=1000)
    fan_out_concurrency: int = Field(default=20, ge=1, le=1000)

    @field_validator("readable_keys")
    @classmethod
    def _key_arns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arn in value:
            if not _KMS_KEY_ARN.fullmatch(arn):
                raise ValueError(f"sources.readableKeys: {arn!r} is not a KMS key ARN (...:kms:REGION:ACCOUNT:key/ID)")
        return value

    @field_validator("readable_buckets")
    @classmethod
    def _bucket_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name != "*" and not _BUCKET_NAME.fullmatch(name):
                raise ValueError(f"sources.readableBuckets: {name!r} is not a bucket name")
        return value


#: TENANT_LIMITS' share of the API's environment: Lambda allows 4 KB for all its variables
#: (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html; docs/deploy.md, tenants.overrides).
MAX_TENANT_LIMITS_BYTES = 1024


class TenantDefaultsConfig(_Model):
    """Every tenant's limits unless overridden (docs/api.md, "Limits per tenant"). Generous: a
    tenant that never set out to be big never meets them."""

    documents: int = Field(default=100_000, ge=1)
    stored_bytes: int = Field(default=100 * 2**30, ge=1)
    pages_per_day: int = Field(default=100_000, ge=1)
    # The tenant's token bucket in the API function (one DynamoDB update per request); by default a
    # tenant alone may use the whole stage (api.throttlingRateLimit, api.throttlingBurstLimit).
    requests_per_second: float = Field(default=50, gt=0, le=10_000)
    burst_requests: int = Field(default=100, ge=1, le=100_000)


class TenantOverrideConfig(_Model):
    """One tenant's own limits: any of the defaults', and its sources and webhooks caps
    (sources.maxPerTenant and webhooks.maxEndpointsPerTenant for everyone else)."""

    documents: int | None = Field(default=None, ge=1)
    stored_bytes: int | None = Field(default=None, ge=1)
    pages_per_day: int | None = Field(default=None, ge=1)
    requests_per_second: float | None = Field(default=None, gt=0, le=10_000)
    burst_requests: int | None = Field(default=None, ge=1, le=100_000)
    sources: int | None = Field(default=None, ge=1, le=1000)
    webhooks: int | None = Field(default=None, ge=1, le=100)


class TenantsConfig(_Model):
    defaults: TenantDefaultsConfig = TenantDefaultsConfig()
    overrides: dict[str, TenantOverrideConfig] = Field(default_factory=dict)

    @field_validator("overrides")
    @classmethod
    def _valid_tenant_ids(cls, value: dict[str, TenantOverrideConfig]) -> dict[str, TenantOverrideConfig]:
        bad = [tenant for tenant in value if not TENANT_ID_PATTERN.fullmatch(tenant)]
        if bad:
            raise ValueError(f"tenants.overrides keys must be tenant ids ({TENANT_ID_PATTERN.pattern}): {bad}")
        return value


class MonitoringConfig(_Model):
    alarm_email: str | None = None
    queue_age_threshold_seconds: int = Field(default=900, ge=60)
    # Dead letters nobody redrove: alarm long before the DLQ's 14-day retention drops them.
    dead_letter_age_threshold_seconds: int = Field(default=86400, ge=300, le=1_209_600)
    # Stage functions raise on bad files by design (Catch → MarkFailed): alarm on a sustained error
    # rate rather than on any error; SystemFailuresAlarm catches the failures that matter.
    stage_error_rate_percent: int = Field(default=20, ge=1, le=100)
    stage_error_min_invocations: int = Field(default=10, ge=1)

    @field_validator("alarm_email")
    @classmethod
    def _valid_email(cls, value: str | None) -> str | None:
        if value is not None and not _EMAIL.fullmatch(value):
            raise ValueError("monitoring.alarmEmail is not an email address")
        return value


class RagIngestConfig(_Model):
    stack_name: str = "RagIngest"
    removal_policy: Literal["retain", "destroy"] = "retain"
    # The functions' application log level (Lambda's JSON log format filters below it) and the
    # level of the runtime's own lines (INFO keeps each invocation's REPORT: duration, memory).
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    system_log_level: Literal["DEBUG", "INFO", "WARN"] = "INFO"
    log_retention_days: int = 30
    # The page's own origin (CloudFront, or hosting.domainName) is added by the stack; list others
    # here (a frontend of your own). Nothing by default: a localhost origin has no place in production.
    allowed_origins: tuple[str, ...] = ()
    # API Gateway's account-level CloudWatch Logs role (one per account and Region, which the WebSocket
    # stage's access logging needs): "create" makes it, kept after destroy; "existing" uses the one set.
    api_gateway_account_role: Literal["create", "existing"] = "create"
    functions: FunctionsConfig = FunctionsConfig()
    storage: StorageConfig = StorageConfig()
    upload: UploadConfig = UploadConfig()
    limits: LimitsConfig = LimitsConfig()
    parsing: ParsingConfig = ParsingConfig()
    figures: FiguresConfig = FiguresConfig()
    lanes: LanesConfig = LanesConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    opensearch: OpenSearchConfig = OpenSearchConfig()
    search: SearchConfig = SearchConfig()
    intake: IntakeConfig = IntakeConfig()
    workflow: WorkflowConfig = WorkflowConfig()
    api: ApiConfig = ApiConfig()
    auth: AuthConfig = AuthConfig()
    monitoring: MonitoringConfig = MonitoringConfig()
    reaper: ReaperConfig = ReaperConfig()
    reconciler: ReconcilerConfig = ReconcilerConfig()
    webhooks: WebhooksConfig = WebhooksConfig()
    sources: SourcesConfig = SourcesConfig()
    hosting: HostingConfig = HostingConfig()
    live: LiveConfig = LiveConfig()
    tenants: TenantsConfig = TenantsConfig()

    def tenant_limits(self) -> LimitsTable:
        """The API's TENANT_LIMITS: the defaults with the stack-wide sources and webhooks caps."""
        defaults = {
            **self.tenants.defaults.model_dump(),
            "sources": self.sources.max_per_tenant,
            "webhooks": self.webhooks.max_endpoints_per_tenant,
        }
        overrides = {tenant: o.model_dump(exclude_none=True) for tenant, o in self.tenants.overrides.items()}
        return LimitsTable.model_validate({"defaults": defaults, "overrides": overrides})

    def tenant_limits_json(self) -> str:
        return self.tenant_limits().model_dump_json(exclude_none=True)

    @model_validator(mode="after")
    def _tenant_limits_fit_the_environment(self) -> Self:
        size = len(self.tenant_limits_json().encode())
        if size > MAX_TENANT_LIMITS_BYTES:
            raise ValueError(
                f"tenants is {size} bytes as the API function's TENANT_LIMITS, over {MAX_TENANT_LIMITS_BYTES}: "
                "Lambda holds 4 KB of environment variables per function; keep fewer overrides"
            )
        return self

    @field_validator("stack_name")
    @classmethod
    def _valid_stack_name(cls, value: str) -> str:
        if not _STACK_NAME.fullmatch(value):
            raise ValueError("stackName must start with a letter and hold only letters, digits and '-'")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _valid_retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"logRetentionDays must be one of {', '.join(map(str, LOG_RETENTION_DAYS))}")
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _valid_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [origin for origin in value if not _ORIGIN.fullmatch(origin)]
        if bad:
            raise ValueError(f"allowedOrigins must be scheme://host[:port] without a path or '*': {bad}")
        insecure = [o for o in value if o.startswith("http://") and not _LOOPBACK_ORIGIN.fullmatch(o)]
        if insecure:
            raise ValueError(
                f"allowedOrigins must be https except http://localhost or http://127.0.0.1 [:port]: {insecure}"
            )
        return value

    @model_validator(mode="after")
    def _upload_within_file_limit(self) -> Self:
        if self.upload.max_upload_bytes > self.limits.max_file_bytes:
            raise ValueError("upload.maxUploadBytes must not exceed limits.maxFileBytes (Validate would reject it)")
        return self

    @model_validator(mode="after")
    def _page_ranges_within_history(self) -> Self:
        ranges = -(-self.limits.max_pages // self.parsing.range_pages)
        if ranges > MAX_PARSE_RANGES:
            raise ValueError(
                f"limits.maxPages / parsing.rangePages is {ranges} page ranges, more than {MAX_PARSE_RANGES}: "
                "raise parsing.rangePages (an execution's history holds at most 25,000 events)"
            )
        return self

    @model_validator(mode="after")
    def _capacity_wait_within_the_workflow(self) -> Self:
        if self.embedding.capacity.wait_minutes >= self.workflow.timeout_minutes:
            raise ValueError(
                "embedding.capacity.waitMinutes must be below workflow.timeoutMinutes (the execution's timeout "
                "would stop a document still waiting for embedding capacity)"
            )
        return self

    @model_validator(mode="after")
    def _webhook_delivery_outlasts_its_post(self) -> Self:
        # A batch's POSTs run in parallel: one timeout, plus DNS, connection and the queue calls.
        if self.functions.webhook_delivery.timeout_seconds < self.webhooks.timeout_seconds + 5:
            raise ValueError("functions.webhookDelivery.timeoutSeconds must be at least webhooks.timeoutSeconds + 5")
        return self

    @model_validator(mode="after")
    def _workflow_outlasts_a_batch_job(self) -> Self:
        # The execution waits for its job: a workflow timeout shorter than the job's would end it first.
        batch = self.embedding.batch_inference
        if batch.enabled:
            needed = batch.timeout_hours * 60 + 60
            if self.workflow.timeout_minutes < needed:
                raise ValueError(
                    f"embedding.batchInference.enabled needs workflow.timeoutMinutes of at least {needed} "
                    f"(the job's {batch.timeout_hours} h timeout and an hour for the stages around it)"
                )
        return self

    @property
    def search_domain_prefix(self) -> str:
        """The start of a generated OpenSearch domain name (the stack name, lower-cased); a suffix
        unique to the stack's creation completes it (infra/naming.py), within the 28-char limit."""
        base = re.sub(r"[^a-z0-9-]", "", self.stack_name.lower())[:19].rstrip("-")
        return f"{base}-"


def user_pool_domain_base(config: RagIngestConfig) -> str:
    """``auth.domainPrefix``, or the stack-derived start of one (the stack appends the account id)."""
    return config.auth.domain_prefix or stack_domain_base(config.stack_name)


def stack_domain_base(stack_name: str) -> str:
    """The stack name in lower case, without the words Cognito reserves in a domain prefix."""
    base = stack_name.lower()
    for word in RESERVED_IN_DOMAIN_PREFIX:
        base = base.replace(word, "")
    base = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "", base)).strip("-")[:40].rstrip("-")
    return base or "rag-ingest"


def _format_errors(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "(root)"
        lines.append(f"  - {location}: {item['msg']}")
    return "\n".join(lines)


def parse_config(raw: Any) -> RagIngestConfig:
    """Validate the raw context value (a dict, or a JSON string when given with ``-c``)."""
    if raw is None:
        raw = {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as error:
            raise ConfigError(f"context '{CONTEXT_KEY}' is not valid JSON: {error}") from error
    if not isinstance(raw, dict):
        raise ConfigError(f"context '{CONTEXT_KEY}' must be an object, got {type(raw).__name__}")
    try:
        return RagIngestConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(
            f"invalid '{CONTEXT_KEY}' configuration in cdk.json context:\n{_format_errors(error)}"
        ) from None
