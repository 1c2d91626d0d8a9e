"""The real OpenSearch k-NN (lucene HNSW) behaves as the pipeline's vector store needs.

Runs against ``$OPENSEARCH_URL`` (default http://127.0.0.1:9200), e.g. the local server from
``python -m local.opensearch start``; the test does not start it and fails (does not skip) without it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError

pytestmark = pytest.mark.integration

URL = os.environ.get("OPENSEARCH_URL", "").strip() or "http://127.0.0.1:9200"
DIM = 384
N_DOCS = 10_000
N_QUERIES = 50
K = 10
TENANTS = ("acme", "globex", "initech", "umbrella")
SEED = 20240519
BULK_CHUNK = 1_000
N_CLUSTERS = 50
EF_SEARCH = 100


@dataclass
class Corpus:
    client: OpenSearch
    index: str
    vectors: np.ndarray  # (N_DOCS, DIM) float64, exactly what was indexed
    tenants: np.ndarray  # (N_DOCS,) tenant per doc
    queries: np.ndarray  # (N_QUERIES, DIM)


def _doc_id(i: int) -> str:
    return f"doc-{i:05d}"


def _client() -> OpenSearch:
    client = OpenSearch(hosts=[URL], timeout=60, max_retries=0, retry_on_timeout=False)
    error: Exception | None = None
    try:
        info = client.info(request_timeout=10)
        # `timeout` as a keyword is opensearch-py's request timeout; the API's own goes in params
        health = client.cluster.health(params={"wait_for_status": "yellow", "timeout": "10s"}, request_timeout=20)
        plugins = client.cat.plugins(format="json")
    except Exception as exc:
        error = exc
    if error is not None:
        pytest.fail(
            f"OpenSearch is not reachable at {URL} ({type(error).__name__}: {error}). Start it with "
            "`.venv/bin/python -m local.opensearch start` or point OPENSEARCH_URL at a running server.",
            pytrace=False,
        )
    if health.get("status") not in ("yellow", "green"):
        pytest.fail(f"OpenSearch at {URL} is {health.get('status')}", pytrace=False)
    components = {p["component"] for p in plugins}
    if "opensearch-knn" not in components:
        pytest.fail(f"OpenSearch {info['version']['number']} at {URL} lacks the k-NN plugin: {components}")
    return client


def _bulk_ndjson(index: str, ids: list[str], vectors: np.ndarray, tenants: list[str]) -> str:
    lines: list[str] = []
    for doc_id, vector, tenant in zip(ids, vectors.tolist(), tenants, strict=True):
        lines.append(json.dumps({"index": {"_index": index, "_id": doc_id}}))
        lines.append(json.dumps({"embedding": vector, "tenant": tenant, "doc": doc_id, "text": f"chunk {doc_id}"}))
    return "\n".join(lines) + "\n"


def _bulk(client: OpenSearch, body: str) -> None:
    response = client.bulk(body=body)
    assert not response["errors"], [i for i in response["items"] if "error" in next(iter(i.values()))][:3]


def _round(vectors: np.ndarray) -> np.ndarray:
    # 3 decimals: short JSON, and the float32 that Lucene stores is within 1e-7 of what numpy uses.
    return np.round(vectors, 3)


def _random_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    return _round(rng.standard_normal((n, DIM)))


def _embedding_like(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    """Random points around random cluster centres: text embeddings are clustered, not isotropic noise.

    (On isotropic Gaussian noise HNSW needs ef_search ~500 for recall@10 0.95 at 10k x 384-d; see
    docs/opensearch-local.md.)
    """
    return _round(centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, DIM)))


@pytest.fixture(scope="module")
def corpus() -> Iterator[Corpus]:
    client = _client()
    index = f"test-knn-{uuid.uuid4().hex[:12]}"
    rng = np.random.default_rng(SEED)
    centres = rng.standard_normal((N_CLUSTERS, DIM))
    vectors = _embedding_like(rng, centres, N_DOCS)
    tenants = rng.choice(np.array(TENANTS), size=N_DOCS)
    queries = _embedding_like(rng, centres, N_QUERIES)
    client.indices.create(
        index=index,
        body={
            "settings": {
                "index": {
                    "knn": True,
                    "number_of_shards": 1,
                    "number_of_replicas": 0,
                    "refresh_interval": "-1",  # one refresh after loading: fewer, larger HNSW segments
                }
            },
            "mappings": {
                "properties": {
                    "embedding": {
                        "type": "knn_vector",
                        "dimension": DIM,
                        "method": {
                            "name": "hnsw",
                            "space_type": "cosinesimil",
                            "engine": "lucene",
                            "parameters": {"m": 16, "ef_construction": 128},
                        },
                    },
                    "tenant": {"type": "keyword"},
                    "doc": {"type": "keyword"},
                    "text": {"type": "text"},
                }
            },
        },
    )
    try:
        started = time.monotonic()
        for lo in range(0, N_DOCS, BULK_CHUNK):
            hi = min(lo + BULK_CHUNK, N_DOCS)
            ids = [_doc_id(i) for i in range(lo, hi)]
            _bulk(client, _bulk_ndjson(index, ids, vectors[lo:hi], tenants[lo:hi].tolist()))
        client.indices.refresh(index=index)
        print(f"indexed {N_DOCS} x {DIM}-d vectors in {time.monotonic() - started:.1f}s")
        yield Corpus(client=client, index=index, vectors=vectors, tenants=tenants, queries=queries)
    finally:
        client.indices.delete(index=index, ignore_unavailable=True)


def _exact_top_k(vectors: np.ndarray, query: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[str]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = unit @ (query / np.linalg.norm(query))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.argsort(-scores, kind="stable")[:k]
    return [_doc_id(int(i)) for i in top]


def _knn(corpus: Corpus, query: np.ndarray, k: int, knn_filter: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    # lucene's default candidate list is k; ef_search widens it (k-NN >= 2.16 `method_parameters`)
    clause: dict[str, Any] = {"vector": query.tolist(), "k": k, "method_parameters": {"ef_search": EF_SEARCH}}
    if knn_filter is not None:
        clause["filter"] = knn_filter
    response = corpus.client.search(
        index=corpus.index,
        body={"size": k, "query": {"knn": {"embedding": clause}}, "_source": {"excludes": ["embedding"]}},
    )
    hits: list[dict[str, Any]] = response["hits"]["hits"]
    return hits


def _count(corpus: Corpus, query: dict[str, Any] | None = None) -> int:
    body = {"query": query} if query is not None else None
    return int(corpus.client.count(index=corpus.index, body=body)["count"])


def test_knn_recall_against_brute_force(corpus: Corpus) -> None:
    assert _count(corpus) == N_DOCS
    recalls = []
    for query in corpus.queries:
        got = [hit["_id"] for hit in _knn(corpus, query, K)]
        assert len(got) == K
        expected = _exact_top_k(corpus.vectors, query, K)
        recalls.append(len(set(got) & set(expected)) / K)
    mean_recall = float(np.mean(recalls))
    print(f"mean recall@{K} over {len(recalls)} queries: {mean_recall:.3f} (min {min(recalls):.2f})")
    assert mean_recall >= 0.95


def test_knn_efficient_filter_returns_only_matching_docs(corpus: Corpus) -> None:
    tenant = TENANTS[1]
    mask = corpus.tenants == tenant
    recalls = []
    for query in corpus.queries[:10]:
        hits = _knn(corpus, query, K, knn_filter={"term": {"tenant": tenant}})
        assert len(hits) == K
        assert {hit["_source"]["tenant"] for hit in hits} == {tenant}
        expected = _exact_top_k(corpus.vectors, query, K, mask=mask)
        recalls.append(len({hit["_id"] for hit in hits} & set(expected)) / K)
    print(f"filtered ({tenant}) mean recall@{K}: {np.mean(recalls):.3f}")
    assert float(np.mean(recalls)) >= 0.9


def test_overwrite_by_id_does_not_duplicate(corpus: Corpus) -> None:
    client, index = corpus.client, corpus.index
    doc_id = f"overwrite-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(1)
    first, second = _random_vectors(rng, 2)
    client.index(
        index=index, id=doc_id, body={"embedding": first.tolist(), "tenant": "t-ow", "doc": "v1"}, refresh=True
    )
    before = _count(corpus)
    client.index(
        index=index, id=doc_id, body={"embedding": second.tolist(), "tenant": "t-ow", "doc": "v2"}, refresh=True
    )
    assert _count(corpus) == before
    assert _count(corpus, {"term": {"tenant": "t-ow"}}) == 1
    assert client.get(index=index, id=doc_id)["_source"]["doc"] == "v2"
    # the vector was replaced too: the new one is its own nearest neighbour within the tenant
    hits = _knn(corpus, second, 1, knn_filter={"term": {"tenant": "t-ow"}})
    assert [h["_id"] for h in hits] == [doc_id]
    assert hits[0]["_score"] == pytest.approx(1.0, abs=1e-3)  # cosinesimil score = (1 + cos) / 2
    client.delete(index=index, id=doc_id, refresh=True)


def test_delete_by_id(corpus: Corpus) -> None:
    client, index = corpus.client, corpus.index
    rng = np.random.default_rng(2)
    vector = _random_vectors(rng, 1)[0]
    client.index(index=index, id="to-delete", body={"embedding": vector.tolist(), "tenant": "t-del"}, refresh=True)
    before = _count(corpus)
    client.delete(index=index, id="to-delete", refresh=True)
    assert _count(corpus) == before - 1
    with pytest.raises(NotFoundError):
        client.get(index=index, id="to-delete")
    assert "to-delete" not in {h["_id"] for h in _knn(corpus, vector, K)}


def test_delete_by_query(corpus: Corpus) -> None:
    client, index = corpus.client, corpus.index
    modules = {m["name"] for node in client.nodes.info(metric="plugins")["nodes"].values() for m in node["modules"]}
    assert "reindex" in modules, f"the reindex module (delete_by_query) is missing: {sorted(modules)}"
    before = _count(corpus)
    rng = np.random.default_rng(3)
    ids = [f"dbq-{i}" for i in range(5)]
    _bulk(client, _bulk_ndjson(index, ids, _random_vectors(rng, len(ids)), ["t-dbq"] * len(ids)))
    client.indices.refresh(index=index)
    assert _count(corpus) == before + len(ids)
    response = client.delete_by_query(index=index, body={"query": {"term": {"tenant": "t-dbq"}}}, refresh=True)
    assert response["deleted"] == len(ids)
    assert _count(corpus) == before
    assert _count(corpus, {"term": {"tenant": "t-dbq"}}) == 0
