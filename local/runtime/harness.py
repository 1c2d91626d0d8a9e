"""Run ``python -m local.runtime serve`` as a child process, for tests (free ports, own state dir)."""

from __future__ import annotations

import json
import os
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalStackProcess:
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

    def control(self, method: str, path: str, payload: Any = None) -> dict[str, Any] | None:
        """Call a control endpoint (``/_local/...``); None when the server does not answer."""
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return dict(json.load(response))
        except urllib.error.HTTPError as error:
            return dict(json.load(error))
        except (OSError, ValueError):
            return None

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

    def __enter__(self) -> LocalStackProcess:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
