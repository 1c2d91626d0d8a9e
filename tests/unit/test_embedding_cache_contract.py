"""The embedding cache's contract, against the in-memory fake (marker ``unit``) and the DynamoDB
adapter on moto's server (marker ``integration``): lookups in batches past BatchGetItem's 100 keys,
overwrites, per-tenant keys, and a damaged item read as a miss."""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Iterator

import boto3
import pytest
from rag_ingest.adapters.embedding_cache_table import MAX_KEYS_PER_READ, EmbeddingCacheTable
from rag_ingest.core.job import CacheKey
from rag_ingest.ingest.embedding_cache import (
    CHECKSUM_ATTRIBUTE,
    DIMENSION_ATTRIBUTE,
    KEY_ATTRIBUTE,
    PACKED_ATTRIBUTE,
    VECTOR_ATTRIBUTE,
    encode_entry,
)

from tests.support.aws import moto_server
from tests.support.fakes import InMemoryEmbeddingCache
from tests.support.operations import create_embedding_cache_table

Cache = InMemoryEmbeddingCache | EmbeddingCacheTable
DIMENSION = 8


@pytest.fixture(scope="module")
def moto_cache_table() -> Iterator[str]:
    with moto_server():
        name = f"embedding-cache-{uuid.uuid4().hex[:6]}"
        create_embedding_cache_table(name)
        yield name


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.unit),
        pytest.param("dynamodb", marks=pytest.mark.integration),
    ]
)
def cache(request: pytest.FixtureRequest) -> Cache:
    if request.param == "memory":
        return InMemoryEmbeddingCache()
    return EmbeddingCacheTable(request.getfixturevalue("moto_cache_table"))


def key(text: str, tenant: str = "acme") -> CacheKey:
    return CacheKey.of(tenant, "model", DIMENSION, text)


def vector(seed: int) -> list[float]:
    return [float(seed + i) / 8 for i in range(DIMENSION)]  # exact in float32


def test_stored_vectors_are_found_in_batches_and_missing_ones_are_left_out(cache: Cache) -> None:
    run = uuid.uuid4().hex
    stored = {key(f"{run} text {n}"): vector(n) for n in range(MAX_KEYS_PER_READ + 30)}
    cache.store(stored)
    missing = [key(f"{run} never embedded {n}") for n in range(5)]
    found = cache.lookup([*stored, *missing])
    assert found == stored


def test_a_write_overwrites_and_keys_are_per_tenant(cache: Cache) -> None:
    text = f"{uuid.uuid4().hex} shared text"
    cache.store({key(text): vector(1)})
    cache.store({key(text): vector(2)})
    assert cache.lookup([key(text)]) == {key(text): vector(2)}
    assert cache.lookup([key(text, tenant="globex")]) == {}


def test_a_damaged_item_is_a_miss(cache: Cache) -> None:
    damaged = key(f"{uuid.uuid4().hex} damaged")
    entry = encode_entry(damaged, vector(3))
    entry[PACKED_ATTRIBUTE] = entry[PACKED_ATTRIBUTE][:-1]  # a partial value
    if isinstance(cache, InMemoryEmbeddingCache):
        cache.entries[damaged.id] = entry
    else:
        boto3.resource("dynamodb").Table(cache._table_name).put_item(Item=entry)
    assert cache.lookup([damaged]) == {}
    cache.store({damaged: vector(3)})  # recomputed and rewritten whole
    assert cache.lookup([damaged]) == {damaged: vector(3)}


def test_an_item_of_the_unpacked_format_is_still_found(cache: Cache) -> None:
    """Entries written before the packed format (float32 bytes, dimension, hex sha256) are hits."""
    old = key(f"{uuid.uuid4().hex} written before")
    data = struct.pack(f"<{DIMENSION}f", *vector(4))
    entry = {
        KEY_ATTRIBUTE: old.id,
        VECTOR_ATTRIBUTE: data,
        DIMENSION_ATTRIBUTE: DIMENSION,
        CHECKSUM_ATTRIBUTE: hashlib.sha256(data).hexdigest(),
    }
    if isinstance(cache, InMemoryEmbeddingCache):
        cache.entries[old.id] = entry
    else:
        boto3.resource("dynamodb").Table(cache._table_name).put_item(Item=entry)
    assert cache.lookup([old]) == {old: vector(4)}
