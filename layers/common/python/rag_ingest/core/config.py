"""Environment models, validated once at cold start so a misconfigured function fails loudly."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Json,
    ValidationError,
    field_validator,
    model_validator,
)

from rag_ingest.core.errors import ConfigurationError
from rag_ingest.core.job import DEFAULT_BULK_ABOVE_PAGES, DEFAULT_PARSE_RANGE_PAGES
from rag_ingest.core.limits import LimitsTable
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX, RAW_PREFIX
from rag_ingest.core.settings import (
    ANSWER_MODEL_ID_PATTERN,
    DEFAULT_ANSWER_MAX_TOKENS,
    DEFAULT_ANSWER_MIN_RELEVANCE,
    DEFAULT_ANSWER_MODEL_ID,
    DEFAULT_FIGURE_VISION_MODEL_ID,
    DEFAULT_FIGURE_VISION_PROMPT,
    DEFAULT_FUSION,
    DEFAULT_MAX_FIGURES_READ,
    DEFAULT_MAX_OCR_PAGES,
    DEFAULT_RERANK_MODEL_ID,
    HYBRID_MAX_CANDIDATES,
    MAX_ANSWER_TOKENS,
    OCR_DPI,
    RERANK_CANDIDATES,
    RERANK_MAX_CANDIDATES,
    CapacityMode,
    FusionSettings,
    RerankModelId,
)


class EnvModel(BaseModel):
    """Base for a function's environment: field names are the env vars, lower-cased."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def variable_names(cls) -> frozenset[str]:
        """The environment variables this model reads (what the stack must set for the function)."""
        return frozenset(name.upper() for name in cls.model_fields)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        source = os.environ if environ is None else environ
        values = {name: source[name.upper()] for name in cls.model_fields if name.upper() in source}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
            )
            raise ConfigurationError(f"{cls.__name__}: invalid environment: {problems}") from exc


class CommonEnv(EnvModel):
    documents_table: str = Field(min_length=1)


class TenantUsageEnv(EnvModel):
    """The tenant usage table (rag_ingest.core.limits): intake counts stored bytes in it, Parse pages.
    Unset (a test's environment), nothing is counted."""

    tenant_usage_table: str | None = Field(default=None, min_length=1)


class TenantLimitsEnv(TenantUsageEnv):
    """The API's per-tenant limits: ``TENANT_LIMITS`` is JSON (rag_ingest.core.limits.LimitsTable:
    defaults and per-tenant overrides, from cdk.json ``tenants``), validated here at cold start.
    Unset, no limit is applied beyond the sources' and webhooks' own caps."""

    tenant_limits: Json[LimitsTable] | None = None


class WorkflowEnv(CommonEnv):
    """Functions that start executions of the ingestion state machine (intake, replays, retries)."""

    state_machine_arn: str = Field(pattern=r"^arn:aws[a-z-]*:states:")


class BucketEnv(EnvModel):
    """The documents bucket: uploads under ``raw/``, the stages' artifacts under ``artifacts_prefix``."""

    bucket_name: str = Field(min_length=3)
    artifacts_prefix: str = ARTIFACTS_PREFIX

    @field_validator("artifacts_prefix")
    @classmethod
    def _prefix_ends_with_slash(cls, value: str) -> str:
        return value if value.endswith("/") else value + "/"


#: The index's concurrent segment search, in cdk.json and the environment alike: a mode, or ``cluster``
#: to set nothing on the index (an endpoint older than OpenSearch 2.17 refuses the setting).
ConcurrentSegmentSearchSetting = Literal["auto", "all", "none", "cluster"]


def _segments_per_tier(value: int) -> int:
    if value == 1:
        raise ValueError("segments per tier must be 0 (the cluster's) or at least 2 (Lucene's minimum)")
    return value


#: The tiered merge policy's segments per tier (``index.merge.policy.segments_per_tier``), and its
#: floor segment size in MB: 0 leaves either to the cluster (OpenSearch's 10 and 2 MB).
MergeSegmentsPerTier = Annotated[int, Field(ge=0, le=50), AfterValidator(_segments_per_tier)]
MergeFloorSegmentMb = Annotated[int, Field(ge=0, le=5120)]
#: The vector encodings a deployment may choose (the adapter's VectorEncoding less ``binary``, whose
#: vectors the embedders do not return).
StoredVectorEncoding = Literal["float32", "sq"]
#: The shipped encoding: 26 % of float32's k-NN memory for 0.2 % of k-NN MRR on test (docs/benchmarks.md).
SHIPPED_VECTOR_ENCODING: StoredVectorEncoding = "sq"

