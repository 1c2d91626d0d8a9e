"""The supply-chain audit's allowlist logic (tools/supply_audit.py) on what pip-audit and npm audit print.

The fixtures in supply_chain/ are the tools' own JSON: pip-audit 2.10.1 and npm audit run against the
loopback advisory stand-in of tests/integration/test_supply_chain_tools.py (pip-audit-osv.json,
npm-audit.json; trimmed to a few packages), and what both printed on a machine whose index serves no
vulnerability data (pip-audit-index-404.json, npm-audit-no-service.json, the registry's name replaced).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from tools import supply_audit
from tools.supply_audit import Entry, evaluate, load_allowlist, parse_npm_audit, parse_pip_audit

pytestmark = pytest.mark.unit
HERE = Path(__file__).parent / "supply_chain"
ROOT = Path(__file__).resolve().parents[2]
TODAY = datetime.date(2026, 12, 7)
LOCK = json.loads((ROOT / "package-lock.json").read_text())


def _json(name: str) -> Any:
    return json.loads((HERE / name).read_text())


def _allow(advisory: str, package: str, expires: datetime.date, reason: str = "not reachable from a function") -> str:
    return f'[[allow]]\nid = "{advisory}"\npackage = "{package}"\nreason = "{reason}"\nexpires = {expires}\n'


def _findings() -> list[supply_audit.TargetResult]:
    return [parse_pip_audit(_json("pip-audit-osv.json"), "python venv"), parse_npm_audit(_json("npm-audit.json"), LOCK)]


def test_pip_audits_report_becomes_findings_without_our_own_distributions() -> None:
    result = parse_pip_audit(_json("pip-audit-osv.json"), "python venv")
    assert result.unavailable is None and not result.unaudited
    assert result.audited == 2, "idna and pyjwt; rag-ingest is ours, never on an index"
    [finding] = result.findings
    assert (finding.package, finding.version, finding.fix) == ("pyjwt", "2.15.1", "999.0.0")
    assert finding.ids() == {"CVE-0000-0001", "GHSA-TEST-PYJW-0001"}


def test_npm_audits_report_becomes_findings_with_the_locked_version() -> None:
    result = parse_npm_audit(_json("npm-audit.json"), LOCK)
    assert result.unavailable is None and result.audited == 14
    [finding] = result.findings
    locked = LOCK["packages"]["node_modules/pdfjs-dist"]["version"]
    assert (finding.ecosystem, finding.package, finding.version, finding.id) == (
        "npm",
        "pdfjs-dist",
        locked,
        "GHSA-test-pdfj-0001",
    )


def test_an_unknown_vulnerability_fails() -> None:
    verdict = evaluate(_findings(), [], [], TODAY, require_service=True)
    assert not verdict.passed
    assert any("pyjwt==2.15.1: CVE-0000-0001" in failure for failure in verdict.failures)
    assert any("pdfjs-dist" in failure and "GHSA-test-pdfj-0001" in failure for failure in verdict.failures)


def test_an_admitted_vulnerability_passes_by_its_id_or_an_alias_and_any_spelling_of_the_name() -> None:
    later = TODAY + datetime.timedelta(days=60)
    text = _allow("GHSA-test-pyjw-0001", "PyJWT", later) + _allow("GHSA-test-pdfj-0001", "pdfjs-dist", later)
    entries, errors = load_allowlist(text, TODAY)
    assert not errors
    verdict = evaluate(_findings(), entries, errors, TODAY, require_service=True)
    assert verdict.passed, verdict.failures
    assert {finding.package for finding, _ in verdict.admitted} == {"pyjwt", "pdfjs-dist"}
    assert not verdict.warnings, "both entries admit something"


def test_an_entry_admits_only_its_own_package() -> None:
    entries, _ = load_allowlist(_allow("CVE-0000-0001", "requests", TODAY + datetime.timedelta(days=5)), TODAY)
    verdict = evaluate(_findings()[:1], entries, [], TODAY, require_service=True)
    assert not verdict.passed and not verdict.admitted
    assert any("admits nothing" in warning for warning in verdict.warnings)


def test_an_expired_entry_fails_and_admits_nothing() -> None:
    yesterday = TODAY - datetime.timedelta(days=1)
    entries, errors = load_allowlist(_allow("CVE-0000-0001", "pyjwt", yesterday), TODAY)
    assert not errors, "an expired entry is well formed: it fails in evaluate, naming its date"
    verdict = evaluate(_findings()[:1], entries, errors, TODAY, require_service=True)
    assert any(f"expired on {yesterday}" in failure for failure in verdict.failures)
    assert any("pyjwt==2.15.1: CVE-0000-0001" in failure for failure in verdict.failures)
    assert not verdict.admitted


def test_an_expired_entry_fails_even_when_nothing_is_found() -> None:
    entries, _ = load_allowlist(_allow("CVE-0000-0001", "pyjwt", TODAY - datetime.timedelta(days=1)), TODAY)
    clean = supply_audit.TargetResult("python venv", audited=10)
    assert not evaluate([clean], entries, [], TODAY, require_service=False).passed


def test_an_entry_expiring_today_still_admits() -> None:
    entries, _ = load_allowlist(_allow("CVE-0000-0001", "pyjwt", TODAY), TODAY)
    assert evaluate(_findings()[:1], entries, [], TODAY, require_service=True).passed


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('[[allow]]\nid = "X"\npackage = "p"\nexpires = 2027-01-01\n', "missing reason"),
        ('[[allow]]\nid = "X"\npackage = "p"\nreason = "r"\n', "missing expires"),
        ('[[allow]]\nid = "X"\npackage = "p"\nreason = "r"\nexpires = "2027-01-01"\n', "TOML date"),
        ('[[allow]]\nid = "X"\npackage = "p"\nreason = "r"\nexpires = 2031-01-01\n', "days ahead"),
        ("[[allow]\n", "not TOML"),
        ('[[ignore]]\nid = "X"\n', "unknown keys"),
    ],
)
def test_a_malformed_allowlist_is_an_error(text: str, complaint: str) -> None:
    entries, errors = load_allowlist(text, TODAY)
    assert not entries and any(complaint in error for error in errors), errors
    assert not evaluate([], entries, errors, TODAY, require_service=False).passed


def test_an_index_that_answers_404_to_every_package_is_unavailable_not_clean() -> None:
    result = parse_pip_audit(_json("pip-audit-index-404.json"), "python layer")
    assert result.audited == 0 and not result.findings
    assert set(result.unaudited) == {"boto3==1.43.11", "idna==3.21", "pyjwt==2.15.1"}
    assert result.unavailable and "404" in result.unavailable
    soft = evaluate([result], [], [], TODAY, require_service=False)
    assert soft.passed and any("UNAVAILABLE" in warning for warning in soft.warnings)
    assert any("3 packages NOT AUDITED" in warning for warning in soft.warnings)
    strict = evaluate([result], [], [], TODAY, require_service=True)
    assert not strict.passed and any("UNAVAILABLE" in failure for failure in strict.failures)


def test_a_registry_without_the_advisory_endpoint_is_unavailable() -> None:
    result = parse_npm_audit(_json("npm-audit-no-service.json"), LOCK)
    assert result.unavailable and "405 Method Not Allowed" in result.unavailable
    locked = {path.rsplit("node_modules/", 1)[-1] for path in LOCK["packages"] if path}
    assert {key.partition("==")[0] for key in result.unaudited} == locked, "every locked package, not audited"
    assert not evaluate([result], [], [], TODAY, require_service=True).passed
    verdict = evaluate([result], [], [], TODAY, require_service=False)
    assert verdict.passed and verdict.warnings
    assert "WITH GAPS" in supply_audit.render([result], verdict)


def test_the_committed_allowlist_is_well_formed_and_unexpired() -> None:
    entries, errors = load_allowlist(supply_audit.ALLOWLIST.read_text(), datetime.date.today())
    assert not errors
    assert all(entry.expires >= datetime.date.today() and entry.reason for entry in entries)
    assert all(isinstance(entry, Entry) for entry in entries)
