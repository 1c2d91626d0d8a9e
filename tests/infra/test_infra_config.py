"""The rag-ingest context: defaults, validation errors, and the synth-time guards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from rag_ingest.embeddings.bedrock import TITAN_V2_DIMENSIONS, TITAN_V2_MODEL_ID

from infra.cdk_app import cdk_json_context, create_app
from infra.config import BEDROCK_EMBEDDING_DIMENSIONS, CONTEXT_KEY, ConfigError, RagIngestConfig, parse_config
from infra.constructs import layer as layer_module
from infra.constructs.layer import LayerNotBuiltError, SharedLayer

pytestmark = pytest.mark.infra


def test_cdk_json_spells_out_every_default() -> None:
    # cdk.json is the reviewable copy of the defaults: it must stay in step with the model.
    configured = cdk_json_context()[CONTEXT_KEY]
    assert configured == RagIngestConfig().model_dump(by_alias=True, mode="json")


def test_empty_context_gives_the_defaults() -> None:
    assert parse_config(None) == RagIngestConfig()
    assert parse_config({}) == RagIngestConfig()


def test_camel_case_keys_and_json_strings_are_accepted() -> None:
    config = parse_config(json.dumps({"stackName": "Docs-Dev", "intake": {"maxReceiveCount": 5}}))
    assert config.stack_name == "Docs-Dev"
    assert config.intake.max_receive_count == 5
    assert config.search_domain_prefix == "docs-dev-"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"intake": {"batchSize": 0}}, "intake.batchSize"),
        ({"intake": {"maxConcurrency": 1}}, "intake.maxConcurrency"),
        ({"intake": {"batchSize": 100, "maxBatchingWindowSeconds": 0}}, "maxBatchingWindowSeconds"),
        ({"chunking": {"chunkTokens": 100, "chunkOverlapTokens": 100}}, "chunkOverlapTokens"),
        ({"opensearch": {"endpoint": "http://plain.example.com"}}, "https URL"),
        ({"opensearch": {"concurrentSegmentSearch": "on"}}, "opensearch.concurrentSegmentSearch"),
        ({"opensearch": {"mergeSegmentsPerTier": 1}}, "opensearch.mergeSegmentsPerTier"),
        ({"opensearch": {"mergeFloorSegmentMb": -1}}, "opensearch.mergeFloorSegmentMb"),
        ({"logRetentionDays": 10}, "logRetentionDays must be one of"),
        ({"allowedOrigins": ["*"]}, "allowedOrigins"),
        ({"functions": {"api": {"timeoutSeconds": 60}}}, "29 s"),
        ({"upload": {"maxUploadBytes": 10**9}}, "maxUploadBytes"),
        ({"embedding": {"provider": "openai"}}, "embedding.provider"),
        ({"embedding": {"modelId": "cohere.embed-english-v3"}}, "not supported by the Bedrock embedder"),
        ({"embedding": {"dimension": 768}}, "embedding.dimension 768 is not one of"),
        ({"monitoring": {"alarmEmail": "not-an-email"}}, "alarmEmail"),
        ({"workflow": {"retry": {"intervalSeconds": 10, "maxDelaySeconds": 5}}}, "maxDelaySeconds"),
        ({"search": {"bm25Weight": -1}}, "search.bm25Weight"),
        ({"search": {"bm25Weight": 0, "knnWeight": 0}}, "cannot both be 0"),
        ({"search": {"minCandidates": 101}}, "search.minCandidates"),
        ({"search": {"rerank": {"modelId": "cohere.rerank-v3:0"}}}, "search.rerank.modelId"),
        ({"search": {"rerank": {"candidates": 101}}}, "search.rerank.candidates"),
        ({"search": {"rerank": {"candidates": 0}}}, "search.rerank.candidates"),
        ({"search": {"rerank": {"default": "sometimes"}}}, "search.rerank.default"),
        ({"search": {"rerank": {"topN": 5}}}, "topN"),
        ({"stackName": "1bad"}, "stackName"),
        ({"unknownKey": 1}, "unknownKey"),
        ("{not json", "not valid JSON"),
        ([1, 2], "must be an object"),
    ],
)
def test_bad_context_is_a_clear_error(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    text = str(error.value)
    assert message in text
    assert "rag-ingest" in text


def test_embedding_config_is_the_embedders_and_every_problem_is_listed_at_once() -> None:
    # The embedder's own constants are the one source of truth (a model it would reject fails synth).
    assert BEDROCK_EMBEDDING_DIMENSIONS == {TITAN_V2_MODEL_ID: TITAN_V2_DIMENSIONS}
    for dimension in TITAN_V2_DIMENSIONS:
        assert parse_config({"embedding": {"dimension": dimension}}).embedding.dimension == dimension
    raw = {
        "embedding": {"modelId": "amazon.titan-embed-text-v1", "dimension": 1536},
        "intake": {"batchSize": 0},
    }
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    problems = [line for line in str(error.value).splitlines() if line.startswith("  - ")]
    assert [p.split(":")[0].strip(" -") for p in problems] == [
        "embedding.modelId",
        "embedding.dimension",
        "intake.batchSize",
    ], problems


def test_bad_context_stops_the_app_before_any_resource() -> None:
    with pytest.raises(ConfigError, match=r"intake\.maxReceiveCount"):
        create_app(context={CONTEXT_KEY: {"intake": {"maxReceiveCount": 0}}})


def test_missing_layer_tells_how_to_build_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(layer_module, "LAYER_DIR", tmp_path / "no-layer")
    with pytest.raises(LayerNotBuiltError, match="run `make layer`"):
        SharedLayer(Stack(App(), "LayerCheck"), "Layer")


def test_existing_opensearch_endpoint_creates_no_domain(tmp_path: Path) -> None:
    endpoint = "https://search-existing.eu-west-1.es.amazonaws.com"
    context = {CONTEXT_KEY: {"stackName": "RagIngestExternal", "opensearch": {"endpoint": endpoint}}}
    _app, stack, _config = create_app(context=context, outdir=str(tmp_path))
    template = Template.from_stack(stack)  # synthesizes with cdk-nag: raises on a finding
    template.resource_count_is("AWS::OpenSearchService::Domain", 0)
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "app.index", "Environment": {"Variables": {"OPENSEARCH_ENDPOINT": endpoint}}},
    )
    assert template.to_json()["Outputs"]["OpenSearchEndpoint"]["Value"] == endpoint
