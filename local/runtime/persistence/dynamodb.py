"""DynamoDB items in the kept state: each item's attributes, by table and key.

Hooked at ``put_item``, ``update_item`` and ``delete_item`` of moto's backend (batch and
transactional writes go through them). Restoring puts items straight into the table: no stream
record, no condition.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from local.runtime.persistence.base import EntityKey, Patches, Touch
from local.runtime.persistence.blobs import BlobStore


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class DynamoDbEntities:
    kind = "dynamodb"

    def __init__(self, account_id: str, region: str) -> None:
        self.account_id = account_id
        self.region = region

    # Looked up at each use: moto may replace a table object (a failed transaction).
    def backend(self) -> Any:
        from moto.dynamodb.models import dynamodb_backends

        return dynamodb_backends[self.account_id][self.region]

    def entity_key(self, table_name: str, key_or_item: dict[str, Any]) -> EntityKey | None:
        table = self.backend().tables.get(table_name)
        if table is None:
            return None
        hash_value = key_or_item.get(table.hash_key_attr)
        if hash_value is None:
            return None
        range_value = key_or_item.get(table.range_key_attr) if table.range_key_attr else None
        return ("dynamodb", table_name, _json_key(hash_value), "" if range_value is None else _json_key(range_value))

    def _item(self, key: EntityKey) -> Any:
        from moto.dynamodb.models.dynamo_type import DynamoType

        table = self.backend().tables.get(key[1])
        if table is None:
            return None
        hash_value = DynamoType(json.loads(key[2]))
        if table.range_key_attr:
            return table.items.get(hash_value, {}).get(DynamoType(json.loads(key[3])))
        return table.items.get(hash_value)

    def read(self, key: EntityKey, blobs: BlobStore) -> dict[str, Any] | None:
        item = self._item(key)
        return None if item is None else _attributes(item)

    def all_entities(self, blobs: BlobStore) -> Iterator[tuple[EntityKey, Any]]:
        for table_name, table in list(self.backend().tables.items()):
            for item in _items_of(table):
                attributes = _attributes(item)
                key = self.entity_key(table_name, attributes)
                if key is not None:
                    yield key, attributes

    def containers(self) -> set[str]:
        return set(self.backend().tables)

    def write(self, key: EntityKey, record: dict[str, Any], blobs: BlobStore) -> None:
        from moto.dynamodb.models.dynamo_type import DynamoType, Item

        table = self.backend().tables[key[1]]
        hash_value = DynamoType(json.loads(key[2]))
        range_value = DynamoType(json.loads(key[3])) if table.range_key_attr else None
        item = Item(hash_value, range_value, record)
        if range_value is not None:
            table.items[hash_value][range_value] = item
        else:
            table.items[hash_value] = item

    def hook(self, patches: Patches, touch: Touch) -> None:
        from moto.dynamodb.models import DynamoDBBackend

        def item_change(argument: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
            def make(original: Callable[..., Any]) -> Callable[..., Any]:
                def changed(backend: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
                    key_or_item = args[0] if args else kwargs.get(argument)
                    try:
                        return original(backend, table_name, *args, **kwargs)
                    finally:
                        if isinstance(key_or_item, dict):
                            entity = self.entity_key(table_name, key_or_item)
                            if entity is not None:
                                touch(entity)

                return changed

            return make

        patches.wrap(DynamoDBBackend, "put_item", item_change("item_attrs"))
        patches.wrap(DynamoDBBackend, "update_item", item_change("key"))
        patches.wrap(DynamoDBBackend, "delete_item", item_change("key"))


def _items_of(table: Any) -> list[Any]:
    # list() of a dict view copies it in one step under the GIL: safe while moto writes meanwhile.
    hash_sets = list(table.items.values())
    if not table.range_key_attr:
        return hash_sets
    return [item for hash_set in hash_sets for item in list(hash_set.values())]


def _attributes(item: Any) -> dict[str, Any]:
    for _ in range(5):
        try:
            return dict(item.to_json()["Attributes"])
        except RuntimeError:  # an update changed the item while it was read: read it again
            time.sleep(0.001)
    return dict(item.to_json()["Attributes"])