#: How far ahead of now an Embed task books the shared quota (cdk.json embedding.capacity.bookAheadSeconds):
#: a tenant that comes later waits about this long for its first booking (rag_ingest.embeddings.capacity).
DEFAULT_BOOK_AHEAD_SECONDS = 2.0
#: Tenants with a weight of their own (embedding.capacity.tenantWeights) and the largest weight: 20
#: ids of 64 characters keep the Embed functions' environment inside Lambda's 4 KB (docs/deploy.md).
MAX_TENANT_WEIGHTS = 12
MAX_TENANT_WEIGHT = 1000.0
# core.auth.TENANT_ID_PATTERN's (not imported: core.auth brings PyJWT to every function).
_TENANT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _tenant_weights(value: Any) -> Any:
    """A JSON object in the environment; a mapping from cdk.json."""
    return json.loads(value) if isinstance(value, str) else value


def _check_tenant_weights(weights: dict[str, float]) -> dict[str, float]:
    if len(weights) > MAX_TENANT_WEIGHTS:
        raise ValueError(f"at most {MAX_TENANT_WEIGHTS} tenants may have a weight of their own, not {len(weights)}")
    for tenant, weight in weights.items():
        if not _TENANT_ID.fullmatch(tenant):
            raise ValueError(f"{tenant!r} is not a tenant id (it must match {_TENANT_ID.pattern})")
        if not 0 < weight <= MAX_TENANT_WEIGHT:
            raise ValueError(
                f"the weight of tenant {tenant} must be above 0 and at most {MAX_TENANT_WEIGHT:g}, not {weight}"
            )
    return weights


TenantWeights = Annotated[dict[str, float], BeforeValidator(_tenant_weights), AfterValidator(_check_tenant_weights)]


class IndexParamsEnv(EnvModel):
    """k-NN index parameters (lucene HNSW), all optional: the defaults are IndexSettings'.

    ``space_type``, ``m``, ``ef_construction``, the concurrent segment search mode and the merge
    policy apply when the index is created (an existing index keeps its own); ``ef_search``
    applies to every query.
    """

    opensearch_space_type: Literal["cosinesimil", "l2", "innerproduct"] = "cosinesimil"
    opensearch_hnsw_m: int = Field(default=16, ge=2, le=100)
    opensearch_ef_construction: int = Field(default=128, ge=2, le=4096)
    opensearch_ef_search: int = Field(default=200, ge=1, le=10_000)
    # The index's concurrent segment search mode (OpenSearch >= 2.17), at index creation: "auto"
    # searches a k-NN query's segments in parallel; "cluster" leaves the setting to the cluster.
    opensearch_concurrent_segment_search: ConcurrentSegmentSearchSetting = "auto"
    # The tiered merge policy at index creation: segments per tier and floor segment size (MB);
    # 0 leaves either to the cluster. Fewer, larger segments: faster k-NN, more merging at ingest.
    opensearch_merge_segments_per_tier: MergeSegmentsPerTier = 4
    opensearch_merge_floor_segment_mb: MergeFloorSegmentMb = 256
    # How the index stores each vector, at index creation: 4-byte floats, or Lucene's 7-bit scalar
    # quantization of them ("sq", OpenSearch >= 2.16: a quarter of the memory; docs/benchmarks.md).
    opensearch_vector_encoding: StoredVectorEncoding = SHIPPED_VECTOR_ENCODING
    # Replicas per shard, set where the stack knows the node count (a lone node gets 0); unset keeps
    # the cluster's default. Applies when the index is created.
    opensearch_replicas: int | None = Field(default=None, ge=0, le=15)


class ChunkIndexEnv(EnvModel):
    """The chunk index and the size of its vectors."""

    opensearch_endpoint: str = Field(pattern=r"^https?://")
    opensearch_index: str = Field(min_length=1)
    embedding_dimension: int = Field(gt=0)


