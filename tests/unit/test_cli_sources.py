"""``rag-ingest sources``: its arguments and the bodies they become, its rendering, and each command
against a real HTTP server speaking docs/sources.md's routes in memory (tests/support/sources_api.py):
the requests sent, what is printed, exit codes, and one-line errors for the API's refusals."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rag_ingest_client.cli import build_parser, main
from rag_ingest_client.cli import sources as sources_cli
from rag_ingest_client.cli.errors import CliError
from rag_ingest_client.cli.sources import item_body, source_body, source_rows, statistics_text, sync_lines

from tests.support.sources_api import SourcesApi, Step

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- arguments
def body_of(*argv: str) -> dict[str, Any]:
    return source_body(build_parser().parse_args(["sources", "add", *argv]))


def test_an_s3_source_sends_only_the_options_given_with_typed_metadata_and_readers() -> None:
    body = body_of(
        "s3", "--bucket", "team-docs", "--prefix", "handbook/", "--include", "**/*.pdf", "--include", "*.md",
        "--exclude", "drafts/**", "--schedule", "rate(1 day)", "--meta", "team=hr", "--meta", "year=2024",
        "--reader", "ana", "--reader-group", "legal", "--access-group", "hr",
    )  # fmt: skip
    assert body == {
        "kind": "s3",
        "name": "s3://team-docs/handbook/",
        "config": {
            "bucket": "team-docs",
            "prefix": "handbook/",
            "include": ["**/*.pdf", "*.md"],
            "exclude": ["drafts/**"],
        },
        "schedule": "rate(1 day)",
        "metadata": {"team": "hr", "year": 2024},
        "access": {"users": ["ana"], "groups": ["legal", "hr"]},
    }
    assert body_of("s3", "--bucket", "b", "--name", "handbook") == {
        "kind": "s3", "name": "handbook", "config": {"bucket": "b"},
    }  # fmt: skip


def test_a_web_source_names_itself_after_its_first_host_and_sends_its_caps() -> None:
    body = body_of(
        "web", "--seed", "https://docs.example.com/guide/", "--seed", "https://docs.example.com/api/",
        "--sitemap", "https://docs.example.com/sitemap.xml", "--max-pages", "50", "--max-depth", "2",
        "--max-page-bytes", "1000000", "--requests-per-second", "0.5", "--concurrency", "1",
        "--scope-prefix", "/guide/", "--tracking-parameter", "ref",
    )  # fmt: skip
    assert body == {
        "kind": "web",
        "name": "docs.example.com",
        "config": {
            "seeds": ["https://docs.example.com/guide/", "https://docs.example.com/api/"],
            "sitemaps": ["https://docs.example.com/sitemap.xml"],
            "scope": {"path_prefix": "/guide/"},
            "max_pages": 50, "max_depth": 2, "max_page_bytes": 1000000, "requests_per_second": 0.5,
            "concurrency": 1, "tracking_parameters": ["ref"],
        },
    }  # fmt: skip
    sitemap_only = body_of("web", "--sitemap", "https://example.org/sitemap.xml")
    assert (sitemap_only["name"], sitemap_only["config"]["seeds"]) == ("example.org", [])
    with pytest.raises(CliError, match="needs --seed URL or --sitemap URL"):
        body_of("web", "--max-pages", "3")


def test_a_custom_source_has_an_empty_config() -> None:
    assert body_of("custom", "--name", "wiki") == {"kind": "custom", "name": "wiki", "config": {}}


@pytest.mark.parametrize(
    "argv",
    [
        ["sources", "add", "custom"],  # --name is required
        ["sources", "add", "s3"],  # --bucket is required
        ["sources", "add", "ftp", "--name", "x"],
        ["sources", "add", "s3", "--bucket", "b", "--schedule", "every day"],
        ["sources", "add", "web", "--seed", "https://a.example", "--max-pages", "0"],
        ["sources", "rm", "src_1"],  # --documents delete|keep is required
        ["sources", "rm", "src_1", "--documents", "maybe"],
        ["sources", "sync"],
        ["sources", "put", "src_1", "ext"],
        ["sources"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: rag-ingest sources" in capsys.readouterr().err


def test_target_options_work_after_the_nested_command() -> None:
    args = build_parser().parse_args(["sources", "sync", "src_1", "--wait", "--stack", "Prod", "--json"])
    assert (args.command, args.sources_command, args.source_id, args.wait, args.stack, args.json) == (
        "sources", "sync", "src_1", True, "Prod", True,
    )  # fmt: skip
    args = build_parser().parse_args(["--tenant", "acme", "sources", "add", "s3", "--bucket", "b", "--user", "ana"])
    assert (args.tenant, args.user, args.kind) == ("acme", "ana", "s3")


def test_an_item_is_sent_as_text_when_it_is_utf8_text_else_as_base64(tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Größe\n\nText.\n", encoding="utf-8")
    assert item_body(note, {"team": "hr"}, None) == {
        "filename": "note.md", "text": "# Größe\n\nText.\n", "metadata": {"team": "hr"},
    }  # fmt: skip
    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(b"%PDF-1.7\n\xe2\xe3\xcf\xd3\n%%EOF\n")
    body = item_body(pdf, None, {"users": ["ana"], "groups": []})
    assert base64.b64decode(body["content_base64"]) == pdf.read_bytes() and "text" not in body
    assert body["access"] == {"users": ["ana"], "groups": []}
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    assert base64.b64decode(item_body(latin, None, None)["content_base64"]) == b"caf\xe9"
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(CliError, match=r"empty\.txt: refused: the file is empty"):
        item_body(tmp_path / "empty.txt", None, None)
    with pytest.raises(CliError, match="no such file"):
        item_body(tmp_path / "missing.pdf", None, None)


# ---------------------------------------------------------------- rendering
SYNC = {
    "id": "sync_1", "source_id": "src_1", "status": "COMPLETE", "started_at": "2026-12-01T05:00:00Z",
    "ended_at": "2026-12-01T05:02:00Z", "listing_complete": True,
    "statistics": {"scanned": 120, "added": 100, "modified": 3, "unchanged": 15, "deleted": 0, "failed": 2},
    "failures": [{"item": "handbook/big.pdf", "uri": "s3://team-docs/handbook/big.pdf", "code": "FILE_TOO_LARGE",
                  "reason": "over 50 MB"}],
}  # fmt: skip


def test_statistics_read_in_bedrocks_order_and_missing_counters_are_zero() -> None:
    assert (
        statistics_text(SYNC["statistics"]) == "scanned 120, added 100, modified 3, unchanged 15, deleted 0, failed 2"
    )
    assert statistics_text(None) == "scanned 0, added 0, modified 0, unchanged 0, deleted 0, failed 0"


def test_the_table_aligns_its_columns_and_says_never_for_a_source_not_synced() -> None:
    lines = source_rows([
        {"id": "src_1", "kind": "s3", "name": "handbook", "last_sync": SYNC},
        {"id": "src_22", "kind": "custom", "name": "wiki", "last_sync": None},
    ])  # fmt: skip
    assert lines == [
        "ID      KIND    NAME      LAST SYNC                     STATISTICS",
        "src_1   s3      handbook  COMPLETE 2026-12-01T05:02:00  scanned 120, added 100, modified 3, unchanged 15, "
        "deleted 0, failed 2",
        "src_22  custom  wiki      never                         -",
    ]


def test_a_sync_shows_its_failures_and_how_many_were_not_kept() -> None:
    assert sync_lines(SYNC) == [
        "sync_1  COMPLETE  2026-12-01T05:00:00Z → 2026-12-01T05:02:00Z",
        "  scanned 120, added 100, modified 3, unchanged 15, deleted 0, failed 2",
        "  failures (1 of 2 shown):",
        "    s3://team-docs/handbook/big.pdf: FILE_TOO_LARGE: over 50 MB",
    ]
    running = {**SYNC, "status": "IN_PROGRESS", "ended_at": None, "listing_complete": False, "failures": []}
    assert sync_lines({**running, "listed": 4000})[2:] == [
        "  listed 4000 so far (counted above as they are applied)",
        "  listing not complete yet: nothing is deleted before it is",
    ]


# ---------------------------------------------------------------- against the routes
@pytest.fixture
def api() -> Iterator[SourcesApi]:
    server = SourcesApi().start()
    yield server
    server.stop()


@pytest.fixture
def base(api: SourcesApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"ApiUrl": api.url}))
    return ["--outputs", str(outputs), "--user", "ana", "--tenant", "acme"]


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits of ``sync --wait``, recorded instead of slept."""
    waited: list[float] = []
    monkeypatch.setattr(sources_cli, "pause", waited.append)
    return waited


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def add_s3(base: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run_cli(
        ["sources", "add", "s3", "--bucket", "team-docs", "--name", "handbook", "--json", *base], capsys
    )
    assert code == 0
    return str(json.loads(out)["id"])


def test_add_ls_and_show(api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["sources", "ls", *base], capsys)
    assert (code, out) == (0, "no sources\n")
    code, out, _ = run_cli(
        ["sources", "add", "s3", "--bucket", "team-docs", "--prefix", "handbook/", "--meta", "team=hr",
         "--reader-group", "hr", "--schedule", "rate(1 day)", *base], capsys,
    )  # fmt: skip
    assert code == 0
    assert out.splitlines() == [
        "added s3 source src_0001 (s3://team-docs/handbook/)",
        "  sync it: rag-ingest sources sync src_0001 --wait",
    ]
    [request] = [r for r in api.requests if r.method == "POST"]
    assert (request.path, request.tenant) == ("/sources", "acme")
    assert request.body == {
        "kind": "s3", "name": "s3://team-docs/handbook/", "config": {"bucket": "team-docs", "prefix": "handbook/"},
        "schedule": "rate(1 day)", "metadata": {"team": "hr"}, "access": {"users": [], "groups": ["hr"]},
    }  # fmt: skip

    code, out, _ = run_cli(["sources", "add", "web", "--seed", "https://docs.example.com/a/", *base], capsys)
    assert code == 0 and out.startswith("added web source src_0002 (docs.example.com)")

    code, out, _ = run_cli(["sources", "ls", *base], capsys)
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "KIND", "NAME", "LAST", "SYNC", "STATISTICS"]
    assert lines[1].split()[:3] == ["src_0001", "s3", "s3://team-docs/handbook/"] and lines[1].split()[-2:] == [
        "never",
        "-",
    ]
    assert lines[2].split()[:3] == ["src_0002", "web", "docs.example.com"]
    code, out, _ = run_cli(["sources", "ls", "--json", *base], capsys)
    assert [s["id"] for s in json.loads(out)["sources"]] == ["src_0001", "src_0002"]

    code, out, _ = run_cli(["sources", "show", "src_0001", *base], capsys)
    assert code == 0
    assert out.splitlines()[:5] == [
        "src_0001  s3  s3://team-docs/handbook/",
        "  reads     s3://team-docs/handbook/",
        "  schedule  rate(1 day)",
        "  metadata  team=hr",
        "  readers   users: -; groups: hr",
    ]
    assert out.splitlines()[-1] == "  last sync never"


