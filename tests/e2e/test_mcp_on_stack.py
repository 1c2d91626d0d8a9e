"""``rag-ingest mcp`` over stdio against the local stack, driven by the MCP SDK's own client: a
reader of a group-restricted document finds, lists and reads it with citations and filters; a user
of the same tenant outside the group, and a user of another tenant, never see it in any tool."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from local.runtime.harness import OfflineStackProcess
from tests.support.mcp import tool

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "rag-ingest"
QUESTION = "Argand burner hollow circular wick"


class Cli:
    """The console script against one local stack, with a config folder of its own."""

    def __init__(self, outputs: Path, config_home: Path) -> None:
        self.outputs = outputs
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        packages = f"{REPO / 'client'}:{REPO / 'layers/common/python'}"
        self.env = env | {"XDG_CONFIG_HOME": str(config_home), "PYTHONPATH": packages}

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), *argv, "--outputs", str(self.outputs)],
            cwd=REPO, env=self.env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip

    def session(self, user: tuple[str, ...], work: Callable[[Client], Awaitable[Any]]) -> Any:
        """``work`` with an MCP client of ``rag-ingest mcp`` signed in as ``user`` (its sign-in options)."""
        server = StdioServerParameters(
            command=str(SCRIPT), args=["mcp", "--outputs", str(self.outputs), *user], env=self.env, cwd=str(REPO)
        )

        async def main() -> Any:
            async with Client(server, read_timeout_seconds=120) as client:
                return await work(client)

        return anyio.run(main)


@pytest.fixture(scope="module")
def world(stack_process: OfflineStackProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cli = Cli(stack_process.state_dir / "outputs.json", tmp_path_factory.mktemp("xdg"))
    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    owner = ("--user", "ana", "--tenant", tenant)
    restricted = cli.run(
        "upload", str(REPO / "samples/lighthouses.pdf"), "--access-group", "keepers", "--meta", "team=lights", *owner
    )
    assert restricted.returncode == 0, restricted.stdout + restricted.stderr
    open_to_all = cli.run("upload", str(REPO / "samples/formats/sourdough-starter.md"), "--meta", "team=bakery", *owner)
    assert open_to_all.returncode == 0, open_to_all.stdout + open_to_all.stderr
    return {
        "cli": cli,
        "reader": ("--user", "kim", "--tenant", tenant, "--groups", "keepers"),
        "outsider": ("--user", "bob", "--tenant", tenant),
        "other_tenant": ("--user", "eve", "--tenant", f"{tenant}-other", "--groups", "keepers"),
    }


def test_the_server_lists_its_read_only_tools_over_stdio(world: dict[str, Any]) -> None:
    async def names(client: Client) -> list[str]:
        return sorted(t.name for t in (await client.list_tools()).tools)

    assert world["cli"].session(world["reader"], names) == ["answer", "fetch", "list_documents", "search"]


def test_a_reader_finds_lists_and_reads_the_restricted_document_with_citations(world: dict[str, Any]) -> None:
    cli, reader = world["cli"], world["reader"]
    found = cli.session(reader, tool("search", {"query": QUESTION, "k": 3, "mode": "bm25"})).structured_content
    top = found["passages"][0]
    assert top["citation"]["filename"] == "lighthouses.pdf" and top["citation"]["page_start"] == 2
    assert top["citation"]["boxes"], top  # the page's boxes: the page can open the spot

    bakery = {"equals": {"key": "team", "value": "bakery"}}
    filtered = cli.session(reader, tool("search", {"query": QUESTION, "k": 5, "filter": bakery})).structured_content
    assert filtered["passages"] and {p["citation"]["filename"] for p in filtered["passages"]} == {
        "sourdough-starter.md"
    }

    listed = cli.session(reader, tool("list_documents", {})).structured_content["documents"]
    assert sorted(d["filename"] for d in listed) == ["lighthouses.pdf", "sourdough-starter.md"]
    document_id = top["citation"]["document_id"]
    page = cli.session(reader, tool("fetch", {"document_id": document_id, "page": 2, "neighbours": 0}))
    assert not page.is_error, page.content
    assert [p["page"] for p in page.structured_content["pages"]] == [2]
    assert "Argand" in page.structured_content["pages"][0]["text"]


def test_a_user_outside_the_group_and_another_tenant_never_see_it(world: dict[str, Any]) -> None:
    cli = world["cli"]
    reader_hits = cli.session(world["reader"], tool("search", {"query": QUESTION, "k": 1, "mode": "bm25"}))
    restricted_id = reader_hits.structured_content["passages"][0]["citation"]["document_id"]

    outsider = world["outsider"]
    hits = cli.session(outsider, tool("search", {"query": QUESTION, "k": 10})).structured_content["passages"]
    assert all(p["citation"]["document_id"] != restricted_id for p in hits)
    listed = cli.session(outsider, tool("list_documents", {})).structured_content["documents"]
    assert [d["filename"] for d in listed] == ["sourdough-starter.md"]
    refused = cli.session(outsider, tool("fetch", {"document_id": restricted_id, "page": 2}))
    assert refused.is_error and "404" in refused.content[0].text

    stranger = world["other_tenant"]
    assert cli.session(stranger, tool("search", {"query": QUESTION, "k": 10})).structured_content["passages"] == []
    assert cli.session(stranger, tool("list_documents", {})).structured_content["documents"] == []
    assert cli.session(stranger, tool("fetch", {"document_id": restricted_id})).is_error