class FusionEnv(EnvModel):
    """How hybrid search fuses BM25 and k-NN (weighted RRF) and how many candidates each leg
    fetches; all optional, the defaults are rag_ingest.retrieval.search.DEFAULT_FUSION (tuned on dev)."""

    search_bm25_weight: float = Field(default=DEFAULT_FUSION.bm25_weight, ge=0, le=100)
    search_knn_weight: float = Field(default=DEFAULT_FUSION.knn_weight, ge=0, le=100)
    search_rrf_rank_constant: int = Field(default=DEFAULT_FUSION.rank_constant, ge=0, le=1000)
    search_min_candidates: int = Field(default=DEFAULT_FUSION.min_candidates, ge=1, le=HYBRID_MAX_CANDIDATES)
    search_candidates_per_result: int = Field(default=DEFAULT_FUSION.candidates_per_result, ge=1, le=100)

    @model_validator(mode="after")
    def _one_weight_counts(self) -> Self:
        if self.search_bm25_weight + self.search_knn_weight <= 0:
            raise ValueError("SEARCH_BM25_WEIGHT and SEARCH_KNN_WEIGHT cannot both be 0")
        return self

    @property
    def fusion(self) -> FusionSettings:
        return FusionSettings(
            bm25_weight=self.search_bm25_weight,
            knn_weight=self.search_knn_weight,
            rank_constant=self.search_rrf_rank_constant,
            min_candidates=self.search_min_candidates,
            candidates_per_result=self.search_candidates_per_result,
        )


class RerankEnv(EnvModel):
    """The optional rerank stage of POST /search (rag_ingest.retrieval.rerank): on when a request
    says nothing (``search_rerank_default``), the model, and how many fused passages it scores."""

    search_rerank_default: bool = False
    search_rerank_model_id: RerankModelId = DEFAULT_RERANK_MODEL_ID
    search_rerank_candidates: int = Field(default=RERANK_CANDIDATES, ge=1, le=RERANK_MAX_CANDIDATES)


class SearchEnv(ChunkIndexEnv, IndexParamsEnv, FusionEnv, RerankEnv):
    """POST /search (in the API function): the index, the embedder that embeds the query, fusion,
    reranking."""

    embedding_provider: Literal["bedrock", "local"]
    embedding_model_id: str = Field(min_length=1)


class AnswerEnv(EnvModel):
    """POST /answer (in the API function; rag_ingest.answers): the Converse model, the reranked score
    a passage needs to be read, the answer's token cap, and whether an answer reranks by default."""

    answer_model_id: str = Field(default=DEFAULT_ANSWER_MODEL_ID, pattern=ANSWER_MODEL_ID_PATTERN)
    answer_min_relevance: float = Field(default=DEFAULT_ANSWER_MIN_RELEVANCE, ge=0, le=1)
    answer_max_tokens: int = Field(default=DEFAULT_ANSWER_MAX_TOKENS, ge=1, le=MAX_ANSWER_TOKENS)
    answer_rerank_default: bool = True


class DocumentsEnv(CommonEnv, BucketEnv):
    """Reading the tenant's documents (rag_ingest.documents.service): records, extracted text, access."""

    # Members of this group (cognito:groups) read every document of their tenant and set anyone's
    # access (rag_ingest.core.access; cdk.json auth.tenantAdminGroup).
    tenant_admin_group: str = Field(default="tenant-admins", min_length=1, max_length=128)


class ApiEnv(WorkflowEnv, DocumentsEnv, ChunkIndexEnv, TenantLimitsEnv):
    """The API function. DELETE /documents/{id} removes the document's chunks and artifacts too;
    POST /documents/{id}/retry replays a FAILED document with a new execution."""

    raw_prefix: str = RAW_PREFIX
    max_upload_bytes: int = Field(gt=0)
    upload_url_expiry_seconds: int = Field(gt=0, le=3600)
    # DELETE /documents/{id} announces DocumentDeleted on this bus (the webhooks' document.deleted).
    event_bus_name: str = "default"


class WebhookUrlEnv(EnvModel):
    """The webhook URL policy: in AWS only https to public addresses; the local stack and the tests
    also allow loopback receivers (http or https), nothing else (rag_ingest.core.url_policy)."""

    webhook_allow_loopback_http: bool = False


class WebhooksApiEnv(WebhookUrlEnv):
    """The API function's webhook routes: the endpoints table."""

    webhooks_table: str = Field(min_length=1)
    webhook_max_endpoints: int = Field(default=10, ge=1, le=100)


