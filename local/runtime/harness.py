"""Run ``python -m local.runtime serve`` as a child process, for tests (free ports, own state dir);
``kill()`` and ``restart()`` for the chaos runs (``kill -9`` of the whole stack, started again on the
same ports with the same state dir)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from local.runtime.alarms.clock_control import ALARM_CLOCK_PATH
from local.runtime.settings import REPO_ROOT


def template_with_environment(source: Path, variables: Mapping[str, str]) -> dict[str, Any]:
    """The synthesized template at ``source``, runnable from anywhere (asset paths made absolute),
    with each of ``variables`` set in every function whose environment has it: a benchmark's own
    index, or a test stack's smaller page ranges and bulk-lane threshold."""
    template = json.loads(source.read_text())
    for resource in template.get("Resources", {}).values():
        metadata = resource.get("Metadata", {})
        asset = metadata.get("aws:asset:path")
        if isinstance(asset, str) and not Path(asset).is_absolute():
            metadata["aws:asset:path"] = str((source.parent / asset).resolve())
        if resource.get("Type") == "AWS::Lambda::Function":
            environment = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
            environment.update({name: value for name, value in variables.items() if name in environment})
    return dict(template)


def process_state(pid: int) -> str | None:
    """The state letter of ``/proc/<pid>/stat`` (R running, S sleeping, Z zombie, ...); None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def child_processes(parent: int) -> dict[int, str]:
    """The live child processes of ``parent``: pid -> command line (spaces between arguments)."""
    children: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name in parentheses may hold spaces: the fields after it are split.
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if int(ppid) == parent and state != "Z":
            children[int(entry.name)] = command
    return children


def names(logical_id: str, construct_id: str) -> bool:
    """Whether ``logical_id`` (``WorkflowEmbedFunctionA7323F44``) is the function ``construct_id``
    (``EmbedFunction``): the construct path, then CDK's 8-character hash."""
    return re.fullmatch(rf"[A-Za-z]*?{re.escape(construct_id)}[0-9A-F]{{8}}", logical_id) is not None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _call_json(method: str, url: str, payload: Any = None, timeout: float = 10.0) -> dict[str, Any] | None:
    """A JSON request to a control endpoint; its JSON answer (errors too), None when nobody answers."""
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as error:
        return dict(json.load(error))
    except (OSError, ValueError):
        return None


class OfflineStackProcess:
    """A local stack on free ports; ``start()`` returns its outputs, ``stop()`` ends everything."""

    def __init__(self, state_dir: Path, *, template: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.moto_port = free_port()
        self.api_port = free_port()
        self.env = {
            **os.environ,
            "LOCAL_STATE_DIR": str(state_dir),
            "LOCAL_MOTO_PORT": str(self.moto_port),
            "LOCAL_API_PORT": str(self.api_port),
            **({"LOCAL_TEMPLATE": str(template)} if template is not None else {}),
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.outputs: dict[str, Any] = {}

    @property
    def log_path(self) -> Path:
        return self.state_dir / "stack.log"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def moto_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.moto_port}"

    def start(self, timeout: float = 120.0) -> dict[str, Any]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "local.runtime", "serve"],
                cwd=REPO_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"local stack exited with {self.process.returncode}:\n{self.log_tail()}")
            health = self.control("GET", "/_local/health")
            if health and health.get("ready"):
                self.outputs = json.loads((self.state_dir / "outputs.json").read_text())
                return self.outputs
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"local stack not ready after {timeout} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)

    @property
    def pid(self) -> int | None:
        """The serve process's pid (its process group's id too) while it runs."""
        return self.process.pid if self.process is not None and self.process.poll() is None else None

    def worker_pids(self, construct_id: str) -> list[int]:
        """The Lambda worker processes (execution environments) of the function ``construct_id``
        (e.g. ``EmbedFunction``) running now: children of the serve process, named by the module
        their handler is imported as (``rag_fn_<logical id>_...``)."""
        pid = self.pid
        if pid is None:
            return []
        logical_ids = [
            logical_id for logical_id in self.outputs.get("Functions", {}) if names(logical_id, construct_id)
        ]
        modules = tuple(f"rag_fn_{logical_id}_" for logical_id in logical_ids)
        return sorted(
            child
            for child, command in child_processes(pid).items()
            if "lambda_/worker.py" in command and any(module in command for module in modules)
        )

    def busy_worker_pids(self, construct_id: str) -> list[int]:
        """The worker processes of ``construct_id`` running an invocation now: all of them when the
        runner counts none idle, else those on a CPU (state R; an idle worker waits on its socket)."""
        pids = self.worker_pids(construct_id)
        status = self.control("GET", "/_local/status") or {}
        workers: dict[str, int] = next(
            (f["workers"] for f in status.get("functions", []) if names(f["logical_id"], construct_id)), {}
        )
        if pids and workers.get("idle", 1) == 0 and workers.get("busy", 0) >= len(pids):
            return pids
        return [pid for pid in pids if process_state(pid) == "R"]

    def kill(self) -> None:
        """``kill -9`` of the stack: SIGKILL to the serve process's group (moto, the API adapter, the
        pollers, the Lambda workers and the embedding server), so no shutdown code runs. The state
        dir and the ports are kept for :meth:`restart`."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def restart(self, timeout: float = 120.0) -> dict[str, Any]:
        """Start the stack again on the same ports with the same state dir (after :meth:`kill` or
        :meth:`stop`); returns its outputs."""
        if self.pid is not None:
            raise RuntimeError(f"the local stack (pid {self.pid}) is still running")
        return self.start(timeout)

    def control(self, method: str, path: str, payload: Any = None) -> dict[str, Any] | None:
        """Call a control endpoint (``/_local/...``); None when the server does not answer."""
        return _call_json(method, f"{self.api_url}{path}", payload)

    def alarm_clock(self) -> dict[str, Any]:
        """The alarms' clock: ``now``, ``offset_seconds``, ``period_scale``, ``tick_seconds``."""
        return _call_json("GET", f"{self.moto_endpoint}{ALARM_CLOCK_PATH}") or {}

    def advance_alarm_clock(self, seconds: float) -> dict[str, Any]:
        """Step the alarms' clock by ``seconds`` (each tick of it evaluated at once); the clock and
        the ``transitions`` it made."""
        url = f"{self.moto_endpoint}{ALARM_CLOCK_PATH}"
        answer = _call_json("POST", url, {"advance_seconds": seconds}, timeout=120.0)
        if not answer or "transitions" not in answer:
            raise RuntimeError(f"advancing the alarm clock failed: {answer}")
        return answer

    def arm_fault(self, function: str, mode: str = "raise", *, times: int = 1, **extra: Any) -> dict[str, Any]:
        answer = self.control("POST", "/_local/faults", {"function": function, "mode": mode, "times": times, **extra})
        if not answer or "mode" not in answer:
            raise RuntimeError(f"arming fault failed: {answer}")
        return answer

    def clear_faults(self) -> None:
        self.control("DELETE", "/_local/faults")

    def faults(self) -> dict[str, Any]:
        """``{"faults": [armed...], "injected": {function name: count}}``."""
        return self.control("GET", "/_local/faults") or {}

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def __enter__(self) -> OfflineStackProcess:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
