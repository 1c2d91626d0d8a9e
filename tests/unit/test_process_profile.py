"""The benchmark's process profile: CPU seconds per role of a process tree, read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.peers.process_memory import PeakRssSampler, process_role

pytestmark = pytest.mark.unit

BUSY_SECONDS = 0.8


def test_a_child_born_while_sampling_is_charged_its_cpu_time_and_the_root_only_what_it_uses_after() -> None:
    busy = f"import time\nend = time.process_time() + {BUSY_SECONDS}\nwhile time.process_time() < end: pass"
    with PeakRssSampler(os.getpid(), interval=0.05) as sampler:
        subprocess.run([sys.executable, "-c", busy], check=True)
    by_role = sampler.cpu_seconds_by_role
    # The child spun for BUSY_SECONDS of CPU; it may exit up to one interval after the last sample.
    assert BUSY_SECONDS * 0.5 <= by_role["other"] <= BUSY_SECONDS + 1.0
    # The test process mostly waited: its time before sampling started is not counted.
    assert by_role[process_role(os.getpid(), os.getpid())] < BUSY_SECONDS
    assert sampler.peak_tree_bytes > 0


def test_roles_come_from_the_command_line() -> None:
    assert process_role(os.getpid(), os.getpid()).startswith("runtime")
    assert process_role(os.getpid(), root_pid=1) == "other"  # pytest's command line names no role
    assert process_role(2**22 + 7, root_pid=1) == "other"  # no such process


@pytest.mark.parametrize(
    ("argument", "role"),
    [
        ("rag_fn_WorkflowParseFunction668BA694_app", "worker WorkflowParseFunction"),
        ("rag_fn_IntakeIntakeFunctionD13202D9_index", "worker IntakeIntakeFunction"),
        ("local.embedding_server", "embedding server"),
    ],
)
def test_a_lambda_worker_and_the_embedding_server_are_named_by_their_arguments(argument: str, role: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)", argument])
    try:
        cmdline = Path(f"/proc/{child.pid}/cmdline")
        deadline = time.monotonic() + 5
        while argument.encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)  # until the fork has exec'd the new command line
        assert process_role(child.pid, root_pid=os.getpid()) == role
    finally:
        child.kill()
        child.wait()
