"""make bench-search: POST /search latency and k-NN recall@10 at 100,000 chunks, through the local stack.

    .venv/bin/python -m bench.search_scale [--chunks 100000] [--queries 200]

Loads synthetic chunks (``bench.search_scale_data``) for two tenants into an index of its own behind a
fresh local stack, times ``POST /search`` per mode (knn, bm25, hybrid; filtered and not; hybrid with
and without rerank), splits a request's time in process (OpenSearch's ``took``, the query embedding)
and measures k-NN recall@10 against exact search per ``ef_search``; every passage must be the caller
tenant's. Writes bench/results/search-scale-<time>.json, then drops its index and stack; it only
measures. Imports the domain package, ``local``, ``eval.stack``. Method, figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import numpy as np
from opensearchpy import OpenSearch, Urllib3HttpConnection
from rag_ingest.adapters.vector_store import IndexSettings, VectorStore
from rag_ingest.core.config import FusionEnv, IndexParamsEnv
from rag_ingest.embeddings.base import BEDROCK_PROVIDER, LOCAL_MODEL_ID, MINILM_DIMENSION, Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import SearchMode, search_passages
from rag_ingest.wiring import index_settings_for, vector_store_for

from bench.search_scale_data import (
    SyntheticChunks,
    Vectors,
    base_passages,
    bulk_load,
    check_shape,
    customer_name,
    synthesize,
)
from eval.stack import eval_template
from local.client import OfflineClient
from local.embedding_server.batcher import Lane as EmbeddingLane
from local.embedding_server.server import lane_endpoint
from local.runtime.harness import OfflineStackProcess
from local.runtime.settings import DEFAULT_OPENSEARCH_URL, REPO_ROOT, stack_name_from_cdk_json

RESULTS = REPO_ROOT / "bench" / "results"
QUESTIONS = REPO_ROOT / "eval" / "questions.json"
#: The real passages' vectors between runs (.local/ is the local stack's, never committed).
VECTOR_CACHE = REPO_ROOT / ".local" / "bench-search"
DEFAULT_CHUNKS = 100_000
RESULTS_PER_QUERY = 10
MODES = (SearchMode.KNN, SearchMode.BM25, SearchMode.HYBRID)
#: ef_search values measured besides the configured one (lucene explores max(ef_search, k)).
EF_SEARCH_SWEEP = (40, 100, 200, 400)
#: Requests the second tenant makes per mode, only to check that it sees its own chunks only.
OTHER_TENANT_QUERIES = 5
#: How long each mode is warmed up through the API before it is timed: a newly started OpenSearch
#: searches slower for its first thousand or two searches (docs/benchmarks.md, the runs of 15:03).
DEFAULT_WARMUP_SECONDS = 60.0
#: The warm-up's first and last requests whose medians the report keeps.
WARMUP_EDGE = 50
#: The filtered pass cycles through this many customers, each 1 % of the main tenant's chunks
#: (bench.search_scale_data.synthetic_metadata), so OpenSearch's filter cache holds more than one.
FILTERED_CUSTOMERS = 10


@dataclass(frozen=True)
class Options:
    chunks: int
    other_chunks: int
    base_passages: int
    queries: int
    warmup: int
    warmup_seconds: float
    ef_values: tuple[int, ...]
    seed: int
    timeout: float
    merge_timeout: float


#: The benchmark measures chunk retrieval: every request asks for the matched chunks, not sections.
CHUNKS = "none"


def summary(values: Sequence[float]) -> dict[str, float]:
    """Percentiles (ms) of ``values``; an empty list gives zeros (a mode with nothing to split)."""
    data = np.asarray(values, dtype=np.float64) if values else np.zeros(1)
    return {
        "n": len(values),
        "p50": round(float(np.percentile(data, 50)), 2),
        "p95": round(float(np.percentile(data, 95)), 2),
        "p99": round(float(np.percentile(data, 99)), 2),
        "mean": round(float(data.mean()), 2),
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_times() -> list[int] | None:
    """The machine's CPU time counters (the ``cpu`` line of /proc/stat), or None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    return [int(field) for field in fields[1:]] if fields and fields[0] == "cpu" else None


