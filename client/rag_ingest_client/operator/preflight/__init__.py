"""``rag-ingest preflight``: what an AWS account lacks for ``cdk deploy`` of this app, asked before
anything is created (docs/deploy.md, "Preflight").

:mod:`settings` reads cdk.json through the checkout's ``infra/config.py``; :mod:`checks` asks the
account (the read-only calls of ``rag_ingest.adapters.account_preflight``) and hands the answers to
the pure :mod:`decisions` and :mod:`quotas`; :mod:`render` prints the :mod:`results`. The run exits
0 when nothing is missing.
"""

from __future__ import annotations

from pathlib import Path

from rag_ingest.adapters import account_preflight

from rag_ingest_client.cli.console import Console
from rag_ingest_client.operator.preflight.checks import run_checks
from rag_ingest_client.operator.preflight.render import report
from rag_ingest_client.operator.preflight.settings import read_settings


def run_preflight(console: Console, cdk_json: Path, *, stack_name: str | None, region: str | None) -> int:
    """Every check against the account of the usual AWS chain (``--region`` or its default), printed."""
    settings = read_settings(cdk_json, stack_name=stack_name)
    return report(console, run_checks(account_preflight.AccountProbe(region), settings))
