"""The operator CLI's arguments: durations, error codes, the requests they become, usage errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest.operations.reaper import ReapRequest
from rag_ingest.operations.redrive import RedriveRequest
from rag_ingest.operations.replay import ReplayRequest
from rag_ingest_client.cli import build_parser, main
from rag_ingest_client.cli.operator_args import duration
from rag_ingest_client.operator.commands import request_for

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


def test_the_local_stack_is_the_default_target() -> None:
    args = build_parser().parse_args(["ls"])
    assert (args.stack, args.local, args.outputs, args.json) == (
        None,
        False,
        Path(".local/runtime/outputs.json"),
        False,
    )


def test_target_options_work_before_and_after_the_command() -> None:
    after = build_parser().parse_args(["upload", "a.pdf", "b/", "--stack", "Prod", "--json", "--no-wait"])
    assert (after.stack, after.json, after.paths, after.wait) == ("Prod", True, ["a.pdf", "b/"], False)
    before = build_parser().parse_args(
        ["--stack", "Prod", "--user", "ana", "search", "tides", "--mode", "bm25", "-k", "3"]
    )
    assert (before.stack, before.user, before.query, before.mode, before.k) == ("Prod", "ana", "tides", "bm25", 3)
    retry = build_parser().parse_args(["retry", "01J", "--wait", "--tenant", "acme"])
    assert (retry.document_id, retry.wait, retry.tenant) == ("01J", True, "acme")


def test_user_command_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["search", "q", "--mode", "fuzzy"], ["upload"], ["status"], ["ls", "--limit", "many"], ["nope"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2, argv
    with pytest.raises(SystemExit) as exit_info:
        main(["ls", "--local", "--stack", "Prod"])
    assert exit_info.value.code == 2
    assert "--local and --stack cannot be combined" in capsys.readouterr().err


def test_user_commands_without_a_running_local_stack_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--outputs", str(tmp_path / "outputs.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the local stack is not running") and "make stack-up" in err
    assert "Traceback" not in err


def test_the_console_script_points_at_the_entry_point() -> None:
    import importlib
    import tomllib

    from tests.support.aws import REPO

    target = tomllib.loads((REPO / "client" / "pyproject.toml").read_text())["project"]["scripts"]["rag-ingest"]
    module, _, name = target.partition(":")
    assert callable(getattr(importlib.import_module(module), name))


@pytest.mark.parametrize(("flags", "rerank"), [((), None), (("--rerank",), True), (("--no-rerank",), False)])
def test_search_takes_rerank_on_off_or_the_deployments_default(flags: tuple[str, ...], rerank: bool | None) -> None:
    from rag_ingest_client.cli.api import ApiClient

    args = build_parser().parse_args(["search", "tide", *flags])
    assert args.rerank is rerank

    class Recording:
        def __init__(self) -> None:
            self.body: dict[str, object] = {}

        def call(self, method: str, path: str, body: dict[str, object]) -> dict[str, object]:
            self.body = body
            return {}

    recording = Recording()
    ApiClient.search(recording, "tide", k=3, mode="hybrid", rerank=args.rerank)  # type: ignore[arg-type]
    expected: dict[str, object] = {"query": "tide", "k": 3, "mode": "hybrid"}
    assert recording.body == (expected if rerank is None else {**expected, "rerank": rerank})
