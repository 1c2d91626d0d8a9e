"""What the kept state's per-service modules share: the entity key, the refusal, moto patches.

An entity is one S3 key with its versions, one DynamoDB item or one SQS message, named by an
:data:`EntityKey` whose first element is its kind (``"s3"``, ``"dynamodb"``, ``"sqs"``). Each
service module hooks moto where such an entity changes (:class:`Patches`) and reports its key.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from local.runtime.persistence.blobs import BlobStore

# ("s3", bucket, key) | ("dynamodb", table, hash key JSON, range key JSON or "") | ("sqs", queue name, message id)
EntityKey = tuple[str, ...]
Touch = Callable[[EntityKey], None]


class StateRefusedError(Exception):
    """The kept state cannot be loaded by this build; the message says why and what to do."""


def refusal(state_dir: Path, why: str) -> StateRefusedError:
    return StateRefusedError(
        f"the local stack's kept state in {state_dir} {why}. Nothing was loaded. Either run the build "
        f"that wrote it, or set it aside and start empty: `.venv/bin/python -m local.runtime reset` "
        f"(moves it to {state_dir.name}.old-<time>; documents, uploads and statuses start empty)."
    )


class Patches:
    """Methods of moto's classes wrapped in place; :meth:`remove` puts every original back."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = getattr(owner, name)
        wrapped = functools.wraps(original)(make(original))
        setattr(owner, name, wrapped)
        self._undo.append(lambda: setattr(owner, name, original))

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()


class ServiceEntities(Protocol):
    """One service's entities in moto's backend (one account and region)."""

    kind: str

    def read(self, key: EntityKey, blobs: BlobStore) -> Any:
        """The entity's whole state (None: it is gone)."""

    def write(self, key: EntityKey, record: Any, blobs: BlobStore) -> None:
        """Put a kept state back (at start, into freshly provisioned containers)."""

    def all_entities(self, blobs: BlobStore) -> Iterator[tuple[EntityKey, Any]]: ...

    def containers(self) -> set[str]:
        """The buckets, tables or queues that exist now."""

    def hook(self, patches: Patches, touch: Touch) -> None:
        """Report to ``touch`` the key of every entity moto changes from now on."""
