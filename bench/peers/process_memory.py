"""Peak resident memory and CPU time of process trees, sampled from /proc (Linux) in a background thread.

The stack's footprint at an instant is the summed RSS of its ``serve`` process and the Lambda workers
it spawns, sampled every ``interval`` seconds; the peak is the maximum over a run (an upper bound:
shared pages count once per process). CPU time is summed per role (runtime, embedding server, each
function's workers, OpenSearch). Standard library only. How it counts: docs/benchmarks.md (bench-peers).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: Lambda worker processes name their handler module ``rag_fn_<logical id>_<handler module>``.
_WORKER_MODULE = re.compile(r"^rag_fn_(?P<logical_id>[A-Za-z0-9]+?)(?:[0-9A-F]{8})?_")


def _parent_pids() -> dict[int, int]:
    """pid -> parent pid of every process now alive."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended while we looked
        # Fields after the command name, which is in parentheses and may contain spaces.
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def descendants_and_self(root_pid: int) -> set[int]:
    parents = _parent_pids()
    tree = {root_pid}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree & (set(parents) | {root_pid})


def rss_bytes(pids: Iterable[int]) -> int:
    total = 0
    for pid in pids:
        try:
            resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total += resident_pages * PAGE_BYTES
    return total


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds ``pid`` has used so far (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15 of stat)


def process_role(pid: int, root_pid: int) -> str:
    """What a process of a local stack is, from its command line."""
    if pid == root_pid:
        return "runtime (moto, Step Functions, SQS poller, API)"
    try:
        arguments = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return "other"
    if "local.embedding_server" in arguments:
        return "embedding server"
    for argument in arguments:
        match = _WORKER_MODULE.match(argument)
        if match:
            return f"worker {match.group('logical_id')}"
    return "other"


def pids_with_argument(argument: str) -> list[int]:
    """Processes whose command line has ``argument`` (e.g. OpenSearch's bootstrap class)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argument.encode() in arguments:
            found.append(int(entry.name))
    return found


class PeakRssSampler:
    """Samples the summed RSS of ``root_pid``'s tree (and, apart, of ``separate_pids``) until stopped."""

    def __init__(self, root_pid: int, separate_pids: Iterable[int] = (), interval: float = 0.2) -> None:
        self.root_pid = root_pid
        self.separate_pids = list(separate_pids)
        self.interval = interval
        self.peak_tree_bytes = 0
        self.peak_tree_processes = 0
        self.peak_separate_bytes = 0
        self.samples = 0
        # pid -> (role, CPU seconds at the first sample that saw it, at the last)
        self._cpu: dict[int, tuple[str, float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _sample(self) -> None:
        tree = descendants_and_self(self.root_pid)
        tree_bytes = rss_bytes(tree)
        if tree_bytes > self.peak_tree_bytes:
            self.peak_tree_bytes, self.peak_tree_processes = tree_bytes, len(tree)
        self.peak_separate_bytes = max(self.peak_separate_bytes, rss_bytes(self.separate_pids))
        for pid in (*tree, *self.separate_pids):
            used = cpu_seconds(pid)
            if used is None:
                continue
            known = self._cpu.get(pid)
            if known is None:
                role = "OpenSearch" if pid in self.separate_pids else process_role(pid, self.root_pid)
                # A process born after the first sample started at zero; one alive then, at `used`.
                self._cpu[pid] = (role, used if self.samples == 0 else 0.0, used)
            else:
                self._cpu[pid] = (known[0], known[1], used)
        self.samples += 1

    @property
    def cpu_seconds_by_role(self) -> dict[str, float]:
        """CPU seconds used while sampling, per role, largest first."""
        totals: dict[str, float] = {}
        for role, first, last in self._cpu.values():
            totals[role] = totals.get(role, 0.0) + (last - first)
        return dict(sorted(((role, round(seconds, 1)) for role, seconds in totals.items()), key=lambda kv: -kv[1]))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()  # one last look, so a run shorter than the interval is still measured
