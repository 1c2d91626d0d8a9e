"""What the local stack was given, kept across ``stack-down``/``stack-up``, a reboot and ``kill -9``.

S3, DynamoDB and SQS run in moto, in memory. This module keeps their **data** on disk; the
resources themselves (buckets, tables, queues, functions, the state machine) are created from the
template at every start, as before, and the data is put back into them.

- **Entities.** The unit kept is one entity: an S3 key with all its versions, a DynamoDB item, an
  SQS message. A record holds the entity's whole state after a write (``None``: it is gone), so
  applying a record twice, or an older one before a newer one, ends in the same state.
- **Journal before acknowledgement.** moto's backends are hooked where they change an entity;
  the WSGI middleware writes the record of every entity a request changed to the journal
  (``journal.py``), flushed to the OS and fsync'd, *before* the response leaves. A client that
  was told "stored" has it on disk.
- **Snapshot.** Every ``checkpoint_seconds`` (when the journal has grown) and at a clean stop,
  every entity is written to ``snapshot.pickle`` (temporary file, fsync, rename) and the journal
  is emptied. Start = snapshot, then the journal on top.
- **Bodies out of line.** S3 object bodies are files named by their SHA-256 under ``blobs/``,
  written (and fsync'd) before the record that names them; unreferenced ones go at a checkpoint.
- **Versions.** The state's header names this format and moto's version (records hold moto's
  own objects); any other is refused before anything is loaded, with what to do.

Step Functions executions are not kept: the documents' records are. An execution that was
running when the stack stopped is re-driven at start from the document's checkpoints (the
reaper's re-drive, run once before the queues are polled: ``stack.py``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from local.runtime.persistence.journal import Journal, read_journal

LOG = logging.getLogger("local.runtime.state")

FORMAT_VERSION = 1
SNAPSHOT_FILE = "snapshot.pickle"
JOURNAL_FILE = "journal.log"
BLOBS_DIR = "blobs"
# A checkpoint also runs whenever the journal passes this size, so a restart never replays much.
CHECKPOINT_JOURNAL_BYTES = 32 * 1024 * 1024

# ("s3", bucket, key) | ("dynamodb", table, hash key JSON, range key JSON or "") | ("sqs", queue name, message id)
EntityKey = tuple[str, ...]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class StateRefusedError(Exception):
    """The kept state cannot be loaded by this build; the message says why and what to do."""


def moto_version() -> str:
    return package_version("moto")


def _refusal(state_dir: Path, why: str) -> StateRefusedError:
    return StateRefusedError(
        f"the local stack's kept state in {state_dir} {why}. Nothing was loaded. Either run the build "
        f"that wrote it, or set it aside and start empty: `.venv/bin/python -m local.runtime reset` "
        f"(moves it to {state_dir.name}.old-<time>; documents, uploads and statuses start empty)."
    )


# -- S3 bodies -----------------------------------------------------------------------------------


class BlobStore:
    """S3 object bodies, one file per distinct body, named by its SHA-256."""

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


# -- moto's entities ----------------------------------------------------------------------------


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class MotoEntities:
    """Reads and writes entities in moto's backends (one account and region)."""

    def __init__(self, account_id: str, region: str) -> None:
        self.account_id = account_id
        self.region = region
        # (bucket, key, version id, etag) -> body digest: a version's body never changes.
        self._digests: dict[tuple[str, str, str, str], str] = {}

    # The backends, looked up at each use: moto may replace a table object (a failed transaction).
    def s3(self) -> Any:
        from moto.s3.models import s3_backends

        return s3_backends[self.account_id]["aws"]

    def dynamodb(self) -> Any:
        from moto.dynamodb.models import dynamodb_backends

        return dynamodb_backends[self.account_id][self.region]

    def sqs(self) -> Any:
        from moto.sqs.models import sqs_backends

        return sqs_backends[self.account_id][self.region]

    # -- keys of a change --

    def dynamodb_key(self, table_name: str, key_or_item: dict[str, Any]) -> EntityKey | None:
        table = self.dynamodb().tables.get(table_name)
        if table is None:
            return None
        hash_value = key_or_item.get(table.hash_key_attr)
        if hash_value is None:
            return None
        range_value = key_or_item.get(table.range_key_attr) if table.range_key_attr else None
        return ("dynamodb", table_name, _json_key(hash_value), "" if range_value is None else _json_key(range_value))

    # -- reading --

    def read(self, key: EntityKey, blobs: BlobStore) -> Any:
        kind = key[0]
        if kind == "s3":
            return self._read_s3(key[1], key[2], blobs)
        if kind == "dynamodb":
            return self._read_item(key)
        if kind == "sqs":
            return self._read_message(key[1], key[2])
        raise ValueError(f"unknown entity kind {kind!r}")

    def _read_s3(self, bucket_name: str, key_name: str, blobs: BlobStore) -> list[dict[str, Any]] | None:
        from moto.s3.models import FakeDeleteMarker

        bucket = self.s3().buckets.get(bucket_name)
        if bucket is None:
            return None
        versions = list(bucket.keys.getlist(key_name, None) or [])
        if not versions:
            return None
        records: list[dict[str, Any]] = []
        for version in versions:
            if isinstance(version, FakeDeleteMarker):
                records.append(
                    {
                        "marker": True,
                        "name": version.name,
                        "version_id": version.version_id,
                        "last_modified": version.last_modified,
                    }
                )
                continue
            cache_key = (bucket_name, key_name, str(version.version_id), str(version.etag))
            digest = self._digests.get(cache_key)
            if digest is None:
                digest = blobs.put(version.value)
                self._digests[cache_key] = digest
            state = {
                name: value
                for name, value in version.__dict__.items()
                if name not in ("_value_buffer", "lock", "multipart")  # the body is a blob; parts are not kept
            }
            records.append({"marker": False, "state": state, "blob": digest})
        return records

    def _table_item(self, key: EntityKey) -> Any:
        from moto.dynamodb.models.dynamo_type import DynamoType

        table = self.dynamodb().tables.get(key[1])
        if table is None:
            return None
        hash_value = DynamoType(json.loads(key[2]))
        if table.range_key_attr:
            return table.items.get(hash_value, {}).get(DynamoType(json.loads(key[3])))
        return table.items.get(hash_value)

    def _read_item(self, key: EntityKey) -> dict[str, Any] | None:
        item = self._table_item(key)
        return None if item is None else _attributes(item)

    def _read_message(self, queue_name: str, message_id: str) -> bytes | None:
        queue = self.sqs().queues.get(queue_name)
        if queue is None:
            return None
        for message in list(queue._messages):
            if message.id == message_id:
                return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        return None

    def everything(self, blobs: BlobStore) -> Iterator[tuple[EntityKey, Any]]:
        for bucket_name, bucket in list(self.s3().buckets.items()):
            for key_name in list(bucket.keys.keys()):
                record = self._read_s3(bucket_name, key_name, blobs)
                if record is not None:
                    yield ("s3", bucket_name, key_name), record
        for table_name, table in list(self.dynamodb().tables.items()):
            for item in _items_of(table):
                attrs = _attributes(item)
                key = self.dynamodb_key(table_name, attrs)
                if key is not None:
                    yield key, attrs
        for queue_name, queue in list(self.sqs().queues.items()):
            for message in list(queue._messages):
                yield ("sqs", queue_name, message.id), pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)

    # -- writing (at start only) --

    def containers(self) -> dict[str, set[str]]:
        return {
            "s3": set(self.s3().buckets),
            "dynamodb": set(self.dynamodb().tables),
            "sqs": set(self.sqs().queues),
        }

    def write(self, key: EntityKey, record: Any, blobs: BlobStore) -> None:
        kind = key[0]
        if kind == "s3":
            self._write_s3(key[1], key[2], record, blobs)
        elif kind == "dynamodb":
            self._write_item(key, record)
        elif kind == "sqs":
            self._write_message(key[1], record)

    def _write_s3(self, bucket_name: str, key_name: str, records: list[dict[str, Any]], blobs: BlobStore) -> None:
        from moto.s3.models import FakeDeleteMarker, FakeKey

        versions: list[Any] = []
        for record in records:
            if record["marker"]:
                marker: Any = FakeDeleteMarker.__new__(FakeDeleteMarker)
                # A marker points at the version it hid (moto reads it when the marker is deleted).
                marker.key = versions[-1] if versions else None
                marker.name = record["name"]
                marker.last_modified = record["last_modified"]
                marker._version_id = record["version_id"]
                versions.append(marker)
                continue
            restored: Any = FakeKey.__new__(FakeKey)
            restored.__setstate__({**record["state"], "multipart": None, "value": blobs.get(record["blob"])})
            state = record["state"]
            self._digests[(bucket_name, key_name, str(state["_version_id"]), str(restored.etag))] = record["blob"]
            versions.append(restored)
        self.s3().buckets[bucket_name].keys.setlist(key_name, versions)

    def _write_item(self, key: EntityKey, attrs: dict[str, Any]) -> None:
        from moto.dynamodb.models.dynamo_type import DynamoType, Item

        table = self.dynamodb().tables[key[1]]
        hash_value = DynamoType(json.loads(key[2]))
        range_value = DynamoType(json.loads(key[3])) if table.range_key_attr else None
        item = Item(hash_value, range_value, attrs)
        # Straight into the table: a restore is not a write (no stream record, no condition).
        if range_value is not None:
            table.items[hash_value][range_value] = item
        else:
            table.items[hash_value] = item

    def _write_message(self, queue_name: str, record: bytes) -> None:
        message = pickle.loads(record)
        # Whoever received it before the stop is gone: it is visible again at once.
        message.visible_at = 0.0
        queue = self.sqs().queues[queue_name]
        queue._messages.append(message)


