"""Builds the domain services from a validated environment: the one place adapters are chosen.

Every handler (functions/*/app.py) and the operator CLI get what they run from here. ``aws`` says
where boto3 clients come from: by default the usual chain (``AWS_ENDPOINT_URL`` is moto locally);
the CLI passes a stack's own session (``adapters.stack_resources.StackResources``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from rag_ingest.adapters import aws
from rag_ingest.adapters.batch_inference import BedrockBatchJobs
from rag_ingest.adapters.capacity_table import CapacityTable
from rag_ingest.adapters.converse import BedrockConverse
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.embedding_cache_table import EmbeddingCacheTable
from rag_ingest.adapters.events import EventPublisher
from rag_ingest.adapters.executions import Executions
from rag_ingest.adapters.jwks import CachedJwks, jwks_url_for
from rag_ingest.adapters.live_connections import DynamoConnectionStore, ManagementApiPoster
from rag_ingest.adapters.object_store import ObjectStore
from rag_ingest.adapters.object_versions import ObjectVersions
from rag_ingest.adapters.presigner import S3Presigner
from rag_ingest.adapters.queues import Queues
from rag_ingest.adapters.reranker import BedrockReranker
from rag_ingest.adapters.source_bucket import SourceBucket
from rag_ingest.adapters.source_documents import SourceDocumentStore, StagedPageObjects, SyncCursorObjects
from rag_ingest.adapters.source_item_links import SourceItemLinksTable
from rag_ingest.adapters.sources_table import ItemStatesView, SourcesTable, SyncJobsView
from rag_ingest.adapters.sync_schedules import SyncScheduler
from rag_ingest.adapters.tenant_usage_table import TenantUsageTable
from rag_ingest.adapters.textract import TextractEngine
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.adapters.vision import BedrockDescriber
from rag_ingest.adapters.web_fetch import PolicyCheckedFetcher
from rag_ingest.adapters.webhook_http import PinnedHttpTransport
from rag_ingest.adapters.webhook_queues import WebhookQueues
from rag_ingest.adapters.webhooks_table import WebhooksTable
from rag_ingest.adapters.workflow import WorkflowStarter
from rag_ingest.answers.extractive import ExtractiveAnswerModel
from rag_ingest.answers.ports import AnswerModel
from rag_ingest.answers.service import AnswerService, AnswerSettings
from rag_ingest.core.auth import TokenVerifier
from rag_ingest.core.config import (
    AnswerEnv,
    ApiEnv,
    BatchInferenceEnv,
    IndexParamsEnv,
    IntakeEnv,
    LiveAnswersEnv,
    McpEnv,
    ReaperEnv,
    ReconcilerEnv,
    RedriveEnv,
    SearchEnv,
    SourcesApiEnv,
    SourcesEnv,
    SourceSyncEnv,
    StagesEnv,
    TokenEnv,
    WebhookDeliveryEnv,
    WebhookFanOutEnv,
    WebhooksApiEnv,
)
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.limits import LimitsTable, TenantLimiter, UsageCounter
from rag_ingest.core.telemetry import CloudTelemetry, Telemetry
from rag_ingest.core.tokens import count_tokens
from rag_ingest.core.url_policy import UrlPolicy
from rag_ingest.documents.deletion import DocumentDeletion
from rag_ingest.documents.intake import IntakeService
from rag_ingest.documents.service import DocumentQueries, DocumentService
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.capacity import CapacityLimiter, EmbeddingQuota, FairShare
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.ingest.batch_embedding import BatchEmbedding, BatchSettings
from rag_ingest.ingest.chunk_rewrite import ChunkRewriter
from rag_ingest.ingest.embedding_cache import NoEmbeddingCache
from rag_ingest.ingest.pipeline import Pipeline, StageDependencies
from rag_ingest.live.answers import LiveAnswers
from rag_ingest.operations.reaper import Reaper, ReaperSettings
from rag_ingest.operations.reconciler import Reconciler, ReconcilerSettings
from rag_ingest.operations.redrive import DeadLetterRedrive, Recovery
from rag_ingest.operations.replay import FailedDocumentReplay, Replayer
from rag_ingest.parsing.figures import CaptionsOnly, ImageReader
from rag_ingest.parsing.image_reading import DescribingReader, OcrImageReader
from rag_ingest.parsing.ocr.engine import OcrEngine
from rag_ingest.parsing.ocr.local import local_engine
from rag_ingest.retrieval.ports import Reranker
from rag_ingest.retrieval.rerank import LexicalStandInReranker
from rag_ingest.retrieval.search import RerankSettings, SearchService
from rag_ingest.sources.connector import Connector
from rag_ingest.sources.kinds import config_validator
from rag_ingest.sources.model import Source
from rag_ingest.sources.object_events import ObjectEventApplier
from rag_ingest.sources.runner import SyncRunner
from rag_ingest.sources.s3 import S3Connector, S3SourceConfig
from rag_ingest.sources.service import SourceService
from rag_ingest.sources.sync import DEFAULT_BATCH_ITEMS, DEFAULT_MAX_ITEMS, SyncEngine
from rag_ingest.sources.web.crawler import WebConnector
from rag_ingest.webhooks.service import WebhookDelivery, WebhookFanOut, WebhookService


class AwsClients(Protocol):
    def client(self, service: str) -> Any: ...

    def resource(self, service: str) -> Any: ...


class DefaultAwsClients:
    """The functions' clients: the default credential chain and endpoint."""

    def client(self, service: str) -> Any:
        return aws.client(service)

    def resource(self, service: str) -> Any:
        return aws.resource(service)


