"""The supply-chain audit end to end: real pip-audit and real npm against a loopback advisory service.

The stand-in answers OSV's query API (what pip-audit's ``--osv-url`` asks) and the npm registry's bulk
advisory endpoint (what ``npm audit --registry`` posts to), with one made-up advisory each for a package
the project really installs. tools/supply_audit.py must then fail naming it, pass when the allowlist
admits it, fail when that entry has expired, and say UNAVAILABLE (never pass quietly) when nothing answers.
The JSON both tools printed is saved for tests/unit/test_supply_chain_audit.py's fixtures when
RAG_INGEST_CAPTURE_AUDIT_JSON names a folder.
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tools import supply_audit

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
# A package each ecosystem really installs here (the venv has PyJWT; package-lock.json has pdfjs-dist).
PY_PACKAGE, PY_ADVISORY = "pyjwt", "GHSA-test-pyjw-0001"
NPM_PACKAGE, NPM_ADVISORY = "pdfjs-dist", "GHSA-test-pdfj-0001"
LOCK = json.loads((ROOT / "package-lock.json").read_text())


class Advisories(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return

    def _body(self) -> Any:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        return json.loads(raw or b"{}")

    def _answer(self, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self._body()
        if self.path == "/v1/query":
            name = str(body.get("package", {}).get("name", "")).lower()
            vulns = [_osv_record(str(body.get("version")))] if name == PY_PACKAGE else []
            self._answer({"vulns": vulns} if vulns else {})
        elif self.path.endswith("/-/npm/v1/security/advisories/bulk"):
            self._answer({NPM_PACKAGE: [_npm_advisory()]} if NPM_PACKAGE in body else {})
        else:
            self.send_error(404)

    def do_GET(self) -> None:
        # npm reads the vulnerable package's document (its versions) to say which are affected and fixed.
        name = self.path.strip("/").replace("%2f", "/").replace("%2F", "/")
        versions = {
            str(entry["version"])
            for path, entry in LOCK["packages"].items()
            if path.endswith(f"node_modules/{name}") and "version" in entry
        }
        if not versions:
            self.send_error(404)
            return
        latest = max(versions)
        self._answer(
            {
                "name": name,
                "dist-tags": {"latest": latest},
                "versions": {version: {"name": name, "version": version} for version in versions},
            }
        )


def _osv_record(version: str) -> dict[str, Any]:
    return {
        "id": PY_ADVISORY,
        "summary": "made-up advisory of the loopback stand-in",
        "details": "made-up advisory of the loopback stand-in",
        "aliases": ["CVE-0000-0001"],
        "modified": "2026-01-01T00:00:00Z",
        "affected": [
            {
                "package": {"name": PY_PACKAGE, "ecosystem": "PyPI"},
                "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "999.0.0"}]}],
                "versions": [version],
            }
        ],
    }


def _npm_advisory() -> dict[str, Any]:
    return {
        "id": 1,
        "url": f"https://github.com/advisories/{NPM_ADVISORY}",
        "title": "made-up advisory of the loopback stand-in",
        "severity": "high",
        "vulnerable_versions": "<999.0.0",
        "cwe": ["CWE-79"],
        "cvss": {"score": 8.8, "vectorString": None},
    }


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Advisories)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(tmp_path: Path, allowlist: str, *args: str) -> tuple[int, str, dict[str, Any]]:
    (tmp_path / "allow.toml").write_text(allowlist)
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "tools.supply_audit", "--targets", "venv,npm", "--report", str(report)]
    command += ["--allowlist", str(tmp_path / "allow.toml"), *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text())


def _entry(advisory: str, package: str, expires: datetime.date) -> str:
    return f'[[allow]]\nid = "{advisory}"\npackage = "{package}"\nreason = "stand-in"\nexpires = {expires}\n'


def test_the_real_tools_find_the_advisories_and_an_unknown_one_fails(service: str, tmp_path: Path) -> None:
    code, output, report = _run(tmp_path, "", "--osv-url", f"{service}/v1/query", "--npm-registry", f"{service}/")
    assert code == 1, output
    failures = "\n".join(report["failures"])
    assert PY_ADVISORY in failures and "CVE-0000-0001" in failures and NPM_ADVISORY in failures, output
    venv, npm = report["results"]
    assert venv["unavailable"] is None and npm["unavailable"] is None, output
    assert venv["audited"] > 100 and not venv["unaudited"], "the venv holds over a hundred distributions"
    assert npm["audited"] >= 3, "package-lock.json holds aws-cdk, pdfjs-dist, @napi-rs/canvas"
    capture = os.environ.get("RAG_INGEST_CAPTURE_AUDIT_JSON")
    if capture:
        _capture(Path(capture), service)


def test_an_admitted_advisory_passes_and_an_expired_entry_fails(service: str, tmp_path: Path) -> None:
    later = datetime.date.today() + datetime.timedelta(days=30)
    admitted = _entry(PY_ADVISORY, "PyJWT", later) + _entry(NPM_ADVISORY, NPM_PACKAGE, later)
    args = ("--osv-url", f"{service}/v1/query", "--npm-registry", f"{service}/", "--require-service")
    code, output, report = _run(tmp_path, admitted, *args)
    assert code == 0 and "admitted: " in output and not report["failures"], output

    expired = _entry(PY_ADVISORY, "PyJWT", datetime.date.today() - datetime.timedelta(days=1))
    code, output, report = _run(tmp_path, expired + _entry(NPM_ADVISORY, NPM_PACKAGE, later), *args)
    assert code == 1, output
    assert any("expired" in failure for failure in report["failures"]), output
    assert any(PY_ADVISORY in failure for failure in report["failures"]), "an expired entry admits nothing"


def test_a_service_that_does_not_answer_is_unavailable_never_a_pass(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    args = ("--osv-url", f"{dead}/v1/query", "--npm-registry", f"{dead}/")
    code, output, report = _run(tmp_path, "", *args)
    assert code == 0 and "UNAVAILABLE" in output and "WITH GAPS" in output, output
    assert all(result["unavailable"] for result in report["results"]), output
    code, output, _ = _run(tmp_path, "", *args, "--require-service")
    assert code == 1 and "FAIL: python venv: UNAVAILABLE" in output and "FAIL: npm: UNAVAILABLE" in output, output


def _capture(folder: Path, service: str) -> None:
    """Save what pip-audit and npm audit print against the stand-in (the unit tests' fixtures)."""
    folder.mkdir(parents=True, exist_ok=True)
    site = supply_audit.venv_site()
    pip_audit = [sys.executable, "-m", "pip_audit", "--path", str(site), "-f", "json", "--progress-spinner", "off"]
    with_vuln = subprocess.run(
        [*pip_audit, "-s", "osv", "--osv-url", f"{service}/v1/query"], capture_output=True, text=True, check=False
    )
    report = json.loads(with_vuln.stdout)
    keep = {PY_PACKAGE, "rag-ingest", "idna"}
    report["dependencies"] = [dep for dep in report["dependencies"] if dep["name"] in keep]
    (folder / "pip-audit-osv.json").write_text(json.dumps(report, indent=1) + "\n")
    npm = subprocess.run(
        ["npm", "audit", "--json", "--package-lock-only", "--registry", f"{service}/"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    (folder / "npm-audit.json").write_text(npm.stdout)


def test_the_index_project_json_speaks_for_its_latest_release_only() -> None:
    # pycrypto's last release (2.6.1, 2013) carries published advisories; the index lists them for it.
    base = supply_audit.index_json_base()
    findings, reason = supply_audit.latest_release_vulnerabilities(base, "pycrypto", "2.6.1")
    assert findings is not None and not reason
    assert any("PYSEC-2017-94" in finding.ids() for finding in findings), findings
    older, reason = supply_audit.latest_release_vulnerabilities(base, "pycrypto", "2.6")
    assert older is None and "latest release (2.6.1)" in reason


def test_the_fallback_audits_latest_pins_and_names_the_others() -> None:
    result = supply_audit.TargetResult("python venv", unavailable="the index answered 404")
    result.unaudited = {"pycrypto==2.6.1": "404", "pycrypto==2.5": "404"}
    supply_audit.apply_index_fallback(result, supply_audit.index_json_base())
    assert result.audited == 1 and result.unavailable, "one package left unseen keeps the service unavailable"
    assert list(result.unaudited) == ["pycrypto==2.5"] and "latest release (2.6.1)" in result.unaudited["pycrypto==2.5"]
    verdict = supply_audit.evaluate([result], [], [], datetime.date.today(), require_service=False)
    assert any("pycrypto==2.6.1: PYSEC-2017-94" in failure for failure in verdict.failures), verdict.failures
