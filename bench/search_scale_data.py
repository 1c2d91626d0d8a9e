"""The synthetic chunks of ``make bench-search``: real sentences, realistic vectors, the product's document shape.

A chunk is a window of real sentences (``samples/text`` and ``eval/corpus``, parsed by the product's
``parse_pdf``) plus a sentence of another, its vector the normalised mix of the two windows' MiniLM
vectors plus a little noise: vectors cluster as related documents' chunks do, and BM25 sees real term
statistics. Every text is unique. Chunks are indexed exactly as ``VectorStore.write_chunks`` writes
them, only in larger bulk requests. Imports the domain package, ``local.runtime.settings``, numpy and
opensearch-py. The mix, sizes and why: docs/benchmarks.md (Search at 100,000 chunks).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from opensearchpy import OpenSearch, helpers
from rag_ingest.adapters.opensearch_filters import METADATA_FIELD, chunk_access, chunk_metadata
from rag_ingest.adapters.vector_store import INDEXED_TEXT_FIELD, OPTIONAL_CHUNK_FIELDS, chunk_provenance
from rag_ingest.core.ids import chunk_id, new_document_id, version_hash
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.retrieval_text import document_title, indexed_text
from rag_ingest.core.tokens import count_tokens
from rag_ingest.parsing.pdf.extract import parse_pdf

from local.runtime.settings import REPO_ROOT

Vectors = npt.NDArray[np.float32]

SAMPLE_TEXTS = REPO_ROOT / "samples" / "text"
EVAL_CORPUS = REPO_ROOT / "eval" / "corpus"
#: Sentences per base passage (~500 characters), and how far the window moves: one sentence, so
#: neighbouring passages overlap as neighbouring chunks do (and the corpus yields ~3,900 of them).
SENTENCES_PER_PASSAGE = 4
PASSAGE_STRIDE = 1
#: A chunk's vector: its own passage's weight, the mixed-in sentence's passage's, and the noise per dimension.
OWN_WEIGHT = 0.85
MIXED_WEIGHT = 0.15
NOISE_SIGMA = 0.015
#: Chunks per synthetic document (a 20-30-page PDF makes about this many).
CHUNKS_PER_DOCUMENT = 50
#: Floats are sent rounded to 6 decimals (about half the JSON); exact search uses the same rounded values.
VECTOR_DECIMALS = 6

MIN_SENTENCE_CHARS = 30
MAX_SENTENCE_CHARS = 400
#: A base passage is embedded, so it must fit the model (510 tokens); this leaves a margin.
MAX_PASSAGE_TOKENS = 450

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


@dataclass(frozen=True)
class BasePassage:
    text: str
    sentences: tuple[str, ...]
    source: str  # the file it comes from


def _sentences(text: str) -> list[str]:
    """Sentences of a page: 5 words and 30 to 400 characters, so a window reads like prose (a longer
    "sentence" is a table or code read as one line)."""
    flat = " ".join(text.split())
    return [
        s
        for s in _SENTENCE_END.split(flat)
        if MIN_SENTENCE_CHARS <= len(s) <= MAX_SENTENCE_CHARS and len(s.split()) >= 5
    ]


def _source_texts() -> Iterator[tuple[str, list[str]]]:
    """(file name, sentences) of each real document: the sample texts first, then the eval PDFs,
    smallest first (a quick run parses only what it needs)."""
    for path in sorted(SAMPLE_TEXTS.glob("*.txt")):
        yield path.name, _sentences(path.read_text())
    for path in sorted(EVAL_CORPUS.glob("*.pdf"), key=lambda p: p.stat().st_size):
        parsed = parse_pdf(path.read_bytes(), max_bytes=50 * 2**20, max_pages=5_000)
        yield path.name, [s for page in parsed.pages for s in _sentences(page.text)]


def base_passages(count: int) -> list[BasePassage]:
    """``count`` windows of consecutive real sentences (fewer if the corpus has fewer), spread
    evenly over every document read."""
    passages: list[BasePassage] = []
    for name, sentences in _source_texts():
        for start in range(0, max(1, len(sentences) - SENTENCES_PER_PASSAGE + 1), PASSAGE_STRIDE):
            window = tuple(sentences[start : start + SENTENCES_PER_PASSAGE])
            if len(window) >= 2 and count_tokens(" ".join(window)) <= MAX_PASSAGE_TOKENS:
                passages.append(BasePassage(" ".join(window), window, name))
        if len(passages) >= count:
            break
    if len(passages) <= count:
        return passages
    chosen = np.linspace(0, len(passages) - 1, count).round().astype(int)
    return [passages[i] for i in chosen]


@dataclass(frozen=True)
class SyntheticChunks:
    """One tenant's chunks: ids, texts and unit vectors (row i is chunk i), grouped into documents."""

    tenant_id: str
    ids: list[str]
    document_ids: list[str]
    chunks: list[Chunk]
    filenames: list[str]
    vectors: Vectors
    version: str
    #: Row i's document's user metadata (one dict per document, shared by its chunks).
    metadata: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.ids)


def _unit_rows(matrix: npt.NDArray[np.float64]) -> Vectors:
    normed = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.round(normed, VECTOR_DECIMALS).astype(np.float32)