class SourcesEnv(CommonEnv, BucketEnv, ChunkIndexEnv):
    """Sources (rag_ingest.sources): their table; their items become documents under ``raw_prefix``,
    and a deleted item's document goes as DELETE /documents/{id} does (chunks, artifacts, events)."""

    sources_table: str = Field(min_length=1)
    raw_prefix: str = RAW_PREFIX
    event_bus_name: str = "default"
    # Crawled URLs pass the SSRF guard: in AWS public addresses only; locally loopback too.
    source_allow_loopback_http: bool = False


class SourcesApiEnv(SourcesEnv):
    """The API function's source routes: they start the sync workflow."""

    source_sync_state_machine_arn: str = Field(pattern=r"^arn:aws[a-z-]*:states:")
    source_max_per_tenant: int = Field(default=50, ge=1, le=1000)
    source_max_syncs_per_hour: int = Field(default=12, ge=1, le=3600)
    # Sources' schedules: EventBridge Scheduler's group and the role its schedules start syncs with.
    source_schedule_group: str = Field(min_length=1, max_length=64)
    source_schedule_role_arn: str = Field(pattern=r"^arn:aws[a-z-]*:iam::")


class SourceSyncEnv(SourcesEnv):
    """The sync workflow's function: each step runs for at most this budget, then checkpoints."""

    source_sync_step_seconds: int = Field(default=600, ge=5, le=840)
    # The sync workflow itself: a lost execution is started again (rag_ingest.sources.runner).
    source_sync_state_machine_arn: str = Field(pattern=r"^arn:aws[a-z-]*:states:")
    source_max_items_per_sync: int = Field(default=1_000_000, ge=1)
    # The largest object an S3 source's item may be (the stack's upload limit).
    max_upload_bytes: int = Field(default=52_428_800, gt=0)
    # Items a child of the workflow's Distributed Map applies; 0: the workflow has no Map.
    source_fan_out_batch_items: int = Field(default=0, ge=0, le=1000)


class WebhookFanOutEnv(EnvModel):
    """The fan-out function: a document event -> one delivery message per subscribed endpoint."""

    webhooks_table: str = Field(min_length=1)
    webhook_delivery_queue_url: str = Field(pattern=r"^https?://")
    webhook_retry_hours: int = Field(default=24, ge=1, le=72)


class WebhookDeliveryEnv(WebhookUrlEnv):
    """The delivery function: one signed POST per message, retried with backoff, then dead-lettered."""

    webhooks_table: str = Field(min_length=1)
    webhook_delivery_queue_url: str = Field(pattern=r"^https?://")
    webhook_dead_letter_queue_url: str = Field(pattern=r"^https?://")
    webhook_timeout_seconds: int = Field(default=10, ge=1, le=30)
    webhook_retry_base_seconds: int = Field(default=30, ge=1, le=3600)
    webhook_retry_max_delay_seconds: int = Field(default=3600, ge=1, le=43_200)


class IntakeEnv(WorkflowEnv, BucketEnv, ChunkIndexEnv, TenantUsageEnv):
    """Intake; the bucket's artifacts and the chunk index serve an S3 sidecar arriving after its
    document is READY: its metadata is written onto the chunks as PATCH writes it."""

    idempotency_table: str = Field(min_length=1)
    idempotency_ttl_seconds: int = Field(default=86400 * 7, gt=0)


class BatchInferenceEnv(EnvModel):
    """The bulk lane's Embed by Bedrock batch inference (cdk.json embedding.batchInference;
    rag_ingest.ingest.batch_embedding): set only on the EmbedBatchBulk function, where it is on. The
    role is the service role Bedrock assumes to read the job's input and write its output."""

    batch_inference_role_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/")
    batch_min_records: int = Field(default=100, ge=1, le=50_000)
    batch_timeout_hours: int = Field(default=24, ge=24, le=168)
    batch_poll_seconds: int = Field(default=60, ge=1, le=3600)
    batch_max_poll_seconds: int = Field(default=1800, ge=1, le=3600)
    batch_write_cache: bool = False


