"""The content-addressed embedding cache: its keys and entries (rag_ingest.ingest.embedding_cache) and the
Embed stage's use of it over in-memory fakes (lookup before the model, write after it, per tenant)."""

from __future__ import annotations

import hashlib
import json
import random
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from rag_ingest.core.job import DocumentJob, EmbedTask
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.telemetry import CloudTelemetry
from rag_ingest.ingest.embedding_cache import (
    CHECKSUM_ATTRIBUTE,
    DIMENSION_ATTRIBUTE,
    KEY_ATTRIBUTE,
    KIND_RAW,
    KIND_SPLIT,
    PACKED_ATTRIBUTE,
    VECTOR_ATTRIBUTE,
    CacheKey,
    decode_entry,
    encode_entry,
    entry_size_bytes,
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


def unit_vector(rng: random.Random, dimension: int) -> list[float]:
    """A vector like an embedding model's: Gaussian components, normalised (Titan v2's default)."""
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


def unpacked_entry(key: CacheKey, vector: Sequence[float]) -> dict[str, Any]:
    """An entry as the cache wrote it before the packed format (float32 bytes, dimension, hex sha256)."""
    data = struct.pack(f"<{len(vector)}f", *vector)
    return {
        KEY_ATTRIBUTE: key.id,
        VECTOR_ATTRIBUTE: data,
        DIMENSION_ATTRIBUTE: key.dimension,
        CHECKSUM_ATTRIBUTE: hashlib.sha256(data).hexdigest(),
    }


def test_a_packed_entry_gives_back_every_float32_bit_for_bit() -> None:
    rng = random.Random(7)
    key = CacheKey.of("acme", "model", 1024, "a passage")
    vectors = [
        unit_vector(rng, 1024),
        [x * 37.5 for x in unit_vector(rng, 1024)],  # not normalised
        [0.0, -0.0, 1e-45, -3.4e38, 1.0, *unit_vector(rng, 1019)],  # zeros, a subnormal, the extremes
    ]
    for vector in vectors:
        entry = encode_entry(key, vector)
        assert set(entry) == {KEY_ATTRIBUTE, PACKED_ATTRIBUTE}  # the dimension is the key's
        decoded = decode_entry(key, entry)
        assert decoded is not None
        assert struct.pack("<1024f", *decoded) == struct.pack("<1024f", *vector)


def test_a_vector_whose_high_bytes_do_not_shrink_is_stored_unpacked() -> None:
    rng = random.Random(3)
    key = CacheKey.of("acme", "model", 256, "noise")
    # Every bit pattern equally likely (finite ones): the sign-and-exponent bytes do not deflate.
    words = [w for w in (rng.getrandbits(32) for _ in range(400)) if (w >> 23) & 0xFF != 0xFF][:256]
    noise = list(struct.unpack("<256f", struct.pack("<256I", *words)))
    entry = encode_entry(key, noise)
    assert entry[PACKED_ATTRIBUTE][1] == KIND_RAW
    assert decode_entry(key, entry) == noise
    assert encode_entry(key, unit_vector(rng, 256))[PACKED_ATTRIBUTE][1] == KIND_SPLIT


def test_an_entry_at_titan_v2_s_1024_dimensions_is_four_write_units() -> None:
    """DynamoDB bills a write per started 1 KB of the item (names and values; binary at its raw
    length) and an eventually consistent read per started 4 KB at half a unit: under 4,096 bytes
    an entry is 4 write units and half a read unit, where the unpacked one (4,096 bytes of floats
    alone) was 5 and 1. A tenant id of 64 characters leaves room; 200 vectors, the largest counts."""
    rng = random.Random(11)
    key = CacheKey.of("t" * 64, "amazon.titan-embed-text-v2:0", 1024, "a passage")
    largest = max(entry_size_bytes(encode_entry(key, unit_vector(rng, 1024))) for _ in range(200))
    assert largest <= 4096 - 150  # with room to spare
    assert entry_size_bytes(unpacked_entry(key, unit_vector(rng, 1024))) > 4096


def test_an_entry_of_the_unpacked_format_is_still_a_hit() -> None:
    vector = [0.125, -0.5, 0.1, 1 / 3]
    assert decode_entry(KEY, unpacked_entry(KEY, vector)) == as_float32(vector)
    damaged = unpacked_entry(KEY, vector)
    damaged[VECTOR_ATTRIBUTE] = flip_first_bit(damaged[VECTOR_ATTRIBUTE])
    assert decode_entry(KEY, damaged) is None  # its own checksum still guards it


def with_payload(entry: dict[str, Any], change: Any) -> None:
    entry[PACKED_ATTRIBUTE] = change(entry[PACKED_ATTRIBUTE])


def deflated_high_bytes(value: bytes, dimension: int) -> bytes:
    return value[2 + 3 * dimension : -8]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda e: with_payload(e, lambda v: v[:8]), id="partial vector"),
        pytest.param(lambda e: with_payload(e, lambda v: v[:-1]), id="digest cut"),
        pytest.param(lambda e: with_payload(e, lambda v: v[:2] + flip_first_bit(v[2:])), id="flipped bit"),
        pytest.param(lambda e: with_payload(e, lambda v: bytes([9]) + v[1:]), id="unknown format"),
        pytest.param(lambda e: with_payload(e, lambda v: v[:1] + bytes([7]) + v[2:]), id="unknown kind"),
        pytest.param(
            lambda e: with_payload(e, lambda v: v[: 2 + 3 * 64] + zlib.compress(b"\x3c" * 65) + v[-8:]),
            id="high bytes of another dimension",
        ),
        pytest.param(
            lambda e: with_payload(e, lambda v: v[: 2 + 3 * 64] + deflated_high_bytes(v, 64) + b"x" + v[-8:]),
            id="trailing bytes",
        ),
        pytest.param(lambda e: e.update({PACKED_ATTRIBUTE: "not bytes"}), id="not binary"),
        pytest.param(lambda e: e.pop(PACKED_ATTRIBUTE), id="no vector"),
        pytest.param(lambda e: e.update({"cache_key": "globex#fake-embedder#64#x"}), id="another key"),
    ],
)
def test_a_damaged_entry_is_no_vector(damage: object) -> None:
    key = CacheKey.of("acme", "fake-embedder", 64, "a passage")
    entry = encode_entry(key, unit_vector(random.Random(5), 64))
    assert entry[PACKED_ATTRIBUTE][1] == KIND_SPLIT  # the high bytes deflated: every check applies
    damage(entry)  # type: ignore[operator]
    assert decode_entry(key, entry) is None


def test_an_entry_of_another_dimension_is_no_vector() -> None:
    entry = encode_entry(KEY, [0.5, 0.25, 0.125, 1.0])
    assert decode_entry(CacheKey(KEY.tenant_id, KEY.model_id, 8, KEY.text_sha256), entry) is None


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
    cache.entries[damaged_id][PACKED_ATTRIBUTE] = cache.entries[damaged_id][PACKED_ATTRIBUTE][:-4]
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
