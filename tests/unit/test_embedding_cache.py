"""The content-addressed embedding cache: its keys and entries (rag_ingest.ingest.embedding_cache) and the
Embed stage's use of it over in-memory fakes (lookup before the model, write after it, per tenant)."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence

import pytest
from rag_ingest.core.models import Chunk, DocumentJob, EmbedTask
from rag_ingest.core.telemetry import CloudTelemetry
from rag_ingest.ingest.embedding_cache import (
    CHECKSUM_ATTRIBUTE,
    DIMENSION_ATTRIBUTE,
    VECTOR_ATTRIBUTE,
    CacheKey,
    decode_entry,
    encode_entry,
)
from rag_ingest.ingest.pipeline import texts_to_embed

from tests.support.fakes import (
    CountingEmbedder,
    InMemoryEmbeddingCache,
)
from tests.unit.test_pipeline_stages_fast import ENV, World, build_world, sample

pytestmark = pytest.mark.unit
KEY = CacheKey.of("acme", "fake-embedder", 4, "a passage")


class FailingEmbedder(CountingEmbedder):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("the model is down")


def as_float32(vector: Sequence[float]) -> list[float]:
    return list(struct.unpack(f"<{len(vector)}f", struct.pack(f"<{len(vector)}f", *vector)))


def flip_first_bit(data: bytes) -> bytes:
    return bytes([data[0] ^ 1]) + data[1:]


@pytest.fixture
def cache() -> InMemoryEmbeddingCache:
    return InMemoryEmbeddingCache()


@pytest.fixture
def world(cache: InMemoryEmbeddingCache) -> World:
    return build_world(embedding_cache=cache)


# -- keys and entries -----------------------------------------------------------------------------
def test_the_key_is_the_tenant_model_dimension_and_hash_of_the_text() -> None:
    assert CacheKey.of("acme", "fake-embedder", 4, "a passage") == KEY
    assert KEY.id.startswith("acme#fake-embedder#4#") and len(KEY.text_sha256) == 64
    others = {
        CacheKey.of("globex", "fake-embedder", 4, "a passage"),  # another tenant
        CacheKey.of("acme", "other-model", 4, "a passage"),
        CacheKey.of("acme", "fake-embedder", 8, "a passage"),
        CacheKey.of("acme", "fake-embedder", 4, "a passage."),
    }
    assert KEY.id not in {other.id for other in others} and len({other.id for other in others}) == 4


def test_an_entry_round_trips_as_float32() -> None:
    vector = [0.125, -0.5, 0.1, 1 / 3]
    assert decode_entry(KEY, encode_entry(KEY, vector)) == as_float32(vector)
    with pytest.raises(ValueError):
        encode_entry(KEY, [0.1, 0.2])  # a vector of another dimension is never stored


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda e: e.update({VECTOR_ATTRIBUTE: e[VECTOR_ATTRIBUTE][:8]}), id="partial vector"),
        pytest.param(lambda e: e.update({VECTOR_ATTRIBUTE: flip_first_bit(e[VECTOR_ATTRIBUTE])}), id="flipped bit"),
        pytest.param(lambda e: e.update({DIMENSION_ATTRIBUTE: 8}), id="wrong dimension"),
        pytest.param(lambda e: e.pop(CHECKSUM_ATTRIBUTE), id="no checksum"),
        pytest.param(lambda e: e.update({VECTOR_ATTRIBUTE: "not bytes"}), id="not binary"),
        pytest.param(lambda e: e.update({"cache_key": "globex#fake-embedder#4#x"}), id="another key"),
    ],
)
def test_a_damaged_entry_is_no_vector(damage: object) -> None:
    entry = encode_entry(KEY, [0.5, 0.25, 0.125, 1.0])
    damage(entry)  # type: ignore[operator]
    assert decode_entry(KEY, entry) is None


# -- the Embed stage -----------------------------------------------------------------------------
def ingest(world: World, data: bytes, *, document_id: str | None = None, version: str = "v1") -> DocumentJob:
    job = world.through_chunk(world.upload(data, document_id=document_id, version=version))
    world.embed_all(job)
    return job


def indexed_vectors(world: World, document_id: str) -> list[list[float]]:
    sources = [s for s in world.index.chunks.values() if s["document_id"] == document_id]
    return [s["embedding"] for s in sorted(sources, key=lambda s: s["chunk"].chunk_index)]


def cache_counts(world: World, job: DocumentJob) -> tuple[int, int]:
    record = world.documents.get(job.document_id)
    assert record is not None and record.embedding_cache is not None
    return record.embedding_cache.hits, record.embedding_cache.misses


def test_a_first_ingest_misses_everything_and_fills_the_cache(world: World, cache: InMemoryEmbeddingCache) -> None:
    job = ingest(world, sample("sourdough.pdf"))
    chunks = job.chunk_count or 0
    assert chunks > 4  # several Embed tasks (EMBED_TASK_CHUNKS = 4)
    assert world.embedder.texts_embedded == chunks
    assert cache_counts(world, job) == (0, chunks)
    assert len(cache.entries) == chunks
    # One lookup per Embed task for all of its batches, never one per chunk.
    assert len(cache.lookups) == len(job.embed_tasks) and max(cache.lookups) > 1
    assert sum(misses for _, _, misses in world.telemetry.cache_lookups) == chunks


def test_the_same_bytes_under_another_document_embed_nothing(world: World) -> None:
    first = ingest(world, sample("sourdough.pdf"))
    paid = world.embedder.texts_embedded
    copy = ingest(world, sample("sourdough.pdf"))
    assert world.embedder.texts_embedded == paid
    assert cache_counts(world, copy) == (copy.chunk_count, 0)
    # The vectors are the cached ones: the copy indexes the same vectors as the first upload (float32).
    world.pipeline.index(first)
    world.pipeline.index(copy)
    first_vectors = [as_float32(v) for v in indexed_vectors(world, first.document_id)]
    assert indexed_vectors(world, copy.document_id) == first_vectors


def test_another_tenant_never_hits_a_tenants_entries(world: World, cache: InMemoryEmbeddingCache) -> None:
    ingest(world, sample("sourdough.pdf"))
    paid = world.embedder.texts_embedded
    job = world.through_chunk(world.upload(sample("sourdough.pdf")).model_copy(update={"tenant_id": "globex"}))
    world.embed_all(job)
    assert world.embedder.texts_embedded == 2 * paid
    assert {key.split("#", 1)[0] for key in cache.entries} == {"acme", "globex"}


def test_a_corrupt_entry_is_ignored_embedded_again_and_rewritten(world: World, cache: InMemoryEmbeddingCache) -> None:
    ingest(world, sample("sourdough.pdf"))
    paid = world.embedder.texts_embedded
    damaged_id = sorted(cache.entries)[0]
    cache.entries[damaged_id][VECTOR_ATTRIBUTE] = cache.entries[damaged_id][VECTOR_ATTRIBUTE][:-4]
    copy = ingest(world, sample("sourdough.pdf"))
    assert world.embedder.texts_embedded == paid + 1
    assert cache_counts(world, copy) == ((copy.chunk_count or 0) - 1, 1)
    key = CacheKey(*damaged_id.split("#")[:2], 4, damaged_id.rsplit("#", 1)[1])  # type: ignore[arg-type]
    assert decode_entry(key, cache.entries[damaged_id]) is not None  # rewritten whole


def test_nothing_is_cached_when_the_model_fails(world: World, cache: InMemoryEmbeddingCache) -> None:
    job = world.through_chunk(world.upload(sample("sourdough.pdf")))
    world.pipeline._deps.embedder = lambda: FailingEmbedder()
    with pytest.raises(RuntimeError):
        world.pipeline.embed(EmbedTask(job=job, task=0))
    assert cache.entries == {}


def test_a_retry_resumes_from_checkpoints_and_pays_nothing_twice(world: World, cache: InMemoryEmbeddingCache) -> None:
    job = ingest(world, sample("sourdough.pdf"))
    paid, lookups = world.embedder.texts_embedded, len(cache.lookups)
    world.pipeline.embed(EmbedTask(job=job, task=0))  # every batch of the task is checkpointed
    assert world.embedder.texts_embedded == paid
    assert len(cache.lookups) == lookups  # nothing to look up either
    assert cache_counts(world, job) == (0, job.chunk_count)  # the retry added no count


def test_texts_to_embed_is_what_the_cache_is_keyed_on(world: World, cache: InMemoryEmbeddingCache) -> None:
    job = ingest(world, sample("sourdough.pdf"))
    chunks = [Chunk.model_validate(c) for c in world.objects.get_json("docs", job.chunks_key or "")]
    expected = {
        CacheKey.of("acme", ENV.embedding_model_id, ENV.embedding_dimension, t).id for t in texts_to_embed(chunks)
    }
    assert set(cache.entries) == expected


# -- duplicate uploads ----------------------------------------------------------------------------
def test_the_same_bytes_again_name_the_earlier_ready_document(world: World) -> None:
    first = world.run(world.upload(sample("sourdough.pdf")))
    copy = world.through_chunk(world.upload(sample("sourdough.pdf")))
    other = world.through_chunk(world.upload(sample("lighthouses.pdf")))
    copy_record, other_record = world.documents.get(copy.document_id), world.documents.get(other.document_id)
    assert copy_record is not None and other_record is not None
    assert copy_record.duplicate_of == first.document_id
    assert copy_record.content_sha256 == copy.content_sha256 and copy.content_sha256 is not None
    assert other_record.duplicate_of is None


def test_a_copy_in_flight_is_not_named(world: World) -> None:
    first = world.through_chunk(world.upload(sample("sourdough.pdf")))  # not READY yet
    copy = world.through_chunk(world.upload(sample("sourdough.pdf")))
    record = world.documents.get(copy.document_id)
    assert record is not None and record.duplicate_of is None and first.document_id != copy.document_id


# -- metrics --------------------------------------------------------------------------------------
def test_the_cache_counts_are_emf_metrics_with_the_document_as_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    CloudTelemetry(events=RecordingEvents(), namespace="RagIngestTest").embedding_cache_used("doc-1", 337, 18)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    names = ("EmbeddingCacheHits", "EmbeddingCacheMisses")
    values = {name: line[name] for line in lines for name in names if name in line}
    assert values == {"EmbeddingCacheHits": [337.0], "EmbeddingCacheMisses": [18.0]}
    for line in lines:
        assert line["document_id"] == "doc-1"
        [directive] = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "RagIngestTest"
        assert all("document_id" not in dimensions for dimensions in directive["Dimensions"])  # not a dimension


class RecordingEvents:
    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, object]]] = []

    def publish(self, detail_type: str, detail: dict[str, object]) -> None:
        self.published.append((detail_type, detail))