DEFAULT_AWS = DefaultAwsClients()


# -- adapters ------------------------------------------------------------------------------------
def index_settings_for(index: str, dimension: int, params: IndexParamsEnv | None = None) -> IndexSettings:
    params = params or IndexParamsEnv()
    mode = params.opensearch_concurrent_segment_search
    return IndexSettings(
        name=index,
        dimension=dimension,
        space_type=params.opensearch_space_type,
        hnsw_m=params.opensearch_hnsw_m,
        ef_construction=params.opensearch_ef_construction,
        ef_search=params.opensearch_ef_search,
        replicas=params.opensearch_replicas,
        concurrent_segment_search=None if mode == "cluster" else mode,
        merge_segments_per_tier=params.opensearch_merge_segments_per_tier or None,
        merge_floor_segment_mb=params.opensearch_merge_floor_segment_mb or None,
        vector_encoding=params.opensearch_vector_encoding,
    )


def vector_store_for(endpoint: str, index: str, dimension: int, params: IndexParamsEnv | None = None) -> VectorStore:
    return VectorStore(connect(endpoint), index_settings_for(index, dimension, params))


def lazy_vector_store(env: SearchEnv) -> Callable[[], VectorStore]:
    """Connects on first use and keeps the client for the warm container's life."""
    return cache(lambda: vector_store_for(env.opensearch_endpoint, env.opensearch_index, env.embedding_dimension, env))


def embedder_for(env: SearchEnv) -> Embedder:
    bedrock = aws.bedrock_runtime_client() if env.embedding_provider == "bedrock" else None
    return create_embedder(env.embedding_provider, env.embedding_model_id, env.embedding_dimension, bedrock)


def stage_embedder_for(env: StagesEnv) -> Embedder:
    """Embed's embedder: as the search's, plus the configured way of sharing the model's quota
    (rag_ingest.embeddings.capacity; queries embedded by the API are few and are not paced)."""
    if env.embedding_provider != "bedrock" or env.embedding_capacity_mode == "off":
        return embedder_for(env)
    bedrock = aws.bedrock_runtime_client(adaptive=env.embedding_capacity_mode == "adaptive")
    limiter = None
    if env.embedding_capacity_mode == "shared" and env.embedding_capacity_table:
        limiter = CapacityLimiter(
            CapacityTable(env.embedding_capacity_table),
            EmbeddingQuota(
                env.embedding_requests_per_minute, env.embedding_tokens_per_minute, env.embedding_capacity_headroom
            ),
            # Bedrock's quotas are per model, account and Region; the table is the account's in its Region.
            scope=f"{env.embedding_model_id}@{os.environ.get('AWS_REGION', 'local')}",
            max_wait_seconds=env.embedding_capacity_max_wait_seconds,
            fair=FairShare(env.embedding_capacity_tenant_weights),
            book_ahead_seconds=env.embedding_capacity_book_ahead_seconds,
        )
    return create_embedder(
        env.embedding_provider, env.embedding_model_id, env.embedding_dimension, bedrock, limiter=limiter
    )