def steal_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of CPU time the hypervisor gave to other guests between two ``cpu_times()``: on a
    shared VM it stretches every request, so a latency figure is read with it."""
    if before is None or after is None or min(len(before), len(after)) < 8:
        return None
    deltas = [later - earlier for earlier, later in zip(before[:8], after[:8], strict=True)]
    total = sum(deltas)  # user, nice, system, idle, iowait, irq, softirq, steal (guest is in user)
    return round(deltas[7] / total, 3) if total > 0 else None


#: Iterations of the reference loop (its time on this machine: docs/benchmarks.md, bench-search).
REFERENCE_LOOP_ITERATIONS = 200_000


def reference_loop_ms(repeats: int = 50) -> dict[str, float]:
    """A fixed pure-Python loop, timed ``repeats`` times: its best and median milliseconds. On a
    shared VM the same CPU work takes up to about twice its best time while steal stays near 0
    (another guest on the vCPU's host core shows as slower execution, not as stolen time), and
    every request of the pass after it is as much slower."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for number in range(REFERENCE_LOOP_ITERATIONS):
            total += number * number
        times.append((time.perf_counter() - started) * 1000)
    return {"best": round(min(times), 2), "p50": round(statistics.median(times), 2)}


def question_texts(count: int) -> list[str]:
    """``count`` queries: the eval's questions in order, cycled when ``count`` is larger."""
    questions = [str(q["question"]) for q in json.loads(QUESTIONS.read_text())]
    return list(itertools.islice(itertools.cycle(questions), count))


class TookRecordingClient(OpenSearch):
    """An OpenSearch client that keeps each search's ``took`` (ms, as OpenSearch measured it)."""

    def __init__(self, url: str) -> None:
        if not url.startswith("http://"):
            raise SystemExit(f"the benchmark runs against a local OpenSearch (http://host:port), not {url}")
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        super().__init__(hosts=[{"host": host, "port": int(port)}], connection_class=Urllib3HttpConnection, timeout=60)
        self.took_ms: list[int] = []

    def search(self, body: Any = None, index: Any = None, params: Any = None, headers: Any = None) -> Any:
        response = super().search(body=body, index=index, params=params, headers=headers)
        self.took_ms.append(int(response["took"]))
        return response


class TimedEmbedder:
    """Wraps the API's embedder (Bedrock's client against the local embedding server): seconds per call."""

    def __init__(self, url: str) -> None:
        bedrock = boto3.client(
            "bedrock-runtime",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        self._inner = create_embedder(BEDROCK_PROVIDER, LOCAL_MODEL_ID, MINILM_DIMENSION, bedrock)
        self.model_id = self._inner.model_id
        self.dimension = self._inner.dimension
        self.max_input_tokens = self._inner.max_input_tokens
        self.seconds: list[float] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = self._inner.embed(texts)
        self.seconds.append(time.perf_counter() - started)
        return vectors


def function_environment(template: dict[str, Any], variable: str) -> dict[str, str]:
    """The (string) environment of the API function (the one that searches and takes uploads)
    if it sets ``variable``."""
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") != "AWS::Lambda::Function":
            continue
        variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        if variable in variables and "MAX_UPLOAD_BYTES" in variables:
            return {name: value for name, value in variables.items() if isinstance(value, str)}
    raise SystemExit(f"the API function in the template does not set {variable}: synthesize again (make synth)")


def exact_top_ids(query_vectors: Vectors, chunks: SyntheticChunks, k: int) -> list[list[str]]:
    """The exact k nearest chunks of one tenant by cosine (the vectors are unit length: a dot product)."""
    scores = query_vectors @ chunks.vectors.T
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    ordered = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1), axis=1)
    return [[chunks.ids[i] for i in row] for row in ordered]


def unfiltered_hits_of_other_tenant(query_vectors: Vectors, main: SyntheticChunks, other: SyntheticChunks) -> int:
    """Queries whose exact top 10 over both tenants, without a filter, holds a chunk of ``other``:
    what a search that dropped the tenant filter would leak."""
    scores = query_vectors @ np.vstack([main.vectors, other.vectors]).T
    top = np.argpartition(-scores, RESULTS_PER_QUERY, axis=1)[:, :RESULTS_PER_QUERY]
    return int(np.any(top >= len(main), axis=1).sum())


def recall_at(found: Sequence[Sequence[str]], exact: Sequence[Sequence[str]]) -> float:
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact, strict=True)]))


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return (time.perf_counter() - started) * 1000, result