class StagesEnv(CommonEnv, BucketEnv, SearchEnv, TenantUsageEnv):
    """The workflow's stages: Embed needs the embedder, Index and Finalize the index."""

    max_file_bytes: int = Field(gt=0)
    max_pages: int = Field(gt=0)
    # Pages per Parse Map task (cdk.json parsing.rangePages): a task's memory and time are its range's.
    parse_range_pages: int = Field(default=DEFAULT_PARSE_RANGE_PAGES, ge=1, le=1000)
    # Documents of more pages run in the bulk lane (cdk.json lanes.bulkAbovePages).
    bulk_above_pages: int = Field(default=DEFAULT_BULK_ABOVE_PAGES, ge=1)
    chunk_tokens: int = Field(ge=16, le=8192)
    chunk_overlap_tokens: int = Field(ge=0)
    embed_batch_size: int = Field(default=16, gt=0, le=256)
    embed_task_chunks: int = Field(default=256, gt=0, le=10_000)
    # One budget for every Embed task (rag_ingest.embeddings.capacity, cdk.json embedding.capacity);
    # a quota left unset is not enforced; the ledger's table is for "shared" only.
    embedding_capacity_mode: CapacityMode = "off"
    embedding_capacity_table: str | None = Field(default=None, min_length=1)
    embedding_requests_per_minute: int | None = Field(default=None, ge=1)
    embedding_tokens_per_minute: int | None = Field(default=None, ge=1)
    embedding_capacity_headroom: float = Field(default=0.97, gt=0, le=1)
    embedding_capacity_max_wait_seconds: int = Field(default=30, ge=0, le=600)
    embedding_capacity_book_ahead_seconds: float = Field(default=DEFAULT_BOOK_AHEAD_SECONDS, gt=0, le=600)
    # Each tenant's weight on the quota, a JSON object (the others weigh 1): their fair shares.
    embedding_capacity_tenant_weights: TenantWeights = Field(default_factory=dict)
    event_bus_name: str = Field(default="default", min_length=1)
    # The content-addressed embedding cache's table; unset, every chunk is embedded (no cache).
    embedding_cache_table: str | None = Field(default=None, min_length=1)
    # Pages without a text layer (rag_ingest.parsing.ocr.engine): "textract" in AWS, "local" (Tesseract) in the
    # local stack, "off" reads text layers only (such pages become failed pages).
    ocr_engine: Literal["off", "local", "textract"] = "off"
    max_ocr_pages: int = Field(default=DEFAULT_MAX_OCR_PAGES, ge=0, le=3000)
    ocr_dpi: int = Field(default=OCR_DPI, ge=72, le=600)
    # Textract reads scanned pages with AnalyzeDocument TABLES instead of DetectDocumentText (cdk.json
    # parsing.textractTables; about ten times the price per page, docs/ocr.md). Only with OCR_ENGINE=textract.
    ocr_textract_tables: bool = False
    # Spreadsheets' hidden sheets are read and indexed (cdk.json parsing.indexHiddenSheets; docs/formats.md).
    index_hidden_sheets: bool = False
    # Figures read per document (cdk.json figures.maxRead): by the OCR engine, and described by the
    # vision model when FIGURE_VISION_ENABLED (cdk.json figures.vision; rag_ingest.adapters.vision).
    max_figures_read: int = Field(default=DEFAULT_MAX_FIGURES_READ, ge=0, le=10_000)
    figure_vision_enabled: bool = False
    figure_vision_model_id: str = Field(default=DEFAULT_FIGURE_VISION_MODEL_ID, pattern=ANSWER_MODEL_ID_PATTERN)
    figure_vision_prompt: str = Field(default=DEFAULT_FIGURE_VISION_PROMPT, min_length=1, max_length=4000)
    figure_vision_max_figures: int = Field(default=20, ge=1, le=1000)

    @model_validator(mode="after")
    def _textract_tables_need_textract(self) -> Self:
        if self.ocr_textract_tables and self.ocr_engine != "textract":
            raise ValueError(f"OCR_TEXTRACT_TABLES=true needs OCR_ENGINE=textract, not {self.ocr_engine!r}")
        return self

    @model_validator(mode="after")
    def _shared_capacity_has_a_table(self) -> Self:
        if self.embedding_capacity_mode == "shared" and self.embedding_capacity_table is None:
            raise ValueError("EMBEDDING_CAPACITY_MODE 'shared' needs EMBEDDING_CAPACITY_TABLE")
        return self

    @property
    def batches_per_embed_task(self) -> int:
        # Tasks cover whole batches, so batch checkpoints are the same whatever the task size.
        return max(1, self.embed_task_chunks // self.embed_batch_size)


class RedriveEnv(WorkflowEnv):
    """Redrive moves DLQ messages back to the ingest queue; replays of FAILED documents start executions."""

    dlq_url: str = Field(pattern=r"^https?://")
    queue_url: str = Field(pattern=r"^https?://")


# The reaper's defaults: the stack's (infra/config.py ReaperConfig) and the CLI's `reap`, which runs outside it.
REAPER_STUCK_AFTER_MINUTES = 30
REAPER_MAX_REDRIVES = 2
REAPER_MAX_DOCUMENTS_PER_RUN = 200


class ReaperEnv(WorkflowEnv):
    stuck_after_seconds: int = Field(ge=60)
    max_redrives: int = Field(ge=0)
    max_documents: int = Field(default=REAPER_MAX_DOCUMENTS_PER_RUN, ge=1)
    # AWAITING_UPLOAD documents expire this long after their upload URL did (infra: reaper.uploadGraceMinutes).
    upload_url_expiry_seconds: int = Field(gt=0, le=3600)
    upload_grace_seconds: int = Field(ge=0)
    # DocumentFailed events for the documents it marks FAILED (STUCK), as MarkFailed sends them.
    event_bus_name: str = Field(default="default", min_length=1)


class ReconcilerEnv(WorkflowEnv, BucketEnv, ChunkIndexEnv):
    """The reconciler (rag_ingest.operations.reconciler): the table, the bucket's uploads and the
    index compared; the reaper's deadlines (it reports documents past them); whether it repairs."""

    raw_prefix: str = RAW_PREFIX
    stuck_after_seconds: int = Field(ge=60)
    upload_url_expiry_seconds: int = Field(gt=0, le=3600)
    upload_grace_seconds: int = Field(ge=0)
    object_grace_seconds: int = Field(default=900, ge=0, le=86_400)
    # The scheduled run repairs what is safe (infra: reconciler.repair); a manual invocation may say otherwise.
    repair: bool = False
    # The sources' items whose documents it checks (None: a stack without sources).
    sources_table: str | None = Field(default=None, min_length=1)


#: An https URL, or http on loopback only: the local stack's (docs/local-stack.md, "Live status").
HTTPS_OR_LOOPBACK = r"^(https://|http://(127\.0\.0\.1|localhost)[:/])"


class TokenEnv(EnvModel):
    """ID tokens of this issuer for this app client, verified as the HTTP API's JWT authorizer does."""

    # https://cognito-idp.<region>.amazonaws.com/<poolId>; its keys are at <issuer>/.well-known/jwks.json.
    token_issuer: str = Field(pattern=HTTPS_OR_LOOPBACK)
    token_audience: str = Field(min_length=1)
    jwks_max_age_seconds: int = Field(default=3600, ge=60)


class LiveAuthorizerEnv(TokenEnv):
    """The WebSocket API's ``$connect`` authorizer."""


class McpEnv(TokenEnv, DocumentsEnv):
    """The MCP server over streamable HTTP (docs/mcp.md): it verifies the caller's token itself, so a
    request without one gets a 401 naming this resource's metadata; its tools read documents and
    search (SearchEnv) as the caller."""

    # The MCP endpoint's URL (https://<api>.execute-api.<region>.amazonaws.com/mcp): the resource the
    # protected-resource metadata (RFC 9728) describes.
    mcp_resource_url: str = Field(pattern=r"^(https://|http://(127\.0\.0\.1|localhost)[:/])[^?#]*/mcp$")


class LiveConnectionsEnv(EnvModel):
    """``$connect`` / ``$disconnect``: the connections table and how long a record lives."""

    connections_table: str = Field(min_length=1)
    # API Gateway drops a WebSocket after 2 h; the TTL removes records whose $disconnect never came.
    connection_ttl_seconds: int = Field(default=7200, ge=60, le=86400)


class LivePusherEnv(EnvModel):
    """The documents-table stream consumer that posts changes to the tenant's connections."""

    connections_table: str = Field(min_length=1)
    # The stage's management endpoint: https://<api>.execute-api.<region>.amazonaws.com/<stage>
    websocket_callback_url: str = Field(pattern=r"^https?://")
    # A change is posted only to connections whose principal may read the document; this group's
    # members read all of their tenant's (rag_ingest.core.access; cdk.json auth.tenantAdminGroup).
    tenant_admin_group: str = Field(default="tenant-admins", min_length=1, max_length=128)
    post_max_attempts: int = Field(default=4, ge=1, le=10)


class LiveAnswersEnv(LivePusherEnv):
    """The live channel's ``answer`` route (rag_ingest.live.answers): the pusher's connections and
    callback URL; the search and the model are SearchEnv's and AnswerEnv's."""
