"""The Lambda service's Invoke, for the template's functions: what runs a handler for moto.

Stands in for Lambda's invocation path: an event in, the function's answer or an error in
Lambda's shape (``errorType``, ``errorMessage``) out, so Step Functions Retry/Catch match on it.
Each function runs in its pool of warm execution environments (:mod:`local.runtime.lambda_.pool`);
armed test faults (:mod:`local.runtime.lambda_.faults`) are applied here. moto reaches the runner through
its one Lambda seam (:mod:`local.runtime.lambda_.moto_seam`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from rag_ingest.core.job import Lane

from local.runtime.cloudformation.provisioned import FunctionDefinition
from local.runtime.lambda_.faults import Fault, FaultInjector
from local.runtime.lambda_.pool import WorkerInitError, WorkerPool, utc_timestamp, worker_environment
from local.runtime.settings import RuntimeSettings

LOG = logging.getLogger("local.runtime.lambda")


@dataclass(frozen=True)
class InvocationResult:
    output: str
    errored: bool
    logs: str = ""

    @classmethod
    def error(cls, error_type: str, message: str, logs: str = "") -> InvocationResult:
        return cls(json.dumps({"errorType": error_type, "errorMessage": message}), True, logs)


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

    def register(self, functions: Iterable[FunctionDefinition], api_functions: Collection[str] = ()) -> None:
        """Pools for ``functions``; ``api_functions`` (by name) serve the HTTP API's routes."""
        with self._lock:
            for function in functions:
                self._functions[function.name] = function
                max_size = self.settings.lambda_max_workers
                if function.reserved_concurrency:
                    max_size = min(max_size, function.reserved_concurrency)
                self._pools[function.name] = WorkerPool(
                    function=function,
                    environment=worker_environment(function, self.settings, serves_api=function.name in api_functions),
                    max_size=max_size,
                    init_timeout=self.settings.lambda_init_timeout_seconds,
                    nice=self.settings.bulk_lane_nice if function.lane == Lane.BULK else 0,
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
                    f"{utc_timestamp()} {request_id} Task timed out after {timeout:.2f} seconds",
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
