"""``start``, ``stop``, ``status`` and ``wait`` for the local OpenSearch (or for ``$OPENSEARCH_URL``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from local.opensearch.install import ensure_service_user, install, is_installed, java_env, service_account, write_config
from local.opensearch.java import find_jdk
from local.opensearch.settings import (
    DEFAULT_URL,
    Layout,
    external_url,
    heap_size,
    layout,
    server_url,
    start_timeout,
)
from local.opensearch.util import OpenSearchLocalError, http_get, human_size, say, tail_lines, warn

BOOTSTRAP_CLASS = "org.opensearch.bootstrap.OpenSearch"
STOP_TIMEOUT_S = 60.0


# --- processes -------------------------------------------------------------------------------------


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", errors="replace") for part in raw.split(b"\0") if part]


def _alive(pid: int) -> bool:
    """True if the process exists and is not a zombie (containers may lack an init that reaps)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _is_our_server(pid: int, paths: Layout) -> bool:
    args = _cmdline(pid)
    return BOOTSTRAP_CLASS in args and f"-Dopensearch.path.home={paths.home}" in args and _alive(pid)


def _scan_for_server(paths: Layout) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_our_server(int(entry.name), paths):
            return int(entry.name)
    return None


def running_pid(paths: Layout) -> int | None:
    """The server's pid: from the pidfile, or by looking for its command line if the pidfile is gone."""
    try:
        pid = int(paths.pidfile.read_text().strip())
    except (OSError, ValueError):
        pid = 0
    if pid and _is_our_server(pid, paths):
        return pid
    return _scan_for_server(paths)


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# --- readiness -------------------------------------------------------------------------------------


def _health(url: str) -> tuple[bool, str]:
    try:
        result = http_get(f"{url}/_cluster/health?wait_for_status=yellow&timeout=2s", timeout=10)
    except OSError as exc:
        return False, f"{type(exc).__name__}: {exc}"
    if result.status == 200:
        try:
            body = result.json()
        except ValueError:
            return False, f"HTTP 200 but not JSON: {result.body[:200]}"
        if body.get("status") in ("yellow", "green") and not body.get("timed_out"):
            return True, f"cluster {body.get('cluster_name')} is {body.get('status')}"
    return False, f"HTTP {result.status}: {result.body[:300]}"


def _log_report(paths: Layout, since: dict[Path, int] | None = None, lines: int = 30) -> str:
    """The last lines of the server log and the launcher's console output (only what this start wrote)."""
    parts: list[str] = []
    new_lines = tail_lines(paths.server_log, 2000, start=(since or {}).get(paths.server_log, 0))
    for i, line in enumerate(new_lines):
        if "][ERROR]" in line or "][FATAL]" in line:
            parts.append("first error:\n" + "\n".join(new_lines[i : i + 3]))
            break
    for log in (paths.server_log, paths.console_log):
        tail = tail_lines(log, lines, start=(since or {}).get(log, 0))
        if tail:
            parts.append(f"--- last {len(tail)} lines of {log} ---\n" + "\n".join(tail))
    if not parts:
        parts.append(f"(nothing new in {paths.server_log} or {paths.console_log})")
    return "\n".join(parts)


def _log_offsets(paths: Layout) -> dict[Path, int]:
    return {log: log.stat().st_size if log.exists() else 0 for log in (paths.server_log, paths.console_log)}


def wait_ready(url: str, timeout: float, paths: Layout | None = None, since: dict[Path, int] | None = None) -> float:
    """Poll cluster health until yellow; returns seconds waited. ``paths``: a local server to watch."""
    started = time.monotonic()
    deadline = started + timeout
    reason = "not polled yet"
    while True:
        ok, reason = _health(url)
        if ok:
            return time.monotonic() - started
        if paths is not None and running_pid(paths) is None and time.monotonic() - started > 3:
            raise OpenSearchLocalError(
                f"the OpenSearch process exited during startup ({reason}).\n"
                f"server log: {paths.server_log}\n{_log_report(paths, since)}"
            )
        if time.monotonic() >= deadline:
            where = f"server log: {paths.server_log}\n{_log_report(paths, since)}" if paths else f"check {url}"
            raise OpenSearchLocalError(
                f"OpenSearch at {url} was not ready (yellow) within {timeout:.0f}s "
                f"(OPENSEARCH_START_TIMEOUT); last answer: {reason}\n{where}"
            )
        time.sleep(0.5)


def wait(timeout: float | None = None) -> None:
    url = server_url()
    timeout = start_timeout() if timeout is None else timeout
    paths = None if external_url() else layout()
    if paths is not None and running_pid(paths) is None and not _health(url)[0]:
        raise OpenSearchLocalError(
            f"no local OpenSearch is running (pidfile {paths.pidfile}); "
            "start it with `python -m local.opensearch start`"
        )
    waited = wait_ready(url, timeout, paths)
    say(f"{url} is ready (waited {waited:.1f}s)")


# --- start / stop ----------------------------------------------------------------------------------


