"""Supply-chain audit: known vulnerabilities in what rag-ingest installs (docs/security.md, "Supply chain").

pip-audit over the venv ``make install`` builds from the pins and over both Lambda layers as built
(tools/build_layer.py); npm audit over package-lock.json. A finding fails unless tools/audit-allowlist.toml
admits it (id, package, reason, expiry); an expired or malformed entry fails too. A vulnerability service
that does not answer is UNAVAILABLE, never a pass: a failure with ``--require-service`` (make audit), a loud
warning otherwise (make check). Run: ``python -m tools.supply_audit [--require-service]``.
Imports the standard library only; pip-audit and npm run as processes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import functools
import importlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ALLOWLIST = ROOT / "tools" / "audit-allowlist.toml"
PACKAGE_LOCK_DIR = ROOT
# The layers as tools/build_layer.py leaves them (what the functions load).
LAYER_SITES = {"layer": ROOT / ".build" / "layer" / "python", "mcp-layer": ROOT / ".build" / "mcp-layer" / "python"}
# rag-ingest's own distributions: never on a package index, so never audited there.
OWN_DISTRIBUTIONS = frozenset({"rag-ingest", "rag-ingest-client"})
# An entry admits a vulnerability for a while, not for ever: at most this far ahead.
MAX_ALLOW_DAYS = 366
NOT_ON_INDEX = "Dependency not found on PyPI"


def normalise(name: str) -> str:
    """A distribution's name as indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Finding:
    """One known vulnerability of one installed package."""

    ecosystem: str  # "pypi" or "npm"
    package: str
    version: str
    id: str
    aliases: tuple[str, ...] = ()
    fix: str = ""
    summary: str = ""

    def ids(self) -> set[str]:
        return {self.id.upper(), *(alias.upper() for alias in self.aliases)}

    def __str__(self) -> str:
        aliases = f" ({', '.join(self.aliases)})" if self.aliases else ""
        fix = f"; fixed in {self.fix}" if self.fix else "; no fix released"
        return f"{self.package}=={self.version}: {self.id}{aliases}{fix}"


@dataclass(frozen=True)
class Entry:
    """An allowlist entry: this vulnerability of this package is admitted until ``expires``."""

    id: str
    package: str
    reason: str
    expires: datetime.date

    def admits(self, finding: Finding) -> bool:
        return self.id.upper() in finding.ids() and normalise(self.package) == normalise(finding.package)


@dataclass
class TargetResult:
    """What one audit of one target (the venv, a layer, the npm lock) found and could not see."""

    name: str
    audited: int = 0
    findings: list[Finding] = field(default_factory=list)
    # "package==version" -> why it was not audited.
    unaudited: dict[str, str] = field(default_factory=dict)
    # Why the vulnerability service did not answer (None: it answered).
    unavailable: str | None = None
    fallback: str = ""


