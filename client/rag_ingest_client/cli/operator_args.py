"""The operator commands' arguments (redrive, replay, reap, reconcile) and their dispatch.

The arguments are parsed here, without the domain package, so ``rag-ingest --help`` works with the
client alone; the commands run in ``rag_ingest_client.operator.commands``, imported when one runs.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from rag_ingest_client.cli.errors import CliError

OPERATOR_COMMANDS = ("redrive", "replay", "reap", "reconcile")
_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> int:
    """``90``, ``90s``, ``15m``, ``2h``, ``3d`` → seconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 15m, 2h, 3d)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def add_operator_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """``redrive``, ``replay`` and ``reap`` under the ``rag-ingest`` command (``commands`` is its subparsers)."""
    redrive = commands.add_parser(
        "redrive", parents=[common], help="operator: move dead-lettered upload events back to the ingest queue"
    )
    redrive.add_argument("--dry-run", action="store_true", help="list what would move, move nothing")
    redrive.add_argument("--max-messages", type=int, default=100)
    redrive.add_argument("--document-id", help="only messages about this document")
    redrive.add_argument(
        "--error-code", type=str.upper, action="append", dest="error_codes", help="only documents failed with it"
    )
    redrive.add_argument("--older-than", type=duration, help="only messages sent at least this long ago")
    redrive.add_argument("--newer-than", type=duration, help="only messages sent at most this long ago")
    redrive.add_argument("--include-unparseable", action="store_true", help="move messages intake cannot parse")

    replay = commands.add_parser(
        "replay", parents=[common], help="operator: re-run FAILED documents from their first unfinished stage"
    )
    replay.add_argument("--dry-run", action="store_true", help="list what would be replayed, change nothing")
    replay.add_argument("--document-id", action="append", dest="document_ids", default=[], help="repeatable")
    replay.add_argument(
        "--error-code",
        type=str.upper,
        action="append",
        dest="error_codes",
        help="repeatable; default without --document-id: the system codes "
        "(INTERNAL_ERROR, TRANSIENT_RETRIES_EXHAUSTED, EMBEDDING_CAPACITY, TIMEOUT, STUCK)",
    )
    replay.add_argument("--older-than", type=duration, help="only documents failed at least this long ago")
    replay.add_argument("--newer-than", type=duration, help="only documents failed at most this long ago")
    replay.add_argument("--max-documents", type=int, default=100)

    reap = commands.add_parser("reap", parents=[common], help="operator: run the stuck-document reaper once")
    reap.add_argument("--dry-run", action="store_true", help="report what it would do, change nothing")
    reap.add_argument("--stuck-after", type=duration, help="default: the deployed reaper's (reaper.stuckAfterMinutes)")
    reap.add_argument("--max-redrives", type=int)
    reap.add_argument("--max-documents", type=int)

    reconcile = commands.add_parser(
        "reconcile",
        parents=[common],
        help="operator: compare the documents table, the uploaded files and the index (--tenant T: one tenant)",
    )
    reconcile.add_argument("--repair", action="store_true", help="fix what is safe (default: report only)")
    reconcile.add_argument(
        "--grace", type=duration, help="objects younger than this may still be on their way through intake (15m)"
    )


def run_operator(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The operator command of ``args`` against ``--stack NAME``, or the local stack of ``--outputs``."""
    try:
        from rag_ingest_client.operator.commands import run_operator_command
    except ImportError as exc:
        raise CliError(needs_the_checkout(args.command, exc)) from None
    return run_operator_command(args, parser, stack_name=args.stack, outputs=Path(args.outputs))


def use_checkout(cdk_json: Path) -> None:
    """Make the checkout holding ``cdk_json`` importable: preflight reads cdk.json with that checkout's
    own ``infra/config.py``, as ``cdk deploy`` from there would."""
    if not cdk_json.is_file():
        raise CliError(f"{cdk_json} not found: run from the repository root or pass --cdk-json PATH")
    root = cdk_json.resolve().parent
    if (root / "infra" / "config.py").is_file() and str(root) not in sys.path:
        sys.path.insert(0, str(root))


def needs_the_checkout(command: str, exc: ImportError) -> str:
    return (
        f"`rag-ingest {command}` runs the domain package's code: run it from the rag-ingest checkout's venv "
        f"(make install) ({exc})"
    )
