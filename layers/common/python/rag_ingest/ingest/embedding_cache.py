"""The content-addressed embedding cache: a vector is found again by what was embedded, not by where.

Key. ``sha256(text embedded)`` + model id + dimension, inside the tenant's own key space: one
tenant never reads (or times) another's entries. A new version of a document whose chunks did
not change, or the same bytes under another name, finds its vectors here and pays for nothing.

Entry. The vector as little-endian float32 (what the k-NN index stores anyway: half the bytes of
float64, so half the write units) with its dimension and a sha256 checksum of those bytes. An
entry that fails any check (wrong dimension, wrong length, bad checksum, missing field) is a miss:
the chunk is embedded again and its entry rewritten. Entries are written only after the model
returned the vectors (the pipeline's Embed stage), never before.

The store behind it is the ``EmbeddingCache`` port (rag_ingest.core.ports); the DynamoDB adapter is
``rag_ingest.adapters.embedding_cache_table`` (why DynamoDB and not S3: docs/embedding-cache.md).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rag_ingest.core.models import CacheKey

#: The entry's attributes (the DynamoDB item's, and the in-memory fake's).
KEY_ATTRIBUTE = "cache_key"
VECTOR_ATTRIBUTE = "vector"
DIMENSION_ATTRIBUTE = "dimension"
CHECKSUM_ATTRIBUTE = "checksum"


def encode_entry(key: CacheKey, vector: Sequence[float]) -> dict[str, Any]:
    """The stored entry of ``vector`` (raises ValueError when it does not have the key's dimension)."""
    if len(vector) != key.dimension:
        raise ValueError(f"a vector of {len(vector)} floats under a key of dimension {key.dimension}")
    data = struct.pack(f"<{len(vector)}f", *vector)
    return {
        KEY_ATTRIBUTE: key.id,
        VECTOR_ATTRIBUTE: data,
        DIMENSION_ATTRIBUTE: key.dimension,
        CHECKSUM_ATTRIBUTE: hashlib.sha256(data).hexdigest(),
    }


def decode_entry(key: CacheKey, entry: Any) -> list[float] | None:
    """The vector of a stored entry, or None when the entry is not a whole, intact vector for ``key``."""
    if not isinstance(entry, dict) or entry.get(KEY_ATTRIBUTE) != key.id:
        return None
    data = entry.get(VECTOR_ATTRIBUTE)
    data = getattr(data, "value", data)  # boto3 hands binary attributes back wrapped in Binary
    if not isinstance(data, bytes | bytearray) or len(data) != 4 * key.dimension:
        return None
    try:
        dimension = int(entry.get(DIMENSION_ATTRIBUTE, -1))
    except (TypeError, ValueError):
        return None
    if dimension != key.dimension or entry.get(CHECKSUM_ATTRIBUTE) != hashlib.sha256(data).hexdigest():
        return None
    return list(struct.unpack(f"<{key.dimension}f", bytes(data)))


class NoEmbeddingCache:
    """The ``EmbeddingCache`` port when no cache is configured: every lookup misses, nothing is kept."""

    def lookup(self, keys: Sequence[CacheKey]) -> dict[CacheKey, list[float]]:
        return {}

    def store(self, entries: Mapping[CacheKey, Sequence[float]]) -> None:
        return None
