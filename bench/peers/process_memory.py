"""Peak resident memory of process trees, sampled from /proc (Linux) in a background thread.

A local stack is one ``serve`` process and the Lambda worker processes it spawns: their summed
RSS, sampled every ``interval`` seconds, is the stack's footprint at that instant; the maximum
over a run is its peak. Pages shared between processes are counted once per process, as the
kernel reports RSS, so the sum is an upper bound of what the tree really holds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _sample(self) -> None:
        tree = descendants_and_self(self.root_pid)
        tree_bytes = rss_bytes(tree)
        if tree_bytes > self.peak_tree_bytes:
            self.peak_tree_bytes, self.peak_tree_processes = tree_bytes, len(tree)
        self.peak_separate_bytes = max(self.peak_separate_bytes, rss_bytes(self.separate_pids))
        self.samples += 1

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
