"""The kept state's store: what moto's S3, DynamoDB and SQS were given, on disk across restarts.

:meth:`DurableState.load` reads ``snapshot.pickle`` then the journal on top (refusing another
format or moto version); :meth:`~DurableState.restore` puts it into the freshly provisioned
containers; :meth:`~DurableState.start` hooks moto (:mod:`.moto_entities`) and journals each
request's changed entities before its response leaves (:meth:`~DurableState.wsgi`); a checkpoint
folds them into a new snapshot. Design and guarantees: docs/local-stack.md, "What a restart keeps".
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local.runtime.persistence.base import EntityKey, Patches, StateRefusedError, refusal
from local.runtime.persistence.blobs import BlobStore
from local.runtime.persistence.journal import Journal, read_journal
from local.runtime.persistence.moto_entities import MotoEntities

if TYPE_CHECKING:
    from local.runtime.moto_server import WsgiApp

__all__ = ["BLOBS_DIR", "FORMAT_VERSION", "SNAPSHOT_FILE", "DurableState", "LoadedState", "StateRefusedError"]

LOG = logging.getLogger("local.runtime.state")

FORMAT_VERSION = 1
SNAPSHOT_FILE = "snapshot.pickle"
JOURNAL_FILE = "journal.log"
BLOBS_DIR = "blobs"
# A checkpoint also runs whenever the journal passes this size, so a restart never replays much.
CHECKPOINT_JOURNAL_BYTES = 32 * 1024 * 1024


def moto_version() -> str:
    return package_version("moto")


@dataclass
class LoadedState:
    entities: dict[EntityKey, Any] = field(default_factory=dict)
    snapshot_entities: int = 0
    journal_records: int = 0
    journal_dropped_bytes: int = 0


@dataclass(frozen=True)
class RestoreReport:
    objects: int
    items: int
    messages: int
    seconds: float

    def summary(self) -> str:
        return (
            f"{self.objects} S3 keys, {self.items} DynamoDB items, {self.messages} SQS messages "
            f"restored in {self.seconds:.1f} s"
        )


class DurableState:
    """The kept state in ``directory``: :meth:`load` and :meth:`restore` at start, then
    :meth:`start` (hooks, journal, checkpoints), :meth:`wsgi` around moto, :meth:`stop`."""

    def __init__(
        self,
        directory: Path,
        *,
        account_id: str,
        region: str,
        fsync: bool = True,
        checkpoint_seconds: float = 300.0,
    ) -> None:
        self.directory = directory
        self.fsync = fsync
        self.checkpoint_seconds = checkpoint_seconds
        self.entities = MotoEntities(account_id, region)
        self.blobs = BlobStore(directory / BLOBS_DIR, fsync=fsync)
        self._lock = threading.Lock()
        self._request = threading.local()
        self._journal: Journal | None = None
        self._hooks: Patches | None = None
        self._stop = threading.Event()
        self._checkpointer: threading.Thread | None = None
        self._last_checkpoint = time.monotonic()
        self.checkpoints = 0
        self._empty_journal_bytes = 0
        self.last_checkpoint_seconds = 0.0

    @property
    def snapshot_path(self) -> Path:
        return self.directory / SNAPSHOT_FILE

    @property
    def journal_path(self) -> Path:
        return self.directory / JOURNAL_FILE

    def header(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "moto": moto_version(), "written_at": time.time()}

    # -- start ---------------------------------------------------------------------------------

    def load(self) -> LoadedState:
        """Everything kept, in memory, after checking it was written by this format and moto;
        :class:`StateRefusedError` otherwise (then nothing is loaded)."""
        loaded = LoadedState()
        if self.snapshot_path.exists():
            try:
                with self.snapshot_path.open("rb") as file:
                    snapshot = pickle.load(file)
            except Exception as exc:
                why = f"has a snapshot that cannot be read ({type(exc).__name__}: {exc})"
                raise refusal(self.directory, why) from exc
            self._check_header(snapshot.get("header") if isinstance(snapshot, dict) else None)
            loaded.entities.update(snapshot["entities"])
            loaded.snapshot_entities = len(snapshot["entities"])
        contents = read_journal(self.journal_path)
        for payload in contents.records:
            entry = pickle.loads(payload)
            if entry[0] == "header":
                self._check_header(entry[1])
                continue
            key, record = entry
            loaded.entities[key] = record
            loaded.journal_records += 1
        loaded.journal_dropped_bytes = contents.dropped_bytes
        return loaded

    def _check_header(self, header: Any) -> None:
        if not isinstance(header, dict) or "format" not in header:
            raise refusal(self.directory, "has no format header (it was not written by this stack)")
        if header["format"] != FORMAT_VERSION:
            raise refusal(
                self.directory, f"was written in format {header['format']}; this build reads format {FORMAT_VERSION}"
            )
        if header.get("moto") != moto_version():
            raise refusal(
                self.directory, f"was written with moto {header.get('moto')}; this build runs moto {moto_version()}"
            )

    def restore(self, loaded: LoadedState) -> RestoreReport:
        """Put ``loaded`` into moto's (freshly provisioned) buckets, tables and queues. Every
        container must exist first, so a state never half-loads into a template without them."""
        started = time.monotonic()
        present = self.entities.containers()
        missing = sorted(
            {f"{key[0]} {key[1]}" for key, record in loaded.entities.items() if record is not None}
            - {f"{kind} {name}" for kind, names in present.items() for name in names}
        )
        if missing:
            raise refusal(
                self.directory,
                "holds data for resources the template no longer creates: "
                + ", ".join(missing[:5])
                + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""),
            )
        counts = {"s3": 0, "dynamodb": 0, "sqs": 0}
        for key, record in loaded.entities.items():
            if record is None:
                continue
            self.entities.write(key, record, self.blobs)
            counts[key[0]] += 1
        return RestoreReport(counts["s3"], counts["dynamodb"], counts["sqs"], time.monotonic() - started)

    def start(self) -> None:
        """Journal every change from now on; a first checkpoint folds what was loaded into one snapshot."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._journal = Journal.open(self.journal_path, fsync=self.fsync)
        self._hooks = self.entities.hook(self._touch)
        self.checkpoint()
        self._checkpointer = threading.Thread(target=self._checkpoint_loop, name="state-checkpoint", daemon=True)
        self._checkpointer.start()

    def stop(self) -> None:
        """A last checkpoint (a clean stop leaves no journal to replay), then no more journaling."""
        self._stop.set()
        if self._checkpointer is not None:
            self._checkpointer.join(timeout=30)
        if self._journal is None:
            return
        try:
            self.checkpoint()
        finally:
            if self._hooks is not None:
                self._hooks.remove()
            with self._lock:
                journal, self._journal = self._journal, None
                if journal is not None:
                    journal.close()

    # -- while running -------------------------------------------------------------------------

    def wsgi(self, app: WsgiApp) -> WsgiApp:
        """``app`` with its changes journaled before each response is returned."""

        def journaled(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            with self.request_scope():
                return app(environ, start_response)

        return journaled

    @contextlib.contextmanager
    def request_scope(self) -> Iterator[None]:
        """One request: the entities it changes are journaled together when it ends (a response
        handler may still change an object after moto's backend created it, e.g. its metadata)."""
        self._request.pending = {}
        try:
            yield
        finally:
            pending, self._request.pending = self._request.pending, None
            if pending:
                self._flush(list(pending))

    def _touch(self, key: EntityKey) -> None:
        pending = getattr(self._request, "pending", None)
        if pending is None:  # a change outside a request (moto's own threads): kept at once
            self._flush([key])
        else:
            pending[key] = None

    def _flush(self, keys: list[EntityKey]) -> None:
        with self._lock:
            journal = self._journal
            if journal is None:
                return
            for key in keys:
                record = self.entities.read(key, self.blobs)
                journal.append(pickle.dumps((key, record), protocol=pickle.HIGHEST_PROTOCOL))
        # Outside the lock: concurrent requests' syncs overlap. Closed by stop() meanwhile: the
        # final checkpoint has it.
        with contextlib.suppress(ValueError):
            journal.sync()

    def checkpoint(self) -> None:
        """Every entity into a new snapshot, atomically; then the journal starts empty."""
        started = time.monotonic()
        with self._lock:
            entities = dict(self.entities.all_entities(self.blobs))
            snapshot = {"header": self.header(), "entities": entities}
            temporary = self.snapshot_path.with_suffix(".tmp")
            with temporary.open("wb") as file:
                pickle.dump(snapshot, file, protocol=pickle.HIGHEST_PROTOCOL)
                file.flush()
                if self.fsync:
                    os.fsync(file.fileno())
            temporary.replace(self.snapshot_path)
            self._sync_directory()
            if self._journal is not None:
                self._journal.reset()
                # The journal's records are moto's objects too: its own header, checked at load.
                self._journal.append(pickle.dumps(("header", self.header()), protocol=pickle.HIGHEST_PROTOCOL))
                self._empty_journal_bytes = self._journal.size
            referenced = {
                version["blob"]
                for key, record in entities.items()
                if key[0] == "s3"
                for version in record
                if not version["marker"]
            }
            self.blobs.collect_garbage(referenced)
        self._last_checkpoint = time.monotonic()
        self.checkpoints += 1
        self.last_checkpoint_seconds = self._last_checkpoint - started
        LOG.debug("state checkpoint: %d entities in %.2f s", len(entities), self.last_checkpoint_seconds)

    def _sync_directory(self) -> None:
        if not self.fsync:
            return
        descriptor = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def _checkpoint_loop(self) -> None:
        while not self._stop.wait(1.0):
            journal = self._journal
            if journal is None or journal.size <= self._empty_journal_bytes:
                continue
            due = time.monotonic() - self._last_checkpoint >= self.checkpoint_seconds
            if due or journal.size >= CHECKPOINT_JOURNAL_BYTES:
                try:
                    self.checkpoint()
                except Exception:  # the journal still holds everything; the next try may succeed
                    LOG.exception("state checkpoint failed; the journal keeps the changes")

    def status(self) -> dict[str, Any]:
        journal = self._journal
        return {
            "directory": str(self.directory),
            "journal_bytes": journal.size if journal is not None else 0,
            "checkpoints": self.checkpoints,
            "last_checkpoint_seconds": round(self.last_checkpoint_seconds, 3),
        }
