"""Runs the template's Lambda functions for moto, in warm worker processes.

moto has no Lambda runtime without Docker. Its one seam is
``moto.awslambda.models.LambdaFunction._invoke_lambda(self, event) -> (output, errored, logs)``:
``install_moto_seam`` replaces it in the server process, so every invocation moto makes (Step
Functions tasks, ``lambda.invoke`` calls, the local SQS poller) runs the real handler here.

Each function gets a pool of worker processes (``lambda_worker.py``), one per concurrent
invocation and reused, like Lambda execution environments: ``os.environ`` and module state are
per process, a worker can be killed at the function's timeout, and tests can make one crash.
"""

from __future__ import annotations

import contextlib
import datetime
import inspect
import json
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any, Literal, get_args

from local.runtime.lambda_worker import LOG_END_MARKER
from local.runtime.provision import FunctionDefinition
from local.runtime.settings import LOCAL_CREDENTIALS, RuntimeSettings

LOG = logging.getLogger("local.runtime.lambda")
WORKER_SCRIPT = Path(__file__).with_name("lambda_worker.py")
MOTO_VERSION = "5.2.5"
# What AWS returns to callers in x-amz-log-result: the last 4 KB of the invocation's log.
LOG_TAIL_BYTES = 4096
# Host environment a worker inherits (everything else comes from the template).
_HOST_ENV_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")

FaultMode = Literal["raise", "raise_after", "crash_after", "delay", "timeout"]
FAULT_MODES: tuple[str, ...] = get_args(FaultMode)

class MotoSeamError(RuntimeError):
    """moto's Lambda invocation seam moved or changed: the local runner cannot attach."""


@dataclass(frozen=True)
class InvocationResult:
    output: str
    errored: bool
    logs: str = ""

    @classmethod
    def error(cls, error_type: str, message: str, logs: str = "") -> InvocationResult:
        return cls(json.dumps({"errorType": error_type, "errorMessage": message}), True, logs)


# -- fault injection (tests only; nothing is injected unless asked) ----------------------------


@dataclass
class Fault:
    """What to do to the next ``remaining`` matching invocations of a function (see docs/local-stack.md)."""

    function_name: str
    mode: FaultMode
    error_type: str
    error_message: str
    remaining: int
    after_seconds: float | None = None
    # Only invocations whose event (as JSON text) contains this, e.g. a document id or tenant.
    match: str | None = None
    # The chance that a matching invocation is hit; a miss does not use up ``remaining``.
    probability: float = 1.0
    injected: int = 0

    def applies_to(self, function_name: str, event_json: str) -> bool:
        return self.function_name == function_name and (self.match is None or self.match in event_json)

    def describe(self) -> dict[str, Any]:
        return {
            "function": self.function_name,
            "mode": self.mode,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "remaining": self.remaining,
            "after_seconds": self.after_seconds,
            "match": self.match,
            "probability": self.probability,
            "injected": self.injected,
        }


