"""The content-addressed embedding cache: a vector is found again by what was embedded, not by where.

A key is the tenant, the model id, the dimension and the sha256 of the text embedded: a new
version whose chunks did not change, or the same bytes under another name, finds its vectors and
pays for nothing, and one tenant never reads another's entries. An entry is the vector as float32,
exactly, packed under DynamoDB's 4 KB (:func:`encode_entry`) and checked when read
(:func:`decode_entry`: an entry failing any check is a miss, so it is embedded again); entries of
the first, unpacked format are still read. Entries are written only after the model returned the
vectors. The store is the ``EmbeddingCache`` port. The format and its cost: docs/embedding-cache.md.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from rag_ingest.core.job import CacheKey

#: The entry's attributes (the DynamoDB item's, and the in-memory fake's).
KEY_ATTRIBUTE = "cache_key"
PACKED_ATTRIBUTE = "v"
#: The attributes of entries written before the packed format: still read, no longer written.
VECTOR_ATTRIBUTE = "vector"
DIMENSION_ATTRIBUTE = "dimension"
CHECKSUM_ATTRIBUTE = "checksum"

#: The packed value: format byte, kind byte, the payload, then the digest of the float32 bytes.
FORMAT = 2
KIND_RAW = 0  # the float32 bytes as they are
KIND_SPLIT = 1  # the three low bytes of every float, then the high bytes deflated
DIGEST_BYTES = 8
_HEADER_BYTES = 2


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()[:DIGEST_BYTES]


def pack_vector(vector: Sequence[float]) -> bytes:
    """The packed value of ``vector``: its float32 bytes, split and deflated when that is smaller."""
    data = struct.pack(f"<{len(vector)}f", *vector)
    high = zlib.compress(data[3::4], 9)
    if len(high) < len(vector):
        kind, payload = KIND_SPLIT, data[0::4] + data[1::4] + data[2::4] + high
    else:
        kind, payload = KIND_RAW, data
    return bytes((FORMAT, kind)) + payload + _digest(data)


def unpack_vector(value: bytes, dimension: int) -> list[float] | None:
    """The vector of a packed value of ``dimension`` floats, or None when it is not one, intact."""
    if len(value) < _HEADER_BYTES + DIGEST_BYTES or value[0] != FORMAT:
        return None
    kind, payload, digest = value[1], value[_HEADER_BYTES:-DIGEST_BYTES], value[-DIGEST_BYTES:]
    if kind == KIND_RAW:
        data = payload
    elif kind == KIND_SPLIT and len(payload) > 3 * dimension:
        try:
            inflater = zlib.decompressobj()
            high = inflater.decompress(payload[3 * dimension :], dimension + 1)
        except zlib.error:
            return None
        if len(high) != dimension or not inflater.eof or inflater.unused_data:
            return None
        joined = bytearray(4 * dimension)
        for plane in range(3):
            joined[plane::4] = payload[plane * dimension : (plane + 1) * dimension]
        joined[3::4] = high
        data = bytes(joined)
    else:
        return None
    if len(data) != 4 * dimension or _digest(data) != digest:
        return None
    return list(struct.unpack(f"<{dimension}f", data))


def encode_entry(key: CacheKey, vector: Sequence[float]) -> dict[str, Any]:
    """The stored entry of ``vector`` (raises ValueError when it does not have the key's dimension)."""
    if len(vector) != key.dimension:
        raise ValueError(f"a vector of {len(vector)} floats under a key of dimension {key.dimension}")
    return {KEY_ATTRIBUTE: key.id, PACKED_ATTRIBUTE: pack_vector(vector)}


def decode_entry(key: CacheKey, entry: Any) -> list[float] | None:
    """The vector of a stored entry, or None when the entry is not a whole, intact vector for ``key``."""
    if not isinstance(entry, dict) or entry.get(KEY_ATTRIBUTE) != key.id:
        return None
    packed = _binary(entry.get(PACKED_ATTRIBUTE))
    if packed is not None:
        return unpack_vector(packed, key.dimension)
    return _decode_unpacked_entry(key, entry)


def _binary(value: Any) -> bytes | None:
    value = getattr(value, "value", value)  # boto3 hands binary attributes back wrapped in Binary
    return bytes(value) if isinstance(value, bytes | bytearray) else None


def _decode_unpacked_entry(key: CacheKey, entry: dict[str, Any]) -> list[float] | None:
    """An entry of the first format: the float32 bytes, the dimension and a hex sha256 of the bytes."""
    data = _binary(entry.get(VECTOR_ATTRIBUTE))
    if data is None or len(data) != 4 * key.dimension:
        return None
    try:
        dimension = int(entry.get(DIMENSION_ATTRIBUTE, -1))
    except (TypeError, ValueError):
        return None
    if dimension != key.dimension or entry.get(CHECKSUM_ATTRIBUTE) != hashlib.sha256(data).hexdigest():
        return None
    return list(struct.unpack(f"<{key.dimension}f", data))


def entry_size_bytes(entry: Mapping[str, Any]) -> int:
    """The entry's size as DynamoDB bills it: each attribute's name plus its value's bytes (UTF-8 for
    strings, raw length for binary; numbers taken at their digits, an upper bound)."""
    size = 0
    for name, value in entry.items():
        raw = getattr(value, "value", value)
        size += len(name.encode()) + (len(raw) if isinstance(raw, bytes | bytearray) else len(str(raw).encode()))
    return size


class NoEmbeddingCache:
    """The ``EmbeddingCache`` port when no cache is configured: every lookup misses, nothing is kept."""

    def lookup(self, keys: Sequence[CacheKey]) -> dict[CacheKey, list[float]]:
        return {}

    def store(self, entries: Mapping[CacheKey, Sequence[float]]) -> None:
        return None
