"""make bench-vectors: the k-NN index's memory and retrieval quality per vector setting, on the real OpenSearch.

    .venv/bin/python -m bench.vector_settings [--chunks 100000] [--setting NAME ...] [--no-quality]

Per setting (float32, Lucene's 7-bit scalar quantization, sign bits by Hamming distance, truncated
vectors) it loads ``--chunks`` clustered vectors made from real passages (``bench.search_scale_data``)
into an index of its own with the product's mapping, flushes, and reads the vector files' sizes and
the k-NN stats; then ``make eval``'s in-process run (the same parse, chunk and search code) per split
scores k-NN and hybrid with that setting. Writes bench/results/vector-settings-<time>.json and drops
its indexes. Imports the domain package, ``bench``, ``eval``. Method, figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from opensearchpy import OpenSearch, helpers
from rag_ingest.adapters.vector_store import IndexSettings, VectorEncoding, VectorStore, connect
from rag_ingest.embeddings.base import Embedder
from rag_ingest.embeddings.factory import create_embedder
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.retrieval.search import SearchMode

from bench.search_scale import RESULTS, cached_vectors, load_average
from bench.search_scale_data import MIXED_WEIGHT, NOISE_SIGMA, OWN_WEIGHT, base_passages
from eval.retrieval import (
    EMBEDDINGS_CACHE,
    SPLITS,
    MemoEmbedder,
    in_process_index,
    load_questions,
    load_splits,
    pipeline_chunks,
    run_questions,
    score,
    split_corpus,
)

DEFAULT_OPENSEARCH = "http://127.0.0.1:9200"
DEFAULT_CHUNKS = 100_000
BASE_PASSAGES = 1000
#: The Chunk stage's shipped sizes (cdk.json chunking), as the ablation uses them.
CHUNK_TOKENS, OVERLAP_TOKENS = 300, 60
#: The eval's modes a vector setting can change (BM25 reads no vector).
MODES = (SearchMode.KNN, SearchMode.HYBRID)
#: Lucene's vector files: the HNSW graph and its metadata, raw vectors, 7-bit quantized vectors.
GRAPH_FILES = ("vex", "vem")
RAW_VECTOR_FILES = ("vec", "vemf")
QUANTIZED_VECTOR_FILES = ("veq", "vemq")


@dataclass(frozen=True)
class VectorSetting:
    name: str
    encoding: VectorEncoding
    #: Dimensions of the model's vector kept (its first ones, renormalised), or the bits of a binary one.
    dimension: int
    what: str


SETTINGS = (
    VectorSetting("float32", "float32", MINILM_DIMENSION, "today's mapping: 384 floats, lucene HNSW"),
    VectorSetting("sq7", "sq", MINILM_DIMENSION, "Lucene scalar quantization, 7 bits, of the same floats"),
    VectorSetting("binary", "binary", MINILM_DIMENSION, "sign bit of each of the 384 floats, Hamming distance"),
    VectorSetting("float32-192", "float32", 192, "the first 192 of 384 floats, renormalised (a proxy)"),
    VectorSetting("sq7-192", "sq", 192, "the first 192 floats, 7-bit scalar quantization (a proxy)"),
)


def shaped(vectors: npt.NDArray[np.float32], setting: VectorSetting) -> list[list[float]]:
    """``vectors`` as ``setting`` stores them: truncated and renormalised, or packed sign bits
    (signed bytes, what a ``binary`` knn_vector takes)."""
    if setting.encoding == "binary":
        return np.packbits(vectors[:, : setting.dimension] > 0, axis=1).astype(np.int8).tolist()
    kept = vectors[:, : setting.dimension].astype(np.float64)
    return (kept / np.linalg.norm(kept, axis=1, keepdims=True)).round(6).tolist()


class ShapedEmbedder:
    """The local model's vectors in ``setting``'s shape (queries and passages alike)."""

    def __init__(self, inner: Embedder, setting: VectorSetting) -> None:
        self._inner = inner
        self._setting = setting
        self.model_id = inner.model_id
        self.dimension = setting.dimension
        self.max_input_tokens = inner.max_input_tokens

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return shaped(np.asarray(self._inner.embed(texts), dtype=np.float32), self._setting)


def clustered_vectors(
    rng: np.random.Generator, count: int, passage_vectors: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """``bench.search_scale_data``'s chunk vectors: a real passage's, a little of another's, noise."""
    own = rng.integers(0, len(passage_vectors), count)
    mixed = rng.integers(0, len(passage_vectors), count)
    noise = rng.normal(0.0, NOISE_SIGMA, (count, passage_vectors.shape[1]))
    matrix = OWN_WEIGHT * passage_vectors[own] + MIXED_WEIGHT * passage_vectors[mixed] + noise
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def file_sizes(client: OpenSearch, index: str) -> dict[str, int]:
    """Bytes per Lucene file extension of the index's primaries (OpenSearch's segment file sizes)."""
    stats = client.indices.stats(index=index, metric="segments", params={"include_segment_file_sizes": "true"})
    segments = stats["indices"][index]["primaries"]["segments"]
    return {ext: int(entry["size_in_bytes"]) for ext, entry in segments.get("file_sizes", {}).items()}