def warm_up(send: Callable[[str], None], queries: Sequence[str], count: int, seconds: float) -> dict[str, Any]:
    """Untimed requests, cycling through ``queries``: at least ``count`` and for at least
    ``seconds``. A freshly started OpenSearch answers its first thousand or so searches slower
    while its JVM compiles the search code (docs/benchmarks.md); the figures are for a node that has
    run a while. What the warm-up saw is kept: its first and last requests' medians."""
    latencies: list[float] = []
    started = time.monotonic()
    for query in itertools.cycle(queries):
        if len(latencies) >= count and time.monotonic() - started >= seconds:
            break
        ms, _ = timed(functools.partial(send, query))
        latencies.append(ms)
    edge = max(1, min(WARMUP_EDGE, len(latencies) // 2))
    return {
        "requests": len(latencies),
        "seconds": round(time.monotonic() - started, 1),
        "first_p50": round(float(np.median(latencies[:edge])), 2) if latencies else None,
        "last_p50": round(float(np.median(latencies[-edge:])), 2) if latencies else None,
    }


def api_pass(client: OfflineClient, queries: Sequence[str], options: Options, own_ids: set[str]) -> dict[str, Any]:
    """``POST /search`` per mode: end-to-end ms, the k-NN result ids, and passages of another tenant."""
    report: dict[str, Any] = {
        "latency_ms": {},
        "warmup": {},
        "steal_share": {},
        "reference_loop_ms": {},
        "knn_ids": [],
        "passages_checked": 0,
        "foreign_passages": 0,
    }
    for mode in MODES:

        def send(query: str, mode: SearchMode = mode) -> None:
            client.search(query, k=RESULTS_PER_QUERY, expand=CHUNKS, mode=mode.value).raise_for_status()

        report["warmup"][mode.value] = warm_up(send, queries, options.warmup, options.warmup_seconds)
        report["reference_loop_ms"][mode.value] = reference_loop_ms()
        cpu_before = cpu_times()
        latencies: list[float] = []
        for query in queries:
            started = time.perf_counter()
            response = client.search(query, k=RESULTS_PER_QUERY, expand=CHUNKS, mode=mode.value)
            ms = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"POST /search ({mode}) answered {response.status_code}: {response.text[:300]}")
            latencies.append(ms)
            passages = response.json()["passages"]
            ids = [p["chunk_id"] for p in passages] + [c["chunk_id"] for p in passages for c in p["copies"]]
            report["passages_checked"] += len(ids)
            report["foreign_passages"] += sum(1 for i in ids if i not in own_ids)
            if mode is SearchMode.KNN:
                report["knn_ids"].append([p["chunk_id"] for p in passages])
        report["latency_ms"][mode.value] = summary(latencies)
        report["steal_share"][mode.value] = steal_share(cpu_before, cpu_times())
        print(
            f"  API {mode.value}: {report['latency_ms'][mode.value]}, steal {report['steal_share'][mode.value]}, "
            f"reference loop before it {report['reference_loop_ms'][mode.value]} ms; warm-up "
            f"{report['warmup'][mode.value]}",
            flush=True,
        )
    return report


def customer_filter(number: int) -> dict[str, Any]:
    """The RetrievalFilter of one synthetic customer: 1 % of the main tenant's chunks."""
    return {"equals": {"key": "customer", "value": customer_name(number)}}


def filtered_pass(
    client: OfflineClient, queries: Sequence[str], options: Options, main: SyntheticChunks
) -> dict[str, Any]:
    """``POST /search`` per mode with a filter selecting 1 % of the main tenant's chunks (query i
    filters on customer i mod FILTERED_CUSTOMERS), each request paired with the same query
    unfiltered, in alternating order, so a change in the machine's load weighs on both alike: end-to-end
    ms of both, responses with fewer than k passages, and passages outside the filter (which must be
    none: the filter runs inside both legs)."""
    customer_of = {chunk_id: metadata["customer"] for chunk_id, metadata in zip(main.ids, main.metadata, strict=True)}
    shares = [
        sum(1 for name in customer_of.values() if name == customer_name(number)) / len(main)
        for number in range(FILTERED_CUSTOMERS)
    ]
    report: dict[str, Any] = {
        "customers": FILTERED_CUSTOMERS,
        "selected_share_of_chunks": {"min": round(min(shares), 4), "max": round(max(shares), 4)},
        "latency_ms": {},
        "paired_unfiltered_latency_ms": {},
        "p95_over_unfiltered": {},
        "short_responses": {},
        "passages_checked": 0,
        "passages_outside_filter": 0,
    }
    for mode in MODES:

        def send(query: str, mode: SearchMode = mode) -> None:
            where = customer_filter(queries.index(query))
            client.search(query, k=RESULTS_PER_QUERY, expand=CHUNKS, mode=mode.value, filter=where).raise_for_status()

        warm_up(send, queries, options.warmup, options.warmup_seconds)
        filtered_ms: list[float] = []
        unfiltered_ms: list[float] = []
        short = 0
        for number, query in enumerate(queries):
            wanted = customer_name(number)
            for filtered in (True, False) if number % 2 == 0 else (False, True):
                where = customer_filter(number) if filtered else None
                started = time.perf_counter()
                response = client.search(query, k=RESULTS_PER_QUERY, expand=CHUNKS, mode=mode.value, filter=where)
                ms = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    answer = f"{response.status_code}: {response.text[:300]}"
                    raise RuntimeError(f"POST /search ({mode}, filtered {filtered}) answered {answer}")
                if not filtered:
                    unfiltered_ms.append(ms)
                    continue
                filtered_ms.append(ms)
                passages = response.json()["passages"]
                short += len(passages) < RESULTS_PER_QUERY
                ids = [p["chunk_id"] for p in passages] + [c["chunk_id"] for p in passages for c in p["copies"]]
                report["passages_checked"] += len(ids)
                report["passages_outside_filter"] += sum(1 for i in ids if customer_of.get(i) != wanted)
        filtered_summary, unfiltered_summary = summary(filtered_ms), summary(unfiltered_ms)
        report["latency_ms"][mode.value] = filtered_summary
        report["paired_unfiltered_latency_ms"][mode.value] = unfiltered_summary
        base = unfiltered_summary["p95"]
        report["p95_over_unfiltered"][mode.value] = round(filtered_summary["p95"] / base, 3) if base else None
        report["short_responses"][mode.value] = short
        print(
            f"  API {mode.value} filtered (1 %): {filtered_summary}, paired unfiltered {unfiltered_summary}, "
            f"short {short}",
            flush=True,
        )
    return report


#: The rerank pass's mode label: hybrid search with its rerank stage on.
RERANK_MODE = "hybrid+rerank"


def rerank_pass(client: OfflineClient, queries: Sequence[str], options: Options) -> dict[str, Any]:
    """``POST /search`` in hybrid mode with ``"rerank": true``, each request paired with the same query
    ``"rerank": false`` in alternating order (a change in load weighs on both alike): both latencies,
    and what reranking adds, as the difference of the percentiles and the percentiles of the paired
    per-query differences."""

    def send(query: str, rerank: bool) -> float:
        started = time.perf_counter()
        response = client.search(query, k=RESULTS_PER_QUERY, expand=CHUNKS, mode=SearchMode.HYBRID.value, rerank=rerank)
        ms = (time.perf_counter() - started) * 1000
        if response.status_code != 200 or response.json().get("reranked") is not rerank:
            answer = f"{response.status_code}: {response.text[:300]}"
            raise RuntimeError(f"POST /search (hybrid, rerank {rerank}) answered {answer}")
        return ms

    def send_reranked(query: str) -> None:
        send(query, True)

    warm_up(send_reranked, queries, options.warmup, options.warmup_seconds)
    reranked_ms: list[float] = []
    plain_ms: list[float] = []
    for number, query in enumerate(queries):
        for rerank in (True, False) if number % 2 == 0 else (False, True):
            (reranked_ms if rerank else plain_ms).append(send(query, rerank))
    reranked, plain = summary(reranked_ms), summary(plain_ms)
    added = summary([with_rerank - without for with_rerank, without in zip(reranked_ms, plain_ms, strict=True)])
    report = {
        "mode": RERANK_MODE,
        "latency_ms": reranked,
        "paired_hybrid_latency_ms": plain,
        "added_ms": {"p50": round(reranked["p50"] - plain["p50"], 2), "p95": round(reranked["p95"] - plain["p95"], 2)},
        "paired_difference_ms": added,
    }
    print(f"  API {RERANK_MODE}: {reranked}, paired hybrid {plain}, added {report['added_ms']}", flush=True)
    return report


def print_rerank_report(rerank: dict[str, Any]) -> None:
    api, paired, added = rerank["latency_ms"], rerank["paired_hybrid_latency_ms"], rerank["added_ms"]
    print(
        f"{RERANK_MODE} {api['n']:>4} p50 {api['p50']} p95 {api['p95']} p99 {api['p99']} | paired hybrid p50 "
        f"{paired['p50']} p95 {paired['p95']} | reranking adds p50 {added['p50']} ms, p95 {added['p95']} ms "
        f"(paired per-query difference p50 {rerank['paired_difference_ms']['p50']}, "
        f"p95 {rerank['paired_difference_ms']['p95']} ms)"
    )


def isolation_of_other_tenant(client: OfflineClient, queries: Sequence[str], own_ids: set[str]) -> dict[str, int]:
    """The second tenant's searches see only its own chunks."""
    checked = foreign = 0
    for mode, query in itertools.product(MODES, queries):
        response = client.search(query, k=RESULTS_PER_QUERY, expand=CHUNKS, mode=mode.value)
        response.raise_for_status()
        ids = [p["chunk_id"] for p in response.json()["passages"]]
        checked += len(ids)
        foreign += sum(1 for i in ids if i not in own_ids)
    return {"passages_checked": checked, "foreign_passages": foreign}


def direct_pass(
    store: VectorStore,
    took: TookRecordingClient,
    embedder: TimedEmbedder,
    tenant_id: str,
    queries: Sequence[str],
    warmup: int,
    depth: int,
) -> dict[str, Any]:
    """The product's search code in process: OpenSearch's took and the query embedding, per request."""
    report: dict[str, Any] = {}
    for mode in MODES:
        for query in queries[:warmup]:
            search_passages(
                store, embedder, SearchQuery(tenant_id=tenant_id, text=query, k=RESULTS_PER_QUERY, mode=mode)
            )
        took.took_ms.clear()
        embedder.seconds.clear()
        walls: list[float] = []
        tooks: list[float] = []
        for query in queries:
            before = len(took.took_ms)
            started = time.perf_counter()
            search_passages(
                store, embedder, SearchQuery(tenant_id=tenant_id, text=query, k=RESULTS_PER_QUERY, mode=mode)
            )
            walls.append((time.perf_counter() - started) * 1000)
            tooks.append(float(sum(took.took_ms[before:])))
        embed_ms = [s * 1000 for s in embedder.seconds]
        report[mode.value] = {
            "in_process_ms": summary(walls),
            "opensearch_took_ms": summary(tooks),
            "query_embedding_ms": summary(embed_ms),
            "opensearch_requests_per_search": len(took.took_ms) / len(queries),
        }
        print(f"  in process {mode.value}: took {report[mode.value]['opensearch_took_ms']}", flush=True)
    report["candidates_per_leg"] = depth
    return report


def ef_sweep(
    settings: IndexSettings,
    took: TookRecordingClient,
    tenant_id: str,
    query_vectors: Vectors,
    exact: list[list[str]],
    values: Sequence[int],
    depth: int,
) -> list[dict[str, Any]]:
    """Recall@10 and took of the k-NN leg as the API asks it (k = ``depth``), per ``ef_search``."""
    rows = []
    for ef in values:
        probe = VectorStore(took, replace(settings, ef_search=ef))
        found: list[list[str]] = []
        for vector in query_vectors[: min(5, len(query_vectors))]:  # warm-up of this setting
            probe.knn_search(SearchQuery(tenant_id=tenant_id, text=""), vector.tolist(), k=depth)
        took.took_ms.clear()
        for vector in query_vectors:
            hits = probe.knn_search(SearchQuery(tenant_id=tenant_id, text=""), vector.tolist(), k=depth)
            found.append([hit.chunk_id for hit in hits[:RESULTS_PER_QUERY]])
        rows.append(
            {
                "ef_search": ef,
                "effective_ef": max(ef, depth),
                "recall_at_10": round(recall_at(found, exact), 4),
                "took_ms": summary([float(t) for t in took.took_ms]),
            }
        )
        print(f"  ef_search {ef}: recall@10 {rows[-1]['recall_at_10']}, took {rows[-1]['took_ms']}", flush=True)
    return rows


def wait_for_merges(client: OpenSearch, index: str, timeout: float) -> float:
    """Seconds until ``index`` has no merge running (twice in a row, a second apart). A bulk load
    leaves merges behind that rebuild HNSW graphs for minutes, on the same two cores as the
    searches: measured through them, the latency is the load's, not the index's."""
    started = time.monotonic()
    idle = 0
    while idle < 2:
        if time.monotonic() - started > timeout:
            raise SystemExit(f"{index} was still merging after {timeout:.0f} s")
        stats = client.indices.stats(index=index, metric="merge")["indices"][index]["primaries"]
        idle = idle + 1 if int(stats["merges"]["current"]) == 0 else 0
        time.sleep(1)
    return round(time.monotonic() - started, 1)


def index_stats(client: OpenSearch, index: str) -> dict[str, Any]:
    stats = client.indices.stats(index=index, metric="docs,store,segments")["indices"][index]["primaries"]
    settings = client.indices.get_settings(index=index, include_defaults=True, flat_settings=True)[index]

    def setting(name: str) -> Any:
        # The index's own value, else the default it follows.
        return settings["settings"].get(name) or settings.get("defaults", {}).get(name)

    return {
        "docs": int(stats["docs"]["count"]),
        "segments": int(stats["segments"]["count"]),
        "store_bytes": int(stats["store"]["size_in_bytes"]),
        # Whether its segments (one HNSW graph each) are searched in parallel, and how far they merge.
        "concurrent_segment_search": setting("index.search.concurrent_segment_search.mode"),
        "merge_segments_per_tier": setting("index.merge.policy.segments_per_tier"),
        "merge_floor_segment": setting("index.merge.policy.floor_segment"),
    }


@dataclass(frozen=True)
class Workload:
    """What the benchmark loads and asks: both tenants' chunks, the queries and their vectors."""

    passages: int
    main: SyntheticChunks
    other: SyntheticChunks
    queries: list[str]
    unique_queries: list[str]
    query_vectors: Vectors  # row i embeds unique_queries[i] (in process, the stack's model)


def cached_vectors(model: Embedder, texts: Sequence[str]) -> Vectors:
    """``model``'s vectors of ``texts``, kept in VECTOR_CACHE by the texts' and the model's hash:
    a few thousand passages take minutes on a busy 2-core machine, and a rerun needs the same ones."""
    key = hashlib.sha256("\0".join([model.model_id, *texts]).encode()).hexdigest()[:16]
    path = VECTOR_CACHE / f"passages-{key}.npy"
    if path.is_file():
        return np.asarray(np.load(path), dtype=np.float32)
    vectors = np.asarray(model.embed(texts), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def prepare(options: Options) -> Workload:
    from rag_ingest.embeddings.local import LocalMiniLMEmbedder

    rng = np.random.default_rng(options.seed)
    passages = base_passages(options.base_passages)
    queries = question_texts(options.queries)
    unique_queries = list(dict.fromkeys(queries))
    model = LocalMiniLMEmbedder()
    passage_vectors = cached_vectors(model, [p.text for p in passages])
    query_vectors = np.asarray(model.embed(unique_queries), dtype=np.float32)
    taken: set[str] = set()
    tenant = f"scale-{uuid.uuid4().hex[:8]}"
    main = synthesize(rng, tenant, options.chunks, passages, passage_vectors, taken)
    other = synthesize(rng, f"{tenant}-other", options.other_chunks, passages, passage_vectors, taken)
    return Workload(len(passages), main, other, queries, unique_queries, query_vectors)


def run(options: Options) -> dict[str, Any]:
    source = REPO_ROOT / "cdk.out" / f"{stack_name_from_cdk_json(REPO_ROOT)}.template.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: synthesize first (make synth)")
    loads: dict[str, list[float]] = {"start": load_average()}
    phases: dict[str, float] = {}
    template_json = json.loads(source.read_text())
    api_env = function_environment(template_json, "OPENSEARCH_EF_SEARCH")
    index_params = IndexParamsEnv.from_env(api_env)
    depth = FusionEnv.from_env(api_env).fusion.candidates_for(RESULTS_PER_QUERY)
    index_name = f"rag-bench-search-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="rag-bench-search-") as work:
        template = Path(work) / "template.json"
        template.write_text(json.dumps(eval_template(source, index_name)))
        process = OfflineStackProcess(Path(work) / "state", template=template)
        opensearch_url = process.env.get("OPENSEARCH_URL") or DEFAULT_OPENSEARCH_URL
        store = vector_store_for(opensearch_url, index_name, MINILM_DIMENSION, index_params)
        try:
            # The stack starts while the texts are read and embedded (neither is timed).
            with ThreadPoolExecutor(max_workers=1) as pool:
                starting = pool.submit(process.start, options.timeout)
                started = time.perf_counter()
                workload = prepare(options)
                phases["texts_and_vectors_s"] = round(time.perf_counter() - started, 1)
                outputs = starting.result()
            main, other, queries = workload.main, workload.other, workload.queries
            unique_queries, query_vectors = workload.unique_queries, workload.query_vectors
            print(
                f"{workload.passages} real passages embedded; {len(main)} + {len(other)} chunks made "
                f"({phases['texts_and_vectors_s']} s)",
                flush=True,
            )
            store.ensure_index()
            check_shape(store.mapping(), main)
            took_client = TookRecordingClient(opensearch_url)
            loads["before_load"] = load_average()
            load_ms, written = timed(lambda: bulk_load(took_client, index_name, [main, other]))
            phases["bulk_load_s"] = round(load_ms / 1000, 1)
            merges_s = wait_for_merges(took_client, index_name, options.merge_timeout)
            # The commit lets the merge policy look again; the merges it starts then are waited for too.
            took_client.indices.flush(index=index_name)
            merges_s += wait_for_merges(took_client, index_name, options.merge_timeout)
            phases["merges_settled_s"] = round(merges_s, 1)
            # A shard nobody searched for 30 s skips its scheduled refreshes: without this one the
            # segment count would be the pre-merge reader's until the warm-up's first search.
            took_client.indices.refresh(index=index_name)
            stats = index_stats(took_client, index_name)
            print(
                f"loaded {written} chunks in {phases['bulk_load_s']} s, merges settled after "
                f"{phases['merges_settled_s']} s: {stats}",
                flush=True,
            )

            loads["before_api"] = load_average()
            client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=main.tenant_id)
            api = api_pass(client, queries, options, set(main.ids))
            filtered = filtered_pass(client, queries, options, main)
            reranked = rerank_pass(client, queries, options)
            other_client = OfflineClient(api_url=outputs["ApiUrl"], tenant_id=other.tenant_id)
            other_isolation = isolation_of_other_tenant(
                other_client, unique_queries[:OTHER_TENANT_QUERIES], set(other.ids)
            )
            loads["after_api"] = load_average()

            status = process.control("GET", "/_local/status") or {}
            embedding_url = (status.get("embedding_server") or {}).get("url")
            if not embedding_url:
                raise SystemExit("the local stack runs no embedding server (LOCAL_EMBEDDING=in-process?)")
            # Where the API function's queries go: the server's query lane (local.runtime's worker
            # environment points the HTTP API's functions at it).
            embedder = TimedEmbedder(lane_endpoint(embedding_url, EmbeddingLane.QUERY))
            settings = index_settings_for(index_name, MINILM_DIMENSION, index_params)
            direct = direct_pass(
                VectorStore(took_client, settings),
                took_client,
                embedder,
                main.tenant_id,
                queries,
                options.warmup,
                depth,
            )

            exact = exact_top_ids(query_vectors, main, RESULTS_PER_QUERY)
            api_knn = {q: ids for q, ids in zip(queries, api["knn_ids"], strict=True)}
            api_recall = recall_at([api_knn[q] for q in unique_queries], exact)
            leak_chances = unfiltered_hits_of_other_tenant(query_vectors, main, other)
            sweep = ef_sweep(
                settings,
                took_client,
                main.tenant_id,
                query_vectors,
                exact,
                sorted({*options.ef_values, settings.ef_search}),
                depth,
            )
            loads["end"] = load_average()
        finally:
            process.stop()
            store.drop_index()

    knn_total = api["latency_ms"][SearchMode.KNN.value]["p50"]
    embed_p50 = direct[SearchMode.KNN.value]["query_embedding_ms"]["p50"]
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "load_average_1_5_15": loads},
        "options": asdict(options),
        "index": stats | {"name": index_name, "tenants": {"main": len(main), "other": len(other)}},
        "real_passages": workload.passages,
        "index_parameters": index_params.model_dump(),
        "ef_search_configured": settings.ef_search,
        "candidates_per_knn_request": depth,
        "phases_s": phases,
        "api_latency_ms": api["latency_ms"],
        "api_warmup": api["warmup"],
        "api_cpu_steal_share": api["steal_share"],
        "api_reference_loop_ms": api["reference_loop_ms"],
        "filtered": filtered,
        "rerank": reranked,
        "in_process": direct,
        "query_embedding_share_of_knn_p50": round(embed_p50 / knn_total, 3) if knn_total else None,
        "recall_at_10": {
            "api_knn": round(api_recall, 4),
            "ef_search": settings.ef_search,
            "queries": len(unique_queries),
            "sweep": sweep,
        },
        "tenant_isolation": {
            "main": {"passages_checked": api["passages_checked"], "foreign_passages": api["foreign_passages"]},
            "other": other_isolation,
            "queries_whose_unfiltered_top10_holds_other_tenant_chunks": leak_chances,
        },
    }


