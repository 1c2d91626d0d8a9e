"""The documents bucket's key layout: every S3 key the system writes or reads is built or parsed here.

- uploads: ``raw/{tenant_id}/{document_id}/{filename}`` from the API; an object put without the API
  (``raw/{tenant_id}/...`` of any depth) still belongs to the tenant of its first folder.
- stage artifacts: ``artifacts/{document_id}/{version_hash}/{pages/NNNNNN.json,chunks.json,embeddings/NNNNNN.json}``,
  one folder per document version, so a replay reuses its own checkpoints and deletion removes the folder.

Both prefixes are configurable per function (``RAW_PREFIX``, ``ARTIFACTS_PREFIX``); the constants here
are the defaults the stack sets, the bucket notification filters on and the IAM grants are scoped to.
Parsing takes keys already URL-decoded (S3 notifications encode them; intake decodes first).
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_ingest.core.auth import InvalidTenantError, validate_tenant_id
from rag_ingest.core.ids import is_api_document_id, version_hash

RAW_PREFIX = "raw/"
ARTIFACTS_PREFIX = "artifacts/"
# Source syncs' work files (cursors, staged items); expired by the bucket's lifecycle.
SOURCES_PREFIX = "sources/"
PAGES_FOLDER = "pages/"  # one artifact per parsed page range, named by its first page
CHUNKS_ARTIFACT = "chunks.json"
EMBEDDINGS_FOLDER = "embeddings/"
BATCH_FOLDER = "batch/"  # Bedrock batch inference jobs' input and output (rag_ingest.ingest.batch_embedding)


class KeyOutsideUploadsError(ValueError):
    """The key is not under the uploads prefix: the bucket never notifies for it."""


class NoTenantFolderError(ValueError):
    """The key is under the uploads prefix but names no valid tenant folder (put without the API)."""


@dataclass(frozen=True)
class UploadKey:
    """A parsed upload key. ``document_id`` is set only when the key has the API's shape."""

    tenant_id: str
    document_id: str | None
    filename: str


def as_prefix(prefix: str) -> str:
    """A key prefix names a folder: always with its trailing slash."""
    return prefix if prefix.endswith("/") else prefix + "/"


def upload_key(tenant_id: str, document_id: str, filename: str, raw_prefix: str = RAW_PREFIX) -> str:
    """The key the API issues the presigned POST for."""
    return f"{as_prefix(raw_prefix)}{tenant_id}/{document_id}/{filename}"


def parse_upload_key(key: str, raw_prefix: str = RAW_PREFIX) -> UploadKey:
    """Tenant, document id (when the API issued the key) and filename of an upload key.

    Raises :class:`KeyOutsideUploadsError` for a key outside ``raw_prefix`` and
    :class:`NoTenantFolderError` when the first folder is missing or not a valid tenant id.
    """
    prefix = as_prefix(raw_prefix)
    if not key.startswith(prefix):
        raise KeyOutsideUploadsError(f"key {key!r} is outside {prefix!r}")
    parts = key[len(prefix) :].split("/")
    if len(parts) < 2 or not parts[0] or not parts[-1]:
        raise NoTenantFolderError(f"key {key!r} does not name a tenant folder: expected {prefix}<tenant>/...")
    try:
        tenant_id = validate_tenant_id(parts[0])
    except InvalidTenantError as exc:
        raise NoTenantFolderError(f"key {key!r}: the tenant segment is not a valid tenant id: {exc}") from exc
    document_id = parts[1] if len(parts) == 3 and is_api_document_id(parts[1]) else None
    return UploadKey(tenant_id=tenant_id, document_id=document_id, filename=parts[-1])


def filename_of(key: str) -> str:
    """The last segment of any key: an upload's filename."""
    return key.rsplit("/", 1)[-1]


def artifacts_folder(document_id: str, artifacts_prefix: str = ARTIFACTS_PREFIX) -> str:
    """Every artifact of every version of one document (what deletion removes)."""
    return f"{as_prefix(artifacts_prefix)}{document_id}/"


def artifact_key(document_id: str, version: str, name: str, artifacts_prefix: str = ARTIFACTS_PREFIX) -> str:
    """One version's artifact ``name`` (a file, or a folder when it ends with ``/``)."""
    return f"{artifacts_folder(document_id, artifacts_prefix)}{version_hash(version)}/{name}"


def page_range_key(pages_prefix: str, first_page: int) -> str:
    """The checkpoint of one parsed page range (raw page texts), under a version's ``pages/`` folder."""
    return f"{as_prefix(pages_prefix)}{first_page:06d}.json"


def embedding_batch_key(embeddings_prefix: str, batch_number: int) -> str:
    """The checkpoint of one embedding batch, under a version's ``embeddings/`` folder."""
    return f"{as_prefix(embeddings_prefix)}{batch_number:06d}.json"


def batch_inference_folder(
    document_id: str, version: str, job_name: str, artifacts_prefix: str = ARTIFACTS_PREFIX
) -> str:
    """One Bedrock batch inference job's folder (its JSONL input, and ``output/`` where Bedrock writes
    ``<job id>/records.jsonl.out``), under the version's artifacts: the service role Bedrock assumes
    reads and writes ``*/batch/*`` only (infra/constructs/workflow.py)."""
    return artifact_key(document_id, version, f"{BATCH_FOLDER}{job_name}/", artifacts_prefix)


def sidecar_target(key: str, suffix: str = ".metadata.json") -> str | None:
    """The document a sidecar key describes (``a/b.pdf.metadata.json`` -> ``a/b.pdf``), or None when
    ``key`` is no sidecar (rag_ingest.core.metadata.SIDECAR_SUFFIX, docs/api.md "S3 sidecars")."""
    if key.endswith(suffix) and len(key) > len(suffix) and not key[: -len(suffix)].endswith("/"):
        return key[: -len(suffix)]
    return None