def knn_graph_memory_kb(client: OpenSearch) -> int:
    """The k-NN plugin's native graph cache (KB) over all nodes: native engines only, lucene's is 0."""
    stats = client.transport.perform_request("GET", "/_plugins/_knn/stats")
    return sum(int(node.get("graph_memory_usage", 0)) for node in stats.get("nodes", {}).values())


def memory_pass(
    client: OpenSearch, setting: VectorSetting, vectors: npt.NDArray[np.float32], batch: int = 1000
) -> dict[str, Any]:
    """Load ``vectors`` in ``setting``'s shape into an index of the product's mapping; the vector
    files' bytes a chunk, the k-NN stats, the load's time."""
    name = f"rag-bench-vectors-{setting.name}-{uuid.uuid4().hex[:8]}"
    store = VectorStore(
        client, IndexSettings(name=name, dimension=setting.dimension, replicas=0, vector_encoding=setting.encoding)
    )
    tenant = f"vectors-{uuid.uuid4().hex[:8]}"
    store.ensure_index()
    try:
        client.indices.put_settings(index=name, body={"index": {"refresh_interval": "-1"}})
        started = time.monotonic()
        for start in range(0, len(vectors), batch):
            rows = shaped(vectors[start : start + batch], setting)
            actions = (
                {"_index": name, "_id": f"c{start + i}", "_source": {"tenant_id": tenant, "embedding": row}}
                for i, row in enumerate(rows)
            )
            helpers.bulk(client, actions, chunk_size=batch, request_timeout=600)
        client.indices.flush(index=name, params={"wait_if_ongoing": "true"}, request_timeout=1800)
        client.indices.refresh(index=name, request_timeout=1800)
        load_seconds = time.monotonic() - started
        sizes = file_sizes(client, name)
        count = int(client.count(index=name)["count"])
        segment_count = int(
            client.indices.stats(index=name, metric="segments")["indices"][name]["primaries"]["segments"]["count"]
        )
        graph_memory_kb = knn_graph_memory_kb(client)
    finally:
        store.drop_index()
    vector_files = QUANTIZED_VECTOR_FILES if setting.encoding == "sq" else RAW_VECTOR_FILES
    searched = sum(sizes.get(ext, 0) for ext in (*GRAPH_FILES, *vector_files))
    on_disk = sum(sizes.get(ext, 0) for ext in (*GRAPH_FILES, *RAW_VECTOR_FILES, *QUANTIZED_VECTOR_FILES))
    return {
        "chunks": count,
        "segments": segment_count,
        "load_seconds": round(load_seconds, 1),
        "file_bytes": {ext: size for ext, size in sorted(sizes.items()) if ext.startswith("ve")},
        "searched_bytes_per_chunk": round(searched / count, 1),
        "vector_files_bytes_per_chunk": round(on_disk / count, 1),
        "searched_mib_per_million": round(searched / count * 1e6 / 2**20, 1),
        "knn_stats_graph_memory_kb": graph_memory_kb,
        "load_average": load_average(),
    }


def documented_bytes_per_vector(setting: VectorSetting, m: int = 16) -> float:
    """OpenSearch's documented HNSW memory estimate a vector (docs/benchmarks.md cites each page)."""
    payload = {"float32": 4 * setting.dimension, "sq": setting.dimension, "binary": setting.dimension / 8}
    return 1.1 * (payload[setting.encoding] + 8 * m)