def reranker_for(env: SearchEnv) -> Reranker:
    """Bedrock's Rerank where the query embedder is Bedrock's (locally: the embedding server's Rerank
    route, a lexical stand-in); the in-process stand-in where the embedder runs in process."""
    if env.embedding_provider == "bedrock":
        return BedrockReranker(env.search_rerank_model_id, aws.bedrock_agent_runtime_client())
    return LexicalStandInReranker()


def answer_model_for(env: AnswerEnv, search_env: SearchEnv) -> AnswerModel:
    """Bedrock's Converse where the query embedder is Bedrock's (locally: the model server's Converse
    route, an extractive stand-in); the in-process stand-in where the embedder runs in process."""
    if search_env.embedding_provider == "bedrock":
        return BedrockConverse(env.answer_model_id, aws.bedrock_runtime_client())
    return ExtractiveAnswerModel(env.answer_model_id)


def ocr_engine_for(env: StagesEnv) -> OcrEngine | None:
    """The OCR engine OCR_ENGINE names (made at cold start: a missing tesseract fails loudly)."""
    if env.ocr_engine == "textract":
        return TextractEngine(tables=env.ocr_textract_tables)
    if env.ocr_engine == "local":
        return local_engine()
    return None


def image_reader_for(env: StagesEnv, engine: OcrEngine | None) -> Callable[[float], ImageReader] | None:
    """What reads a document's figures, given the share of the document a Parse task holds: the OCR
    engine, with the vision model's description (up to the task's share of its cap) when one is set."""
    ocr: ImageReader = OcrImageReader(engine) if engine is not None else CaptionsOnly()
    if env.figure_vision_enabled:
        describer = BedrockDescriber(env.figure_vision_model_id, env.figure_vision_prompt, aws.bedrock_runtime_client())
        cap = env.figure_vision_max_figures
        return lambda share: DescribingReader(ocr, describer, max_described=math.ceil(cap * share))
    return (lambda share: ocr) if engine is not None else None


def documents_table(table_name: str, clients: AwsClients = DEFAULT_AWS) -> DocumentsTable:
    return DocumentsTable(table_name, table=clients.resource("dynamodb").Table(table_name))


# -- the functions' services ---------------------------------------------------------------------
def build_pipeline(env: StagesEnv, batch_env: BatchInferenceEnv | None = None) -> Pipeline:
    return Pipeline(
        StageDependencies(
            env=env,
            status=documents_table(env.documents_table),
            objects=ObjectStore(),
            vector_store=lazy_vector_store(env),
            embedder=cache(lambda: stage_embedder_for(env)),  # loading a model is only Embed's cost
            count_tokens=count_tokens,
            telemetry=CloudTelemetry(EventPublisher(env.event_bus_name)),
            embedding_cache=(
                EmbeddingCacheTable(env.embedding_cache_table) if env.embedding_cache_table else NoEmbeddingCache()
            ),
            ocr_engine=(engine := ocr_engine_for(env)),
            image_reader=image_reader_for(env, engine),
            batch_embedding=batch_embedding_for(env, batch_env) if batch_env else None,
            usage=usage_counter(env.tenant_usage_table),
        )
    )


