"""POST /answer against the local stack, through the CLI (``rag-ingest ask``) and the MCP ``answer``
tool: a reader of a group-restricted PDF gets an answer citing its page; a user of the same tenant
outside the group never gets it cited; another tenant, or a question nothing supports, gets no
answer and no model call (the local model server counts its Converse calls)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import requests

from local.runtime.harness import OfflineStackProcess
from tests.e2e.test_mcp_on_stack import REPO, Cli, tool

pytestmark = pytest.mark.e2e
QUESTION = "What did the Argand burner draw through the flame from both sides?"


@pytest.fixture(scope="module")
def world(stack_process: OfflineStackProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cli = Cli(stack_process.state_dir / "outputs.json", tmp_path_factory.mktemp("xdg"))
    tenant = f"ask-{uuid.uuid4().hex[:8]}"
    owner = ("--user", "ana", "--tenant", tenant)
    for upload in (
        ("upload", str(REPO / "samples/lighthouses.pdf"), "--access-group", "keepers", *owner),
        ("upload", str(REPO / "samples/formats/sourdough-starter.md"), *owner),
    ):
        done = cli.run(*upload)
        assert done.returncode == 0, done.stdout + done.stderr
    embedding_url = (stack_process.control("GET", "/_local/status") or {})["embedding_server"]["url"]
    return {
        "cli": cli,
        "converses": lambda: int(requests.get(f"{embedding_url}/_local/stats", timeout=10).json()["converses"]),
        "reader": ("--user", "kim", "--tenant", tenant, "--groups", "keepers"),
        "outsider": ("--user", "bob", "--tenant", tenant),
        "other_tenant": ("--user", "eve", "--tenant", f"{tenant}-other", "--groups", "keepers"),
    }


def ask(world: dict[str, Any], user: tuple[str, ...], question: str, *options: str) -> dict[str, Any]:
    done = world["cli"].run("--json", "ask", question, *options, *user)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_a_reader_gets_an_answer_citing_the_restricted_page(world: dict[str, Any]) -> None:
    before = world["converses"]()
    answer = ask(world, world["reader"], QUESTION)

    assert answer["supported"] and answer["stand_in"] == "extractive-stand-in"
    assert "air" in answer["answer"] and "[1]" in answer["answer"], answer
    cited = answer["citations"][0]["passage"]
    assert (cited["filename"], cited["page_start"]) == ("lighthouses.pdf", 2)
    assert cited["boxes"], cited  # the page opens the cited spot
    assert answer["usage"]["input_tokens"] > answer["usage"]["output_tokens"] > 0
    assert world["converses"]() == before + 1


def test_the_same_question_outside_the_group_never_cites_the_restricted_document(world: dict[str, Any]) -> None:
    answer = ask(world, world["outsider"], QUESTION)
    assert all(c["passage"]["filename"] != "lighthouses.pdf" for c in answer["citations"]), answer
    assert "Argand" not in answer["answer"]


def test_no_passage_no_model_call(world: dict[str, Any]) -> None:
    before = world["converses"]()
    elsewhere = ask(world, world["other_tenant"], QUESTION)
    assert (elsewhere["supported"], elsewhere["unsupported_reason"]) == (False, "no_passages")
    unrelated = ask(world, world["reader"], "zygomorphic quasars", "--mode", "knn")
    assert (unrelated["supported"], unrelated["unsupported_reason"]) == (False, "below_threshold")
    assert elsewhere["citations"] == unrelated["citations"] == []
    assert world["converses"]() == before


def test_the_mcp_answer_tool_cites_what_the_reader_may_read(world: dict[str, Any]) -> None:
    cli = world["cli"]
    result = cli.session(world["reader"], tool("answer", {"query": QUESTION, "k": 3})).structured_content
    assert result["supported"] and result["citations"][0]["citation"]["filename"] == "lighthouses.pdf"
    outsider = cli.session(world["outsider"], tool("answer", {"query": QUESTION})).structured_content
    assert all(c["citation"]["filename"] != "lighthouses.pdf" for c in outsider["citations"])
