"""A client of the running local stack, as a browser or a user's script would use it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

OUTPUTS = Path(".local/runtime/outputs.json")
TERMINAL = frozenset({"READY", "FAILED", "DELETED"})


@dataclass
class LocalStackClient:
    api_url: str
    tenant_id: str = "demo"
    timeout: float = 30.0

    @classmethod
    def from_outputs(cls, tenant_id: str = "demo", outputs: Path = OUTPUTS) -> LocalStackClient:
        if not outputs.exists():
            raise SystemExit(f"{outputs} not found: start the local stack first (make stack-up)")
        return cls(api_url=json.loads(outputs.read_text())["ApiUrl"].rstrip("/"), tenant_id=tenant_id)

    def _headers(self) -> dict[str, str]:
        # Local stand-in for the Cognito JWT claim custom:tenant_id (see docs/local-stack.md).
        return {"X-Tenant-Id": self.tenant_id, "Content-Type": "application/json"}

    def create_upload(self, filename: str, content_type: str = "application/pdf") -> requests.Response:
        return requests.post(
            f"{self.api_url}/documents",
            headers=self._headers(),
            data=json.dumps({"filename": filename, "content_type": content_type}),
            timeout=self.timeout,
        )

    def upload(self, path: Path, content_type: str = "application/pdf") -> str:
        """The browser flow: ask for a presigned POST, then send the file straight to S3."""
        ticket = self.create_upload(path.name)
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
        response = requests.get(f"{self.api_url}/documents/{document_id}", headers=self._headers(), timeout=30)
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