def batch_embedding_for(env: StagesEnv, batch: BatchInferenceEnv) -> BatchEmbedding | None:
    """The bulk lane's batch inference Embed, where the stack turned it on (BATCH_INFERENCE_ROLE_ARN set)."""
    if not batch.batch_inference_role_arn:
        return None
    settings = BatchSettings(
        bucket=env.bucket_name,
        artifacts_prefix=env.artifacts_prefix,
        role_arn=batch.batch_inference_role_arn,
        model_id=env.embedding_model_id,
        dimension=env.embedding_dimension,
        batch_size=env.embed_batch_size,
        min_records=batch.batch_min_records,
        timeout_hours=batch.batch_timeout_hours,
        poll_seconds=batch.batch_poll_seconds,
        max_poll_seconds=batch.batch_max_poll_seconds,
        write_cache=batch.batch_write_cache,
    )
    return BatchEmbedding(
        settings,
        jobs=BedrockBatchJobs(),
        objects=ObjectStore(),
        status=documents_table(env.documents_table),
        cache=EmbeddingCacheTable(env.embedding_cache_table) if env.embedding_cache_table else NoEmbeddingCache(),
    )


def usage_counter(table_name: str | None) -> UsageCounter | None:
    """Intake's and Parse's counters, where the stack gave the function the usage table."""
    return UsageCounter(TenantUsageTable(table_name)) if table_name else None


def tenant_limiter(env: ApiEnv) -> TenantLimiter | None:
    """The API's limits, where the stack set them (TENANT_LIMITS and the usage table)."""
    if env.tenant_limits is None or not env.tenant_usage_table:
        return None
    return TenantLimiter(env.tenant_limits, TenantUsageTable(env.tenant_usage_table))


def build_intake(env: IntakeEnv) -> IntakeService:
    documents = documents_table(env.documents_table)
    objects = ObjectStore()
    endpoint, index, dimension = env.opensearch_endpoint, env.opensearch_index, env.embedding_dimension
    vector_store = cache(lambda: vector_store_for(endpoint, index, dimension))
    return IntakeService(
        documents,
        WorkflowStarter(env.state_machine_arn),
        sidecars=objects,
        # An S3 sidecar arriving after its document is READY rewrites the chunks as PATCH does.
        refresher=ChunkRewriter(
            documents=documents,
            objects=objects,
            vector_store=vector_store,
            bucket=env.bucket_name,
            artifacts_prefix=env.artifacts_prefix,
        ),
        usage=usage_counter(env.tenant_usage_table),
    )


@dataclass(frozen=True)
class ApiServices:
    documents: DocumentService
    deletion: DocumentDeletion
    search: SearchService
    answers: AnswerService
    # Per-tenant limits (None: the stack set none); the handler admits every request through it.
    limiter: TenantLimiter | None = None


def build_api(env: ApiEnv, search_env: SearchEnv, answer_env: AnswerEnv | None = None) -> ApiServices:
    answer_env = answer_env or AnswerEnv()
    documents = documents_table(env.documents_table)
    # One OpenSearch client for DELETE and POST /search, made on first use (other routes never need it).
    vector_store = lazy_vector_store(search_env)
    replayer = Replayer(documents, WorkflowStarter(env.state_machine_arn))
    objects = ObjectStore()
    search = search_service(search_env, vector_store)
    limiter = tenant_limiter(env)
    return ApiServices(
        documents=DocumentService(
            env,
            documents,
            S3Presigner(),
            replayer=replayer,
            artifacts=objects,
            # PATCH rewrites a READY document's chunks from the Index stage's artifacts.
            refresher=ChunkRewriter(
                documents=documents,
                objects=objects,
                vector_store=vector_store,
                bucket=env.bucket_name,
                artifacts_prefix=env.artifacts_prefix,
            ),
            limiter=limiter,
        ),
        deletion=DocumentDeletion(
            documents=documents,
            vector_store=vector_store,
            objects=ObjectVersions(),
            bucket=env.bucket_name,
            artifacts_prefix=env.artifacts_prefix,
            events=EventPublisher(env.event_bus_name),
            limiter=limiter,
        ),
        search=search,
        answers=answer_service(answer_env, search_env, search),
        limiter=limiter,
    )


