"""The upload board: one line per file (bytes sent, then the document's status, stage and progress) and
an overall line. On a terminal it redraws in place; otherwise (a pipe, a CI log) it prints a line
only when something changes, and byte progress only at each quarter, so logs stay short."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

BAR_WIDTH = 20
SENDING = frozenset({"waiting", "uploading"})
REDRAW_SECONDS = 0.1


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[#########---------------]``: the filled part never exceeds ``width``, an empty total is full."""
    fraction = 1.0 if total <= 0 else min(max(done / total, 0.0), 1.0)
    filled = int(fraction * width)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def percent(done: int, total: int) -> int:
    return 100 if total <= 0 else min(100, int(100 * done / total))


def human_bytes(n_bytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n_bytes < 1024 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    raise AssertionError("unreachable")


def status_text(document: dict[str, Any]) -> str:
    """``PROCESSING PARSE 150/2000 pages (bulk lane)``, ``PROCESSING EMBED 12/40``, ``PROCESSING
    EMBED 12/40 (waiting for embedding capacity)``, ``READY 3 pages 14 chunks``, ``FAILED ENCRYPTED_PDF``."""
    status = str(document.get("status", "?"))
    if status == "READY":
        return f"READY {document.get('page_count') or 0} pages {document.get('chunk_count') or 0} chunks"
    if status == "FAILED":
        return f"FAILED {document.get('error_code') or ''}".rstrip()
    parts = [status]
    if document.get("stage"):
        parts.append(str(document["stage"]))
    progress = document.get("progress") or {}
    if document.get("stage") == "PARSE" and document.get("pages_parsed") is not None and document.get("page_count"):
        parts.append(f"{document['pages_parsed']}/{document['page_count']} pages")
    elif progress.get("total"):
        parts.append(f"{progress.get('done', 0)}/{progress['total']}")
    if document.get("lane") == "bulk":
        parts.append("(bulk lane)")
    if document.get("waiting_for") == "EMBEDDING_CAPACITY":
        parts.append("(waiting for embedding capacity)")
    return " ".join(parts)


@dataclass
class Row:
    name: str
    size: int
    sent: int = 0
    state: str = "waiting"
    _last_quarter: int = -1


@dataclass
class ProgressBoard:
    stream: TextIO
    interactive: bool
    rows: list[Row] = field(default_factory=list)
    _drawn_lines: int = 0
    _last_draw: float = 0.0

    @classmethod
    def for_files(cls, stream: TextIO, files: list[tuple[str, int]]) -> ProgressBoard:
        interactive = bool(getattr(stream, "isatty", lambda: False)())
        return cls(stream=stream, interactive=interactive, rows=[Row(name, size) for name, size in files])

    @property
    def overall_label(self) -> str:
        return f"all {len(self.rows)} files"

    @property
    def name_width(self) -> int:
        return min(30, max(len(self.overall_label), *(len(row.name) for row in self.rows)))

    def lines(self) -> list[str]:
        """One line per file, then the overall one. While a file is sent its line shows the bytes; after,
        the document's state takes their place, so that the part that matters fits in 80 columns."""
        width = self.name_width
        lines = []
        for row in self.rows:
            detail = f"{human_bytes(row.sent)} / {human_bytes(row.size)}" if row.state in SENDING else row.state
            lines.append(
                f"{_fit(row.name, width):<{width}} {bar(row.sent, row.size)} {percent(row.sent, row.size):3d}% {detail}"
            )
        sent, total = sum(row.sent for row in self.rows), sum(row.size for row in self.rows)
        lines.append(
            f"{_fit(self.overall_label, width):<{width}} {bar(sent, total)} {percent(sent, total):3d}% "
            f"{human_bytes(sent)} / {human_bytes(total)}"
        )
        return lines

    def sent(self, index: int, n_bytes: int) -> None:
        row = self.rows[index]
        row.sent = min(row.size, row.sent + n_bytes)
        if row.state == "waiting":
            row.state = "uploading"
        if self.interactive:
            self.draw()
            return
        quarter = percent(row.sent, row.size) // 25
        if quarter != row._last_quarter:
            row._last_quarter = quarter
            self._print_row(row)

    def state(self, index: int, text: str) -> None:
        row = self.rows[index]
        if row.state == text:
            return
        row.state = text
        if self.interactive:
            self.draw(force=True)
        else:
            self._print_row(row)

    def draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_draw < REDRAW_SECONDS:
            return
        self._last_draw = now
        # A line wider than the terminal would wrap, and moving up by the line count would then miss.
        columns = shutil.get_terminal_size().columns
        lines = [_fit(line, columns - 1) for line in self.lines()]
        # Move back to the first line of the previous drawing, then rewrite each line and clear its tail.
        prefix = f"\x1b[{self._drawn_lines}F" if self._drawn_lines else ""
        self.stream.write(prefix + "".join(f"{line}\x1b[K\n" for line in lines))
        self.stream.flush()
        self._drawn_lines = len(lines)

    def finish(self) -> None:
        if self.interactive:
            self.draw(force=True)

    def _print_row(self, row: Row) -> None:
        self.stream.write(f"{row.name}: {percent(row.sent, row.size)}% of {human_bytes(row.size)} sent, {row.state}\n")
        self.stream.flush()


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
