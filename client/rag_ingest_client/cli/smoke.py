"""``rag-ingest smoke [--stack NAME]``: after a deploy, prove the stack works end to end as a user would.

Sign in (a test user of the deployed stack: ``rag_ingest_client.operator.smoke_sign_in``; without
``--stack``, the local stack's identity provider), then upload a sample PDF through the presigned
POST, wait for READY, search for it and delete it. Each step prints its latency; any failure ends the
run with exit code 1 and the step that failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_ingest_client.cli.api import TERMINAL, ApiClient
from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.targets import Target
from rag_ingest_client.cli.tokens import TokenSource
from rag_ingest_client.cli.upload import refusal
from rag_ingest_client.http import upload_file
from rag_ingest_client.sentences import sentence
from rag_ingest_client.uploads import PDF

DEFAULT_SAMPLE = Path("samples/lighthouses.pdf")
DEFAULT_QUERY = "lighthouse keepers"
SMOKE_USER = "rag-ingest-smoke"
SMOKE_TENANT = "smoke"


class StepFailed(Exception):
    """A smoke step failed; its line is already printed."""


@dataclass
class StaticToken(TokenSource):
    """A token obtained once for the run (the smoke user's)."""

    id_token: str

    def token(self) -> str:
        return self.id_token

    def invalidate(self) -> bool:
        return False  # a 401 with a fresh token is a real failure: nothing to renew


@dataclass
class SmokeRun:
    console: Console
    results: list[dict[str, Any]] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        """Times the block; ``info["detail"]`` set inside it is printed beside the latency."""
        info: dict[str, Any] = {"detail": ""}
        started = time.monotonic()
        try:
            yield info
        except Exception as exc:
            seconds = time.monotonic() - started
            message = str(exc) or type(exc).__name__
            self.results.append({"step": name, "ok": False, "seconds": round(seconds, 3), "detail": message})
            self.console.print(f"FAIL {name:<16} {seconds:8.2f} s  {message}")
            raise StepFailed(name) from exc
        seconds = time.monotonic() - started
        self.results.append({"step": name, "ok": True, "seconds": round(seconds, 3), "detail": info["detail"]})
        self.console.print(f"ok   {name:<16} {seconds:8.2f} s  {info['detail']}".rstrip())


@dataclass
class SmokeOptions:
    sample: Path = DEFAULT_SAMPLE
    query: str = DEFAULT_QUERY
    timeout_seconds: float = 900.0
    poll_seconds: float = 1.0


def run_pipeline_steps(run: SmokeRun, target: Target, options: SmokeOptions) -> None:
    """create upload → presigned POST → READY → search → delete, through the public API."""
    api = ApiClient(target)
    reason = refusal(options.sample)
    if reason:
        raise CliError(f"{options.sample}: {reason}")
    with run.step("create upload") as info:
        ticket = api.create_upload(options.sample.name, PDF)
        document_id = str(ticket["document_id"])
        info["detail"] = document_id
    with run.step("upload") as info:
        sent: list[int] = []
        form, sample = ticket["upload"], options.sample
        status = upload_file(
            form["url"], form["fields"], sample, filename=sample.name, content_type=PDF, on_bytes=sent.append
        )
        info["detail"] = f"{sum(sent)} bytes, HTTP {status}"
    with run.step("ready") as info:
        document = wait_until_terminal(api, document_id, options)
        if document.get("status") != "READY":
            code = document.get("error_code")
            raise CliError(
                f"{document.get('status')} {code or ''}: {sentence(code)} {document.get('error_detail') or ''}"
            )
        info["detail"] = f"{document.get('page_count')} pages, {document.get('chunk_count')} chunks"
    with run.step("search") as info:
        passages = api.search(options.query, k=5, mode="hybrid").get("passages") or []
        ours = [p for p in passages if p.get("document_id") == document_id]
        if not ours:
            raise CliError(f"no passage of {document_id} among {len(passages)} for {options.query!r}")
        info["detail"] = f"{len(ours)}/{len(passages)} passages, best on page {ours[0].get('page_start')}"
    with run.step("delete") as info:
        answer = api.delete(document_id)
        info["detail"] = str(answer.get("status", "deleted"))


def wait_until_terminal(api: ApiClient, document_id: str, options: SmokeOptions) -> dict[str, Any]:
    deadline = time.monotonic() + options.timeout_seconds
    while True:
        document = api.document(document_id)
        if document.get("status") in TERMINAL:
            return document
        if time.monotonic() > deadline:
            raise CliError(
                f"still {document.get('status')} {document.get('stage') or ''} after {options.timeout_seconds:.0f}s"
            )
        time.sleep(options.poll_seconds)


def smoke(console: Console, options: SmokeOptions, *, sign_in: Callable[[SmokeRun], Target]) -> int:
    """Runs ``sign_in`` (its own timed steps, returning the target) then the pipeline steps."""
    run = SmokeRun(console)
    started = time.monotonic()
    try:
        target = sign_in(run)
        run_pipeline_steps(run, target, options)
    except StepFailed as failed:
        console.print(f"smoke test FAILED at step {failed} after {time.monotonic() - started:.1f} s")
        return 1
    console.print(f"smoke test passed in {time.monotonic() - started:.1f} s")
    return 0


def local_sign_in(make_target: Callable[[], Target]) -> Callable[[SmokeRun], Target]:
    def sign_in(run: SmokeRun) -> Target:
        with run.step("sign in") as info:
            target = make_target()
            target.tokens.token()
            info["detail"] = f"local identity provider, {target.api_url}"
        return target

    return sign_in
