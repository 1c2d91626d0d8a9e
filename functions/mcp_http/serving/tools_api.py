"""The MCP tools' ``Api`` (rag_ingest_client.mcp_server.Api) in process: each call is the HTTP
API's route, run on the domain services as the caller, with the route's JSON and its refusals.

So the tools are defined once (the client's ``build_server``) and the tenant and per-document
access apply exactly as on the API: the same service methods, given the same principal.
May import ``rag_ingest`` and ``rag_ingest_client.http``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ValidationError
from rag_ingest.answers.service import AnswerRequest
from rag_ingest.core.access import Principal
from rag_ingest.core.errors import ApiRefusal, PermanentError, TransientError, validation_problems
from rag_ingest.retrieval.search import SearchRequest
from rag_ingest.wiring import McpServices
from rag_ingest_client.http import ApiError, search_body

# The one route the tools call by path (rag_ingest_client.mcp_server._content_pages).
CONTENT_ROUTE = re.compile(r"^/documents/(?P<document_id>[^/]+)/content$")


class InProcessApi:
    """The routes the tools call, for the principal ``caller()`` returns at each call."""

    def __init__(self, services: Callable[[], McpServices], caller: Callable[[], Principal]) -> None:
        self._services = services
        self._caller = caller

    def search(
        self,
        query: str,
        *,
        k: int,
        mode: str,
        where: dict[str, Any] | None = None,
        rerank: bool | None = None,
        expand: str | None = None,
    ) -> dict[str, Any]:
        """``POST /search``."""
        body = search_body(query, k=k, mode=mode, filter=where, rerank=rerank, expand=expand)
        return self._as_caller(
            "POST /search",
            lambda caller: self._services().search.search(caller.tenant_id, SearchRequest.model_validate(body), caller),
        )

    def answer(
        self,
        query: str,
        *,
        k: int,
        mode: str,
        where: dict[str, Any] | None = None,
        rerank: bool | None = None,
        expand: str | None = None,
    ) -> dict[str, Any]:
        """``POST /answer``."""
        body = search_body(query, k=k, mode=mode, filter=where, rerank=rerank, expand=expand)
        return self._as_caller(
            "POST /answer",
            lambda caller: self._services().answers.answer(
                caller.tenant_id, AnswerRequest.model_validate(body), caller
            ),
        )

    def documents(self, *, limit: int, cursor: str | None, where: dict[str, Any] | None = None) -> dict[str, Any]:
        """``GET /documents``."""
        filter_json = json.dumps(where, separators=(",", ":")) if where is not None else None
        return self._as_caller(
            "GET /documents",
            lambda caller: self._services().documents.list(
                caller.tenant_id, limit=limit, cursor=cursor, filter_json=filter_json, principal=caller
            ),
        )

    def document(self, document_id: str) -> dict[str, Any]:
        """``GET /documents/{document_id}``."""
        return self._as_caller(
            f"GET /documents/{document_id}",
            lambda caller: self._services().documents.get(caller.tenant_id, document_id, caller),
        )

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """``GET /documents/{document_id}/content``, the only route the tools name by path."""
        found = CONTENT_ROUTE.fullmatch(path)
        if method != "GET" or found is None:
            raise ApiError(404, "NOT_FOUND", "no such route", f"{method} {path}")
        document_id = found["document_id"]
        return self._as_caller(
            f"{method} {path}",
            lambda caller: self._services().documents.content(caller.tenant_id, document_id, caller),
        )

    def _as_caller(self, route: str, run: Callable[[Principal], BaseModel]) -> dict[str, Any]:
        """``run`` as the caller, its answer as the route's JSON, its refusal as the route's."""
        with _as_api_error(route):
            return run(self._caller()).model_dump(mode="json")


@contextmanager
def _as_api_error(route: str) -> Iterator[None]:
    """The domain's refusal as the API answers it (functions/api/app.py maps the same errors), so a
    tool's error reads as it does over stdio: ``404 NOT_FOUND: no such document``."""
    try:
        yield
    except ApiRefusal as exc:
        raise ApiError(exc.status, exc.code, exc.message, route) from None
    except PermanentError as exc:
        raise ApiError(400, exc.code.value, exc.detail, route) from None
    except ValidationError as exc:
        raise ApiError(400, "INVALID_REQUEST", validation_problems(exc), route) from None
    except TransientError:
        raise ApiError(503, "SERVICE_UNAVAILABLE", "try again shortly", route) from None
