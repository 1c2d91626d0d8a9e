"""Progress output, sizes, subprocesses and a tiny stdlib HTTP client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PREFIX = "[opensearch]"


class OpenSearchLocalError(Exception):
    """A failure with a message meant for the user (printed without a traceback)."""


def say(message: str) -> None:
    print(f"{PREFIX} {message}", flush=True)


def warn(message: str) -> None:
    print(f"{PREFIX} WARNING: {message}", file=sys.stderr, flush=True)


@contextmanager
def step(title: str) -> Iterator[None]:
    """Print a step's title, and how long it took when it ends."""
    say(f"{title} ...")
    started = time.monotonic()
    yield
    say(f"{title}: done in {time.monotonic() - started:.1f}s")


def human_size(n_bytes: float) -> str:
    size = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    raise AssertionError("unreachable")


def tree_size(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def run(
    cmd: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    what: str,
) -> str:
    """Run a command, returning its combined output; raise with the output's tail when it fails."""
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise OpenSearchLocalError(f"{what}: command not found: {cmd[0]}") from exc
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        raise OpenSearchLocalError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n--- last output ---\n{tail}"
        )
    return proc.stdout


def tail_lines(path: Path, count: int = 30, start: int = 0) -> list[str]:
    """The last ``count`` lines of a file, ignoring the first ``start`` bytes."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            if start > size:  # rotated or truncated
                start = 0
            fh.seek(max(start, size - 64 * 1024))
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return data.splitlines()[-count:]


class HttpResult:
    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def http_get(url: str, timeout: float = 5.0) -> HttpResult:
    """GET without raising on HTTP error statuses; connection problems raise ``OSError``."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return HttpResult(response.status, response.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:
        return HttpResult(exc.code, exc.read().decode("utf-8", errors="replace"))
