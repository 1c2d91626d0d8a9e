"""The HTTP API as the CLI calls it: one method per route (routes and bodies: ``GET /openapi.json``),
with one silent token renewal after a 401 and errors turned into one-line messages."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from rag_ingest_client.cli.targets import Target, TargetError
from rag_ingest_client.cli.transport import CliError, HttpError, NetworkError, request_json

#: The statuses a document does not leave by itself.
TERMINAL = frozenset({"READY", "FAILED", "DELETED", "EXPIRED"})
#: How often a command that waits reads the document again.
POLL_SECONDS = 0.5


@dataclass
class ApiClient:
    target: Target

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        url = f"{self.target.api_url}{path}"
        for attempt in (1, 2):
            try:
                sent = {**self.target.tokens.headers(), **(headers or {})}
                _, answer = request_json(method, url, body=body, headers=sent)
                return answer
            except HttpError as exc:
                if exc.status == 401 and attempt == 1:
                    # An expired or rotated token (the local issuer's key is new at each start): once more, fresh.
                    self.target.tokens.invalidate()
                    continue
                raise self._explain(exc) from None
            except NetworkError as exc:
                raise TargetError(self.target.describe_network_error(exc)) from None
        raise AssertionError("unreachable")

    def _explain(self, exc: HttpError) -> CliError:
        if exc.status == 401:
            return TargetError(
                f"401 Unauthorized: {self.target.label} refused the token; sign in with `{self.target.login_hint}`"
            )
        if exc.status == 403 and exc.code == "ACCESS_CHANGE_FORBIDDEN":
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
        query = urllib.parse.urlencode(params)
        return dict(self.call("GET", f"/documents?{query}"))

    def update_metadata(self, document_id: str, metadata: dict[str, Any], *, revision: int) -> dict[str, Any]:
        """PATCH the document's metadata, only if it is still at ``revision`` (412 otherwise)."""
        path = f"/documents/{_segment(document_id)}"
        return dict(self.call("PATCH", path, {"metadata": metadata}, headers={"If-Match": f'"{revision}"'}))

    def update_access(self, document_id: str, access: dict[str, list[str]], *, revision: int) -> dict[str, Any]:
        """PATCH who may read the document, only if it is still at ``revision`` (412 otherwise)."""
        path = f"/documents/{_segment(document_id)}"
        return dict(self.call("PATCH", path, {"access": access}, headers={"If-Match": f'"{revision}"'}))

    def retry(self, document_id: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/documents/{_segment(document_id)}/retry"))

    def delete(self, document_id: str) -> dict[str, Any]:
        return dict(self.call("DELETE", f"/documents/{_segment(document_id)}") or {})

    def search(
        self, query: str, *, k: int, mode: str, where: dict[str, Any] | None = None, rerank: bool | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "k": k, "mode": mode}
        if where is not None:
            body["filter"] = where
        if rerank is not None:
            body["rerank"] = rerank
        return dict(self.call("POST", "/search", body))


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")
