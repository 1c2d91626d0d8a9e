"""The embedding cache on DynamoDB (the ``EmbeddingCache`` port): one item per tenant, model,
dimension and embedded text, read in batches of 100 keys (BatchGetItem) and written one item per
vector (PutItem: a batch write saves round trips, not write units, and the Embed stage writes only
what it just paid the model for). Why DynamoDB and not S3: docs/embedding-cache.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_ingest.adapters.aws import resource, translated
from rag_ingest.core.job import CacheKey
from rag_ingest.core.tracing import traced
from rag_ingest.ingest.embedding_cache import KEY_ATTRIBUTE, decode_entry, encode_entry

#: BatchGetItem's limit per request.
MAX_KEYS_PER_READ = 100
# Unprocessed keys (throttling, the 16 MB response cap) are asked for again this many times, then
# left out: a key not read is a miss, which costs an embedding, never a wrong vector.
_MAX_READ_ROUNDS = 4


@traced
class EmbeddingCacheTable:
    def __init__(self, table_name: str, table_service: Any | None = None) -> None:
        self._table_name = table_name
        self._table_service = table_service if table_service is not None else resource("dynamodb")
        self._table = self._table_service.Table(table_name)

    def lookup(self, keys: Sequence[CacheKey]) -> dict[CacheKey, list[float]]:
        by_id = {key.id: key for key in keys}
        items: dict[str, Any] = {}
        ids = list(by_id)
        for start in range(0, len(ids), MAX_KEYS_PER_READ):
            items.update(self._read({KEY_ATTRIBUTE: key_id} for key_id in ids[start : start + MAX_KEYS_PER_READ]))
        found = {key: decode_entry(key, items.get(key_id)) for key_id, key in by_id.items()}
        return {key: vector for key, vector in found.items() if vector is not None}

    def store(self, entries: Mapping[CacheKey, Sequence[float]]) -> None:
        for key, vector in entries.items():
            with translated("write embedding cache"):
                self._table.put_item(Item=encode_entry(key, vector))

    def _read(self, request_keys: Any) -> dict[str, Any]:
        """Items by key id; eventually consistent reads (half the read units: an entry never changes
        meaning once written, and one missed just now is a miss)."""
        request: dict[str, Any] = {self._table_name: {"Keys": list(request_keys)}}
        items: dict[str, Any] = {}
        for _ in range(_MAX_READ_ROUNDS):
            with translated("read embedding cache"):
                response = self._table_service.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(self._table_name, []):
                items[str(item[KEY_ATTRIBUTE])] = item
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
        return items
