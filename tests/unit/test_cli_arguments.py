"""The operator CLI's arguments: durations, error codes, the requests they become, usage errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from rag_ingest.cli import build_parser, duration, main, request_for
from rag_ingest.errors import ErrorCode
from rag_ingest.reaper import ReapRequest
from rag_ingest.redrive import RedriveRequest, ReplayRequest

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("3d", 259200)])
def test_durations(text: str, seconds: int) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1w", "-5m", "m", "1.5h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def parse(*argv: str) -> RedriveRequest | ReplayRequest | ReapRequest:
    return request_for(build_parser().parse_args(argv))


def test_redrive_arguments() -> None:
    request = parse(
        "--local", "redrive", "--dry-run", "--error-code", "internal_error", "--error-code", "STUCK",
        "--older-than", "1h", "--max-messages", "5",
    )  # fmt: skip
    assert request == RedriveRequest(
        dry_run=True, max_messages=5, error_codes=[ErrorCode.INTERNAL_ERROR, ErrorCode.STUCK], older_than_seconds=3600
    )


def test_replay_and_reap_arguments() -> None:
    replay = parse("replay", "--document-id", "a", "--document-id", "b", "--newer-than", "2d")
    assert replay == ReplayRequest(document_ids=["a", "b"], newer_than_seconds=172800)
    reap = parse("reap", "--stuck-after", "45m", "--max-redrives", "0")
    assert reap == ReapRequest(stuck_after_seconds=2700, max_redrives=0)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "--error-code", "NOPE"])
    assert exit_info.value.code == 2
    assert "unknown error code 'NOPE'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["reap", "--stuck-after", "10s"])  # the reaper refuses deadlines under a minute
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["--local", "--stack", "X", "reap"])


def test_local_without_a_running_stack_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--local", "--outputs", str(tmp_path / "outputs.json"), "reap"]) == 1
    assert "start the local stack first" in capsys.readouterr().err