def test_another_tenants_source_is_a_404_in_one_line(
    api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    source_id = add_s3(base, capsys)
    other = [*base[:2], "--user", "bo", "--tenant", "globex"]
    for argv in (
        ["show", source_id],
        ["sync", source_id],
        ["status", source_id],
        ["rm", source_id, "--documents", "keep"],
    ):
        code, out, err = run_cli(["sources", *argv, *other], capsys)
        assert (code, out, err) == (1, "", "error: 404 Not Found: no such source\n"), argv
    assert source_id in api.sources  # nothing was deleted


def test_sync_without_wait_then_a_second_sync_is_refused_while_one_runs(
    api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    source_id = add_s3(base, capsys)
    code, out, _ = run_cli(["sources", "sync", source_id, *base], capsys)
    assert (code, out) == (0, f"sync sync_0002 of {source_id} started\n")
    code, out, err = run_cli(["sources", "sync", source_id, *base], capsys)
    assert (code, out) == (1, "")
    assert err == (
        f"error: {source_id} is already syncing (sync sync_0002 is running): "
        f"follow it with `rag-ingest sources status {source_id}`\n"
    )
    assert api.calls().count(f"POST /sources/{source_id}/sync") == 2


def test_sync_wait_reports_each_change_on_stderr_and_ends_on_complete(
    api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str], polls: list[float]
) -> None:
    source_id = add_s3(base, capsys)
    failure = {
        "item": "a b/ü.pdf",
        "uri": "s3://team-docs/a%20b/%C3%BC.pdf",
        "code": "CORRUPT_PDF",
        "reason": "bad xref",
    }
    api.plan = [
        Step("IN_PROGRESS", {"scanned": 40, "added": 10}),
        Step("IN_PROGRESS", {"scanned": 40, "added": 10}),  # no change: no line
        Step("IN_PROGRESS", {"scanned": 90, "added": 60, "failed": 1}, [failure], listing_complete=True),
        Step("COMPLETE", {"scanned": 90, "added": 89, "failed": 1}, [failure]),
    ]
    code, out, err = run_cli(["sources", "sync", source_id, "--wait", *base], capsys)
    assert code == 0
    assert err.splitlines() == [
        "sync_0002 IN_PROGRESS: scanned 0, added 0, modified 0, unchanged 0, deleted 0, failed 0",
        "sync_0002 IN_PROGRESS: scanned 40, added 10, modified 0, unchanged 0, deleted 0, failed 0",
        "sync_0002 IN_PROGRESS: scanned 90, added 60, modified 0, unchanged 0, deleted 0, failed 1",
        "sync_0002 COMPLETE: scanned 90, added 89, modified 0, unchanged 0, deleted 0, failed 1",
    ]
    assert out.splitlines()[1:] == [
        "  scanned 90, added 89, modified 0, unchanged 0, deleted 0, failed 1",
        "  failures:",
        "    s3://team-docs/a%20b/%C3%BC.pdf: CORRUPT_PDF: bad xref",
    ]
    assert polls == [sources_cli.SYNC_POLL_SECONDS] * 4
    assert api.calls()[-4:] == [f"GET /sources/{source_id}/syncs/sync_0002"] * 4


def test_sync_wait_exits_1_on_failed_and_prints_json(
    api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str], polls: list[float]
) -> None:
    source_id = add_s3(base, capsys)
    api.plan = [Step("FAILED", {"scanned": 0}, [{"item": "", "uri": "s3://team-docs/", "code": "ACCESS_DENIED",
                                                 "reason": "s3:ListBucket is not granted"}])]  # fmt: skip
    code, out, _ = run_cli(["sources", "sync", source_id, "--wait", "--json", *base], capsys)
    assert code == 1
    answer = json.loads(out)
    assert (answer["status"], answer["failures"][0]["code"]) == ("FAILED", "ACCESS_DENIED")