def search_service(env: SearchEnv, vector_store: Callable[[], VectorStore]) -> SearchService:
    """POST /search's service: the query embedder and the reranker made on first use."""
    return SearchService(
        store=vector_store,
        embedder=cache(lambda: embedder_for(env)),
        fusion=env.fusion,
        reranker=cache(lambda: reranker_for(env)),
        rerank=RerankSettings(default=env.search_rerank_default, candidates=env.search_rerank_candidates),
    )


def answer_service(env: AnswerEnv, search_env: SearchEnv, search: SearchService) -> AnswerService:
    """POST /answer's service over ``search``: the Converse model made on first use."""
    return AnswerService(
        search,
        cache(lambda: answer_model_for(env, search_env)),
        AnswerSettings(
            model_id=env.answer_model_id,
            min_relevance=env.answer_min_relevance,
            max_tokens=env.answer_max_tokens,
            rerank_default=env.answer_rerank_default,
        ),
    )


def token_verifier(env: TokenEnv) -> TokenVerifier:
    """ID tokens of the issuer for the app client; the key set is fetched on first use and kept by the
    container (http only for a loopback issuer, the local stack's: TokenEnv)."""
    jwks = CachedJwks(
        jwks_url_for(env.token_issuer),
        max_age_seconds=env.jwks_max_age_seconds,
        allow_http=env.token_issuer.startswith("http://"),
    )
    return TokenVerifier(issuer=env.token_issuer, audience=env.token_audience, jwks=jwks)


@dataclass(frozen=True)
class McpServices:
    """What the MCP server's tools read, as the caller: documents (records, extracted text), search
    and answers."""

    documents: DocumentQueries
    search: SearchService
    answers: AnswerService


def build_mcp(env: McpEnv, search_env: SearchEnv, answer_env: AnswerEnv) -> McpServices:
    # A reader: no upload, retry, change or delete (and the role grants none).
    documents = DocumentQueries(env, documents_table(env.documents_table), artifacts=ObjectStore())
    search = search_service(search_env, lazy_vector_store(search_env))
    return McpServices(documents=documents, search=search, answers=answer_service(answer_env, search_env, search))


def build_live_answers(env: LiveAnswersEnv, search_env: SearchEnv, answer_env: AnswerEnv) -> LiveAnswers:
    """The live channel's answer route: answers as the connection's principal, posted back to it."""
    search = search_service(search_env, lazy_vector_store(search_env))
    return LiveAnswers(
        answer_service(answer_env, search_env, search),
        DynamoConnectionStore(env.connections_table),
        ManagementApiPoster(env.websocket_callback_url),
        tenant_admin_group=env.tenant_admin_group,
        post_max_attempts=env.post_max_attempts,
    )


def build_webhooks(env: WebhooksApiEnv, limits: LimitsTable | None = None) -> WebhookService:
    """``limits``: the tenants' limits (TENANT_LIMITS), whose ``webhooks`` replaces the stack-wide cap."""
    table = WebhooksTable(env.webhooks_table)
    return WebhookService(
        table,
        UrlPolicy(allow_loopback_http=env.webhook_allow_loopback_http),
        max_endpoints=(lambda tenant: limits.for_tenant(tenant).webhooks) if limits else env.webhook_max_endpoints,
        history=table,
    )


def build_webhook_fan_out(env: WebhookFanOutEnv) -> WebhookFanOut:
    return WebhookFanOut(
        WebhooksTable(env.webhooks_table),
        WebhookQueues(env.webhook_delivery_queue_url),
        retry_hours=env.webhook_retry_hours,
    )


@dataclass(frozen=True)
class WebhookDeliveryServices:
    delivery: WebhookDelivery
    queues: WebhookQueues


def build_webhook_delivery(env: WebhookDeliveryEnv) -> WebhookDeliveryServices:
    table = WebhooksTable(env.webhooks_table)
    return WebhookDeliveryServices(
        delivery=WebhookDelivery(
            table,
            UrlPolicy(allow_loopback_http=env.webhook_allow_loopback_http),
            PinnedHttpTransport(),
            timeout_seconds=env.webhook_timeout_seconds,
            retry_base_seconds=env.webhook_retry_base_seconds,
            retry_max_delay_seconds=env.webhook_retry_max_delay_seconds,
            history=table,
        ),
        queues=WebhookQueues(env.webhook_delivery_queue_url, env.webhook_dead_letter_queue_url),
    )