class FaultInjector:
    """Makes the next N (matching) invocations of a function fail in a chosen way."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._random = random.Random(seed)
        # Faults injected so far, per function name (kept after a fault is used up or cleared).
        self._injected: dict[str, int] = {}

    def add(self, fault: Fault) -> None:
        if fault.mode not in FAULT_MODES:
            raise ValueError(f"unknown fault mode {fault.mode!r} ({', '.join(FAULT_MODES)})")
        if fault.remaining < 1:
            raise ValueError("times must be >= 1")
        if not 0 < fault.probability <= 1:
            raise ValueError("probability must be in (0, 1]")
        if fault.mode == "delay" and (fault.after_seconds is None or fault.after_seconds <= 0):
            raise ValueError("mode delay needs after_seconds > 0")
        if fault.after_seconds is not None and fault.after_seconds < 0:
            raise ValueError("after_seconds must be >= 0")
        with self._lock:
            self._faults.append(fault)

    def take(self, function_name: str, event_json: str = "") -> Fault | None:
        """The fault that hits this invocation, if any (the first armed one that applies)."""
        with self._lock:
            for fault in self._faults:
                if not fault.applies_to(function_name, event_json):
                    continue
                if fault.probability < 1 and self._random.random() >= fault.probability:
                    return None
                fault.remaining -= 1
                fault.injected += 1
                self._injected[function_name] = self._injected.get(function_name, 0) + 1
                if fault.remaining == 0:
                    self._faults.remove(fault)
                return fault
        return None

    def clear(self, function_name: str | None = None) -> int:
        with self._lock:
            before = len(self._faults)
            self._faults = [f for f in self._faults if function_name is not None and f.function_name != function_name]
            return before - len(self._faults)

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [fault.describe() for fault in self._faults]

    def injected(self) -> dict[str, int]:
        with self._lock:
            return dict(self._injected)


# -- worker processes --------------------------------------------------------------------------


class WorkerInitError(Exception):
    def __init__(self, error: dict[str, Any], logs: str) -> None:
        super().__init__(error.get("errorMessage", "init failed"))
        self.error = error
        self.logs = logs


@dataclass
class _Outcome:
    response: dict[str, Any]
    worker_alive: bool


def _utc_timestamp() -> str:
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

    def __init__(self, function: FunctionDefinition, environment: dict[str, str], index: int) -> None:
        self.function = function
        self.environment = environment
        self.index = index
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
            self._process = subprocess.Popen(
                [sys.executable, "-P", str(WORKER_SCRIPT), str(child_socket.fileno()), module_name],
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
                "errorMessage": f"{_utc_timestamp()} init timed out after {init_timeout:.2f} seconds "
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

    def invoke(self, event_json: str, request_id: str, fault: Fault | None) -> _Outcome:
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
            return _Outcome(
                {
                    "type": "error",
                    "error": {
                        "errorType": "Sandbox.Timedout",
                        "errorMessage": f"{_utc_timestamp()} {request_id} Task timed out after {timeout:.2f} seconds",
                    },
                },
                worker_alive=False,
            )
        try:
            response = json.loads(self._connection.recv_bytes())
        except (EOFError, OSError):
            returncode = self._wait_exit()
            return _Outcome(
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
        return _Outcome(response, worker_alive=True)

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
                    worker = Worker(self.function, self.environment, self._started)
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


def worker_environment(function: FunctionDefinition, settings: RuntimeSettings) -> dict[str, str]:
    """A worker's ``os.environ``: the template's environment, Lambda's reserved variables and
    the documented local overrides (``RuntimeSettings.local_lambda_overrides``)."""
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
    return environment


class LambdaRunner:
    """Runs invocations of the template's functions (by moto function name)."""

    def __init__(self, settings: RuntimeSettings) -> None:
        self.settings = settings
        self.faults = FaultInjector()
        self._functions: dict[str, FunctionDefinition] = {}
        self._pools: dict[str, WorkerPool] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="lambda-reaper", daemon=True)
        self._reaper.start()
        self.invocation_listeners: list[Callable[[str, InvocationResult], None]] = []
        # Called with (function name, result, duration in ms): the alarm evaluator's Lambda metrics.
        self.invocation_observers: list[Callable[[str, InvocationResult, float], None]] = []

    def register(self, functions: Iterable[FunctionDefinition]) -> None:
        with self._lock:
            for function in functions:
                self._functions[function.name] = function
                max_size = self.settings.lambda_max_workers
                if function.reserved_concurrency:
                    max_size = min(max_size, function.reserved_concurrency)
                self._pools[function.name] = WorkerPool(
                    function=function,
                    environment=worker_environment(function, self.settings),
                    max_size=max_size,
                    init_timeout=self.settings.lambda_init_timeout_seconds,
                )

    @property
    def functions(self) -> list[FunctionDefinition]:
        with self._lock:
            return list(self._functions.values())

    def find_function(self, name: str) -> FunctionDefinition | None:
        """A function by name, ARN, logical id or construct path (see FunctionDefinition.aliases)."""
        with self._lock:
            if name in self._functions:
                return self._functions[name]
            matches = [function for function in self._functions.values() if name in function.aliases()]
        return matches[0] if len(matches) == 1 else None

    def invoke(self, function_name: str, event: Any) -> InvocationResult:
        function = self._functions.get(function_name)
        if function is None:
            return InvocationResult.error(
                "Runtime.Unavailable",
                f"function {function_name} is not in the template: the local runner has no code for it",
            )
        if isinstance(event, str | bytes):
            # moto hands over the parsed payload, or the string "{}" when there was none.
            with contextlib.suppress(ValueError):
                event = json.loads(event)
        request_id = str(uuid.uuid4())
        logger = logging.getLogger(f"local.lambda.{function.display_name}")
        logger.info("START RequestId: %s Version: $LATEST", request_id)
        started = time.monotonic()
        try:
            event_json = json.dumps(event)
        except (TypeError, ValueError) as exc:
            result = InvocationResult.error("Runtime.InvalidEvent", f"event is not JSON serializable: {exc}")
        else:
            fault = self.faults.take(function.name, event_json)
            if fault is not None:
                logger.warning("fault injected: %s (%s)", fault.mode, fault.error_type)
            result = self._run(function, event_json, request_id, fault)
        duration_ms = (time.monotonic() - started) * 1000
        status = "error " + json.loads(result.output).get("errorType", "?") if result.errored else "ok"
        logger.info("END RequestId: %s Duration: %.1f ms Status: %s", request_id, duration_ms, status)
        for listener in list(self.invocation_listeners):
            listener(function.name, result)
        for observer in list(self.invocation_observers):
            observer(function.name, result, duration_ms)
        return result

    def _run(
        self, function: FunctionDefinition, event_json: str, request_id: str, fault: Fault | None
    ) -> InvocationResult:
        if fault is not None and fault.mode == "raise":
            return InvocationResult.error(fault.error_type, fault.error_message)
        started = time.monotonic()
        pool = self._pools[function.name]
        try:
            worker = pool.acquire()
        except WorkerInitError as init_error:
            return InvocationResult(json.dumps(init_error.error), True, init_error.logs)
        healthy = False
        try:
            outcome = worker.invoke(event_json, request_id, fault)
            healthy = outcome.worker_alive
            logs = worker.collect_logs(1.0 if healthy else 2.0)
        finally:
            pool.release(worker, healthy=healthy)
        response = outcome.response
        if fault is not None and fault.mode == "raise_after":
            # The handler ran (its side effects stand); the caller sees an error instead of its answer.
            return InvocationResult.error(fault.error_type, fault.error_message, logs)
        if fault is not None and fault.mode == "delay" and fault.after_seconds is not None:
            # The answer comes after_seconds later, within the function's timeout like any slow handler.
            timeout = float(function.timeout_seconds)
            elapsed = time.monotonic() - started
            time.sleep(max(0.0, min(fault.after_seconds, timeout - elapsed)))
            if elapsed + fault.after_seconds >= timeout:
                return InvocationResult.error(
                    "Sandbox.Timedout",
                    f"{_utc_timestamp()} {request_id} Task timed out after {timeout:.2f} seconds",
                    logs,
                )
        if response.get("type") == "result":
            return InvocationResult(str(response["payload"]), False, logs)
        return InvocationResult(json.dumps(response.get("error", {})), True, logs)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {name: pool.stats() for name, pool in self._pools.items()}

    def shutdown(self) -> None:
        self._stopping.set()
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.close()

    def _reap_loop(self) -> None:
        while not self._stopping.wait(min(30.0, max(1.0, self.settings.lambda_idle_seconds / 2))):
            with self._lock:
                pools = list(self._pools.values())
            for pool in pools:
                reaped = pool.reap_idle(self.settings.lambda_idle_seconds)
                if reaped:
                    LOG.info("stopped %d idle worker(s) of %s", reaped, pool.function.display_name)