def test_ctrl_c_while_waiting_leaves_the_sync_running_and_says_so(
    api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source_id = add_s3(base, capsys)

    def interrupted(_: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sources_cli, "pause", interrupted)
    code, out, err = run_cli(["sources", "sync", source_id, "--wait", *base], capsys)
    assert (code, out) == (130, "")
    assert err.splitlines()[-1] == (
        f"stopped waiting: sync sync_0002 of {source_id} goes on (rag-ingest sources status {source_id})"
    )
    assert api.syncs[source_id][0]["status"] == "IN_PROGRESS"
    assert not any(r.method == "DELETE" for r in api.requests)  # nothing cancelled


def test_status_shows_the_latest_syncs_newest_first(
    api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str], polls: list[float]
) -> None:
    source_id = add_s3(base, capsys)
    code, out, _ = run_cli(["sources", "status", source_id, *base], capsys)
    assert out == f"{source_id}: never synced (rag-ingest sources sync {source_id})\n"
    for added in (5, 7, 9):
        api.plan = [Step("COMPLETE", {"scanned": 9, "added": added})]
        assert run_cli(["sources", "sync", source_id, "--wait", *base], capsys)[0] == 0
    code, out, _ = run_cli(["sources", "status", source_id, "--limit", "2", *base], capsys)
    assert code == 0
    headers = [line.split()[:2] for line in out.splitlines() if not line.startswith(" ")]
    assert headers == [["sync_0004", "COMPLETE"], ["sync_0003", "COMPLETE"]]
    assert "  scanned 9, added 9, modified 0" in out
    _, out, _ = run_cli(["sources", "status", source_id, "--json", *base], capsys)
    assert [s["id"] for s in json.loads(out)["syncs"]] == ["sync_0004", "sync_0003", "sync_0002"]


