"""A client of the running local stack, as a browser or a user's script would use it.

It signs in with the local identity provider (``POST /_local/oidc/token``, dev only: a user
name and a tenant, no password), caches the ID token until shortly before it expires, and sends
it as ``Authorization: Bearer`` on every API request, as the page does with a Cognito token.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from rag_ingest.adapters.stack_resources import LOCAL_OUTPUTS

TERMINAL = frozenset({"READY", "FAILED", "DELETED"})
TOKEN_PATH = "/_local/oidc/token"
# A cached token is renewed this long before it expires (a request must not carry a token that
# expires on the way).
TOKEN_RENEWAL_MARGIN_SECONDS = 60.0


class SignInError(RuntimeError):
    """The local identity provider refused to issue a token (a bad tenant or user name)."""


@dataclass
class OfflineClient:
    api_url: str
    tenant_id: str = "demo"
    username: str | None = None
    timeout: float = 30.0
    #: The token's cognito:groups (e.g. the tenant-admin group), as the local issuer signs them.
    groups: tuple[str, ...] = ()
    _token: str | None = field(default=None, init=False, repr=False)
    _token_renew_at: float = field(default=0.0, init=False, repr=False)
    _token_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # One HTTP session per thread (requests' sessions are not thread-safe): its connections stay open
    # between requests, as a browser's do, instead of a TCP connection and server thread per request.
    _sessions: threading.local = field(default_factory=threading.local, init=False, repr=False)

    def __post_init__(self) -> None:
        self.api_url = self.api_url.rstrip("/")
        if self.username is None:
            self.username = f"{self.tenant_id}-user"

    @classmethod
    def from_outputs(
        cls, tenant_id: str = "demo", outputs: Path = LOCAL_OUTPUTS, username: str | None = None
    ) -> OfflineClient:
        if not outputs.exists():
            raise SystemExit(f"{outputs} not found: start the local stack first (make stack-up)")
        return cls(api_url=json.loads(outputs.read_text())["ApiUrl"], tenant_id=tenant_id, username=username)

    # -- sign-in ------------------------------------------------------------------------------

    def token(self) -> str:
        """A valid ID token of ``username`` in ``tenant_id`` (cached; renewed before it expires)."""
        with self._token_lock:
            if self._token is None or time.monotonic() >= self._token_renew_at:
                self._token, lifetime = self.sign_in()
                self._token_renew_at = time.monotonic() + max(0.0, lifetime - TOKEN_RENEWAL_MARGIN_SECONDS)
            return self._token

    def sign_in(self, expires_in: int | None = None) -> tuple[str, float]:
        """A new ID token from the local identity provider, and its lifetime in seconds."""
        request: dict[str, Any] = {"username": self.username, "tenant_id": self.tenant_id}
        if self.groups:
            request["groups"] = list(self.groups)
        if expires_in is not None:
            request["expires_in"] = expires_in
        response = requests.post(f"{self.api_url}{TOKEN_PATH}", json=request, timeout=self.timeout)
        if response.status_code != 200:
            raise SignInError(f"sign-in as {self.username} in {self.tenant_id!r} failed: {response.text[:300]}")
        body = response.json()
        return str(body["id_token"]), float(body["expires_in"])

    def _headers(self) -> dict[str, str]:
        # The one place request auth is built: the ID token, as the page sends Cognito's.
        return {"Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"}

    # -- the API ------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> requests.Response:
        """An authenticated API request; ``body`` is sent as JSON (a ``str`` or ``bytes`` as is)."""
        data = body if isinstance(body, str | bytes) or body is None else json.dumps(body)
        return self._session().request(
            method, f"{self.api_url}{path}", headers=self._headers(), data=data, timeout=timeout or self.timeout
        )

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._sessions, "session", None)
        if session is None:
            session = self._sessions.session = requests.Session()
        return session

    def live_url(self) -> str:
        """The live-status WebSocket URL for this user (the token in the query, as the page sends it)."""
        return f"{self.api_url.replace('http://', 'ws://', 1)}/_local/live?token={self.token()}"

    def create_upload(self, filename: str, content_type: str = "application/pdf", **fields: Any) -> requests.Response:
        """``POST /documents``; ``fields``: the request's others (``metadata``, ``access``)."""
        return self.request("POST", "/documents", {"filename": filename, "content_type": content_type, **fields})

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        mode: str | None = None,
        filter: dict[str, Any] | None = None,
        rerank: bool | None = None,
        expand: str | None = None,
    ) -> requests.Response:
        body: dict[str, Any] = {"query": query}
        if rerank is not None:
            body["rerank"] = rerank
        if expand is not None:
            body["expand"] = expand
        if k is not None:
            body["k"] = k
        if mode is not None:
            body["mode"] = mode
        if filter is not None:
            body["filter"] = filter
        return self.request("POST", "/search", body)

    def delete(self, document_id: str) -> requests.Response:
        return self.request("DELETE", f"/documents/{document_id}", timeout=60)

    def upload(self, path: Path, content_type: str = "application/pdf", **fields: Any) -> str:
        """The browser flow: ask for a presigned POST, then send the file straight to S3."""
        ticket = self.create_upload(path.name, content_type, **fields)
        ticket.raise_for_status()
        body = ticket.json()
        form = body["upload"]
        response = requests.post(
            form["url"],
            data=form["fields"],
            files={"file": (path.name, path.read_bytes(), content_type)},
            timeout=self.timeout,
        )
        if response.status_code not in (200, 201, 204):
            raise RuntimeError(f"upload of {path.name} failed: {response.status_code} {response.text[:300]}")
        return str(body["document_id"])

    def document(self, document_id: str) -> dict[str, Any]:
        response = self.request("GET", f"/documents/{document_id}")
        response.raise_for_status()
        return dict(response.json())

    def wait_until_done(
        self,
        document_ids: list[str],
        *,
        timeout_seconds: float = 600,
        on_change: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Poll each document until READY/FAILED; report every change of status, stage or progress."""
        deadline = time.monotonic() + timeout_seconds
        last_seen: dict[str, tuple[Any, ...]] = {}
        states: dict[str, dict[str, Any]] = {}
        while True:
            for document_id in document_ids:
                if states.get(document_id, {}).get("status") in TERMINAL:
                    continue
                state = self.document(document_id)
                states[document_id] = state
                signature = (state["status"], state.get("stage"), json.dumps(state.get("progress")))
                if on_change and last_seen.get(document_id) != signature:
                    on_change(document_id, state)
                last_seen[document_id] = signature
            if all(states.get(d, {}).get("status") in TERMINAL for d in document_ids):
                return states
            if time.monotonic() > deadline:
                pending = [d for d in document_ids if states.get(d, {}).get("status") not in TERMINAL]
                raise TimeoutError(f"{len(pending)} documents not finished after {timeout_seconds:.0f}s: {pending}")
            time.sleep(0.5)
