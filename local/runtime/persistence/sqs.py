"""SQS messages in the kept state: each message as moto holds it, receive count included.

Hooked wherever a message appears, leaves or is received: ``Queue.add_message`` and
``delete_message``, ``SQSBackend.receive_message`` and ``purge_queue`` (a queue's DLQ too). A
restored message is visible at once: whoever had received it before the stop is gone.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

from local.runtime.persistence.base import EntityKey, Patches, Touch
from local.runtime.persistence.blobs import BlobStore


class SqsEntities:
    kind = "sqs"

    def __init__(self, account_id: str, region: str) -> None:
        self.account_id = account_id
        self.region = region

    def backend(self) -> Any:
        from moto.sqs.models import sqs_backends

        return sqs_backends[self.account_id][self.region]

    def read(self, key: EntityKey, blobs: BlobStore) -> bytes | None:
        queue = self.backend().queues.get(key[1])
        if queue is None:
            return None
        for message in list(queue._messages):
            if message.id == key[2]:
                return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        return None

    def all_entities(self, blobs: BlobStore) -> Iterator[tuple[EntityKey, Any]]:
        for queue_name, queue in list(self.backend().queues.items()):
            for message in list(queue._messages):
                yield ("sqs", queue_name, message.id), pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)

    def containers(self) -> set[str]:
        return set(self.backend().queues)

    def write(self, key: EntityKey, record: bytes, blobs: BlobStore) -> None:
        message = pickle.loads(record)
        message.visible_at = 0.0
        self.backend().queues[key[1]]._messages.append(message)

    def hook(self, patches: Patches, touch: Touch) -> None:
        from moto.sqs.models import Queue, SQSBackend

        def message_added(original: Callable[..., Any]) -> Callable[..., Any]:
            def changed(queue: Any, message: Any) -> Any:
                try:
                    return original(queue, message)
                finally:
                    touch(("sqs", queue.name, message.id))

            return changed

        patches.wrap(Queue, "add_message", message_added)
        patches.wrap(Queue, "delete_message", _queue_changed(touch, _one_queue))
        patches.wrap(SQSBackend, "receive_message", _queue_changed(touch, _queue_and_its_dlq))
        patches.wrap(SQSBackend, "purge_queue", _queue_changed(touch, _queue_and_its_dlq))


def _queue_changed(
    touch: Touch, queues_of: Callable[..., list[Any]]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Any message that appeared, left or was received in the queues ``queues_of`` names."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def changed(owner: Any, *args: Any, **kwargs: Any) -> Any:
            queues = queues_of(owner, *args, **kwargs)
            before = {queue.name: {message.id for message in list(queue._messages)} for queue in queues}
            result = None
            try:
                result = original(owner, *args, **kwargs)
                return result
            finally:
                received = {message.id for message in result or () if hasattr(message, "id")}
                for queue in queues:
                    after = {message.id for message in list(queue._messages)}
                    for message_id in (before[queue.name] ^ after) | (received & after):
                        touch(("sqs", queue.name, message_id))

        return changed

    return make


def _one_queue(queue: Any, *_: Any, **__: Any) -> list[Any]:
    return [queue]


def _queue_and_its_dlq(backend: Any, queue_name: str, *_: Any, **__: Any) -> list[Any]:
    queue = backend.queues.get(queue_name)
    if queue is None:
        return []
    return [queue] + ([queue.dead_letter_queue] if queue.dead_letter_queue is not None else [])