def synthesize(
    rng: np.random.Generator,
    tenant_id: str,
    count: int,
    passages: Sequence[BasePassage],
    passage_vectors: Vectors,
    taken_texts: set[str],
) -> SyntheticChunks:
    """``count`` chunks for ``tenant_id`` made from ``passages``; texts in ``taken_texts`` (the
    other tenant's) are not reused, and the new ones are added to it."""
    own = rng.integers(0, len(passages), count)
    mixed = rng.integers(0, len(passages), count)
    noise = rng.normal(0.0, NOISE_SIGMA, (count, passage_vectors.shape[1]))
    vectors = _unit_rows(OWN_WEIGHT * passage_vectors[own] + MIXED_WEIGHT * passage_vectors[mixed] + noise)
    version = f"bench-{rng.integers(1 << 30):08x}"
    ids: list[str] = []
    document_ids: list[str] = []
    chunks: list[Chunk] = []
    filenames: list[str] = []
    metadata: list[dict[str, Any]] = []
    document_id = filename = title = ""
    document_metadata: dict[str, Any] = {}
    for i in range(count):
        if i % CHUNKS_PER_DOCUMENT == 0:
            document_id = new_document_id()
            document_metadata = synthetic_metadata(i // CHUNKS_PER_DOCUMENT)
            source = passages[own[i]].source
            filename = f"{Path(source).stem}-{i // CHUNKS_PER_DOCUMENT:05d}.pdf"
            title = document_title(None, Path(source).name)
        extra = passages[mixed[i]].sentences
        text = f"{passages[own[i]].text} {extra[int(rng.integers(len(extra)))]}"
        while text in taken_texts:  # a repeat would be folded into its twin by the search
            extra = passages[int(rng.integers(len(passages)))].sentences
            text = f"{text} {extra[int(rng.integers(len(extra)))]}"
        taken_texts.add(text)
        index = i % CHUNKS_PER_DOCUMENT
        page = 1 + index // 2
        chunks.append(
            Chunk(
                chunk_index=index,
                text=text,
                page_start=page,
                page_end=page,
                heading_path=[],
                char_start=0,
                char_end=len(text),
                token_count=len(text.split()),
                document_title=title,
            )
        )
        ids.append(chunk_id(document_id, version, index))
        document_ids.append(document_id)
        filenames.append(filename)
        metadata.append(document_metadata)
    return SyntheticChunks(tenant_id, ids, document_ids, chunks, filenames, vectors, version, metadata)


#: Synthetic documents are spread round-robin over this many customers, so a filter on one
#: customer selects 1 % of a tenant's chunks (the issue's "selective filter").
SYNTHETIC_CUSTOMERS = 100


def customer_name(number: int) -> str:
    return f"customer-{number % SYNTHETIC_CUSTOMERS:03d}"


def synthetic_metadata(document_number: int) -> dict[str, Any]:
    """A synthetic document's user metadata: a keyword that selects 1 % of the documents, a number
    and a boolean (the typed fields a filter reaches)."""
    return {
        "customer": customer_name(document_number),
        "year": 2020 + document_number % 5,
        "confidential": document_number % 2 == 0,
    }


# One upload time for every synthetic document (a fixed ISO 8601 timestamp, as records carry).
SYNTHETIC_CREATED_AT = "2026-01-01T00:00:00+00:00"


def chunk_source(chunks: SyntheticChunks, row: int) -> dict[str, Any]:
    """The ``_source`` the Index stage writes for a chunk (VectorStore.write_chunks)."""
    chunk = chunks.chunks[row]
    return {
        "tenant_id": chunks.tenant_id,
        "document_id": chunks.document_ids[row],
        "version": version_hash(chunks.version),
        "chunk_index": chunk.chunk_index,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "heading_path": chunk.heading_path,
        "filename": chunks.filenames[row],
        # Its format and media type (a PDF's), as the product writes them.
        **chunk_provenance(chunk),
        # The document's fields every chunk carries.
        METADATA_FIELD: chunk_metadata(chunks.metadata[row]),
        "created_at": SYNTHETIC_CREATED_AT,
        # Open to the whole tenant (no access on the synthetic documents), uploaded straight to S3.
        **chunk_access(None, None),
        "text": chunk.text,
        INDEXED_TEXT_FIELD: indexed_text(chunk),
        "embedding": chunks.vectors[row].astype(np.float64).tolist(),
    }


def check_shape(mapping: dict[str, Any], chunks: SyntheticChunks) -> None:
    """Every field of the product's mapping is written, and nothing else (the mapping is strict)."""
    expected = set(mapping["mappings"]["properties"]) - OPTIONAL_CHUNK_FIELDS  # a PDF's chunks carry neither
    written = set(chunk_source(chunks, 0))
    if written != expected:
        raise RuntimeError(f"the bench's chunks differ from the product's mapping: {sorted(written ^ expected)}")


def bulk_load(client: OpenSearch, index: str, tenants: Sequence[SyntheticChunks], batch: int = 500) -> int:
    """Index every chunk (the index named in the request path, as the product does); refresh is
    off during the load and restored (to the index's default) at the end."""
    actions = (
        {"_op_type": "index", "_id": chunks.ids[row], "_source": chunk_source(chunks, row)}
        for chunks in tenants
        for row in range(len(chunks))
    )
    client.indices.put_settings(index=index, body={"index": {"refresh_interval": "-1"}})
    try:
        written = 0
        for ok, item in helpers.streaming_bulk(
            client, actions, chunk_size=batch, max_retries=5, index=index, request_timeout=120
        ):
            if not ok:
                raise RuntimeError(f"bulk indexing failed: {str(item)[:500]}")
            written += 1
    finally:
        client.indices.put_settings(index=index, body={"index": {"refresh_interval": None}})
    client.indices.refresh(index=index, request_timeout=600)
    return written
