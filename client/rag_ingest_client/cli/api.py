"""The HTTP API as the CLI calls it: one method per route (routes and bodies: ``GET /openapi.json``),
the token renewed once after a 401 (``rag_ingest_client.http.BearerAuth``), refusals explained in one line."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from rag_ingest_client.cli.errors import CliError, TargetError
from rag_ingest_client.cli.targets import Target
from rag_ingest_client.http import ApiError, ApiSession, RagIngestError, Unreachable, search_body

#: The statuses a document does not leave by itself.
TERMINAL = frozenset({"READY", "FAILED", "DELETED", "EXPIRED"})
#: How often a command that waits reads the document again.
POLL_SECONDS = 0.5


class ApiClient:
    """The routes of the API as ``target``'s caller, over one connection pool."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.session = ApiSession(target.api_url, target.tokens)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        try:
            return self.session.call(method, path, json=body, headers=headers, params=params)
        except ApiError as exc:
            raise self._explain(exc) from None
        except Unreachable as exc:
            raise TargetError(self.target.describe_network_error(exc)) from None

    def _explain(self, exc: ApiError) -> RagIngestError:
        if exc.status == 401:
            return TargetError(
                f"401 Unauthorized: {self.target.label} refused the token; sign in with `{self.target.login_hint}`"
            )
        if exc.status == 403 and exc.code in ("ACCESS_CHANGE_FORBIDDEN", "EDIT_FORBIDDEN"):
            return exc  # a refusal of this one change (docs/api.md, "Per-document access"), not of the user
        if exc.status == 403:
            return TargetError(f"403 Forbidden: {exc.message} (the signed-in user has no valid tenant?)")
        if exc.status == 404:
            return CliError(f"404 Not Found: {exc.message}")
        return exc

    def create_upload(
        self,
        filename: str,
        content_type: str,
        metadata: dict[str, Any] | None = None,
        access: dict[str, list[str]] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"filename": filename, "content_type": content_type}
        if metadata:
            body["metadata"] = metadata
        if access:
            body["access"] = access
        return dict(self.call("POST", "/documents", body))

    def document(self, document_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/documents/{_segment(document_id)}"))

    def documents(self, *, limit: int, cursor: str | None, where: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        if where is not None:
            params["filter"] = json.dumps(where, separators=(",", ":"))
        return dict(self.call("GET", "/documents", params=params))

    def update_metadata(self, document_id: str, metadata: dict[str, Any], *, revision: int) -> dict[str, Any]:
        """PATCH the document's metadata, only if it is still at ``revision`` (412 otherwise)."""
        path = f"/documents/{_segment(document_id)}"
        return dict(self.call("PATCH", path, {"metadata": metadata}, headers={"If-Match": f'"{revision}"'}))

    def update_access(self, document_id: str, access: dict[str, Any], *, revision: int) -> dict[str, Any]:
        """PATCH who may read the document, only if it is still at ``revision`` (412 otherwise)."""
        path = f"/documents/{_segment(document_id)}"
        return dict(self.call("PATCH", path, {"access": access}, headers={"If-Match": f'"{revision}"'}))

    def retry(self, document_id: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/documents/{_segment(document_id)}/retry"))

    def delete(self, document_id: str) -> dict[str, Any]:
        return dict(self.call("DELETE", f"/documents/{_segment(document_id)}") or {})

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
        body = search_body(query, k=k, mode=mode, filter=where, rerank=rerank, expand=expand)
        return dict(self.call("POST", "/search", body))

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
        """``POST /answer``: a cited answer from the passages a search with these arguments finds."""
        body = search_body(query, k=k, mode=mode, filter=where, rerank=rerank, expand=expand)
        return dict(self.call("POST", "/answer", body))

    # ------------------------------------------------------------ sources (docs/sources.md)
    def create_source(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call("POST", "/sources", body))

    def sources(self) -> list[dict[str, Any]]:
        return list((self.call("GET", "/sources") or {}).get("sources") or [])

    def source(self, source_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/sources/{_segment(source_id)}"))

    def delete_source(self, source_id: str, *, documents: str) -> None:
        """``documents``: ``delete`` (the source's documents go too) or ``keep``."""
        self.call("DELETE", f"/sources/{_segment(source_id)}", params={"documents": documents})

    def start_sync(self, source_id: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/sources/{_segment(source_id)}/sync"))

    def syncs(self, source_id: str) -> list[dict[str, Any]]:
        return list((self.call("GET", f"/sources/{_segment(source_id)}/syncs") or {}).get("syncs") or [])

    def sync(self, source_id: str, sync_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/sources/{_segment(source_id)}/syncs/{_segment(sync_id)}"))

    def put_item(self, source_id: str, external_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call("PUT", f"/sources/{_segment(source_id)}/items/{_segment(external_id)}", body))

    def delete_item(self, source_id: str, external_id: str) -> None:
        self.call("DELETE", f"/sources/{_segment(source_id)}/items/{_segment(external_id)}")


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")
