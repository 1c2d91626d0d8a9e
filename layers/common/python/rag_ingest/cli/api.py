"""The HTTP API as the CLI calls it (routes and bodies: ``GET /openapi.json``), and where it is:
the local stack (``ApiUrl`` of ``.local/runtime/outputs.json``) or a deployed stack (its outputs)."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_ingest.cli.signin import CognitoClient, CognitoSignIn, LocalSignIn, TokenCache, TokenSource, cognito_domain
from rag_ingest.cli.transport import CliError, HttpError, NetworkError, request_json


class TargetError(CliError):
    """The target cannot serve any request (unreachable, or the caller is not let in): no use going on."""


DEFAULT_LOCAL_TENANT = "demo"
DEFAULT_LOCAL_USER = "cli-user"
TERMINAL = frozenset({"READY", "FAILED", "DELETED", "EXPIRED"})


@dataclass
class Target:
    """Where the commands go and who they are."""

    label: str  # "the local stack" or "stack NAME", for messages
    api_url: str
    tokens: TokenSource
    login_hint: str  # the command that signs in again

    def describe_network_error(self, exc: NetworkError) -> str:
        if self.label == "the local stack":
            return f"{exc} (is the local stack running? start it with `make stack-up`)"
        return str(exc)


def local_target(
    outputs_path: Path,
    *,
    username: str | None,
    tenant_id: str | None,
    cache: TokenCache,
    groups: list[str] | None = None,
) -> Target:
    if not outputs_path.is_file():
        raise CliError(f"the local stack is not running ({outputs_path} not found): start it with `make stack-up`")
    try:
        api_url = str(json.loads(outputs_path.read_text())["ApiUrl"]).rstrip("/")
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{outputs_path} has no ApiUrl: restart the local stack") from None
    previous = cache.load(f"local:{api_url}") or {}
    # The user and tenant of the last `login` stay in effect until another login names others.
    sign_in = LocalSignIn(
        api_url=api_url,
        username=username or previous.get("username") or DEFAULT_LOCAL_USER,
        tenant_id=tenant_id or previous.get("tenant_id") or DEFAULT_LOCAL_TENANT,
        cache=cache,
        groups=tuple(_groups(groups, previous, renamed=bool(username or tenant_id))),
    )
    return Target("the local stack", api_url, sign_in, "rag-ingest login --user NAME --tenant TENANT")


def _groups(given: list[str] | None, previous: dict[str, Any], *, renamed: bool) -> list[str]:
    """The local token's groups: those given, else the last login's unless another user or tenant is named."""
    if given is not None:
        return given
    return [] if renamed else [str(group) for group in previous.get("groups") or []]


def deployed_target(stack_name: str, outputs: dict[str, str], region: str | None, cache: TokenCache) -> Target:
    missing = [key for key in ("ApiUrl", "UserPoolClientId", "UserPoolDomain") if not outputs.get(key)]
    if missing:
        raise CliError(f"stack {stack_name} has no output {', '.join(missing)} (deployed from an older version?)")
    client = CognitoClient(
        domain=cognito_domain(outputs["UserPoolDomain"], region), client_id=outputs["UserPoolClientId"]
    )
    sign_in = CognitoSignIn(stack_name=stack_name, client=client, cache=cache)
    return Target(
        f"stack {stack_name}", outputs["ApiUrl"].rstrip("/"), sign_in, f"rag-ingest --stack {stack_name} login"
    )


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
