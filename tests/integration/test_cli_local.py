"""The ``rag-ingest`` CLI in processes of its own.

- The operator commands (``--local`` redrive, replay, reap) against moto's server through an
  outputs.json, as the local stack writes it: the same reports as the Lambda functions, as JSON.
- The user commands against the whole local stack (its identity provider, HTTP API, pipeline and
  OpenSearch): login, upload of two samples to READY with progress, ls, search, status, a FAILED
  upload (exit code 1, its code and sentence) retried to READY, rm, the smoke run, and exit codes.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.ids import new_document_id
from rag_ingest_client.cli import main
from rag_ingest_client.sentences import ERROR_SENTENCES

from local.runtime.harness import OfflineStackProcess
from tests.support.aws import REPO, moto_server
from tests.support.operations import RecordWriter, create_documents_table, create_state_machine

pytestmark = pytest.mark.integration


@pytest.fixture
def outputs(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with moto_server() as endpoint:
        sqs = boto3.client("sqs")
        suffix = uuid.uuid4().hex[:6]
        table = f"documents-{suffix}"
        create_documents_table(table)
        values = {
            "MotoEndpoint": endpoint,
            "Region": "us-east-1",
            "DocumentsTableName": table,
            "DeadLetterQueueUrl": sqs.create_queue(QueueName=f"dlq-{suffix}")["QueueUrl"],
            "IngestQueueUrl": sqs.create_queue(QueueName=f"ingest-{suffix}")["QueueUrl"],
            "StateMachineArn": create_state_machine(),
        }
        path = tmp_path / "outputs.json"
        path.write_text(json.dumps(values))
        yield {"path": path, "records": RecordWriter(table), "sqs": sqs, **values}


def cli(outputs: dict[str, Any], capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["--local", "--outputs", str(outputs["path"]), *argv])
    return code, json.loads(capsys.readouterr().out)


def test_replay_reap_and_redrive_from_the_command_line(
    outputs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    records: RecordWriter = outputs["records"]
    failed, stuck = new_document_id(), new_document_id()
    records.put(failed, "FAILED", age_seconds=600, error_code="INTERNAL_ERROR")
    records.put(stuck, "QUEUED", age_seconds=7200)

    code, dry = cli(outputs, capsys, "replay", "--dry-run")
    assert code == 0 and [d["document_id"] for d in dry["would_replay"]] == [failed]
    code, replayed = cli(outputs, capsys, "replay", "--error-code", "INTERNAL_ERROR", "--older-than", "5m")
    assert code == 0 and replayed["replayed"][0]["execution_name"].endswith("-r1")
    assert records.get(failed)["status"] == "QUEUED"

    code, reaped = cli(outputs, capsys, "reap", "--stuck-after", "1h")
    assert code == 0 and [d["document_id"] for d in reaped["redriven"]] == [stuck]

    outputs["sqs"].send_message(QueueUrl=outputs["DeadLetterQueueUrl"], MessageBody="not an event")
    code, redriven = cli(outputs, capsys, "redrive")
    assert code == 0 and redriven["moved"] == [] and redriven["skipped"][0]["reason"].startswith("unparseable")


def test_python_dash_m_entry_point(outputs: dict[str, Any]) -> None:
    # The module runs as documented, in a process of its own (no AWS_ENDPOINT_URL: outputs.json decides).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    module = [sys.executable, "-m", "rag_ingest_client.cli"]
    result = subprocess.run(
        [*module, "--local", "--outputs", str(outputs["path"]), "reap", "--dry-run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["dry_run"] is True


# ---------------------------------------------------------------- the user commands, on the local stack
SAMPLES = REPO / "samples"
SCRIPT = Path(sys.executable).parent / "rag-ingest"
# The template's TransientError retrier on Parse: 1 attempt + 6 retries, then Catch → MarkFailed.
PARSE_ATTEMPTS = 7


@dataclass
class Cli:
    """``rag-ingest`` (the console script) against one local stack, with a config folder of its own."""

    outputs: Path
    config_home: Path

    def __call__(self, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        assert SCRIPT.exists(), f"{SCRIPT} missing: run `make install` (client/pyproject.toml declares the script)"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        # The checkout's packages first, whichever checkout the venv was installed from.
        packages = f"{REPO / 'client'}:{REPO / 'layers/common/python'}"
        env.update({"XDG_CONFIG_HOME": str(self.config_home), "PYTHONPATH": packages})
        return subprocess.run(
            [str(SCRIPT), *argv, "--outputs", str(self.outputs)],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def json(self, *argv: str) -> Any:
        result = self(*argv, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture(scope="module")
def cli_local(stack_process: OfflineStackProcess, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(stack_process.state_dir / "outputs.json", tmp_path_factory.mktemp("xdg"))


def function_name(stack_process: OfflineStackProcess, construct_id: str) -> str:
    [name] = [n for logical_id, n in stack_process.outputs["Functions"].items() if logical_id.startswith(construct_id)]
    return str(name)


def uploaded_ids(stdout: str) -> dict[str, str]:
    """``✓ lighthouses.pdf 01J...: READY ...`` lines → {filename: document id}."""
    return dict(re.findall(r"^[✓✗↑] (\S+) ([0-9A-Z]{26}):", stdout, flags=re.MULTILINE))


def test_login_upload_ls_search_status_and_rm(cli_local: Cli) -> None:
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    login = cli_local("login", "--user", "ana", "--tenant", tenant)
    assert login.returncode == 0, login.stderr
    assert login.stdout == f"signed in to the local stack as ana (tenant {tenant})\n"
    cache = cli_local.config_home / "rag-ingest" / "tokens.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600

    # No --user/--tenant: the login's stay in effect.
    upload = cli_local("upload", str(SAMPLES / "lighthouses.pdf"), str(SAMPLES / "sourdough.pdf"))
    assert upload.returncode == 0, upload.stdout + upload.stderr
    for name in ("lighthouses.pdf", "sourdough.pdf"):
        assert f"{name}: 100% of " in upload.stdout  # byte progress, as printed into a log (not a terminal)
        assert re.search(rf"^✓ {re.escape(name)} [0-9A-Z]{{26}}: READY \d+ pages \d+ chunks in ", upload.stdout, re.M)
    # Followed after the upload: a state before READY was shown.
    assert re.search(r"^lighthouses.pdf: 100% of .* sent, (AWAITING_UPLOAD|QUEUED|PROCESSING)", upload.stdout, re.M)
    ids = uploaded_ids(upload.stdout)
    lighthouses, sourdough = ids["lighthouses.pdf"], ids["sourdough.pdf"]

    listing = cli_local.json("ls", "--limit", "1", "--all")
    assert [d["document_id"] for d in listing["items"]] == [sourdough, lighthouses]  # newest first, two pages
    assert all(d["status"] == "READY" for d in listing["items"])

    hits = cli_local.json("search", "Argand burner hollow circular wick", "--mode", "bm25", "-k", "3")
    assert hits["passages"][0]["document_id"] == lighthouses and hits["passages"][0]["page_start"] == 2
    text = cli_local("search", "Argand burner hollow circular wick", "--mode", "hybrid")
    assert text.returncode == 0 and text.stdout.startswith("1. lighthouses.pdf p.2")

    status = cli_local.json("status", lighthouses)
    assert (status["status"], status["page_count"]) == ("READY", 5)

    # meta: set merges typed values (If-Match on the revision read), search filters on them at once.
    changed = cli_local.json("meta", "set", lighthouses, "customer=acme", "year=2025")
    assert (changed["metadata"], changed["revision"]) == ({"customer": "acme", "year": 2025}, 2)
    found = cli_local.json("search", "lighthouse", "--where", "customer=acme", "--where", "year=2025")
    assert {p["document_id"] for p in found["passages"]} == {lighthouses}
    shown = cli_local("meta", "unset", lighthouses, "year")
    assert shown.returncode == 0 and shown.stdout == f'{lighthouses} metadata\n  customer = "acme"\n  revision 3\n'
    assert cli_local.json("meta", "clear", lighthouses)["metadata"] == {}
    assert cli_local.json("search", "lighthouse", "--where", "customer=acme")["passages"] == []

    # Another tenant sees none of it.
    other = cli_local("status", lighthouses, "--tenant", f"other-{uuid.uuid4().hex[:6]}")
    assert other.returncode == 1 and other.stderr.startswith("error: 404 Not Found")
    assert "Traceback" not in other.stderr

    removed = cli_local("rm", sourdough, "--tenant", tenant)
    assert removed.returncode == 0 and removed.stdout == f"deleted {sourdough} (DELETED)\n"
    after = cli_local.json("search", "sourdough starter levain", "--mode", "bm25", "--tenant", tenant)
    assert all(p["document_id"] != sourdough for p in after["passages"])

    not_retryable = cli_local("retry", lighthouses, "--tenant", tenant)
    assert not_retryable.returncode == 1 and not_retryable.stderr.startswith(f"error: {lighthouses} cannot be retried")


def test_upload_with_access_login_with_groups_and_access_set_and_open(cli_local: Cli) -> None:
    """Per-document access from the command line: an upload for a group, seen by its members only;
    a member may not change who reads it (403), its uploader may open it to the tenant."""
    tenant = f"cli-acl-{uuid.uuid4().hex[:8]}"
    upload = cli_local(
        "upload", str(SAMPLES / "urban-birds.pdf"), "--access-group", "legal", "--user", "ana", "--tenant", tenant
    )
    assert upload.returncode == 0, upload.stdout + upload.stderr
    birds = uploaded_ids(upload.stdout)["urban-birds.pdf"]
    shown = cli_local.json("access", "show", birds, "--user", "ana", "--tenant", tenant)
    nobody = {"users": [], "groups": []}
    assert shown["access"] == {**nobody, "groups": ["legal"], "editors": nobody, "deny": nobody}
    assert shown["uploaded_by"]

    def listed(*who: str) -> list[str]:
        return [d["document_id"] for d in cli_local.json("ls", *who, "--tenant", tenant)["items"]]

    assert listed("--user", "carl") == []  # not in the group: not listed, not found
    hidden = cli_local("status", birds, "--user", "carl", "--tenant", tenant)
    assert hidden.returncode == 1 and hidden.stderr.startswith("error: 404 Not Found")
    assert listed("--user", "dora", "--groups", "legal") == [birds]
    refused = cli_local("access", "open", birds, "--user", "dora", "--groups", "legal", "--tenant", tenant)
    assert refused.returncode == 1 and "ACCESS_CHANGE_FORBIDDEN" in refused.stderr, refused.stderr
    # Editors and deny lists: a contractor of legal is denied, a lead edits (and reads) it.
    denied = cli_local(
        "access",
        "set",
        birds,
        "--deny-group",
        "contractors",
        "--editor-group",
        "leads",
        "--user",
        "ana",
        "--tenant",
        tenant,
    )
    assert denied.returncode == 0, denied.stderr
    assert "  editors: group leads\n" in denied.stdout and "  denied: group contractors\n" in denied.stdout
    assert listed("--user", "erin", "--groups", "legal,contractors") == []
    assert listed("--user", "lee", "--groups", "leads") == [birds]
    meta = cli_local("meta", "set", birds, "topic=birds", "--user", "dora", "--groups", "legal", "--tenant", tenant)
    assert meta.returncode == 1 and "EDIT_FORBIDDEN" in meta.stderr, meta.stderr  # a reader edits nothing
    opened = cli_local("access", "open", birds, "--user", "ana", "--tenant", tenant)
    assert opened.returncode == 0, opened.stderr
    assert "  open to the whole tenant\n" in opened.stdout and "  denied: group contractors\n" in opened.stdout
    assert listed("--user", "carl") == [birds]
    assert listed("--user", "erin", "--groups", "contractors") == []  # opening keeps the deny list


def test_a_failed_upload_exits_1_with_its_reason_and_retry_brings_it_to_ready(
    cli_local: Cli, stack_process: OfflineStackProcess
) -> None:
    tenant = f"cli-fail-{uuid.uuid4().hex[:8]}"
    parse = function_name(stack_process, "WorkflowParseFunction")
    stack_process.arm_fault(parse, "raise", times=PARSE_ATTEMPTS, match=tenant)
    try:
        failed = cli_local("upload", str(SAMPLES / "urban-birds.pdf"), "--tenant", tenant, "--user", "ben")
    finally:
        stack_process.clear_faults()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    document_id = uploaded_ids(failed.stdout)["urban-birds.pdf"]
    sentence = ERROR_SENTENCES[ErrorCode.TRANSIENT_RETRIES_EXHAUSTED]
    assert f"✗ urban-birds.pdf {document_id}: FAILED TRANSIENT_RETRIES_EXHAUSTED: {sentence}" in failed.stdout

    retried = cli_local("retry", document_id, "--wait", "--tenant", tenant, "--user", "ben")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert re.match(rf"{document_id}: READY \d+ pages \d+ chunks$", retried.stdout.strip())


def test_refusals_before_upload_and_permanent_failures(cli_local: Cli, tmp_path: Path) -> None:
    tenant = f"cli-bad-{uuid.uuid4().hex[:8]}"
    fake = tmp_path / "notes.pdf"  # a GIF with a PDF's name: the bytes decide
    fake.write_bytes(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")
    result = cli_local("upload", str(fake), str(SAMPLES / "invalid" / "encrypted.pdf"), "--tenant", tenant)
    assert result.returncode == 1
    assert "✗ notes.pdf: refused: a GIF image (PNG, JPEG and TIFF images are read)" in result.stdout
    assert re.search(
        r"✗ encrypted.pdf [0-9A-Z]{26}: FAILED ENCRYPTED_PDF: This PDF is password-protected.", result.stdout
    )

    missing = cli_local("upload", str(tmp_path / "nope.pdf"))
    assert missing.returncode == 1 and missing.stderr == f"error: {tmp_path / 'nope.pdf'}: no such file or folder\n"


def test_real_office_files_are_uploaded_and_read(cli_local: Cli, tmp_path: Path) -> None:
    """Word and PowerPoint files as python-docx and python-pptx write them go to READY and are found;
    every Office file of the corpora is sent (a zip's header holds NUL bytes: none may be refused)."""
    import docx
    import pptx

    tenant = f"cli-office-{uuid.uuid4().hex[:8]}"
    document = docx.Document()
    document.add_heading("Harbour dues", level=1)
    document.add_paragraph("Vessels over forty metres pay the quayside levy by the metre of length.")
    document.save(str(tmp_path / "dues.docx"))
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Orchard yields"
    slide.placeholders[1].text = "Russet apples gave eleven tonnes per hectare after the frost."
    deck.save(str(tmp_path / "yields.pptx"))

    written = cli_local("upload", str(tmp_path / "dues.docx"), str(tmp_path / "yields.pptx"), "--tenant", tenant)
    assert written.returncode == 0, written.stdout + written.stderr
    assert set(uploaded_ids(written.stdout)) == {"dues.docx", "yields.pptx"}
    levy = cli_local.json("search", "quayside levy per metre", "--mode", "bm25", "--tenant", tenant)
    assert levy["passages"][0]["filename"] == "dues.docx"
    russet = cli_local.json("search", "russet apples tonnes per hectare", "--mode", "bm25", "--tenant", tenant)
    assert russet["passages"][0]["filename"] == "yields.pptx"

    corpora = sorted([*(REPO / "eval" / "formats").glob("*.[dp][op][ct]x"), *(SAMPLES / "formats").glob("*x")])
    sent = cli_local("upload", *map(str, corpora), "--no-wait", "--tenant", tenant)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    ids = uploaded_ids(sent.stdout)
    assert sorted(ids) == sorted(path.name for path in corpora) and len(ids) >= 10
    for document_id in ids.values():  # what they hold is the formats suites' concern: free the stack
        assert cli_local("rm", document_id, "--tenant", tenant).returncode == 0


def test_smoke_against_the_local_stack(cli_local: Cli) -> None:
    result = cli_local("smoke", "--tenant", f"smoke-{uuid.uuid4().hex[:8]}")
    assert result.returncode == 0, result.stdout + result.stderr
    # "ok   <step, 16 wide> <seconds> s  <detail>"
    steps = [line[5:21].strip() for line in result.stdout.splitlines() if line.startswith("ok ")]
    assert steps == ["sign in", "create upload", "upload", "ready", "search", "delete"]
    assert result.stdout.strip().splitlines()[-1].startswith("smoke test passed in ")


def test_a_stopped_stack_is_a_one_line_error(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "outputs.json", tmp_path)
    result = cli("ls")
    assert result.returncode == 1
    outputs = tmp_path / "outputs.json"
    assert (
        result.stderr == f"error: the local stack is not running ({outputs} not found): start it with `make stack-up`\n"
    )


def test_sources_add_sync_wait_status_put_and_rm_from_the_cli(
    cli_local: Cli, stack_process: OfflineStackProcess, tmp_path: Path
) -> None:
    """An S3 source made, synced (``--wait`` follows it to COMPLETE) and read back; a custom source's
    item pushed from a file; both removed, each with the choice it needs."""
    tenant = f"cli-src-{uuid.uuid4().hex[:8]}"
    outputs = stack_process.outputs
    s3 = boto3.client(
        "s3",
        endpoint_url=outputs["MotoEndpoint"],
        region_name=outputs.get("Region", "us-east-1"),
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    bucket = f"cli-docs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="wiki/quays.md", Body=b"# Quays\nThe east quay takes vessels up to 9 m draught.\n")
    s3.put_object(Bucket=bucket, Key="wiki/skip.txt", Body=b"not included")

    added = cli_local.json(
        "sources", "add", "s3", "--bucket", bucket, "--prefix", "wiki/", "--include", "*.md", "--tenant", tenant
    )
    source_id = added["id"]
    synced = cli_local("sources", "sync", source_id, "--wait", "--tenant", tenant, timeout=300)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    status = cli_local.json("sources", "status", source_id, "--tenant", tenant)
    latest = status["syncs"][0]
    assert latest["status"] == "COMPLETE" and latest["statistics"]["added"] == 1, latest
    listed = cli_local("sources", "ls", "--tenant", tenant)
    assert listed.returncode == 0 and source_id in listed.stdout

    custom = cli_local.json("sources", "add", "custom", "--name", "faq", "--tenant", tenant)
    page = tmp_path / "berths.md"
    page.write_text("# Berths\nVisitors moor on the north pontoon.\n")
    pushed = cli_local.json("sources", "put", custom["id"], "faq-berths", str(page), "--tenant", tenant)
    assert pushed["outcome"] == "added"
    again = cli_local.json("sources", "put", custom["id"], "faq-berths", str(page), "--tenant", tenant)
    assert again["outcome"] == "unchanged" and again["document_id"] == pushed["document_id"]

    refused = cli_local("sources", "rm", source_id, "--tenant", tenant)
    assert refused.returncode != 0  # the documents' fate must be said
    for removed in (source_id, custom["id"]):
        gone = cli_local("sources", "rm", removed, "--documents", "delete", "--tenant", tenant)
        assert gone.returncode == 0, gone.stdout + gone.stderr
    assert source_id not in cli_local("sources", "ls", "--tenant", tenant).stdout
