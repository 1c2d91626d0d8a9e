"""Identity and idempotency keys (DESIGN.md §2): every id here is deterministic from its inputs."""

from __future__ import annotations

import hashlib
import re

from ulid import ULID

_ULID_PATTERN = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
# A ULID from the API, or the id of an object put straight into the bucket (document_id_for_object).
_DOCUMENT_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}|obj-[0-9a-f]{32}")
# Step Functions execution names: 1-80 chars of [A-Za-z0-9-_].
_EXECUTION_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def new_document_id() -> str:
    return str(ULID())


def is_api_document_id(value: str) -> bool:
    return bool(_ULID_PATTERN.match(value))


def is_document_id(value: str) -> bool:
    """Ids the system issues: a ULID from the API, or ``obj-<hash>`` for an object put without it."""
    return bool(_DOCUMENT_ID.fullmatch(value))


def document_id_for_object(bucket: str, key: str) -> str:
    """An object put without the API still gets one stable id, so it is ingested once."""
    digest = hashlib.sha256(f"{bucket}/{key}".encode()).hexdigest()
    return f"obj-{digest[:32]}"


def version_hash(version: str) -> str:
    return hashlib.sha256(version.encode()).hexdigest()[:16]


def execution_name(document_id: str, version: str, replay: int = 0) -> str:
    """Same document version → same name, so a second StartExecution is a no-op.

    ``replay`` > 0 names a deliberate re-run (redrive of a FAILED document).
    """
    base = f"{_EXECUTION_NAME_UNSAFE.sub('-', document_id)}-{version_hash(version)}"
    return base if replay == 0 else f"{base}-r{replay}"


def chunk_id(document_id: str, version: str, chunk_index: int) -> str:
    """The OpenSearch ``_id``: a replay overwrites the same chunk instead of adding one."""
    return f"{document_id}:{version_hash(version)}:{chunk_index}"


def split_chunk_id(value: str) -> tuple[str, str, int]:
    """A ``chunk_id``'s document id, version hash and chunk index; ValueError when it is not one."""
    document_id, hashed, index = value.rsplit(":", 2)
    return document_id, hashed, int(index)