def test_rm_sends_the_fate_of_the_documents(
    api: SourcesApi, base: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = add_s3(base, capsys), add_s3(base, capsys)
    code, out, _ = run_cli(["sources", "rm", first, "--documents", "keep", *base], capsys)
    assert (code, out) == (0, f"deleted source {first} (its documents kept)\n")
    code, out, _ = run_cli(["sources", "rm", second, "--documents", "delete", *base], capsys)
    assert (code, out) == (0, f"deleted source {second} (its documents deleted with it)\n")
    assert [(r.path, r.query) for r in api.requests if r.method == "DELETE"] == [
        (f"/sources/{first}", {"documents": "keep"}),
        (f"/sources/{second}", {"documents": "delete"}),
    ]
    assert api.sources == {}


def test_put_and_delete_item_of_a_custom_source(
    api: SourcesApi, base: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["sources", "add", "custom", "--name", "wiki", "--json", *base], capsys)
    source_id = json.loads(out)["id"]
    page = tmp_path / "page.md"
    page.write_text("# Leave policy\n", encoding="utf-8")
    argv = ["sources", "put", source_id, "wiki/Leave policy", str(page), "--meta", "space=HR", "--reader", "ana"]
    code, out, _ = run_cli([*argv, *base], capsys)
    assert (code, out) == (0, "wiki/Leave policy: added (document doc-wiki/Leave policy)\n")
    put = api.requests[-1]
    assert (put.method, put.raw_path) == ("PUT", f"/sources/{source_id}/items/wiki%2FLeave%20policy")  # one segment
    assert put.body == {"filename": "page.md", "text": "# Leave policy\n", "metadata": {"space": "HR"},
                        "access": {"users": ["ana"], "groups": []}}  # fmt: skip
    code, out, _ = run_cli([*argv, "--json", *base], capsys)
    assert json.loads(out)["outcome"] == "unchanged"

    code, out, _ = run_cli(["sources", "delete-item", source_id, "wiki/Leave policy", *base], capsys)
    assert (code, out) == (0, f"deleted item wiki/Leave policy of {source_id}\n")
    code, _, err = run_cli(["sources", "delete-item", source_id, "wiki/Leave policy", *base], capsys)
    assert (code, err) == (1, "error: 404 Not Found: no such item\n")


def test_a_400_is_one_line_with_its_code(
    api: SourcesApi, base: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source_id = add_s3(base, capsys)
    page = tmp_path / "page.txt"
    page.write_text("text", encoding="utf-8")
    code, out, err = run_cli(["sources", "put", source_id, "x", str(page), *base], capsys)
    assert (code, out) == (1, "")
    assert err == "error: 400 INVALID_REQUEST: items are pushed to custom sources only\n"
