"""Tune the local embedding server: chunks/s and peak RSS for one setting, as the Embed stage loads it.

``python -m bench.peers.embedding_server_tuning --threads 2 --max-batch 8 --workers 2 --concurrency 16``
starts an in-process server with the real MiniLM, then ``--workers`` simulated Embed workers send
batches of 16 texts (about 300 tokens each, from the repository's docs) through
``BedrockTitanEmbedder``, ``--concurrency`` texts in flight per call. One setting per process, so the
peak RSS (``ru_maxrss``) is that setting's. Figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config
from rag_ingest.core.tokens import count_tokens
from rag_ingest.embeddings.base import LOCAL_MODEL_ID, MINILM_DIMENSION
from rag_ingest.embeddings.bedrock import BedrockTitanEmbedder

from local.embedding_server.model import local_minilm
from local.embedding_server.server import EmbeddingServer
from local.embedding_server.settings import EmbeddingServerSettings
from local.runtime.settings import REPO_ROOT

EMBED_BATCH = 16  # the Embed stage's batch (StagesEnv.embed_batch_size)
TEXT_TOKENS = 300  # the stack's chunk size


def sample_texts(count: int) -> list[str]:
    """``count`` texts of at most TEXT_TOKENS tokens, cut from the repository's own docs."""
    words = " ".join(path.read_text() for path in sorted((REPO_ROOT / "docs").glob("*.md"))).split()
    texts: list[str] = []
    start = 0
    while len(texts) < count:
        size = 200
        while count_tokens(" ".join(words[start : start + size])) > TEXT_TOKENS:
            size -= 10
        texts.append(" ".join(words[start : start + size]))
        start = (start + 200) % (len(words) - 210)
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--chunks", type=int, default=128)
    args = parser.parse_args()
    settings = EmbeddingServerSettings(
        intra_op_threads=args.threads, max_batch=args.max_batch, max_wait_ms=args.max_wait_ms
    )
    server = EmbeddingServer(local_minilm(settings), settings)
    server.start()
    try:
        client = boto3.client(
            "bedrock-runtime",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(max_pool_connections=args.workers * args.concurrency, read_timeout=300),
        )
        embedder = BedrockTitanEmbedder(
            client, model_id=LOCAL_MODEL_ID, dimension=MINILM_DIMENSION, max_concurrency=args.concurrency
        )
        texts = sample_texts(args.chunks)
        embedder.embed(texts[:4])  # warm-up: the first run allocates the session's buffers
        batches = [texts[start : start + EMBED_BATCH] for start in range(0, len(texts), EMBED_BATCH)]
        load = os.getloadavg()[0]
        started = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as workers:
            list(workers.map(embedder.embed, batches))
        seconds = time.perf_counter() - started
        stats = server.stats()["batcher"]
    finally:
        server.stop()
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"threads {args.threads}, max batch {args.max_batch}, wait {args.max_wait_ms} ms, "
        f"{args.workers} workers x {args.concurrency} in flight: {len(texts) / seconds:.1f} chunks/s, "
        f"mean batch {stats['mean_batch']}, peak RSS {peak_gib:.2f} GiB, load average {load:.1f}"
    )


if __name__ == "__main__":
    main()
