"""Where a command writes: its results on stdout (JSON with ``--json``), notes and errors on stderr."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TextIO


@dataclass
class Console:
    out: TextIO
    err: TextIO
    as_json: bool = False

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def write(self, text: str) -> None:
        """``text`` as it is, at once (a streamed answer's pieces)."""
        self.out.write(text)
        self.out.flush()

    def json(self, value: Any) -> None:
        self.print(json.dumps(value, indent=2))

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()