def quality_pass(endpoint: str, settings: Sequence[VectorSetting], splits: Sequence[str]) -> dict[str, Any]:
    """``make eval``'s in-process scores (k-NN and hybrid recall@5, MRR@10) per split and setting."""
    embedder = MemoEmbedder(create_embedder("local", LOCAL_MODEL_ID, MINILM_DIMENSION), EMBEDDINGS_CACHE)
    report: dict[str, Any] = {}
    for split in splits:
        corpus = split_corpus(split, load_splits(), load_questions())
        chunker = partial(pipeline_chunks, chunk_tokens=CHUNK_TOKENS, overlap_tokens=OVERLAP_TOKENS)
        chunks = {pdf: chunker(pdf) for pdf in corpus.pdfs}
        report[split] = {"questions": len(corpus.questions), "chunks": sum(map(len, chunks.values()))}
        for setting in settings:
            with in_process_index(
                endpoint,
                ShapedEmbedder(embedder, setting),
                name_prefix=f"rag-bench-vectors-{split}",
                chunker=chunks.__getitem__,
                pdfs=corpus.pdfs,
                vector_encoding=setting.encoding,
            ) as index:
                runs = {mode: run_questions(corpus.questions, partial(index.search, mode=mode)) for mode in MODES}
                scores = {mode.value: score(corpus.questions, ranked) for mode, ranked in runs.items()}
            report[split][setting.name] = {mode: asdict(s) for mode, s in scores.items()}
            row = ", ".join(f"{mode} R@5 {s.recall_at_5:.3f} MRR {s.mrr_at_10:.3f}" for mode, s in scores.items())
            print(f"  {split} {setting.name}: {row}", flush=True)
    return report


def table(report: dict[str, Any]) -> str:
    """The docs' table: memory a million chunks (measured, documented) and quality per setting."""
    lines = [
        "| setting | measured MiB / 1M chunks (graph + searched vectors) | documented estimate MiB / 1M "
        "| test k-NN MRR | test hybrid R@5 | test hybrid MRR | dev k-NN MRR | dev hybrid R@5 | dev hybrid MRR |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    quality = report.get("quality", {})
    for setting in report["settings"]:
        name = setting["name"]
        memory = report["memory"].get(name, {})
        cells = [name, str(memory.get("searched_mib_per_million", "-")), str(setting["documented_mib_per_million"])]
        for split in ("test", "dev"):
            scores = quality.get(split, {}).get(name)
            if scores is None:
                cells += ["-", "-", "-"]
                continue
            knn, hybrid = scores["knn"], scores["hybrid"]
            cells += [f"{knn['mrr_at_10']:.3f}", f"{hybrid['recall_at_5']:.3f}", f"{hybrid['mrr_at_10']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="vectors loaded per setting")
    parser.add_argument("--setting", action="append", choices=[s.name for s in SETTINGS], help="default: all")
    parser.add_argument("--split", action="append", choices=SPLITS, help="eval splits (default: both)")
    parser.add_argument("--no-quality", action="store_true", help="measure memory only")
    parser.add_argument("--no-memory", action="store_true", help="measure quality only")
    parser.add_argument("--seed", type=int, default=47)
    args = parser.parse_args(argv)
    endpoint = os.environ.get("OPENSEARCH_URL", "").strip() or DEFAULT_OPENSEARCH
    settings = [s for s in SETTINGS if not args.setting or s.name in args.setting]
    report: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "opensearch": endpoint,
        "settings": [
            {
                **asdict(s),
                "documented_bytes_per_vector": round(documented_bytes_per_vector(s), 1),
                "documented_mib_per_million": round(documented_bytes_per_vector(s) * 1e6 / 2**20, 1),
            }
            for s in settings
        ],
        "memory": {},
        "load_average_start": load_average(),
    }
    if not args.no_memory:
        from rag_ingest.embeddings.local import LocalMiniLMEmbedder

        passages = base_passages(BASE_PASSAGES)
        passage_vectors = cached_vectors(LocalMiniLMEmbedder(), [p.text for p in passages])
        vectors = clustered_vectors(np.random.default_rng(args.seed), args.chunks, passage_vectors)
        client = connect(endpoint)
        for setting in settings:
            report["memory"][setting.name] = memory_pass(client, setting, vectors)
            print(f"  memory {setting.name}: {report['memory'][setting.name]}", flush=True)
    if not args.no_quality:
        report["quality"] = quality_pass(endpoint, settings, args.split or SPLITS)
    report["load_average_end"] = load_average()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"vector-settings-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n{table(report)}\n\nwritten to {path}")
    return report


if __name__ == "__main__":
    main()
