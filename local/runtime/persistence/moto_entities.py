"""Every kept entity of moto's backends, by kind: S3 keys, DynamoDB items, SQS messages.

:class:`MotoEntities` dispatches on an :data:`EntityKey`'s kind to that service's module
(:data:`SERVICES`) and installs every service's hooks at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from local.runtime.persistence.base import EntityKey, Patches, ServiceEntities, Touch
from local.runtime.persistence.blobs import BlobStore
from local.runtime.persistence.dynamodb import DynamoDbEntities
from local.runtime.persistence.s3 import S3Entities
from local.runtime.persistence.sqs import SqsEntities


class MotoEntities:
    """Reads and writes entities in moto's backends (one account and region)."""

    def __init__(self, account_id: str, region: str) -> None:
        services: list[ServiceEntities] = [
            S3Entities(account_id),
            DynamoDbEntities(account_id, region),
            SqsEntities(account_id, region),
        ]
        self.services: dict[str, ServiceEntities] = {service.kind: service for service in services}

    def _service(self, key: EntityKey) -> ServiceEntities:
        service = self.services.get(key[0])
        if service is None:
            raise ValueError(f"unknown entity kind {key[0]!r}")
        return service

    def read(self, key: EntityKey, blobs: BlobStore) -> Any:
        return self._service(key).read(key, blobs)

    def write(self, key: EntityKey, record: Any, blobs: BlobStore) -> None:
        self._service(key).write(key, record, blobs)

    def all_entities(self, blobs: BlobStore) -> Iterator[tuple[EntityKey, Any]]:
        for service in self.services.values():
            yield from service.all_entities(blobs)

    def containers(self) -> dict[str, set[str]]:
        return {kind: service.containers() for kind, service in self.services.items()}

    def hook(self, touch: Touch) -> Patches:
        """Every service's hooks, reporting changed entities to ``touch``; remove them with the result."""
        patches = Patches()
        for service in self.services.values():
            service.hook(patches, touch)
        return patches
