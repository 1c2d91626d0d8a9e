"""POST /answer against the local stack, through the CLI (``rag-ingest ask``) and the MCP ``answer``
tool: a reader of a group-restricted PDF gets an answer citing its page; a user of the same tenant
outside the group never gets it cited; another tenant, or a question nothing supports, gets no
answer and no model call (the local model server counts its Converse calls). The same answers
stream over the live channel (the WebSocket route ``answer``), to the page's socket and to the CLI."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import requests

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess
from tests.e2e.test_mcp_on_stack import REPO, Cli, tool
from tests.support.live import LiveSocket, live_socket

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

    def model_calls(kind: str) -> int:
        return int(requests.get(f"{embedding_url}/_local/stats", timeout=10).json()[kind])

    api_url = json.loads((stack_process.state_dir / "outputs.json").read_text())["ApiUrl"].rstrip("/")
    return {
        "cli": cli,
        "converses": lambda: model_calls("converses"),
        "converse_streams": lambda: model_calls("converse_streams"),
        "socket_of": lambda user, tenant_id, *groups: OfflineClient(
            api_url, tenant_id=tenant_id, username=user, groups=groups
        ).live_url(),
        "tenant": tenant,
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


def answer_events(socket: LiveSocket, request: dict[str, Any], request_id: str = "r-1") -> list[dict[str, Any]]:
    """The events of one answer over ``socket``, up to its last (completed or failed)."""
    socket.client.send(json.dumps({"action": "answer", "request_id": request_id, "request": request}))
    events: list[dict[str, Any]] = []
    while not events or events[-1]["type"] not in ("answer.completed", "answer.failed"):
        event = socket.next(timeout=30)
        if event.get("request_id") == request_id:
            events.append(event)
    return events


def test_the_answer_streams_over_the_live_channel_as_post_answer_answers(world: dict[str, Any]) -> None:
    before = world["converse_streams"]()
    with live_socket(world["socket_of"]("kim", world["tenant"], "keepers")) as socket:
        events = answer_events(socket, {"query": QUESTION, "k": 5})

    types = [event["type"] for event in events]
    assert types[0] == "answer.passages" and types[-1] == "answer.completed", types
    assert set(types[1:-1]) == {"answer.delta"} and len(types) >= 4, types
    streamed = events[-1]["answer"]
    assert "".join(event["text"] for event in events[1:-1]) == streamed["answer"]
    # The same answer POST /answer gives, cited the same way.
    posted = ask(world, world["reader"], QUESTION)
    assert (streamed["answer"], streamed["citations"]) == (posted["answer"], posted["citations"])
    assert streamed["citations"][0]["passage"]["filename"] == "lighthouses.pdf"
    assert world["converse_streams"]() == before + 1


def test_a_streamed_answer_keeps_access_and_refuses_a_bad_request(world: dict[str, Any]) -> None:
    with live_socket(world["socket_of"]("bob", world["tenant"])) as outsider:
        events = answer_events(outsider, {"query": QUESTION})
        assert all(
            citation["passage"]["filename"] != "lighthouses.pdf" for citation in events[-1]["answer"]["citations"]
        )
        assert all(p["passage"]["filename"] != "lighthouses.pdf" for p in events[0].get("passages", []))
        [failed] = answer_events(outsider, {"query": QUESTION, "k": 500}, request_id="r-2")
    assert failed["type"] == "answer.failed" and failed["error"]["code"] == "INVALID_REQUEST", failed
    with live_socket(world["socket_of"]("eve", f"{world['tenant']}-other", "keepers")) as stranger:
        [only] = answer_events(stranger, {"query": QUESTION})
    assert only["answer"]["unsupported_reason"] == "no_passages"


def test_the_cli_streams_the_answer_then_its_sources(world: dict[str, Any]) -> None:
    before = world["converse_streams"](), world["converses"]()
    done = world["cli"].run("ask", QUESTION, *world["reader"])
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "[1]" in lines[0] and any(line.startswith("[1] lighthouses.pdf p.2") for line in lines), done.stdout
    assert (world["converse_streams"](), world["converses"]()) == (before[0] + 1, before[1])