def print_report(result: dict[str, Any]) -> None:
    print(
        f"\n{result['index']['docs']} chunks indexed ({result['index']['tenants']}), "
        f"{result['index']['segments']} segments (concurrent segment search: "
        f"{result['index']['concurrent_segment_search']}; merge policy: "
        f"{result['index']['merge_segments_per_tier']} per tier, floor {result['index']['merge_floor_segment']}); "
        f"load average {result['machine']['load_average_1_5_15']}"
    )
    print(
        f"{'mode':<7} {'n':>4} {'API p50':>8} {'p95':>7} {'p99':>7} | {'took p50':>8} {'p95':>6} {'p99':>6} | "
        f"{'embed p50':>9} | steal | loop p50/best"
    )
    for mode in MODES:
        api = result["api_latency_ms"][mode.value]
        took = result["in_process"][mode.value]["opensearch_took_ms"]
        embed = result["in_process"][mode.value]["query_embedding_ms"]
        loop = result["api_reference_loop_ms"][mode.value]
        print(
            f"{mode.value:<7} {api['n']:>4} {api['p50']:>8} {api['p95']:>7} {api['p99']:>7} | {took['p50']:>8} "
            f"{took['p95']:>6} {took['p99']:>6} | {embed['p50'] if embed['n'] else '-':>9} | "
            f"{_percent(result['api_cpu_steal_share'][mode.value]):>5} | "
            f"{loop['p50']} / {loop['best']} ms"
        )
    for mode in MODES:
        warmup = result["api_warmup"][mode.value]
        print(
            f"warm-up {mode.value}: {warmup['requests']} requests in {warmup['seconds']} s, median of the "
            f"first {WARMUP_EDGE} {warmup['first_p50']} ms, of the last {WARMUP_EDGE} {warmup['last_p50']} ms"
        )
    filtered = result["filtered"]
    print(
        f"filtered (1 % of the chunks, {filtered['customers']} customers cycled, "
        f"{filtered['selected_share_of_chunks']}): p95 over unfiltered {filtered['p95_over_unfiltered']}; "
        f"short responses {filtered['short_responses']}; passages outside the filter "
        f"{filtered['passages_outside_filter']} of {filtered['passages_checked']}"
    )
    for mode in MODES:
        api, paired = filtered["latency_ms"][mode.value], filtered["paired_unfiltered_latency_ms"][mode.value]
        print(
            f"  {mode.value:<7} filtered {api['n']:>4} p50 {api['p50']} p95 {api['p95']} p99 {api['p99']} | "
            f"paired unfiltered p50 {paired['p50']} p95 {paired['p95']} p99 {paired['p99']}"
        )
    print_rerank_report(result["rerank"])
    recall = result["recall_at_10"]
    print(f"query embedding: {result['query_embedding_share_of_knn_p50']:.0%} of the k-NN p50")
    print(
        f"recall@10 of the API's k-NN vs exact: {recall['api_knn']} (ef_search {recall['ef_search']}, "
        f"k {result['candidates_per_knn_request']}, {recall['queries']} queries)"
    )
    for row in recall["sweep"]:
        print(
            f"  ef_search {row['ef_search']:>4}: recall@10 {row['recall_at_10']}, took p50 {row['took_ms']['p50']} "
            f"p95 {row['took_ms']['p95']} ms"
        )
    print(f"tenant isolation: {result['tenant_isolation']}")


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="the main tenant's chunks")
    parser.add_argument("--other-chunks", type=int, help="the second tenant's chunks (default: a tenth of --chunks)")
    parser.add_argument("--base-passages", type=int, help="real passages embedded (default: chunks/20, 100-3000)")
    parser.add_argument("--queries", type=int, default=200, help="timed requests per mode")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests per mode first, at least")
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=DEFAULT_WARMUP_SECONDS,
        help="and for at least this long (a newly started OpenSearch is slower for its first searches)",
    )
    parser.add_argument("--ef", type=int, nargs="*", default=list(EF_SEARCH_SWEEP), help="ef_search values to measure")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--merge-timeout",
        type=float,
        default=1800,
        help="seconds the merges after the load may take (the merge policy makes a few large segments)",
    )
    parser.add_argument(
        "--output", type=Path, help="the results JSON (default: bench/results/search-scale-<time>.json)"
    )
    args = parser.parse_args(argv)
    options = Options(
        chunks=args.chunks,
        other_chunks=args.other_chunks if args.other_chunks is not None else max(1, args.chunks // 10),
        base_passages=args.base_passages or max(100, min(3000, args.chunks // 20)),
        queries=args.queries,
        warmup=args.warmup,
        warmup_seconds=args.warmup_seconds,
        ef_values=tuple(args.ef),
        seed=args.seed,
        timeout=args.timeout,
        merge_timeout=args.merge_timeout,
    )
    result = run(options)
    print_report(result)
    output = args.output or RESULTS / f"search-scale-{time.strftime('%Y%m%dT%H%M%S')}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2))
    print(f"written: {output}")
    return result


if __name__ == "__main__":
    main()
