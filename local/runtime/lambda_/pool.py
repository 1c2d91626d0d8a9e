"""Lambda execution environments: warm worker processes per function, and their pool.

Stands in for what Lambda does between an invocation and the handler: one process per
concurrent invocation, started on demand (a cold start imports the handler once), reused while
warm, stopped when idle; ``os.environ`` and module state are per process, as per execution
environment. A worker is killed at the function's ``Timeout`` (``Sandbox.Timedout``) and a worker
that dies is reported as Lambda does (``Runtime.ExitError``), then replaced. The process itself
runs ``worker.py``.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from rag_ingest.core.job import Lane

from local.embedding_server.batcher import Lane as EmbeddingLane
from local.embedding_server.server import lane_endpoint
from local.runtime.cloudformation.provisioned import FunctionDefinition
from local.runtime.lambda_.faults import Fault
from local.runtime.lambda_.worker import LOG_END_MARKER
from local.runtime.settings import LOCAL_CREDENTIALS, RuntimeSettings

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
BEDROCK_ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
# Host environment a worker inherits (everything else comes from the template).
_HOST_ENV_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")


class WorkerInitError(Exception):
    def __init__(self, error: dict[str, Any], logs: str) -> None:
        super().__init__(error.get("errorMessage", "init failed"))
        self.error = error
        self.logs = logs


@dataclass
class WorkerOutcome:
    response: dict[str, Any]
    worker_alive: bool


def utc_timestamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _exit_description(returncode: int | None) -> str:
    if returncode is None:
        return "unknown"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return "signal: killed" if name == "SIGKILL" else f"signal: {name.removeprefix('SIG').lower()}"
    return f"exit status {returncode}"


class Worker:
    """One worker process (one Lambda execution environment) of a function."""

    def __init__(self, function: FunctionDefinition, environment: dict[str, str], index: int, nice: int = 0) -> None:
        self.function = function
        self.environment = environment
        self.index = index
        self.nice = nice
        self.last_used = time.monotonic()
        self._process: subprocess.Popen[bytes] | None = None
        self._connection: Connection | None = None
        self._reader: threading.Thread | None = None
        self._log_lock = threading.Lock()
        self._log_lines: list[str] = []
        self._expected_marker = "init"
        self._log_complete = threading.Event()
        self._logger = logging.getLogger(f"local.lambda.{function.display_name}")

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, init_timeout: float) -> None:
        """Start the process and import the handler (raises WorkerInitError)."""
        parent_socket, child_socket = socket.socketpair()
        module_name = (
            "rag_fn_"
            + re.sub(r"\W", "_", self.function.logical_id)
            + "_"
            + re.sub(r"\W", "_", self.function.handler.rpartition(".")[0])
        )
        try:
            # coreutils' nice execs the interpreter: the worker's pid is still the Python process's.
            niced = ["nice", "-n", str(self.nice)] if self.nice else []
            self._process = subprocess.Popen(
                [*niced, sys.executable, "-P", str(WORKER_SCRIPT), str(child_socket.fileno()), module_name],
                pass_fds=(child_socket.fileno(),),
                env=self.environment,
                cwd=self.function.code_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        finally:
            child_socket.close()
        self._connection = Connection(parent_socket.detach())
        self._begin_log("init")
        assert self._process.stdout is not None
        self._reader = threading.Thread(
            target=self._read_logs,
            args=(self._process.stdout,),
            name=f"logs-{self.function.name}-{self.index}",
            daemon=True,
        )
        self._reader.start()
        started = time.monotonic()
        if not self._connection.poll(init_timeout):
            self.kill()
            error = {
                "errorType": "Sandbox.Timedout",
                "errorMessage": f"{utc_timestamp()} init timed out after {init_timeout:.2f} seconds "
                "(LOCAL_LAMBDA_INIT_TIMEOUT)",
            }
            raise WorkerInitError(error, self._end_log())
        try:
            message = json.loads(self._connection.recv_bytes())
        except (EOFError, OSError):
            returncode = self._wait_exit()
            error = {
                "errorType": "Runtime.ExitError",
                "errorMessage": f"Error: Runtime exited during init: {_exit_description(returncode)}",
            }
            raise WorkerInitError(error, self._end_log()) from None
        if message.get("type") != "ready":
            self.kill()
            raise WorkerInitError(message.get("error", {}), self._end_log())
        self._end_log()
        self._logger.info(
            "worker %d (pid %s) ready in %.0f ms", self.index, self.pid, (time.monotonic() - started) * 1000
        )

    def invoke(self, event_json: str, request_id: str, fault: Fault | None) -> WorkerOutcome:
        assert self._connection is not None
        timeout = float(self.function.timeout_seconds)
        wait = timeout
        fault_mode: str | None = None
        if fault is not None and fault.mode == "crash_after":
            fault_mode = "crash_after"
        elif fault is not None and fault.mode == "timeout":
            fault_mode = "hang"
            wait = min(timeout, fault.after_seconds) if fault.after_seconds is not None else timeout
        deadline_ms = int((time.time() + timeout) * 1000)
        self._begin_log(request_id)
        self.last_used = time.monotonic()
        try:
            self._connection.send_bytes(
                json.dumps(
                    {
                        "type": "invoke",
                        "request_id": request_id,
                        "event": event_json,
                        "deadline_ms": deadline_ms,
                        "invoked_function_arn": self.function.arn,
                        "fault": fault_mode,
                    }
                ).encode()
            )
            ready = self._connection.poll(wait)
        except (OSError, EOFError):
            ready = True  # the process is gone: recv below reports it
        if not ready:
            self.kill()
            return WorkerOutcome(
                {
                    "type": "error",
                    "error": {
                        "errorType": "Sandbox.Timedout",
                        "errorMessage": f"{utc_timestamp()} {request_id} Task timed out after {timeout:.2f} seconds",
                    },
                },
                worker_alive=False,
            )
        try:
            response = json.loads(self._connection.recv_bytes())
        except (EOFError, OSError):
            returncode = self._wait_exit()
            return WorkerOutcome(
                {
                    "type": "error",
                    "error": {
                        "errorType": "Runtime.ExitError",
                        "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: "
                        f"{_exit_description(returncode)}",
                    },
                },
                worker_alive=False,
            )
        self.last_used = time.monotonic()
        return WorkerOutcome(response, worker_alive=True)

    def collect_logs(self, wait_seconds: float = 1.0) -> str:
        # The end marker follows the handler's last line; a dead worker's pipe just ends.
        self._log_complete.wait(wait_seconds)
        return self._end_log()

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._wait_exit()
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def stop(self) -> None:
        """Graceful end: closing the connection makes an idle worker exit."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._process is not None:
            try:
                self._process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._wait_exit()

    def _wait_exit(self) -> int | None:
        assert self._process is not None
        try:
            return self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait(timeout=5)

    def _begin_log(self, marker: str) -> None:
        with self._log_lock:
            self._log_lines = []
            self._expected_marker = marker
            self._log_complete.clear()

    def _end_log(self) -> str:
        with self._log_lock:
            lines, self._log_lines = self._log_lines, []
        return "\n".join(lines)

    def _read_logs(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if line.startswith(LOG_END_MARKER):
                with self._log_lock:
                    if line[len(LOG_END_MARKER) :] == self._expected_marker:
                        self._log_complete.set()
                continue
            self._logger.info("%s", line)
            with self._log_lock:
                self._log_lines.append(line)
        self._log_complete.set()


@dataclass
class WorkerPool:
    """The warm workers of one function: at most ``max_size`` processes, reused."""

    function: FunctionDefinition
    environment: dict[str, str]
    max_size: int
    init_timeout: float
    # Niceness of the pool's processes (the bulk lane's run at a lower CPU priority).
    nice: int = 0
    _idle: list[Worker] = field(default_factory=list)
    _busy: set[Worker] = field(default_factory=set)
    _started: int = 0
    _condition: threading.Condition = field(default_factory=threading.Condition)
    _closed: bool = False

    def acquire(self) -> Worker:
        with self._condition:
            while True:
                if self._closed:
                    raise WorkerInitError(
                        {"errorType": "Runtime.Unavailable", "errorMessage": "the local runtime is stopping"}, ""
                    )
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive:
                        self._busy.add(worker)
                        return worker
                    worker.kill()  # died while idle: release its connection
                if len(self._busy) < self.max_size:
                    self._started += 1
                    worker = Worker(self.function, self.environment, self._started, nice=self.nice)
                    self._busy.add(worker)
                    break
                self._condition.wait()
        try:
            worker.start(self.init_timeout)
        except BaseException:
            self.release(worker, healthy=False)
            raise
        return worker

    def release(self, worker: Worker, *, healthy: bool) -> None:
        keep = healthy and worker.alive
        with self._condition:
            self._busy.discard(worker)
            keep = keep and not self._closed
            if keep:
                self._idle.append(worker)
            self._condition.notify()
        if not keep:
            worker.kill()

    def reap_idle(self, idle_seconds: float) -> int:
        now = time.monotonic()
        with self._condition:
            stale = [worker for worker in self._idle if now - worker.last_used > idle_seconds]
            self._idle = [worker for worker in self._idle if worker not in stale]
        for worker in stale:
            worker.stop()
        return len(stale)

    def close(self) -> None:
        with self._condition:
            self._closed = True
            workers = [*self._idle, *self._busy]
            self._idle = []
            self._condition.notify_all()
        for worker in workers:
            worker.kill()

    def stats(self) -> dict[str, Any]:
        with self._condition:
            return {"idle": len(self._idle), "busy": len(self._busy), "started": self._started}


def worker_environment(
    function: FunctionDefinition, settings: RuntimeSettings, *, serves_api: bool = False
) -> dict[str, str]:
    """A worker's ``os.environ``: the template's environment, Lambda's reserved variables and
    the documented local overrides (``RuntimeSettings.local_lambda_overrides``). ``serves_api``:
    the function is behind the HTTP API (its embeddings are search queries)."""
    environment = {name: os.environ[name] for name in _HOST_ENV_PASSTHROUGH if name in os.environ}
    environment.update({name: os.environ[name] for name in settings.passthrough_env if name in os.environ})
    environment.update(function.environment)
    environment.update(LOCAL_CREDENTIALS)
    environment.update(
        {
            "AWS_ENDPOINT_URL": settings.moto_endpoint,
            "AWS_REGION": settings.region,
            "AWS_DEFAULT_REGION": settings.region,
            "AWS_LAMBDA_FUNCTION_NAME": function.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(function.timeout_seconds),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": f"local/[$LATEST]{uuid.uuid4().hex}",
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.runtime}",
            "LAMBDA_TASK_ROOT": str(function.code_dir),
            "_HANDLER": function.handler,
            # Like /var/task then /opt/python in Lambda: the function's code, then the layer.
            "PYTHONPATH": os.pathsep.join([str(function.code_dir), str(settings.layer_source_dir)]),
            "PYTHONUNBUFFERED": "1",
        }
    )
    for name, value in settings.local_lambda_overrides().items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    endpoint = environment.get(BEDROCK_ENDPOINT_VARIABLE)
    # The embedding server's batcher serves queries first and at once, the bulk lane's texts after
    # the standard lane's (local.embedding_server.batcher).
    embedding_lane = EmbeddingLane.QUERY if serves_api else EmbeddingLane.BULK if function.lane == Lane.BULK else None
    if endpoint and embedding_lane:
        environment[BEDROCK_ENDPOINT_VARIABLE] = lane_endpoint(endpoint, embedding_lane)
    return environment
