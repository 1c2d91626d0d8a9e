"""The vector store's requests stay inside the OpenSearch grants of the roles that make them.

Each function's VectorStore calls (infra/permissions.py VECTOR_STORE_CALLS) are replayed against the
real OpenSearch at ``$OPENSEARCH_URL``, every HTTP request is recorded at the transport, and each
must be allowed by that function's OPENSEARCH_ACCESS (the grants CDK writes into the role and the
domain's access policy). A request outside its index (``POST /_bulk`` at the root, ``_cluster``,
another index) or with a method the role lacks fails the test, as it would fail with 403 in AWS.
Also: the index settings from the environment reach the index (a single node gets 0 replicas).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.core.config import IndexParamsEnv
from rag_ingest.core.ids import version_hash
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.record import DocumentStamp
from rag_ingest.retrieval.ports import ParentScope
from rag_ingest.retrieval.query import Expand, SearchQuery
from rag_ingest.wiring import vector_store_for

from infra.permissions import OPENSEARCH_ACCESS, VECTOR_STORE_CALLS

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
DIMENSION = 8
TENANT = "acme"
DOCUMENT = "doc-grants"
HTTP_ACTIONS = {
    "GET": "es:ESHttpGet",
    "HEAD": "es:ESHttpHead",
    "POST": "es:ESHttpPost",
    "PUT": "es:ESHttpPut",
    "DELETE": "es:ESHttpDelete",
    "PATCH": "es:ESHttpPatch",
}


class Recorder:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def take(self) -> list[tuple[str, str]]:
        taken, self.requests = self.requests, []
        return taken


@pytest.fixture
def store() -> Iterator[tuple[VectorStore, Recorder]]:
    index = f"grants-{uuid.uuid4().hex[:12]}"
    # The environment a one-node domain's functions get (infra/constructs/search.py index_parameters).
    params = IndexParamsEnv.from_env({"OPENSEARCH_REPLICAS": "0", "OPENSEARCH_HNSW_M": "8"})
    vector_store = vector_store_for(URL, index, DIMENSION, params)
    client = vector_store._client  # the adapter's own client: record what it sends
    recorder = Recorder()
    perform = client.transport.perform_request

    def recording(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        recorder.requests.append((method, url.split("?", 1)[0]))
        return perform(method, url, *args, **kwargs)

    client.transport.perform_request = recording  # type: ignore[method-assign]
    try:
        yield vector_store, recorder
    finally:
        client.transport.perform_request = perform  # type: ignore[method-assign]
        vector_store.drop_index()


def _chunks(count: int) -> list[Chunk]:
    return [
        Chunk(
            chunk_index=i,
            text=f"passage {i} about grants",
            page_start=1,
            page_end=1,
            char_start=0,
            char_end=10,
            token_count=4,
        )
        for i in range(count)
    ]


def _vectors(count: int) -> list[list[float]]:
    return [[float(i + 1)] + [0.5] * (DIMENSION - 1) for i in range(count)]


def _call(store: VectorStore, method: str) -> None:
    """One VectorStore call as the functions make it, with arguments that make it do its work."""
    if method == "ensure_index":
        store.ensure_index()
    elif method == "write_chunks":
        store.write_chunks(DocumentStamp(TENANT, DOCUMENT, "v2", filename="a.pdf"), _chunks(3), _vectors(3))
    elif method == "delete_version":
        store.delete_version(DOCUMENT, "v1")
    elif method == "delete_other_versions":
        store.delete_other_versions(DOCUMENT, "v2")
    elif method == "delete_document":
        store.delete_document(DOCUMENT)
    elif method == "knn_search":
        store.knn_search(SearchQuery(tenant_id=TENANT, text="grants"), _vectors(1)[0], k=2)
    elif method == "bm25_search":
        store.bm25_search(SearchQuery(tenant_id=TENANT, text="grants"), k=2)
    elif method == "parent_chunks":
        scope = ParentScope(
            DOCUMENT, version_hash("v2"), Expand.PAGE, first_chunk=0, last_chunk=2, page_start=1, page_end=1
        )
        [chunks] = store.parent_chunks(SearchQuery(tenant_id=TENANT, text="grants"), [scope])
        assert [chunk.text for chunk in chunks] == [f"passage {i} about grants" for i in range(3)]
    elif method == "indexed_versions":
        assert list(store.indexed_versions(TENANT)), "the seeded versions are counted"
    elif method == "delete_chunks":
        assert store.delete_chunks(DOCUMENT, from_index=1) > 0
    else:
        raise AssertionError(f"no replay for VectorStore.{method}: add one here")


def _allowed(function: str, index: str, method: str, path: str) -> bool:
    action = HTTP_ACTIONS[method]
    for sub_path in OPENSEARCH_ACCESS[function].get(action, ()):
        if path == (f"/{index}/{sub_path}" if sub_path else f"/{index}"):
            return True
    return False


def _seed(store: VectorStore) -> None:
    """Two versions of one document, so every delete below has something to find and remove."""
    store.ensure_index()
    for version in ("v1", "v2"):
        store.write_chunks(DocumentStamp(TENANT, DOCUMENT, version, filename="a.pdf"), _chunks(3), _vectors(3))


@pytest.mark.parametrize("function", sorted(VECTOR_STORE_CALLS))
def test_every_request_is_within_the_functions_grants(store: tuple[VectorStore, Recorder], function: str) -> None:
    vector_store, recorder = store
    for method in VECTOR_STORE_CALLS[function]:
        if method != "ensure_index":
            _seed(vector_store)
        recorder.take()
        _call(vector_store, method)
        requests = recorder.take()
        assert requests, f"VectorStore.{method} made no request: the replay proves nothing"
        denied = [r for r in requests if not _allowed(function, vector_store.index_name, *r)]
        assert denied == [], f"{function} calls VectorStore.{method}, which sends {denied}: not granted"


def test_bulk_requests_name_the_index_in_the_path(store: tuple[VectorStore, Recorder]) -> None:
    vector_store, recorder = store
    _seed(vector_store)
    vector_store.delete_document(DOCUMENT)
    bulk = [path for method, path in recorder.take() if path.endswith("/_bulk")]
    assert bulk and set(bulk) == {f"/{vector_store.index_name}/_bulk"}
    assert vector_store.count(document_id=DOCUMENT) == 0


def test_a_single_node_index_has_no_replica_and_is_green(store: tuple[VectorStore, Recorder]) -> None:
    vector_store, _ = store
    vector_store.ensure_index()
    client = vector_store._client
    settings = client.indices.get_settings(index=vector_store.index_name)[vector_store.index_name]["settings"]
    assert settings["index"]["number_of_replicas"] == "0"
    # The shipped default: a k-NN query searches the shard's segments (an HNSW graph each) in parallel.
    assert settings["index"]["search"]["concurrent_segment_search"]["mode"] == "auto"
    health = client.cluster.health(index=vector_store.index_name, wait_for_status="green", request_timeout=40)
    assert health["status"] == "green"


@pytest.mark.parametrize(("variable", "mode"), [("none", "none"), ("all", "all"), ("cluster", None)])
def test_the_concurrent_segment_search_mode_reaches_the_index(variable: str, mode: str | None) -> None:
    params = IndexParamsEnv.from_env({"OPENSEARCH_REPLICAS": "0", "OPENSEARCH_CONCURRENT_SEGMENT_SEARCH": variable})
    vector_store = vector_store_for(URL, f"test-css-{uuid.uuid4().hex[:8]}", DIMENSION, params)
    try:
        vector_store.ensure_index()
        index = vector_store.index_name
        settings = vector_store._client.indices.get_settings(index=index)[index]["settings"]["index"]
        # "cluster": the index sets nothing and follows the cluster's setting.
        assert settings.get("search", {}).get("concurrent_segment_search", {}).get("mode") == mode
    finally:
        vector_store.drop_index()


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, {"segments_per_tier": "4", "floor_segment": "256mb"}),  # the shipped default
        (
            {"OPENSEARCH_MERGE_SEGMENTS_PER_TIER": "6", "OPENSEARCH_MERGE_FLOOR_SEGMENT_MB": "64"},
            {"segments_per_tier": "6", "floor_segment": "64mb"},
        ),
        ({"OPENSEARCH_MERGE_SEGMENTS_PER_TIER": "0", "OPENSEARCH_MERGE_FLOOR_SEGMENT_MB": "0"}, {}),
    ],
)
def test_the_merge_policy_reaches_the_index(variables: dict[str, str], expected: dict[str, str]) -> None:
    params = IndexParamsEnv.from_env({"OPENSEARCH_REPLICAS": "0", **variables})
    vector_store = vector_store_for(URL, f"test-merge-{uuid.uuid4().hex[:8]}", DIMENSION, params)
    try:
        vector_store.ensure_index()
        index = vector_store.index_name
        settings = vector_store._client.indices.get_settings(index=index)[index]["settings"]["index"]
        policy = settings.get("merge", {}).get("policy", {})
        # 0: the index sets nothing and follows the cluster's policy.
        assert policy == expected
    finally:
        vector_store.drop_index()
