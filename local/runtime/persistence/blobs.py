"""S3 object bodies of the kept state: one file per distinct body, named by its SHA-256.

A body is written (and fsync'd) before the journal record that names it; :meth:`BlobStore.collect_garbage`
drops the ones no record names any more, at a checkpoint.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from local.runtime.persistence.base import StateRefusedError


class BlobStore:
    def __init__(self, directory: Path, *, fsync: bool) -> None:
        self.directory = directory
        self._fsync = fsync

    def path(self, digest: str) -> Path:
        return self.directory / digest[:2] / digest

    def put(self, body: bytes) -> str:
        digest = hashlib.sha256(body).hexdigest()
        target = self.path(digest)
        if target.exists():
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{digest}.{threading.get_ident()}.tmp")
        with temporary.open("wb") as file:
            file.write(body)
            file.flush()
            if self._fsync:
                os.fsync(file.fileno())
        temporary.replace(target)
        return digest

    def get(self, digest: str) -> bytes:
        try:
            return self.path(digest).read_bytes()
        except FileNotFoundError:
            raise StateRefusedError(f"an S3 body the state names is missing: {self.path(digest)}") from None

    def collect_garbage(self, keep: set[str]) -> int:
        removed = 0
        if not self.directory.is_dir():
            return 0
        for blob in self.directory.glob("*/*"):
            if blob.name not in keep:
                blob.unlink(missing_ok=True)
                removed += 1
        return removed