def build_reaper(env: ReaperEnv) -> Reaper:
    settings = ReaperSettings(
        stuck_after_seconds=env.stuck_after_seconds,
        max_redrives=env.max_redrives,
        max_documents=env.max_documents,
        expire_uploads_after_seconds=max(60, env.upload_url_expiry_seconds + env.upload_grace_seconds),
    )
    return reaper_for(
        documents_table_name=env.documents_table,
        state_machine_arn=env.state_machine_arn,
        settings=settings,
        telemetry=CloudTelemetry,
        event_bus_name=env.event_bus_name,
    )


def build_recovery(env: RedriveEnv) -> Recovery:
    return recovery_for(
        documents_table_name=env.documents_table,
        state_machine_arn=env.state_machine_arn,
        dlq_url=env.dlq_url,
        queue_url=env.queue_url,
    )


# -- the operator tools: also run from a shell against a stack (rag_ingest_client.operator) ------
def reaper_for(
    *,
    documents_table_name: str,
    state_machine_arn: str,
    settings: ReaperSettings,
    telemetry: Callable[[EventPublisher], Telemetry],
    event_bus_name: str = "default",
    clients: AwsClients = DEFAULT_AWS,
) -> Reaper:
    """``telemetry`` is made from the event publisher: the documents the reaper fails announce DocumentFailed."""
    documents = documents_table(documents_table_name, clients)
    sfn = clients.client("stepfunctions")
    return Reaper(
        documents=documents,
        executions=Executions(sfn),
        replayer=Replayer(documents, WorkflowStarter(state_machine_arn, sfn)),
        settings=settings,
        telemetry=telemetry(EventPublisher(event_bus_name, clients.client("events"))),
    )


def recovery_for(
    *,
    documents_table_name: str,
    state_machine_arn: str,
    dlq_url: str,
    queue_url: str,
    clients: AwsClients = DEFAULT_AWS,
) -> Recovery:
    documents = documents_table(documents_table_name, clients)
    replayer = Replayer(documents, WorkflowStarter(state_machine_arn, clients.client("stepfunctions")))
    return Recovery(
        redrive=DeadLetterRedrive(
            queues=Queues(clients.client("sqs")), documents=documents, dlq_url=dlq_url, queue_url=queue_url
        ),
        replay=FailedDocumentReplay(documents=documents, replayer=replayer),
    )


def build_reconciler(env: ReconcilerEnv) -> Reconciler:
    """The reconciler: the documents table, the bucket's versions and artifacts, the chunk index;
    a re-index without checkpoints replays the document (a new execution)."""
    documents = documents_table(env.documents_table)
    s3 = aws.client("s3")
    return Reconciler(
        documents=documents,
        objects=ObjectVersions(s3),
        checkpoints=ObjectStore(s3),
        index=vector_store_for(env.opensearch_endpoint, env.opensearch_index, env.embedding_dimension),
        replayer=Replayer(documents, WorkflowStarter(env.state_machine_arn)),
        settings=ReconcilerSettings(
            bucket=env.bucket_name,
            raw_prefix=env.raw_prefix,
            artifacts_prefix=env.artifacts_prefix,
            stuck_after_seconds=env.stuck_after_seconds,
            expire_uploads_after_seconds=max(60, env.upload_url_expiry_seconds + env.upload_grace_seconds),
            object_grace_seconds=env.object_grace_seconds,
        ),
        repair_by_default=env.repair,
        source_items=SourceItemLinksTable(env.sources_table) if env.sources_table else None,
    )