def start() -> None:
    url = external_url()
    if url:
        say(f"OPENSEARCH_URL={url} is set: not starting a local server, waiting for that one")
        waited = wait_ready(url, start_timeout())
        say(f"{url} is ready (waited {waited:.1f}s)")
        return
    paths = layout()
    pid = running_pid(paths)
    if pid is not None:
        say(f"already running (pid {pid}); nothing to start")
        wait_ready(DEFAULT_URL, start_timeout(), paths)
        return
    if _health(DEFAULT_URL)[0]:
        raise OpenSearchLocalError(
            f"something else already serves OpenSearch on {DEFAULT_URL} (not our pidfile {paths.pidfile}); "
            "stop it, or set OPENSEARCH_URL to use it"
        )
    if not is_installed(paths):
        say("not installed yet: installing first")
        install(paths)

    jdk = find_jdk()
    write_config(paths)
    ensure_service_user(paths)
    paths.pidfile.unlink(missing_ok=True)
    heap = heap_size()
    env = java_env(jdk.home)
    env.update(
        {
            "OPENSEARCH_JAVA_OPTS": f"-Xms{heap} -Xmx{heap}",
            "OPENSEARCH_PATH_CONF": str(paths.config),
            "OPENSEARCH_TMPDIR": str(paths.tmp),
            "HOME": str(paths.base),
        }
    )
    account = service_account()
    who = "the current user" if account is None else "user opensearch"
    say(f"starting OpenSearch (heap {heap}, Java {jdk.major}, as {who}); log: {paths.server_log}")
    started = time.monotonic()
    since = _log_offsets(paths)
    with paths.console_log.open("ab") as console:
        if account is not None:
            os.chown(paths.console_log, *account)
        launcher = subprocess.Popen(
            [str(paths.home / "bin" / "opensearch"), "-d", "-p", str(paths.pidfile)],
            cwd=paths.home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=account[0] if account else None,
            group=account[1] if account else None,
            extra_groups=[] if account else None,
        )
    # The launcher runs the JVM options parser and version check, backgrounds the JVM and exits.
    try:
        code = launcher.wait(timeout=start_timeout())
    except subprocess.TimeoutExpired:
        code = None
    if code not in (0, None) and running_pid(paths) is None:
        raise OpenSearchLocalError(
            f"bin/opensearch exited with {code}.\nserver log: {paths.server_log}\n{_log_report(paths, since)}"
        )
    remaining = max(1.0, start_timeout() - (time.monotonic() - started))
    try:
        wait_ready(DEFAULT_URL, remaining, paths, since)
    except OpenSearchLocalError:
        if running_pid(paths) is not None:
            warn("startup failed: stopping the half-started server")
            stop()
        raise
    elapsed = time.monotonic() - started
    pid = running_pid(paths)
    rss = rss_bytes(pid) if pid else None
    say(f"OpenSearch is up on {DEFAULT_URL} after {elapsed:.1f}s (pid {pid}, RSS {human_size(rss) if rss else '?'})")


def stop() -> None:
    url = external_url()
    if url:
        say(f"OPENSEARCH_URL={url} is set: not stopping anything")
        return
    paths = layout()
    pid = running_pid(paths)
    if pid is None:
        say("not running")
        paths.pidfile.unlink(missing_ok=True)
        return
    say(f"stopping OpenSearch (pid {pid}) ...")
    started = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    while _alive(pid) and time.monotonic() - started < STOP_TIMEOUT_S:
        time.sleep(0.2)
    if _alive(pid):
        warn(f"still running after {STOP_TIMEOUT_S:.0f}s: sending SIGKILL")
        os.kill(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.2)
    paths.pidfile.unlink(missing_ok=True)
    say(f"stopped in {time.monotonic() - started:.1f}s")


# --- status ----------------------------------------------------------------------------------------


def status() -> int:
    """Print state, version, plugins and RSS; returns 0 when the server answers, else 3."""
    url = server_url()
    paths = None if external_url() else layout()
    pid = running_pid(paths) if paths else None
    if paths is not None:
        installed = "installed" if is_installed(paths) else "not installed"
        say(f"local install: {paths.home} ({installed})")
        if pid is None:
            say("process: not running")
        else:
            rss = rss_bytes(pid)
            say(f"process: running, pid {pid}, RSS {human_size(rss) if rss else '?'}, heap {heap_size()}")
    else:
        say(f"OPENSEARCH_URL={url} (external server, no local process)")
    try:
        root = http_get(f"{url}/", timeout=5)
        body = root.json() if root.status == 200 else {}
    except (OSError, ValueError) as exc:
        say(f"{url}: not reachable ({type(exc).__name__}: {exc})")
        return 3
    version = body.get("version", {})
    say(f"{url}: {version.get('distribution', '?')} {version.get('number', '?')} (cluster {body.get('cluster_name')})")
    ok, health = _health(url)
    say(f"health: {health}")
    plugins = http_get(f"{url}/_cat/plugins?format=json", timeout=5)
    if plugins.status == 200:
        entries = [f"{p.get('component')} {p.get('version')}" for p in plugins.json()]
        say(f"plugins: {', '.join(entries) or '(none)'}")
    nodes = http_get(f"{url}/_nodes/_local/plugins", timeout=5)
    if nodes.status == 200:
        for node in nodes.json().get("nodes", {}).values():
            say(f"modules: {', '.join(sorted(m.get('name', '?') for m in node.get('modules', [])))}")
    return 0 if ok else 3