@dataclass
class Verdict:
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    admitted: list[tuple[Finding, Entry]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def load_allowlist(text: str, today: datetime.date) -> tuple[list[Entry], list[str]]:
    """The entries of an allowlist (TOML, ``[[allow]]`` tables) and what is wrong with the others."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return [], [f"allowlist: not TOML: {error}"]
    entries: list[Entry] = []
    errors: list[str] = []
    unknown = set(data) - {"allow"}
    if unknown:
        errors.append(f"allowlist: unknown keys {sorted(unknown)}; entries are [[allow]] tables")
    raw = data.get("allow", [])
    if not isinstance(raw, list):
        return [], [*errors, "allowlist: 'allow' must be an array of tables ([[allow]])"]
    for index, item in enumerate(raw, start=1):
        where = f"allowlist entry {index}"
        if not isinstance(item, dict):
            errors.append(f"{where}: not a table")
            continue
        missing = [key for key in ("id", "package", "reason", "expires") if not item.get(key)]
        if missing:
            errors.append(f"{where}: missing {', '.join(missing)} (each entry needs id, package, reason, expires)")
            continue
        expires = item["expires"]
        if not isinstance(expires, datetime.date) or isinstance(expires, datetime.datetime):
            errors.append(f"{where} ({item['id']}): expires must be a TOML date such as 2027-01-31")
            continue
        if (expires - today).days > MAX_ALLOW_DAYS:
            errors.append(f"{where} ({item['id']}): expires {expires} is more than {MAX_ALLOW_DAYS} days ahead")
            continue
        entries.append(Entry(str(item["id"]), str(item["package"]), str(item["reason"]).strip(), expires))
    return entries, errors


def parse_pip_audit(report: dict[str, Any], name: str) -> TargetResult:
    """pip-audit's JSON report (``-f json``): its findings, and what it skipped and why."""
    result = TargetResult(name)
    skipped_not_on_index = 0
    for dependency in report.get("dependencies", []):
        package = str(dependency.get("name", ""))
        if normalise(package) in OWN_DISTRIBUTIONS:
            continue
        if "skip_reason" in dependency:
            reason = str(dependency["skip_reason"])
            version = re.search(r"\(([^()]*)\)\s*$", reason)
            result.unaudited[f"{package}=={version.group(1) if version else '?'}"] = reason
            skipped_not_on_index += reason.startswith(NOT_ON_INDEX)
            continue
        result.audited += 1
        for vuln in dependency.get("vulns", []):
            fixes = ", ".join(str(fix) for fix in vuln.get("fix_versions", []))
            result.findings.append(
                Finding(
                    "pypi",
                    package,
                    str(dependency.get("version", "")),
                    str(vuln["id"]),
                    tuple(str(alias) for alias in vuln.get("aliases", [])),
                    fixes,
                    str(vuln.get("description", ""))[:200],
                )
            )
    if result.unaudited and result.audited == 0 and skipped_not_on_index == len(result.unaudited):
        # Every distribution, even the most common, "not found": the index serves no per-version JSON API.
        result.unavailable = (
            f"the package index answered 404 to pip-audit's per-version JSON request for all "
            f"{len(result.unaudited)} distributions: it serves no vulnerability data that way"
        )
    return result


def parse_npm_audit(report: dict[str, Any], lock: dict[str, Any], name: str = "npm") -> TargetResult:
    """npm audit's JSON report (``--json``, report version 2); versions come from package-lock.json."""
    result = TargetResult(name)
    if "vulnerabilities" not in report:
        error = report.get("error")
        detail = report.get("message") or (error.get("summary") if isinstance(error, dict) else error)
        result.unavailable = f"npm audit got no report from the registry's advisory service: {detail or report}"
        for path, package in lock.get("packages", {}).items():
            if path:  # "" is the project itself
                name = str(package.get("name") or path.rsplit("node_modules/", 1)[-1])
                result.unaudited[f"{name}=={package.get('version', '?')}"] = result.unavailable
        return result
    packages = lock.get("packages", {})
    result.audited = int(report.get("metadata", {}).get("dependencies", {}).get("total", 0))
    for package, vulnerability in sorted(report["vulnerabilities"].items()):
        versions = sorted({str(packages.get(node, {}).get("version", "?")) for node in vulnerability.get("nodes", [])})
        for via in vulnerability.get("via", []):
            # A string names another vulnerable package this one depends on: that one carries the advisory.
            if not isinstance(via, dict):
                continue
            url = str(via.get("url", ""))
            advisory = url.rstrip("/").rsplit("/", 1)[-1] if "/advisories/" in url else str(via.get("source", "?"))
            fix = vulnerability.get("fixAvailable")
            fixed = f"{fix.get('name')}@{fix.get('version')}" if isinstance(fix, dict) else ("yes" if fix else "")
            result.findings.append(
                Finding("npm", package, ",".join(versions) or "?", advisory, (), fixed, str(via.get("title", "")))
            )
    return result


def evaluate(
    results: Sequence[TargetResult],
    entries: Sequence[Entry],
    errors: Sequence[str],
    today: datetime.date,
    require_service: bool,
) -> Verdict:
    """Apply the allowlist: what fails, what is admitted, what only warns."""
    verdict = Verdict(failures=list(errors))
    for entry in entries:
        if entry.expires < today:
            verdict.failures.append(
                f"allowlist entry {entry.id} ({entry.package}) expired on {entry.expires}: "
                "upgrade, or renew it with a new reason and date"
            )
    live = [entry for entry in entries if entry.expires >= today]
    used: set[Entry] = set()
    for result in results:
        for finding in result.findings:
            admitting = next((entry for entry in live if entry.admits(finding)), None)
            if admitting is None:
                verdict.failures.append(f"{result.name}: {finding}")
            else:
                used.add(admitting)
                verdict.admitted.append((finding, admitting))
        if result.unavailable:
            message = f"{result.name}: UNAVAILABLE: {result.unavailable}"
            (verdict.failures if require_service else verdict.warnings).append(message)
        if result.unaudited:
            names = ", ".join(sorted(result.unaudited)[:12]) + (" ..." if len(result.unaudited) > 12 else "")
            message = f"{result.name}: {len(result.unaudited)} packages NOT AUDITED: {names}"
            (verdict.failures if require_service else verdict.warnings).append(message)
    if all(result.unavailable is None and not result.unaudited for result in results):
        verdict.warnings.extend(
            f"allowlist entry {entry.id} ({entry.package}) admits nothing found: remove it"
            for entry in live
            if entry not in used
        )
    return verdict


# Running the tools.


def venv_site() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def run_pip_audit(name: str, site: Path, osv_url: str | None) -> TargetResult:
    if not site.is_dir():
        result = TargetResult(name)
        result.unavailable = f"{site.relative_to(ROOT) if site.is_relative_to(ROOT) else site} is missing: make layer"
        return result
    command = [sys.executable, "-m", "pip_audit", "--path", str(site), "--format", "json"]
    command += ["--progress-spinner", "off", "--timeout", "20"]
    if osv_url:
        command += ["--vulnerability-service", "osv", "--osv-url", osv_url]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        result = TargetResult(name)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        result.unavailable = f"pip-audit exited {done.returncode} without a report: {last[-400:]}"
        return result
    return parse_pip_audit(report, name)


def index_json_base() -> str:
    """The package index's JSON API, beside the simple API pip installs from (PIP_INDEX_URL or pip's own)."""
    configured = os.environ.get("PIP_INDEX_URL", "").rstrip("/")
    if configured.endswith("/simple"):
        return configured.removesuffix("/simple") + "/pypi"
    index: Any = importlib.import_module("pip._internal.models.index")
    return str(index.PyPI.pypi_url)


@functools.cache
def latest_release_vulnerabilities(base: str, package: str, version: str) -> tuple[list[Finding] | None, str]:
    """The index's project JSON lists the vulnerabilities of its latest release: exact when that is ours."""
    try:
        with urllib.request.urlopen(f"{base}/{normalise(package)}/json", timeout=30) as response:
            project = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as error:
        return None, f"index project JSON unreadable: {error}"
    latest = str(project.get("info", {}).get("version", ""))
    if latest != version:
        return None, f"pinned {version}; the index reports vulnerabilities of its latest release ({latest}) only"
    findings = [
        Finding(
            "pypi",
            package,
            version,
            str(vuln["id"]),
            tuple(str(alias) for alias in vuln.get("aliases") or ()),
            ", ".join(str(fix) for fix in vuln.get("fixed_in") or ()),
            str(vuln.get("summary") or vuln.get("details") or "")[:200],
        )
        for vuln in project.get("vulnerabilities") or ()
        if not vuln.get("withdrawn")
    ]
    return findings, ""


def apply_index_fallback(result: TargetResult, base: str) -> None:
    """When pip-audit's service did not answer: audit what the index's project JSON can speak for."""
    pending = dict(result.unaudited)
    checked = 0

    def check(key: str) -> tuple[str, list[Finding] | None, str]:
        package, _, version = key.partition("==")
        return (key, *latest_release_vulnerabilities(base, package, version))

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for key, findings, reason in pool.map(check, sorted(pending)):
            if findings is None:
                result.unaudited[key] = reason
                continue
            checked += 1
            del result.unaudited[key]
            result.findings.extend(findings)
    result.audited += checked
    result.fallback = f"index latest-release data: {checked} of {len(pending)} packages checked"
    if not result.unaudited:
        # The same advisory records, read another way, covered every package: nothing is left unseen.
        result.fallback += f" (pip-audit's service: {result.unavailable})"
        result.unavailable = None


def run_npm_audit(lock_dir: Path, registry: str | None) -> TargetResult:
    command = ["npm", "audit", "--json", "--package-lock-only"]
    if registry:
        command += ["--registry", registry]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=lock_dir, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        result = TargetResult("npm")
        result.unavailable = f"npm audit did not run: {error}"
        return result
    lock = json.loads((lock_dir / "package-lock.json").read_text())
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return parse_npm_audit(report, lock)


def audit(targets: Iterable[str], osv_url: str | None, npm_registry: str | None) -> list[TargetResult]:
    jobs = {
        "python venv": lambda: run_pip_audit("python venv", venv_site(), osv_url),
        "python layer": lambda: run_pip_audit("python layer", LAYER_SITES["layer"], osv_url),
        "python mcp-layer": lambda: run_pip_audit("python mcp-layer", LAYER_SITES["mcp-layer"], osv_url),
        "npm": lambda: run_npm_audit(PACKAGE_LOCK_DIR, npm_registry),
    }
    wanted = [name for name in jobs if name.split()[-1] in set(targets)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(wanted) or 1) as pool:
        results = list(pool.map(lambda name: jobs[name](), wanted))
    base = None
    for result in results:
        if result.name.startswith("python") and result.unavailable and result.unaudited and not osv_url:
            base = base or index_json_base()
            apply_index_fallback(result, base)
    return results


def render(results: Sequence[TargetResult], verdict: Verdict) -> str:
    lines = ["supply-chain audit (docs/security.md):"]
    for result in results:
        status = "UNAVAILABLE" if result.unavailable else ("replaced" if result.fallback else "answered")
        extra = f"; {result.fallback}" if result.fallback else ""
        lines.append(
            f"  {result.name}: service {status}; {result.audited} audited, {len(result.unaudited)} not audited, "
            f"{len(result.findings)} findings{extra}"
        )
    lines += [
        f"  admitted: {finding} (allowlist: {entry.reason}; until {entry.expires})"
        for finding, entry in verdict.admitted
    ]
    lines += [f"  WARNING: {warning}" for warning in verdict.warnings]
    lines += [f"  FAIL: {failure}" for failure in verdict.failures]
    lines.append(
        "  result: "
        + ("FAILED" if verdict.failures else "passed" + (" WITH GAPS (see WARNING)" if verdict.warnings else ""))
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--require-service", action="store_true", help="fail when a vulnerability service is unreachable"
    )
    parser.add_argument("--allowlist", type=Path, default=ALLOWLIST)
    parser.add_argument(
        "--targets", default="venv,layer,mcp-layer,npm", help="comma-separated: venv,layer,mcp-layer,npm"
    )
    parser.add_argument("--osv-url", help="audit Python against this OSV query endpoint instead of the index's")
    parser.add_argument("--npm-registry", help="ask this registry's advisory endpoint instead of npm's configured one")
    parser.add_argument("--report", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    today = datetime.date.today()
    entries, errors = load_allowlist(args.allowlist.read_text(), today)
    results = audit(args.targets.split(","), args.osv_url, args.npm_registry)
    verdict = evaluate(results, entries, errors, today, args.require_service)
    print(render(results, verdict))
    if args.report:
        args.report.write_text(
            json.dumps(
                {
                    "tools": {"pip-audit": metadata.version("pip-audit")},
                    "results": [
                        {**result.__dict__, "findings": [finding.__dict__ for finding in result.findings]}
                        for result in results
                    ],
                    "failures": verdict.failures,
                    "warnings": verdict.warnings,
                },
                indent=2,
                default=str,
            )
        )
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
