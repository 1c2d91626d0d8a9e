"""An append-only file of records, each framed by its length and CRC-32, written before the write it
records is acknowledged (``docs/local-stack.md``, "What a restart keeps").

A ``kill -9`` or a power cut can leave the last record half-written: reading stops at the first
record whose frame or checksum does not hold, and :meth:`Journal.open` cuts the file there. Such a
record was never acknowledged (its writer had not returned), so cutting it loses nothing a client
was told is stored.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = b"RIJ1"
_FRAME = struct.Struct(">II")  # payload length, CRC-32 of the payload
# A record larger than this is a corrupt length, not a record (S3 bodies live in blob files).
MAX_RECORD_BYTES = 64 * 1024 * 1024


class JournalError(Exception):
    """The file is not a journal of this format."""


@dataclass(frozen=True)
class JournalContents:
    records: list[bytes]
    valid_bytes: int  # where the last whole record ends
    dropped_bytes: int  # a torn or corrupt tail after it


def read_journal(path: Path) -> JournalContents:
    """Every whole record of ``path`` (none when it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JournalContents([], 0, 0)
    if not data:
        return JournalContents([], 0, 0)
    if not data.startswith(MAGIC):
        raise JournalError(f"{path} is not a rag-ingest journal (its first bytes are {data[:4]!r}, not {MAGIC!r})")
    records: list[bytes] = []
    offset = len(MAGIC)
    while offset + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, offset)
        start = offset + _FRAME.size
        end = start + length
        if length > MAX_RECORD_BYTES or end > len(data):
            break
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            break
        records.append(payload)
        offset = end
    return JournalContents(records, offset, len(data) - offset)


class Journal:
    """The open journal file: :meth:`append` writes, :meth:`sync` makes what was written durable."""

    def __init__(self, path: Path, file: BinaryIO, *, fsync: bool) -> None:
        self.path = path
        self._file = file
        self._fsync = fsync

    @classmethod
    def open(cls, path: Path, *, fsync: bool = True) -> Journal:
        """Open for appending, after cutting a torn tail; a missing file starts empty."""
        contents = read_journal(path)
        if contents.valid_bytes == 0:
            with path.open("wb") as fresh:
                fresh.write(MAGIC)
                fresh.flush()
                if fsync:
                    os.fsync(fresh.fileno())
        elif contents.dropped_bytes:
            with path.open("r+b") as torn:
                torn.truncate(contents.valid_bytes)
        return cls(path, path.open("ab"), fsync=fsync)

    @property
    def size(self) -> int:
        return self._file.tell()

    def append(self, payload: bytes) -> None:
        if len(payload) > MAX_RECORD_BYTES:
            raise ValueError(f"a journal record of {len(payload)} bytes is over {MAX_RECORD_BYTES}")
        self._file.write(_FRAME.pack(len(payload), zlib.crc32(payload)) + payload)
        self._file.flush()  # into the OS: a kill -9 of this process no longer loses it

    def sync(self) -> None:
        """Durable across a power cut too (when fsync is on)."""
        if self._fsync:
            os.fsync(self._file.fileno())

    def reset(self) -> None:
        """Empty the journal (its records are in a snapshot now)."""
        self._file.truncate(len(MAGIC))
        self._file.seek(len(MAGIC))
        self._file.flush()
        self.sync()

    def close(self) -> None:
        self._file.close()
