"""Builds the domain services from a validated environment: the one place adapters are chosen."""

from __future__ import annotations

from functools import cache

from rag_ingest.adapters.aws import client
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.events import EventPublisher
from rag_ingest.adapters.object_store import ObjectStore
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore, connect
from rag_ingest.config import IndexParamsEnv, SearchEnv, StagesEnv
from rag_ingest.embeddings.base import Embedder, create_embedder
from rag_ingest.pipeline import Pipeline, StageDependencies
from rag_ingest.telemetry import CloudTelemetry
from rag_ingest.tokens import count_tokens


def vector_store_for(endpoint: str, index: str, dimension: int, params: IndexParamsEnv | None = None) -> VectorStore:
    params = params or IndexParamsEnv()
    settings = IndexSettings(
        name=index,
        dimension=dimension,
        space_type=params.opensearch_space_type,
        hnsw_m=params.opensearch_hnsw_m,
        ef_construction=params.opensearch_ef_construction,
        ef_search=params.opensearch_ef_search,
        replicas=params.opensearch_replicas,
    )
    return VectorStore(connect(endpoint), settings)


def embedder_for(env: StagesEnv | SearchEnv) -> Embedder:
    bedrock = client("bedrock-runtime") if env.embedding_provider == "bedrock" else None
    return create_embedder(env.embedding_provider, env.embedding_model_id, env.embedding_dimension, bedrock)


def build_pipeline(env: StagesEnv) -> Pipeline:
    return Pipeline(
        StageDependencies(
            env=env,
            status=DocumentsTable(env.documents_table),
            objects=ObjectStore(),
            # Created on first use and kept for the warm container's life.
            vector_store=cache(
                lambda: vector_store_for(env.opensearch_endpoint, env.opensearch_index, env.embedding_dimension, env)
            ),
            embedder=cache(lambda: embedder_for(env)),
            count_tokens=count_tokens,
            telemetry=CloudTelemetry(EventPublisher(env.event_bus_name)),
        )
    )
