"""The results as a person reads them (one line each, the fix after an arrow) or as JSON."""

from __future__ import annotations

from rag_ingest_client.cli.console import Console
from rag_ingest_client.operator.preflight.results import CheckResult, exit_code


def render(result: CheckResult) -> str:
    line = f"{result.status:<8}{result.name:<20}{result.finding}"
    return f"{line}  → fix: {result.fix}" if result.fix else line


def report(console: Console, results: list[CheckResult]) -> int:
    """Print the results (a JSON list with ``--json``) and return the exit code."""
    if console.as_json:
        console.json([result.to_json() for result in results])
    else:
        for result in results:
            console.print(render(result))
    counts = {status: sum(r.status == status for r in results) for status in ("ok", "warn", "missing")}
    console.note(f"preflight: {counts['ok']} ok, {counts['warn']} warn, {counts['missing']} missing")
    return exit_code(results)