# -- the moto seam -----------------------------------------------------------------------------


def verify_moto_seam() -> None:
    """Fail loudly if ``LambdaFunction._invoke_lambda`` moved or changed (moto pinned at 5.2.5)."""
    try:
        from moto.awslambda.models import LambdaFunction
    except ImportError as exc:
        raise MotoSeamError(f"moto.awslambda.models.LambdaFunction is gone: {exc}") from exc
    seam = getattr(LambdaFunction, "_invoke_lambda", None)
    if seam is None or not callable(seam):
        raise MotoSeamError("moto.awslambda.models.LambdaFunction._invoke_lambda is gone")
    signature = inspect.signature(seam)
    if list(signature.parameters) != ["self", "event"]:
        raise MotoSeamError(f"LambdaFunction._invoke_lambda signature changed: {signature}")
    if "tuple[str, bool, str]" not in str(signature.return_annotation):
        raise MotoSeamError(f"LambdaFunction._invoke_lambda return type changed: {signature.return_annotation}")
    if "self._invoke_lambda(event=body)" not in inspect.getsource(LambdaFunction.invoke):
        raise MotoSeamError("LambdaFunction.invoke no longer calls self._invoke_lambda(event=body)")


def install_moto_seam(runner: LambdaRunner) -> Callable[[], None]:
    """Route every moto Lambda invocation to the runner; returns a function that undoes it."""
    verify_moto_seam()
    import moto
    from moto.awslambda.models import LambdaFunction

    if moto.__version__ != MOTO_VERSION:
        LOG.warning(
            "moto %s is not the pinned %s: the Lambda seam was verified, but check", moto.__version__, MOTO_VERSION
        )
    original = LambdaFunction._invoke_lambda

    def _invoke_lambda(self: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
        result = runner.invoke(self.function_name, event)
        if result.logs:
            try:
                # Also into moto's CloudWatch Logs, as Lambda would.
                self.logs_backend.ensure_log_group(self.logs_group_name)
                self.save_logs(result.logs)
            except Exception:  # logging must never fail an invocation
                LOG.debug("could not store logs in moto", exc_info=True)
        tail = result.logs.encode()[-LOG_TAIL_BYTES:].decode("utf-8", errors="ignore")
        return result.output, result.errored, tail

    LambdaFunction._invoke_lambda = _invoke_lambda  # type: ignore[method-assign]

    def uninstall() -> None:
        LambdaFunction._invoke_lambda = original  # type: ignore[method-assign]

    return uninstall
