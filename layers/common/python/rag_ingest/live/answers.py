"""Answers streamed over the live channel: the WebSocket route ``answer`` takes
``{"action": "answer", "request_id", "request"}`` (``request`` is ``POST /answer``'s body) and posts
the answer's events back to the connection that asked, each with its ``request_id``:
``answer.passages``, ``answer.delta``..., ``answer.completed`` (rag_ingest.answers.service), or
``answer.failed`` with a code. The asker is the connection's principal as ``$connect`` recorded it,
so tenant and per-document access are the search's. Imports ``core``, ``answers``, ``live``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from rag_ingest.answers.service import AnswerRequest, AnswerService
from rag_ingest.core.access import DEFAULT_TENANT_ADMIN_GROUP
from rag_ingest.core.errors import TransientError, validation_problems
from rag_ingest.core.logs import logger
from rag_ingest.live.connections import ConnectionGoneError, ConnectionPoster, ConnectionStore, post_with_retries

ROUTE_KEY = "answer"
#: The codes of ``answer.failed``: the message was not an answer request, the connection is not
#: (or no longer) recorded, the model or the index is unavailable for now, or something failed.
INVALID_REQUEST, UNKNOWN_CONNECTION, SERVICE_UNAVAILABLE, INTERNAL_ERROR = (
    "INVALID_REQUEST",
    "UNKNOWN_CONNECTION",
    "SERVICE_UNAVAILABLE",
    "INTERNAL_ERROR",
)


class AnswerMessage(BaseModel):
    """What a client sends on the live channel to ask for an answer."""

    action: Literal["answer"]
    #: The client's name for this answer; every event about it carries it back.
    request_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    request: AnswerRequest


def _parsed(body: str | None) -> tuple[Any, str | None]:
    """The message as JSON (None when it is not JSON), and its request id when it names a usable one."""
    try:
        raw = json.loads(body or "")
    except ValueError:
        return None, None
    request_id = raw.get("request_id") if isinstance(raw, dict) else None
    return raw, request_id if isinstance(request_id, str) and len(request_id) <= 64 else None


class LiveAnswers:
    """Streams one answer to the connection that asked for it."""

    def __init__(
        self,
        answers: AnswerService,
        store: ConnectionStore,
        poster: ConnectionPoster,
        *,
        tenant_admin_group: str = DEFAULT_TENANT_ADMIN_GROUP,
        post_max_attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._answers = answers
        self._store = store
        self._poster = poster
        self._tenant_admin_group = tenant_admin_group
        self._post_max_attempts = post_max_attempts
        self._sleep = sleep

    def handle(self, connection_id: str, body: str | None) -> str:
        """Answers the message ``body`` from ``connection_id``; returns how it ended (for the logs).

        A refusal is an ``answer.failed`` event, never an exception: the route has no one else to
        tell. A connection gone mid-answer ends it quietly."""
        try:
            return self._handle(connection_id, body)
        except ConnectionGoneError:
            logger.info("answer abandoned: connection gone", extra={"connection_id": connection_id})
            return "gone"

    def _handle(self, connection_id: str, body: str | None) -> str:
        raw, request_id = _parsed(body)
        connection = self._store.get(connection_id)
        if connection is None:
            return self._fail(connection_id, request_id, UNKNOWN_CONNECTION, "this connection is not signed in")
        try:
            message = AnswerMessage.model_validate(raw)
        except ValidationError as exc:
            return self._fail(connection_id, request_id, INVALID_REQUEST, validation_problems(exc, "body"))
        principal = connection.principal(self._tenant_admin_group)
        try:
            for event in self._answers.stream(principal.tenant_id, message.request, principal):
                self._post(connection_id, event.model_dump(mode="json") | {"request_id": message.request_id})
        except TransientError as exc:
            logger.warning("answer failed for now", extra={"error": str(exc)})
            return self._fail(connection_id, message.request_id, SERVICE_UNAVAILABLE, "try again shortly")
        except ConnectionGoneError:
            raise
        except Exception:
            logger.exception("answer failed")
            return self._fail(connection_id, message.request_id, INTERNAL_ERROR, "the answer failed")
        return "answered"

    def _fail(self, connection_id: str, request_id: str | None, code: str, message: str) -> str:
        event: dict[str, Any] = {"type": "answer.failed", "request_id": request_id}
        self._post(connection_id, event | {"error": {"code": code, "message": message}})
        return code

    def _post(self, connection_id: str, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode()
        post_with_retries(self._poster, connection_id, data, max_attempts=self._post_max_attempts, sleep=self._sleep)
