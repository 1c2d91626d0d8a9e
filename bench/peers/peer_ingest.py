"""One peer's ingest of the corpus, for make bench-peers and make bench-aws; prints one JSON object.

    .venv-peers/bin/python -m bench.peers.peer_ingest {langchain,llamaindex} FILE.pdf ...
    .venv-peers/bin/python -m bench.peers.peer_ingest {langchain,llamaindex}-bedrock --endpoint URL FILE.pdf ...

Runs in the peers' virtual environment (.venv-peers), never the product's: it imports LangChain or
LlamaIndex, and of the product only ``rag_ingest.embeddings`` and ``rag_ingest.core.tokens``. Each peer
loads, splits (300/60 cl100k tokens), embeds with the same local embedder and stores as its
documentation shows; the ``-bedrock`` peers embed through their own Bedrock integration instead, one
document at a time. How each peer is set up, and why: docs/benchmarks.md (bench-peers, bench-aws).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

CHUNK_TOKENS = 300
OVERLAP_TOKENS = 60
TIKTOKEN_ENCODING = "cl100k_base"
EMBED_BATCH_SIZE = 16  # rag_ingest.embeddings.local.DEFAULT_BATCH_SIZE: the same ONNX batches for all
INTRA_OP_THREADS = 2


class TruncatingMiniLM:
    """rag-ingest's local embedder, cutting each text to the model's input limit instead of refusing it."""

    def __init__(self) -> None:
        from rag_ingest.core.tokens import load_tokenizer
        from rag_ingest.embeddings.local import LocalMiniLMEmbedder

        self.embedder = LocalMiniLMEmbedder(batch_size=EMBED_BATCH_SIZE, intra_op_threads=INTRA_OP_THREADS)
        self.tokenizer = load_tokenizer()
        self.truncated = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        limit = self.embedder.max_input_tokens
        fitted = []
        for encoding, text in zip(
            self.tokenizer.encode_batch(list(texts), add_special_tokens=False), texts, strict=True
        ):
            if len(encoding.ids) > limit:
                self.truncated += 1
                text = text[: encoding.offsets[limit - 1][1]]
            fitted.append(text)
        return self.embedder.embed(fitted)


def _use_bundled_tiktoken_encodings() -> None:
    """Point tiktoken at the cl100k_base file llama-index-core ships (this machine has no internet)."""
    cache = metadata.distribution("llama-index-core").locate_file("llama_index/core/_static/tiktoken_cache")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))


def ingest_with_langchain(paths: Sequence[Path]) -> dict[str, Any]:
    from langchain_community.document_loaders import PyPDFLoader
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import TokenTextSplitter

    class MiniLMEmbeddings(Embeddings):  # type: ignore[misc]  # Any outside the peers' venv
        def __init__(self, model: TruncatingMiniLM) -> None:
            self.model = model

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.model.embed(texts)

        def embed_query(self, text: str) -> list[float]:
            return self.model.embed([text])[0]

    started = time.perf_counter()
    model = TruncatingMiniLM()
    pages = [page for path in paths for page in PyPDFLoader(str(path)).load()]
    splitter = TokenTextSplitter(encoding_name=TIKTOKEN_ENCODING, chunk_size=CHUNK_TOKENS, chunk_overlap=OVERLAP_TOKENS)
    chunks = splitter.split_documents(pages)
    store = InMemoryVectorStore(embedding=MiniLMEmbeddings(model))
    ids = store.add_documents(chunks)
    seconds = time.perf_counter() - started
    return {
        "pages": len(pages),
        "chunks": len(chunks),
        "vectors": len(ids),
        "truncated_chunks": model.truncated,
        "seconds": seconds,
    }


def ingest_with_llamaindex(paths: Sequence[Path]) -> dict[str, Any]:
    from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import TokenTextSplitter
    from llama_index.core.vector_stores import SimpleVectorStore
    from pydantic import PrivateAttr

    class MiniLMEmbedding(BaseEmbedding):  # type: ignore[misc]  # Any outside the peers' venv
        _model: TruncatingMiniLM = PrivateAttr()

        def __init__(self, model: TruncatingMiniLM) -> None:
            super().__init__(model_name=model.embedder.model_id, embed_batch_size=EMBED_BATCH_SIZE)
            self._model = model

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._model.embed(texts)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._model.embed([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._model.embed([query])[0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    started = time.perf_counter()
    model = TruncatingMiniLM()
    embedding = MiniLMEmbedding(model)
    pages = SimpleDirectoryReader(input_files=[str(path) for path in paths]).load_data()
    pipeline = IngestionPipeline(
        transformations=[TokenTextSplitter(chunk_size=CHUNK_TOKENS, chunk_overlap=OVERLAP_TOKENS), embedding]
    )
    nodes = pipeline.run(documents=pages)
    store = SimpleVectorStore()
    VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embedding)
    seconds = time.perf_counter() - started
    return {
        "pages": len(pages),
        "chunks": len(nodes),
        "vectors": len(store.data.embedding_dict),
        "truncated_chunks": model.truncated,
        "seconds": seconds,
    }


#: The model both Bedrock peers call: Titan Text Embeddings V2, at its default 1,024 floats.
TITAN_V2_MODEL_ID = "amazon.titan-embed-text-v2:0"


@dataclass(frozen=True)
class BedrockTarget:
    """Where the Bedrock peers send InvokeModel, and the retry config a LangChain user may add."""

    endpoint: str
    region: str
    retry_mode: str | None = None  # None: the client as the framework builds it
    max_attempts: int | None = None


def ingest_one_at_a_time(
    paths: Sequence[Path],
    ingest: Callable[[Path], tuple[int, int]],
    stored: Callable[[], int],
    texts_sent: Callable[[Path], list[str]],
) -> dict[str, Any]:
    """``ingest(path)`` -> (pages, chunks) for each file in turn, timed; one that raises is recorded as
    failed (its exception, and when: after how many documents) and the run goes on.

    After the clock stops, ``texts_sent(path)`` gives every document's texts as the framework sends
    them to the model (the failed documents' too): the requests and tokens the quota must admit for
    this corpus, tokens counted as the local server counts them."""
    from rag_ingest.core.tokens import count_tokens

    started = time.perf_counter()
    pages = chunks = 0
    failures: list[dict[str, Any]] = []
    for number, path in enumerate(paths, start=1):
        try:
            document_pages, document_chunks = ingest(path)
        except Exception as error:  # the measurement: how a user's loop sees the framework fail
            failures.append(
                {
                    "file": path.name,
                    "document_number": number,
                    "documents_done_before": number - 1 - len(failures),
                    "seconds_into_run": round(time.perf_counter() - started, 1),
                    "exception": f"{type(error).__module__}.{type(error).__name__}",
                    "message": str(error)[:300],
                }
            )
            continue
        pages += document_pages
        chunks += document_chunks
    seconds = time.perf_counter() - started
    texts = [text for path in paths for text in texts_sent(path)]
    return {
        "pages": pages,
        "chunks": chunks,
        "vectors": stored(),
        "documents": len(paths),
        "documents_failed": len(failures),
        "failures": failures,
        "seconds": seconds,
        "corpus_requests": len(texts),
        "corpus_tokens": sum(count_tokens(text) for text in texts),
    }


def ingest_with_langchain_bedrock(paths: Sequence[Path], target: BedrockTarget) -> dict[str, Any]:
    from botocore.config import Config
    from langchain_aws import BedrockEmbeddings
    from langchain_community.document_loaders import PyPDFLoader
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import TokenTextSplitter

    retries = {"mode": target.retry_mode, "max_attempts": target.max_attempts} if target.retry_mode else None
    embeddings = BedrockEmbeddings(
        model_id=TITAN_V2_MODEL_ID,
        region_name=target.region,
        endpoint_url=target.endpoint,
        config=Config(retries=retries) if retries else None,
    )
    store = InMemoryVectorStore(embedding=embeddings)
    splitter = TokenTextSplitter(encoding_name=TIKTOKEN_ENCODING, chunk_size=CHUNK_TOKENS, chunk_overlap=OVERLAP_TOKENS)

    def ingest(path: Path) -> tuple[int, int]:
        pages = PyPDFLoader(str(path)).load()
        chunks = splitter.split_documents(pages)
        store.add_documents(chunks)
        return len(pages), len(chunks)

    def texts_sent(path: Path) -> list[str]:
        # BedrockEmbeddings sends each text with its line breaks replaced by spaces.
        chunks = splitter.split_documents(PyPDFLoader(str(path)).load())
        return [chunk.page_content.replace(os.linesep, " ") for chunk in chunks]

    return ingest_one_at_a_time(paths, ingest, lambda: len(store.store), texts_sent)


def ingest_with_llamaindex_bedrock(paths: Sequence[Path], target: BedrockTarget) -> dict[str, Any]:
    from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import TokenTextSplitter
    from llama_index.core.schema import MetadataMode
    from llama_index.core.vector_stores import SimpleVectorStore
    from llama_index.embeddings.bedrock import BedrockEmbedding

    if target.retry_mode:
        raise SystemExit("--retry-mode is LangChain's variant: LlamaIndex's BedrockEmbedding has max_retries")
    os.environ["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = target.endpoint
    embedding = BedrockEmbedding(model_name=TITAN_V2_MODEL_ID, region_name=target.region)
    store = SimpleVectorStore()
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex([], storage_context=storage, embed_model=embedding)
    splitter = TokenTextSplitter(chunk_size=CHUNK_TOKENS, chunk_overlap=OVERLAP_TOKENS)
    pipeline = IngestionPipeline(transformations=[splitter, embedding])

    def ingest(path: Path) -> tuple[int, int]:
        pages = SimpleDirectoryReader(input_files=[str(path)]).load_data()
        nodes = pipeline.run(documents=pages)
        index.insert_nodes(nodes)
        return len(pages), len(nodes)

    def texts_sent(path: Path) -> list[str]:
        # The embedding sees each node with its metadata (page label, file name, ...), LlamaIndex's EMBED mode.
        nodes = splitter.get_nodes_from_documents(SimpleDirectoryReader(input_files=[str(path)]).load_data())
        return [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]

    return ingest_one_at_a_time(paths, ingest, lambda: len(store.data.embedding_dict), texts_sent)


PEERS = {"langchain": ingest_with_langchain, "llamaindex": ingest_with_llamaindex}
BEDROCK_PEERS = {
    "langchain-bedrock": ingest_with_langchain_bedrock,
    "llamaindex-bedrock": ingest_with_llamaindex_bedrock,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", choices=sorted([*PEERS, *BEDROCK_PEERS]))
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--endpoint", help="the Bedrock-compatible server (the -bedrock peers)")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--retry-mode", choices=("legacy", "standard", "adaptive"), help="LangChain's variant")
    parser.add_argument("--max-attempts", type=int, help="with --retry-mode")
    args = parser.parse_args()
    _use_bundled_tiktoken_encodings()
    if args.peer in BEDROCK_PEERS:
        if not args.endpoint:
            parser.error(f"{args.peer} needs --endpoint")
        target = BedrockTarget(args.endpoint, args.region, args.retry_mode, args.max_attempts)
        outcome = BEDROCK_PEERS[args.peer](args.files, target)
    else:
        outcome = PEERS[args.peer](args.files)
    if outcome["vectors"] != outcome["chunks"]:
        sys.exit(f"{args.peer}: {outcome['chunks']} chunks but {outcome['vectors']} vectors stored")
    print(json.dumps(outcome))


if __name__ == "__main__":
    main()
