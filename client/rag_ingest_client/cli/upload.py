"""``rag-ingest upload``: files and folders checked, declared, sent straight to storage through the
API's presigned POST with byte progress, then followed to READY or FAILED (docs/cli.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_ingest_client.cli.api import POLL_SECONDS, TERMINAL, ApiClient
from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.errors import CliError, TargetError
from rag_ingest_client.cli.progress import ProgressBoard, status_text
from rag_ingest_client.http import ApiError, RagIngestError, upload_file
from rag_ingest_client.sentences import sentence
from rag_ingest_client.uploads import EXTENSION_TYPES, client_refusal, declared_type


def document_files(inputs: list[str]) -> list[Path]:
    """Files as given, folders as the documents inside them (recursively, sorted: the extensions of
    rag_ingest_client.uploads); missing paths are usage errors."""
    files: list[Path] = []
    for text in inputs:
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in EXTENSION_TYPES)
            if not found:
                raise CliError(f"{path}: no documents in this folder ({', '.join(EXTENSION_TYPES)})")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise CliError(f"{path}: no such file or folder")
    return files


def refusal(path: Path) -> str | None:
    """Why the page would refuse this file before uploading (the pipeline checks again on the object)."""
    with path.open("rb") as stream:
        return client_refusal(path.name, stream.read(1024))


@dataclass
class UploadOutcome:
    path: Path
    document_id: str | None = None
    document: dict[str, Any] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and (self.document or {}).get("status") == "READY"


def upload(
    api: ApiClient,
    console: Console,
    inputs: list[str],
    *,
    wait: bool,
    timeout_seconds: float,
    metadata: dict[str, Any] | None = None,
    access: dict[str, list[str]] | None = None,
) -> int:
    files = document_files(inputs)
    outcomes = [UploadOutcome(path) for path in files]
    board = ProgressBoard.for_files(
        console.err if console.as_json else console.out, [(p.name, p.stat().st_size) for p in files]
    )
    for index, outcome in enumerate(outcomes):
        reason = refusal(outcome.path)
        if reason:
            outcome.error = f"refused: {reason}"
            board.state(index, outcome.error)
            continue
        try:
            outcome.document_id = send(api, outcome.path, board, index, metadata, access)
        except TargetError:
            raise  # the API is down or refuses this user: every other file would fail the same way
        except RagIngestError as exc:
            outcome.error = f"upload failed: {exc}"
            board.state(index, outcome.error)
            continue
        board.state(index, "uploaded")
    if wait:
        follow(api, board, outcomes, timeout_seconds)
    board.finish()
    report(console, outcomes, waited=wait)
    failed = [o for o in outcomes if o.error or (wait and not o.ok)]
    return 1 if failed else 0


def send(
    api: ApiClient,
    path: Path,
    board: ProgressBoard,
    index: int,
    metadata: dict[str, Any] | None = None,
    access: dict[str, list[str]] | None = None,
) -> str:
    with path.open("rb") as file:
        content_type = declared_type(path.name, file.read(8))
    ticket = api.create_upload(path.name, content_type, metadata, access)
    document_id = str(ticket["document_id"])
    max_bytes = int(ticket.get("max_bytes") or 0)
    if max_bytes and path.stat().st_size > max_bytes:
        api.delete(document_id)  # nothing will arrive: do not leave it AWAITING_UPLOAD
        raise CliError(f"{path.stat().st_size} bytes is over the limit of {max_bytes} bytes")
    form = ticket["upload"]
    try:
        upload_file(
            form["url"],
            form["fields"],
            path,
            filename=path.name,
            content_type=content_type,
            on_bytes=lambda n: board.sent(index, n),
        )
    except ApiError as exc:  # S3's own refusal (policy, size, expiry)
        raise CliError(f"storage refused the file: {exc.code or exc.status}: {exc.message}") from None
    return document_id


def follow(api: ApiClient, board: ProgressBoard, outcomes: list[UploadOutcome], timeout_seconds: float) -> None:
    """Poll every uploaded document until READY/FAILED, showing status, stage and progress."""
    deadline = time.monotonic() + timeout_seconds
    pending = {i for i, o in enumerate(outcomes) if o.document_id and not o.error}
    while pending:
        for index in sorted(pending):
            outcome = outcomes[index]
            document = api.document(str(outcome.document_id))
            outcome.document = document
            board.state(index, status_text(document))
            if document.get("status") in TERMINAL:
                pending.discard(index)
        if not pending:
            return
        if time.monotonic() > deadline:
            for index in pending:
                outcomes[index].error = f"not finished after {timeout_seconds:.0f}s"
                board.state(index, f"{board.rows[index].state} (timed out)")
            return
        time.sleep(POLL_SECONDS)


def report(console: Console, outcomes: list[UploadOutcome], *, waited: bool) -> None:
    if console.as_json:
        console.json(
            [
                {"file": str(o.path), "document_id": o.document_id, "error": o.error, "document": o.document}
                for o in outcomes
            ]
        )
        return
    for outcome in outcomes:
        document = outcome.document or {}
        name = f"{outcome.path.name} {outcome.document_id}" if outcome.document_id else outcome.path.name
        if outcome.error:
            console.print(f"✗ {name}: {outcome.error}")
        elif document.get("status") == "FAILED":
            detail = f" ({document['error_detail']})" if document.get("error_detail") else ""
            console.print(
                f"✗ {name}: FAILED {document.get('error_code')}: {sentence(document.get('error_code'))}{detail}"
            )
        elif not waited:
            console.print(f"↑ {name}: uploaded")
        elif document.get("status") == "READY":
            console.print(f"✓ {name}: {status_text(document)}{_duration(document)}")
        else:  # DELETED or EXPIRED while we waited
            console.print(f"✗ {name}: {status_text(document)}")


def _duration(document: dict[str, Any]) -> str:
    total = sum((document.get("timings_ms") or {}).values())
    return f" in {total / 1000:.1f}s" if total else ""


def upload_access(users: list[str] | None, groups: list[str] | None) -> dict[str, list[str]] | None:
    """``--access-user`` / ``--access-group`` as the API's ``access`` (None: open to the tenant)."""
    if not users and not groups:
        return None
    return {"users": list(dict.fromkeys(users or [])), "groups": list(dict.fromkeys(groups or []))}