# -- sources -------------------------------------------------------------------------------------
def _sync_engine(
    env: SourcesEnv, table: SourcesTable, max_items: int = DEFAULT_MAX_ITEMS, batch_items: int = 0
) -> SyncEngine:
    documents = documents_table(env.documents_table)
    deletion = DocumentDeletion(
        documents=documents,
        vector_store=cache(
            lambda: vector_store_for(env.opensearch_endpoint, env.opensearch_index, env.embedding_dimension)
        ),
        objects=ObjectVersions(),
        bucket=env.bucket_name,
        artifacts_prefix=env.artifacts_prefix,
        events=EventPublisher(env.event_bus_name),
    )
    return SyncEngine(
        sources=table,
        jobs=SyncJobsView(table),
        cursors=SyncCursorObjects(env.bucket_name),
        items=ItemStatesView(table),
        documents=SourceDocumentStore(documents, env.bucket_name),
        remover=deletion,
        raw_prefix=env.raw_prefix,
        max_items=max_items,
        staged_pages=StagedPageObjects(env.bucket_name) if batch_items else None,
        batch_items=batch_items or DEFAULT_BATCH_ITEMS,
    )


def build_sources(env: SourcesApiEnv, limits: LimitsTable | None = None) -> SourceService:
    """``limits``: the tenants' limits (TENANT_LIMITS), whose ``sources`` replaces the stack-wide cap."""
    table = SourcesTable(env.sources_table)
    return SourceService(
        sources=table,
        jobs=SyncJobsView(table),
        items=ItemStatesView(table),
        engine=_sync_engine(env, table),
        starter=WorkflowStarter(env.source_sync_state_machine_arn),
        validate_config=config_validator(UrlPolicy(allow_loopback_http=env.source_allow_loopback_http)),
        new_id=new_document_id,
        schedules=SyncScheduler(
            env.source_schedule_group, env.source_sync_state_machine_arn, env.source_schedule_role_arn
        ),
        max_sources=(lambda tenant: limits.for_tenant(tenant).sources) if limits else env.source_max_per_tenant,
        max_syncs_per_hour=env.source_max_syncs_per_hour,
    )


def build_sync_runner(env: SourceSyncEnv) -> SyncRunner:
    table = SourcesTable(env.sources_table)
    policy = UrlPolicy(allow_loopback_http=env.source_allow_loopback_http)
    return SyncRunner(
        sources=table,
        jobs=SyncJobsView(table),
        engine=_sync_engine(env, table, env.source_max_items_per_sync, env.source_fan_out_batch_items),
        connectors=lambda source: connector_for(source, policy, env.max_upload_bytes),
        starter=WorkflowStarter(env.source_sync_state_machine_arn),
        budget_seconds=env.source_sync_step_seconds,
        fan_out=env.source_fan_out_batch_items > 0,
    )


def build_object_events(env: SourceSyncEnv) -> ObjectEventApplier:
    """S3 object events for the S3 sources over their buckets (rag_ingest.sources.object_events)."""
    table = SourcesTable(env.sources_table)
    bucket = SourceBucket()  # one client for the container's life, not one per event

    def s3_connector(source: Source) -> S3Connector:
        return _s3_connector(source, env.max_upload_bytes, bucket)

    return ObjectEventApplier(
        sources=table,
        items=ItemStatesView(table),
        engine=_sync_engine(env, table, env.source_max_items_per_sync),
        connectors=s3_connector,
    )


def _s3_connector(source: Source, max_object_bytes: int, bucket: SourceBucket | None = None) -> S3Connector:
    """An S3 source's connector: listings and server-side copies through one bucket adapter."""
    bucket = bucket or SourceBucket()
    config = S3SourceConfig.model_validate(source.config)
    return S3Connector(config, bucket, max_object_bytes=max_object_bytes, copier=bucket)


def connector_for(source: Source, policy: UrlPolicy, max_object_bytes: int) -> Connector:
    """The connector of a source's kind over its adapters (a custom source has none: it is pushed)."""
    if source.kind == "s3":
        return _s3_connector(source, max_object_bytes)
    if source.kind == "web":
        return WebConnector.from_config(source.config, PolicyCheckedFetcher(policy))
    raise ValueError(f"a {source.kind} source is not listed: its items are pushed")