def _items_of(table: Any) -> list[Any]:
    # list() of a dict view copies it in one step under the GIL: safe while moto writes meanwhile.
    hash_sets = list(table.items.values())
    if not table.range_key_attr:
        return hash_sets
    return [item for hash_set in hash_sets for item in list(hash_set.values())]


def _attributes(item: Any) -> dict[str, Any]:
    for _ in range(5):
        try:
            return dict(item.to_json()["Attributes"])
        except RuntimeError:  # an update changed the item while it was read: read it again
            time.sleep(0.001)
    return dict(item.to_json()["Attributes"])


# -- hooks into moto ------------------------------------------------------------------------------


class _Hooks:
    """Patches on moto's classes that report each changed entity to ``touch``; undone by ``remove``."""

    def __init__(self, entities: MotoEntities, touch: Callable[[EntityKey], None]) -> None:
        self._entities = entities
        self._touch = touch
        self._undo: list[Callable[[], None]] = []

    def _wrap(self, owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = getattr(owner, name)
        wrapped = functools.wraps(original)(make(original))
        setattr(owner, name, wrapped)
        self._undo.append(lambda: setattr(owner, name, original))

    def install(self) -> None:
        from moto.dynamodb.models import DynamoDBBackend
        from moto.s3.models import S3Backend
        from moto.sqs.models import Queue, SQSBackend

        touch = self._touch
        entities = self._entities

        def s3_key_change(original: Callable[..., Any]) -> Callable[..., Any]:
            def changed(backend: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
                try:
                    return original(backend, bucket_name, key_name, *args, **kwargs)
                finally:
                    touch(("s3", bucket_name, key_name))

            return changed

        self._wrap(S3Backend, "put_object", s3_key_change)
        self._wrap(S3Backend, "delete_object", s3_key_change)

        def item_change(argument: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
            def make(original: Callable[..., Any]) -> Callable[..., Any]:
                def changed(backend: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
                    key_or_item = args[0] if args else kwargs.get(argument)
                    try:
                        return original(backend, table_name, *args, **kwargs)
                    finally:
                        if isinstance(key_or_item, dict):
                            entity = entities.dynamodb_key(table_name, key_or_item)
                            if entity is not None:
                                touch(entity)

                return changed

            return make

        self._wrap(DynamoDBBackend, "put_item", item_change("item_attrs"))
        self._wrap(DynamoDBBackend, "update_item", item_change("key"))
        self._wrap(DynamoDBBackend, "delete_item", item_change("key"))

        def message_added(original: Callable[..., Any]) -> Callable[..., Any]:
            def changed(queue: Any, message: Any) -> Any:
                try:
                    return original(queue, message)
                finally:
                    touch(("sqs", queue.name, message.id))

            return changed

        self._wrap(Queue, "add_message", message_added)

        def queue_changed(queue_of: Callable[..., list[Any]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
            """Any message that appeared, left or was received in the queues ``queue_of`` names."""

            def make(original: Callable[..., Any]) -> Callable[..., Any]:
                def changed(owner: Any, *args: Any, **kwargs: Any) -> Any:
                    queues = queue_of(owner, *args, **kwargs)
                    before = {queue.name: {message.id for message in list(queue._messages)} for queue in queues}
                    result = None
                    try:
                        result = original(owner, *args, **kwargs)
                        return result
                    finally:
                        received = {message.id for message in result or () if hasattr(message, "id")}
                        for queue in queues:
                            after = {message.id for message in list(queue._messages)}
                            for message_id in (before[queue.name] ^ after) | (received & after):
                                touch(("sqs", queue.name, message_id))

                return changed

            return make

        def one_queue(queue: Any, *_: Any, **__: Any) -> list[Any]:
            return [queue]

        def queue_and_its_dlq(backend: Any, queue_name: str, *_: Any, **__: Any) -> list[Any]:
            queue = backend.queues.get(queue_name)
            if queue is None:
                return []
            return [queue] + ([queue.dead_letter_queue] if queue.dead_letter_queue is not None else [])

        self._wrap(Queue, "delete_message", queue_changed(one_queue))
        self._wrap(SQSBackend, "receive_message", queue_changed(queue_and_its_dlq))
        self._wrap(SQSBackend, "purge_queue", queue_changed(queue_and_its_dlq))

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()


# -- the state on disk ----------------------------------------------------------------------------


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
        self._hooks: _Hooks | None = None
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
                raise _refusal(self.directory, why) from exc
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
            raise _refusal(self.directory, "has no format header (it was not written by this stack)")
        if header["format"] != FORMAT_VERSION:
            raise _refusal(
                self.directory, f"was written in format {header['format']}; this build reads format {FORMAT_VERSION}"
            )
        if header.get("moto") != moto_version():
            raise _refusal(
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
            raise _refusal(
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
        self._hooks = _Hooks(self.entities, self._touch)
        self._hooks.install()
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
            entities = dict(self.entities.everything(self.blobs))
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
