"""rag-ingest: upload documents, follow them to READY, search them, and operate the pipeline.

The local stack is the default target (its ``ApiUrl`` from ``.local/runtime/outputs.json``, tokens from
its identity provider); ``--stack NAME`` targets a deployed stack (its CloudFormation outputs, Cognito
sign-in); ``preflight`` checks an account before the first ``cdk deploy``. Exit codes: 0 success,
1 failure (a document FAILED, the API refused, the stack is unreachable), 2 bad usage. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_ingest_client.aws import StackOutputsError, stack_outputs
from rag_ingest_client.cli.commands import add_user_commands, run_user_command
from rag_ingest_client.cli.console import Console
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.operator_args import (
    OPERATOR_COMMANDS,
    add_operator_commands,
    needs_the_checkout,
    run_operator,
    use_checkout,
)
from rag_ingest_client.cli.smoke import (
    DEFAULT_QUERY,
    DEFAULT_SAMPLE,
    SMOKE_TENANT,
    SMOKE_USER,
    SmokeOptions,
    local_sign_in,
    smoke,
)
from rag_ingest_client.cli.targets import LOCAL_OUTPUTS, Target, deployed_target, local_target
from rag_ingest_client.cli.tokens import TokenCache
from rag_ingest_client.http import RagIngestError


def _target_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options every command takes; on the subcommands they default to SUPPRESS so that a value
    given before the command is not overwritten by the subcommand's default."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--local", action="store_true", default=default(False), help="target the local stack (the default)"
    )
    parser.add_argument(
        "--stack", metavar="NAME", default=default(None), help="target the deployed CloudFormation stack NAME"
    )
    parser.add_argument("--region", default=default(None), help="AWS region of --stack (default: the AWS CLI's)")
    parser.add_argument(
        "--outputs",
        type=Path,
        default=default(LOCAL_OUTPUTS),
        help=f"the local stack's outputs.json (default {LOCAL_OUTPUTS})",
    )
    parser.add_argument("--user", default=default(None), help="local sign-in: user name (kept from the last login)")
    parser.add_argument("--tenant", default=default(None), help="local sign-in: tenant id (kept from the last login)")
    parser.add_argument(
        "--groups",
        action="append",
        default=default(None),
        metavar="G[,G]",
        help="local sign-in: the token's groups, e.g. tenant-admins (repeatable; kept from the last login)",
    )
    parser.add_argument("--json", action="store_true", default=default(False), help="print JSON for scripts")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-ingest",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="docs/cli.md has the details.",
    )
    _target_options(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _target_options(common, suppress=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_user_commands(commands, common)
    smoke_parser = commands.add_parser(
        "smoke", parents=[common], help="after a deploy: sign in, upload, wait for READY, search, delete (timed)"
    )
    smoke_parser.add_argument("--sample", type=Path, default=DEFAULT_SAMPLE, help=f"default {DEFAULT_SAMPLE}")
    smoke_parser.add_argument("--query", default=DEFAULT_QUERY, help=f"default {DEFAULT_QUERY!r}")
    smoke_parser.add_argument("--email", help="the test user's e-mail (default <user>@example.com)")
    smoke_parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for READY")
    preflight_parser = commands.add_parser(
        "preflight",
        parents=[common],
        help="before a first deploy: what this account and region lack for cdk deploy (read-only)",
    )
    preflight_parser.add_argument(
        "--cdk-json", type=Path, default=Path("cdk.json"), help="the app's cdk.json (default ./cdk.json)"
    )
    add_operator_commands(commands, common)
    return parser


def resolve_target(args: argparse.Namespace, cache: TokenCache) -> Target:
    if args.stack:
        try:
            outputs, region = stack_outputs(args.stack, args.region)
        except StackOutputsError as exc:
            raise CliError(str(exc)) from None
        return deployed_target(args.stack, outputs, region, cache)
    return local_target(
        args.outputs, username=args.user, tenant_id=args.tenant, cache=cache, groups=split_groups(args.groups)
    )


def split_groups(values: list[str] | None) -> list[str] | None:
    """``--groups a,b --groups c`` as ``[a, b, c]``; None when not given (the last login's stay)."""
    if values is None:
        return None
    return list(dict.fromkeys(name.strip() for value in values for name in value.split(",") if name.strip()))


def run_smoke(args: argparse.Namespace, console: Console, cache: TokenCache) -> int:
    options = SmokeOptions(sample=args.sample, query=args.query, timeout_seconds=args.timeout)
    if args.stack:
        try:
            from rag_ingest_client.operator.smoke_sign_in import deployed_sign_in
        except ImportError as exc:
            raise CliError(needs_the_checkout("smoke --stack", exc)) from None
        sign_in = deployed_sign_in(
            args.stack,
            args.region,
            username=args.user or SMOKE_USER,
            tenant_id=args.tenant or SMOKE_TENANT,
            email=args.email,
        )
    else:
        sign_in = local_sign_in(
            lambda: local_target(
                args.outputs, username=args.user or SMOKE_USER, tenant_id=args.tenant or SMOKE_TENANT, cache=cache
            )
        )
    return smoke(console, options, sign_in=sign_in)


def run_preflight(args: argparse.Namespace, console: Console) -> int:
    use_checkout(args.cdk_json)
    try:
        from rag_ingest_client.operator.preflight import run_preflight
    except ImportError as exc:
        raise CliError(needs_the_checkout("preflight", exc)) from None
    return run_preflight(console, args.cdk_json, stack_name=args.stack, region=args.region)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.local and args.stack:
        parser.error("--local and --stack cannot be combined")
    console = Console(out=sys.stdout, err=sys.stderr, as_json=args.json)
    cache = TokenCache.default()
    try:
        if args.command in OPERATOR_COMMANDS:
            return run_operator(args, parser)
        if args.command == "smoke":
            return run_smoke(args, console, cache)
        if args.command == "preflight":
            return run_preflight(args, console)
        return run_user_command(args, resolve_target(args, cache), console)
    except RagIngestError as exc:
        console.note(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        console.note("interrupted")
        return 130
    except BrokenPipeError:
        # `rag-ingest ls | head`: the reader left. Point stdout at /dev/null so the exit flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def entry_point() -> None:
    """The ``rag-ingest`` console script."""
    sys.exit(main())
