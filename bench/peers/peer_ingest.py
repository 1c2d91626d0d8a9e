"""One peer's ingest of the corpus; runs in the peers' virtual environment (.venv-peers), not the product's.

    .venv-peers/bin/python -m bench.peers.peer_ingest {langchain,llamaindex} FILE.pdf ...

Prints one JSON object: pages, chunks, seconds, vectors stored. Each peer is used as its own
documentation shows: LangChain loads every file with langchain-community's PyPDFLoader (pypdf,
one Document per page), splits with TokenTextSplitter (300 tokens, 60 overlap) and adds the
chunks to an InMemoryVectorStore; LlamaIndex reads with SimpleDirectoryReader (PDFReader, pypdf,
one Document per page) and runs an IngestionPipeline of TokenTextSplitter (300/60) and the
embedding model, then builds a VectorStoreIndex over an in-memory SimpleVectorStore.

Both split on tiktoken's cl100k_base tokens: LlamaIndex's default, and the encoding whose file
ships inside llama-index-core (nothing is downloaded; LangChain's default, gpt2, is not shipped).
Both embed with the same code rag-ingest runs locally (rag_ingest.embeddings.local: all-MiniLM-L6-v2
int8 ONNX, 2 intra-op threads, batches of 16). A chunk longer than the model's 512 positions is
cut to fit, as sentence-transformers would cut it; rag-ingest's chunker never makes one.
The clock starts after the imports (a service has them loaded) and includes loading the model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
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


PEERS = {"langchain": ingest_with_langchain, "llamaindex": ingest_with_llamaindex}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    _use_bundled_tiktoken_encodings()
    outcome = PEERS[args.peer](args.files)
    if outcome["vectors"] != outcome["chunks"]:
        sys.exit(f"{args.peer}: {outcome['chunks']} chunks but {outcome['vectors']} vectors stored")
    print(json.dumps(outcome))


if __name__ == "__main__":
    main()
