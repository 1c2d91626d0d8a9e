"""The embedding server as a child process of the local stack: started on a free port, stopped with it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from local.embedding_server.__main__ import READY_PREFIX

LOG = logging.getLogger("local.embedding_server")
REPO_ROOT = Path(__file__).resolve().parents[2]


class EmbeddingServerError(RuntimeError):
    pass


class EmbeddingServerProcess:
    """``python -m local.embedding_server`` on ``host``; :attr:`url` once :meth:`start` returns."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._output: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise EmbeddingServerError("the embedding server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, timeout: float = 120.0) -> None:
        """Start the process and wait until it listens (loading the model takes a few seconds)."""
        process = subprocess.Popen(
            [sys.executable, "-m", "local.embedding_server", "--host", self.host, "--port", str(self.requested_port)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._process = process
        assert process.stdout is not None
        ready = threading.Event()
        early_lines: list[str] = []
        self._output = threading.Thread(
            target=self._read_output,
            args=(process.stdout, ready, early_lines),
            name="embedding-server-log",
            daemon=True,
        )
        self._output.start()
        if not ready.wait(timeout) or self.port is None:
            self.stop()
            tail = "\n".join(early_lines[-20:])
            raise EmbeddingServerError(f"the embedding server did not start within {timeout:.0f} s:\n{tail}")
        LOG.info("embedding server (pid %s) on %s", process.pid, self.url)

    def _read_output(self, stream: IO[bytes], ready: threading.Event, early_lines: list[str]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not ready.is_set() and line.startswith(READY_PREFIX):
                self.port = int(json.loads(line[len(READY_PREFIX) :])["port"])
                ready.set()
                continue
            if not ready.is_set():
                early_lines.append(line)
            LOG.info("%s", line)
        ready.set()  # the process ended (before or after it was ready)

    def stop(self) -> None:
        process, self._process = self._process, None
        self.port = None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._output is not None:
            self._output.join(timeout=5)
