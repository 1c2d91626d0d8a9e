"""``python -m local.runtime {serve,up,down,status}``.

serve   run the local stack in the foreground (Ctrl-C stops it)
up      start ``serve`` detached, logging to .local/runtime/stack.log, and wait until ready
down    stop it
status  print what runs (exit 3 when nothing does)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from local.runtime.settings import RuntimeSettings

EXIT_NOT_RUNNING = 3


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(settings: RuntimeSettings) -> int | None:
    try:
        pid = int(settings.pid_path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def _get_json(url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as error:
        try:
            return dict(json.load(error))
        except ValueError:
            return None
    except (OSError, ValueError):
        return None


def _tail(path: Any, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def serve(settings: RuntimeSettings) -> int:
    from local.runtime.stack import OfflineStack

    logging.basicConfig(
        level=os.environ.get("LOCAL_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return OfflineStack(settings).serve_forever()


def up(settings: RuntimeSettings) -> int:
    running = _read_pid(settings)
    if running is not None:
        print(f"local stack already running (pid {running}); `python -m local.runtime status` for details")
        return 0
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with settings.log_path.open("ab") as log:
        log.write(f"\n==== up {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n".encode())
        log.flush()
        process = subprocess.Popen(
            [sys.executable, "-m", "local.runtime", "serve"],
            cwd=settings.repo_root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives this shell; `down` stops its process group
        )
    print(f"starting the local stack (pid {process.pid}, log {settings.log_path})")
    deadline = time.monotonic() + settings.ready_timeout_seconds
    last_phase = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            print(f"the local stack exited with code {process.returncode}; last log lines:\n{_tail(settings.log_path)}")
            return 1
        health = _get_json(f"{settings.api_url}/_local/health")
        phase = str(health.get("phase")) if health else "starting"
        if phase != last_phase:
            print(f"  ... {phase}")
            last_phase = phase
        if health and health.get("ready"):
            print(
                f"local stack ready: API {settings.api_url}, moto {settings.moto_endpoint}, "
                f"outputs {settings.outputs_path}"
            )
            return 0
        time.sleep(0.5)
    print(f"the local stack was not ready after {settings.ready_timeout_seconds:.0f} s; stopping it")
    _stop_pid(process.pid)
    print(_tail(settings.log_path))
    return 1


def _stop_pid(pid: int, timeout: float = 20.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.2)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our child (after `up` gave up)
    if _pid_alive(pid):
        try:
            # `up` started serve in its own session: its process group is serve and its workers.
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def down(settings: RuntimeSettings) -> int:
    pid = _read_pid(settings)
    if pid is None:
        print("local stack is not running")
        settings.pid_path.unlink(missing_ok=True)
        return 0
    print(f"stopping the local stack (pid {pid})")
    _stop_pid(pid)
    settings.pid_path.unlink(missing_ok=True)
    print("stopped")
    return 0


def reset(settings: RuntimeSettings) -> int:
    """Set the kept state aside (never deleted: moved next to itself), so the next start is empty."""
    if _read_pid(settings) is not None:
        print("the local stack is running: stop it first (make stack-down)")
        return 1
    data_dir = settings.data_dir
    if not data_dir.exists():
        print(f"no kept state in {data_dir}: the next start is empty")
        return 0
    aside = data_dir.with_name(f"{data_dir.name}.old-{time.strftime('%Y%m%dT%H%M%S')}")
    data_dir.rename(aside)
    print(f"kept state moved to {aside}; the next start is empty (delete that folder when you no longer need it)")
    return 0


def status(settings: RuntimeSettings, as_json: bool) -> int:
    pid = _read_pid(settings)
    details = _get_json(f"{settings.api_url}/_local/status") if pid is not None else None
    if as_json:
        print(json.dumps({"running": pid is not None, "pid": pid, **(details or {})}, indent=2))
        return 0 if pid is not None else EXIT_NOT_RUNNING
    if pid is None:
        print("local stack is not running")
        return EXIT_NOT_RUNNING
    if details is None:
        print(f"local stack process {pid} is running but does not answer on {settings.api_url}")
        return 1
    print(f"local stack: {details['phase']} (pid {pid}, up {details['uptime_seconds']} s)")
    if details.get("error"):
        print(f"  error: {details['error']}")
    print(f"  moto     {details['moto_endpoint']}")
    print(f"  API      {details['api_url']}")
    print(f"  outputs  {details['outputs']}")
    print(f"  template {details['template']}")
    for function in details.get("functions", []):
        workers = function.get("workers", {})
        print(
            f"  function {function['path']}: {function['name']} "
            f"(workers idle {workers.get('idle', 0)}, busy {workers.get('busy', 0)}, "
            f"started {workers.get('started', 0)})"
        )
    for poller in details.get("pollers", []):
        print(
            f"  poller   {poller['mapping']} -> {poller['function']}: batches {poller['batches']}, "
            f"received {poller['received']}, deleted {poller['deleted']}, failed {poller['failed']}"
        )
    for fault in details.get("faults", []):
        print(f"  fault    {fault}")
    kept = details.get("kept_state")
    if kept:
        print(
            f"  state    {kept['directory']}: journal {kept['journal_bytes']} bytes, "
            f"{kept['checkpoints']} checkpoints (last {kept['last_checkpoint_seconds']} s)"
        )
    else:
        print("  state    in memory only (LOCAL_PERSIST=0)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.runtime", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the local stack in the foreground")
    commands.add_parser("up", help="start the local stack detached and wait until it is ready")
    commands.add_parser("down", help="stop the local stack")
    commands.add_parser("reset", help="set the kept state aside: the next start is empty")
    status_parser = commands.add_parser("status", help="print what runs")
    status_parser.add_argument("--json", action="store_true", help="machine-readable output")
    arguments = parser.parse_args(argv)
    settings = RuntimeSettings.from_env()
    if arguments.command == "serve":
        return serve(settings)
    if arguments.command == "up":
        return up(settings)
    if arguments.command == "down":
        return down(settings)
    if arguments.command == "reset":
        return reset(settings)
    return status(settings, arguments.json)


if __name__ == "__main__":
    sys.exit(main())
