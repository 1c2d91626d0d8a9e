"""The embedding server as a child process of the local stack: started on a free port, stopped with it,
and started again on the same port when it dies (a supervisor, as a container runtime would restart it):
the functions were given its URL once, when their workers were configured."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from local.embedding_server.__main__ import READY_PREFIX

LOG = logging.getLogger("local.embedding_server")
REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_COMMAND = (sys.executable, "-m", "local.embedding_server")
# Pause between two failed attempts to start the server again (a port still held, a model that fails).
RESTART_PAUSE_SECONDS = 2.0


class EmbeddingServerError(RuntimeError):
    pass


class EmbeddingServerProcess:
    """``python -m local.embedding_server`` on ``host``; :attr:`url` once :meth:`start` returns.

    While it runs, a supervisor thread waits on the process; when it exits without :meth:`stop`
    (a crash, ``kill -9``), the server is started again on the same port and :attr:`restarts`
    counts it. ``command`` replaces the server's command line (tests run a stand-in server)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        command: Sequence[str] = SERVER_COMMAND,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``env``: variables set in the server's environment besides this process's own (the
        batch job runner's moto endpoint, ``LOCAL_BATCH_S3_ENDPOINT``)."""
        self.host = host
        self.env = dict(env or {})
        self.requested_port = port
        self.command = tuple(command)
        self.port: int | None = None
        self.restarts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._output: threading.Thread | None = None
        self._stopping = threading.Event()
        # Held while a process is launched, so stop() never misses one started by the supervisor.
        self._launch_lock = threading.Lock()
        self._supervisor: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise EmbeddingServerError("the embedding server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process else None

    def start(self, timeout: float = 120.0) -> None:
        """Start the process and wait until it listens (loading the model takes a few seconds)."""
        self._stopping.clear()
        self._launch(self.requested_port, timeout)
        self._supervisor = threading.Thread(
            target=self._supervise, args=(timeout,), name="embedding-server-supervisor", daemon=True
        )
        self._supervisor.start()

    def _launch(self, port: int, timeout: float) -> None:
        with self._launch_lock:
            if self._stopping.is_set():
                return
            process = subprocess.Popen(
                [*self.command, "--host", self.host, "--port", str(port)],
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env} if self.env else None,
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
            if not ready.wait(timeout) or process.poll() is not None or self.port is None:
                _end(process)
                self._process = None
                tail = "\n".join(early_lines[-20:])
                raise EmbeddingServerError(f"the embedding server did not start within {timeout:.0f} s:\n{tail}")
        LOG.info("embedding server (pid %s) on %s", process.pid, self.url)

    def _supervise(self, timeout: float) -> None:
        """Wait on the server; start it again on its port whenever it exits unasked."""
        while not self._stopping.is_set():
            process = self._process
            if process is None:
                if self._stopping.wait(RESTART_PAUSE_SECONDS):
                    return
            else:
                returncode = process.wait()
                if self._stopping.is_set():
                    return
                LOG.warning(
                    "embedding server (pid %s) exited with %s: starting it again on %s",
                    process.pid,
                    returncode,
                    self.url,
                )
            try:
                self._launch(self.port or self.requested_port, timeout)
            except (EmbeddingServerError, OSError) as exc:
                LOG.error("embedding server did not start again: %s", exc)
                continue
            if not self._stopping.is_set():
                self.restarts += 1

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
        self._stopping.set()
        with self._launch_lock:
            process, self._process = self._process, None
        self.port = None
        if process is not None:
            _end(process)
        if self._output is not None:
            self._output.join(timeout=5)
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None and supervisor is not threading.current_thread():
            supervisor.join(timeout=5)


def _end(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
