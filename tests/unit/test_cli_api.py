"""The CLI's API client against a small server speaking the contract: tokens from the local issuer,
one silent renewal after a 401, and one-line errors (never tracebacks) for 401/403/404, 409 and a
stack that is down."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from rag_ingest_client.cli import main
from rag_ingest_client.cli.api import ApiClient
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.targets import local_target
from rag_ingest_client.cli.tokens import TokenCache, unverified_claims

from tests.support.aws import free_port
from tests.unit.test_cli_signin import jwt_with

pytestmark = pytest.mark.unit


@dataclass
class Api:
    url: str = ""
    issued: list[str] = field(default_factory=list)
    accepted: set[str] = field(default_factory=set)
    seen_auth: list[str] = field(default_factory=list)
    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)
    refuse_every_token: bool = False
    calls: list[str] = field(default_factory=list)


@pytest.fixture
def api() -> Iterator[Api]:
    state = Api()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: Any) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            if self.path == "/_local/oidc/token":
                if body["tenant_id"] == "bad tenant":
                    self._answer(400, {"error": {"code": "INVALID_TENANT", "message": "tenant id must match"}})
                    return
                token = jwt_with({"cognito:username": body["username"], "custom:tenant_id": body["tenant_id"],
                                  "exp": 4_000_000_000, "n": len(state.issued)})  # fmt: skip
                state.issued.append(token)
                state.accepted.add(token)
                self._answer(200, {"id_token": token, "token_type": "Bearer", "expires_in": 3600})
                return
            authorization = self.headers.get("Authorization", "")
            state.seen_auth.append(authorization)
            state.calls.append(f"{self.command} {self.path}")
            if state.refuse_every_token or authorization.removeprefix("Bearer ") not in state.accepted:
                self._answer(401, {"message": "Unauthorized"})
                return
            status, answer = state.answers.get(f"{self.command} {self.path}", (404, {"message": "Not Found"}))
            self._answer(status, answer)

        do_GET = do_POST = do_DELETE = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def outputs(api: Api, tmp_path: Path) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"ApiUrl": api.url + "/"}))
    return path


def test_local_tokens_are_cached_and_renewed_once_after_a_401(api: Api, outputs: Path, tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "cfg" / "tokens.json")
    api.answers["GET /documents/01J"] = (200, {"document_id": "01J", "status": "READY"})
    client = ApiClient(local_target(outputs, username="ana", tenant_id="acme", cache=cache))
    assert client.document("01J")["status"] == "READY"
    assert client.document("01J")["status"] == "READY"
    assert len(api.issued) == 1  # the second call reused the cached token
    assert unverified_claims(api.issued[0])["custom:tenant_id"] == "acme"

    api.accepted.clear()  # the local stack restarted: its issuer has a new key
    assert client.document("01J")["status"] == "READY"
    assert len(api.issued) == 2 and api.seen_auth[-1] == f"Bearer {api.issued[1]}"

    # Without --user/--tenant the last login's user and tenant stay in effect.
    later = local_target(outputs, username=None, tenant_id=None, cache=cache)
    assert (later.tokens.username, later.tokens.tenant_id) == ("ana", "acme")  # type: ignore[attr-defined]


def test_a_token_the_api_keeps_refusing_is_a_clear_401(api: Api, outputs: Path, tmp_path: Path) -> None:
    client = ApiClient(local_target(outputs, username="ana", tenant_id="acme", cache=TokenCache(tmp_path / "t.json")))
    api.answers["GET /documents/01J"] = (200, {})
    api.refuse_every_token = True
    with pytest.raises(
        CliError, match=r"^401 Unauthorized: the local stack refused the token; sign in with `rag-ingest login"
    ):
        client.document("01J")
    assert len(api.issued) == 2  # one renewal, not a loop


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def private_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def test_errors_are_one_line_with_exit_code_1(api: Api, outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--outputs", str(outputs)]
    code, _, err = run_cli(["status", "01MISSING", *base], capsys)
    assert code == 1 and err == "error: 404 Not Found: Not Found\n"

    api.answers["POST /documents/01J/retry"] = (409, {"error": {"code": "NOT_RETRYABLE", "message": "it is READY"}})
    code, _, err = run_cli(["retry", "01J", *base], capsys)
    assert code == 1 and err == "error: 01J cannot be retried: it is READY\n"

    api.answers["POST /search"] = (403, {"error": {"code": "INVALID_TENANT", "message": "invalid tenant"}})
    code, _, err = run_cli(["search", "tides", *base], capsys)
    assert code == 1 and err.startswith("error: 403 Forbidden: invalid tenant")

    code, _, err = run_cli(["login", "--tenant", "bad tenant", *base], capsys)
    assert code == 1 and err == "error: the local identity provider refused the sign-in: tenant id must match\n"


def test_a_stopped_local_stack_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = tmp_path / "outputs.json"
    port = free_port()
    outputs.write_text(json.dumps({"ApiUrl": f"http://127.0.0.1:{port}"}))
    code, _, err = run_cli(["ls", "--outputs", str(outputs)], capsys)
    assert code == 1 and f"cannot reach http://127.0.0.1:{port}" in err and "make stack-up" in err
    assert "Traceback" not in err


def test_login_ls_search_and_rm_output(api: Api, outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--outputs", str(outputs)]
    code, out, _ = run_cli(["login", "--user", "ana", "--tenant", "acme", *base], capsys)
    assert code == 0 and out == "signed in to the local stack as ana (tenant acme)\n"

    document = {"document_id": "01A", "status": "FAILED", "error_code": "ENCRYPTED_PDF", "page_count": None,
                "chunk_count": None, "created_at": "2026-12-01T05:00:00Z", "filename": "secret.pdf"}  # fmt: skip
    api.answers["GET /documents?limit=1"] = (200, {"items": [document], "next_cursor": "c1"})
    api.answers["GET /documents?limit=1&cursor=c1"] = (200, {"items": [{**document, "document_id": "01B"}],
                                                             "next_cursor": None})  # fmt: skip
    code, out, _ = run_cli(["ls", "--limit", "1", *base], capsys)
    assert code == 0 and "01A" in out and "FAILED ENCRYPTED_PDF" in out and "rag-ingest ls --cursor c1" in out
    code, out, _ = run_cli(["ls", "--limit", "1", "--all", "--json", *base], capsys)
    assert [d["document_id"] for d in json.loads(out)["items"]] == ["01A", "01B"]

    api.answers["GET /documents/01A"] = (200, {**document, "error_detail": "needs a password"})
    code, out, _ = run_cli(["status", "01A", *base], capsys)
    assert "error    ENCRYPTED_PDF: This PDF is password-protected." in out and "needs a password" in out

    passage = {"document_id": "01B", "filename": "tides.pdf", "page_start": 2, "page_end": 3, "score": 0.5,
               "text": "x", "highlights": ["the <em>tide</em> &amp; the moon"]}  # fmt: skip
    api.answers["POST /search"] = (200, {"passages": [passage]})
    code, out, _ = run_cli(["search", "tide", *base], capsys)
    assert out.splitlines() == ["1. tides.pdf p.2-3  score 0.500  (01B)", "   the *tide* & the moon"]
    # Other formats say where they stand their own way: a slide, a section and its paragraph.
    deck = {**passage, "filename": "tides.pptx", "document_format": "pptx", "page_start": 4, "page_end": 4}
    notes = {**passage, "filename": "tides.md", "document_format": "markdown", "page_start": 1, "page_end": 1,
             "heading_path": ["Tides", "Spring tides"], "anchor": "spring-tides", "paragraph_index": 2}  # fmt: skip
    api.answers["POST /search"] = (200, {"passages": [deck, notes]})
    code, out, _ = run_cli(["search", "tide", *base], capsys)
    assert [line for line in out.splitlines() if line[0].isdigit()] == [
        "1. tides.pptx slide 4  score 0.500  (01B)",
        "2. tides.md § Tides > Spring tides ¶2  score 0.500  (01B)",
    ]

    api.answers["DELETE /documents/01B"] = (200, {"document_id": "01B", "status": "DELETED"})
    code, out, _ = run_cli(["rm", "01B", *base], capsys)
    assert code == 0 and out == "deleted 01B (DELETED)\n"


def test_logout_forgets_the_cached_token(
    api: Api, outputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--outputs", str(outputs)]
    assert run_cli(["login", "--user", "ana", "--tenant", "acme", *base], capsys)[0] == 0
    cache = TokenCache(tmp_path / "xdg" / "rag-ingest" / "tokens.json")
    assert cache.load(f"local:{api.url}") is not None
    code, out, _ = run_cli(["logout", *base], capsys)
    assert (code, out) == (0, "signed out of the local stack\n")
    assert cache.load(f"local:{api.url}") is None


def test_upload_stops_at_once_when_the_api_refuses_the_user(
    api: Api, outputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = []
    for name in ("a.pdf", "b.pdf"):
        files.append(tmp_path / name)
        files[-1].write_bytes(b"%PDF-1.7\n%%EOF\n")
    api.refuse_every_token = True
    code, _, err = run_cli(["upload", *map(str, files), "--outputs", str(outputs)], capsys)
    assert code == 1 and err.count("\n") == 1 and err.startswith("error: 401 Unauthorized")
    assert api.calls == ["POST /documents", "POST /documents"]  # one renewal for a.pdf, nothing for b.pdf


def test_a_file_over_the_limit_is_not_sent_and_its_ticket_is_deleted(
    api: Api, outputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.pdf"
    big.write_bytes(b"%PDF-1.7\n" + b"0" * 200)
    api.answers["POST /documents"] = (
        201,
        {"document_id": "01BIG", "status": "AWAITING_UPLOAD", "max_bytes": 100,
         "upload": {"url": f"{api.url}/bucket", "fields": {"key": "raw/acme/01BIG/big.pdf"}}},
    )  # fmt: skip
    api.answers["DELETE /documents/01BIG"] = (200, {"document_id": "01BIG", "status": "DELETED"})
    code, out, _ = run_cli(["upload", str(big), "--outputs", str(outputs)], capsys)
    assert code == 1
    assert out.splitlines()[-1] == "✗ big.pdf: upload failed: 209 bytes is over the limit of 100 bytes"
    assert api.calls == ["POST /documents", "DELETE /documents/01BIG"]  # nothing sent to storage
