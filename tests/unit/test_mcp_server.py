"""The MCP server's tools through the SDK's own client, in process, over a recorded API: the tools
and their schemas (which must take what the API takes), citations, and errors as tool errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from rag_ingest.core.filters import CONDITION_OPS, GROUP_OPS
from rag_ingest_client.http import RagIngestError
from rag_ingest_client.mcp_server import FILTER_HELP, MAX_ANSWER_K, MAX_K, build_server

pytestmark = pytest.mark.unit
OPENAPI = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())

PASSAGE = {
    "chunk_id": "01JDOC:abc:4",
    "document_id": "01JDOC",
    "filename": "harbour.pdf",
    "source_uri": "s3://team-docs/harbour.pdf",
    "page_start": 3,
    "page_end": 3,
    "heading_path": ["Tides", "Spring tides"],
    "anchor": None,
    "boxes": [{"page": 3, "x0": 0.1, "y0": 0.2, "x1": 0.9, "y1": 0.3}],
    "text": "Spring tides follow the new and the full moon.",
    "score": 0.91,
}


class RecordedApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def search(
        self,
        query: str,
        *,
        k: int,
        mode: str,
        where: dict[str, Any] | None = None,
        rerank: bool | None = None,
        expand: str | None = None,
    ) -> dict[str, Any]:
        call = {"query": query, "k": k, "mode": mode, "filter": where, "rerank": rerank, "expand": expand}
        self.calls.append(("search", call))
        second = {**PASSAGE, "chunk_id": "01JDOC:abc:2", "text": "Neap tides come between."}
        return {"passages": [PASSAGE, second]}

    def answer(
        self,
        query: str,
        *,
        k: int,
        mode: str,
        where: dict[str, Any] | None = None,
        rerank: bool | None = None,
        expand: str | None = None,
    ) -> dict[str, Any]:
        call = {"query": query, "k": k, "mode": mode, "filter": where, "rerank": rerank, "expand": expand}
        self.calls.append(("answer", call))
        return {
            "answer": "They follow the new and the full moon [1].",
            "supported": True,
            "citations": [{"number": 1, "passage": PASSAGE}],
            "stand_in": None,
        }

    def documents(self, *, limit: int, cursor: str | None, where: dict[str, Any] | None = None) -> dict[str, Any]:
        self.calls.append(("documents", {"limit": limit, "cursor": cursor, "filter": where}))
        item = {"document_id": "01JDOC", "filename": "harbour.pdf", "status": "READY", "uploaded_by": "ana"}
        return {"items": [item], "next_cursor": "c2"}

    def document(self, document_id: str) -> dict[str, Any]:
        if document_id == "01JNOTYOURS":
            raise RagIngestError("404 Not Found: no document 01JNOTYOURS")
        fmt = "pdf" if document_id == "01JDOC" else "markdown"
        return {"document_id": document_id, "filename": "harbour.pdf", "document_format": fmt, "page_count": 9}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        self.calls.append(("call", f"{method} {path}"))
        pages = [
            {"page_number": n, "blocks": [{"text": f"page {n} heading"}, {"text": f"page {n} body"}]} for n in (1, 2, 3)
        ]
        return {"pages": pages}


def run(api: RecordedApi, work: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(api)) as client:
            return await work(client)

    return anyio.run(main)


def test_the_tools_are_read_only_and_their_schemas_take_what_the_api_takes() -> None:
    tools = {tool.name: tool for tool in run(RecordedApi(), lambda client: client.list_tools()).tools}
    assert set(tools) == {"search", "answer", "list_documents", "fetch"}
    assert all(tool.annotations.read_only_hint and not tool.annotations.destructive_hint for tool in tools.values())
    assert all(tool.description for tool in tools.values())
    schema = tools["search"].input_schema["properties"]
    api = OPENAPI["components"]["schemas"]["SearchRequest"]["properties"]
    assert (schema["query"]["minLength"], schema["query"]["maxLength"]) == (
        api["query"]["minLength"],
        api["query"]["maxLength"],
    )
    assert (schema["k"]["minimum"], schema["k"]["maximum"], schema["k"]["default"]) == (
        1,
        api["k"]["maximum"],
        api["k"]["default"],
    )
    assert api["k"]["maximum"] == MAX_K
    assert set(schema["mode"]["enum"]) == set(OPENAPI["components"]["schemas"]["SearchMode"]["enum"])
    expands = {value for option in schema["expand"]["anyOf"] for value in option.get("enum", ())}
    assert expands == set(OPENAPI["components"]["schemas"]["Expand"]["enum"])
    assert "RetrievalFilter" in schema["filter"]["description"]
    assert tools["search"].input_schema["required"] == ["query"]
    operators = re.search(r"Operators: ([^.]+)\.", FILTER_HELP)
    assert operators is not None and operators.group(1).split(", ") == [*CONDITION_OPS, *GROUP_OPS]
    answer = tools["answer"].input_schema["properties"]
    answer_api = OPENAPI["components"]["schemas"]["AnswerRequest"]["properties"]
    assert (answer["k"]["maximum"], answer["k"]["default"]) == (answer_api["k"]["maximum"], answer_api["k"]["default"])
    assert answer_api["k"]["maximum"] == MAX_ANSWER_K and set(answer) == set(answer_api)
    limit = tools["list_documents"].input_schema["properties"]["limit"]
    [api_limit] = [p["schema"] for p in OPENAPI["paths"]["/documents"]["get"]["parameters"] if p["name"] == "limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (
        api_limit["minimum"],
        api_limit["maximum"],
        api_limit["default"],
    )


def test_search_passes_the_filter_and_cites_each_passage() -> None:
    api = RecordedApi()
    where = {"equals": {"key": "team", "value": "harbour"}}
    result = run(api, lambda client: client.call_tool("search", {"query": "spring tides", "k": 2, "filter": where}))
    assert not result.is_error
    first = result.structured_content["passages"][0]
    assert first["citation"] == {
        "document_id": "01JDOC",
        "filename": "harbour.pdf",
        "source_uri": "s3://team-docs/harbour.pdf",
        "page_start": 3,
        "page_end": 3,
        "section": "Tides > Spring tides",
        "anchor": None,
        "boxes": [{"page": 3, "x0": 0.1, "y0": 0.2, "x1": 0.9, "y1": 0.3}],
    }
    assert api.calls == [
        ("search", {"query": "spring tides", "k": 2, "mode": "hybrid", "filter": where, "rerank": None, "expand": None})
    ]
    run(api, lambda client: client.call_tool("search", {"query": "spring tides", "expand": "section"}))
    assert api.calls[-1][1]["expand"] == "section"


def test_answer_returns_the_answer_and_each_cited_passage_with_its_citation() -> None:
    api = RecordedApi()
    where = {"equals": {"key": "team", "value": "harbour"}}
    result = run(api, lambda client: client.call_tool("answer", {"query": "When are spring tides?", "filter": where}))
    assert not result.is_error
    content = result.structured_content
    assert content["answer"] == "They follow the new and the full moon [1]." and content["supported"]
    [cited] = content["citations"]
    assert cited["number"] == 1 and cited["text"] == PASSAGE["text"]
    assert cited["citation"]["filename"] == "harbour.pdf" and cited["citation"]["page_start"] == 3
    assert api.calls == [
        (
            "answer",
            {
                "query": "When are spring tides?",
                "k": 5,
                "mode": "hybrid",
                "filter": where,
                "rerank": None,
                "expand": None,
            },
        )
    ]


def test_an_out_of_range_k_is_refused_before_the_api_is_called() -> None:
    api = RecordedApi()
    result = run(api, lambda client: client.call_tool("search", {"query": "tides", "k": MAX_K + 1}))
    assert result.is_error and api.calls == []


def test_list_documents_pages_with_a_filter() -> None:
    api = RecordedApi()
    result = run(api, lambda client: client.call_tool("list_documents", {"limit": 1, "cursor": "c1"}))
    assert result.structured_content["next_cursor"] == "c2"
    assert result.structured_content["documents"][0]["document_id"] == "01JDOC"
    assert "uploaded_by" not in result.structured_content["documents"][0]
    assert api.calls == [("documents", {"limit": 1, "cursor": "c1", "filter": None})]


def test_fetch_reads_a_pdf_page_with_its_neighbours_in_passage_order() -> None:
    api = RecordedApi()
    result = run(api, lambda client: client.call_tool("fetch", {"document_id": "01JDOC", "page": 3}))
    ((name, request),) = api.calls
    assert name == "search" and request["k"] == MAX_K
    assert request["expand"] == "none"  # the chunks themselves, whatever the API's default
    assert request["filter"]["andAll"] == [
        {"equals": {"key": "document_id", "value": "01JDOC"}},
        {"greaterThanOrEquals": {"key": "page", "value": 2}},
        {"lessThanOrEquals": {"key": "page", "value": 4}},
    ]
    assert result.structured_content["pages"] == [
        {"page": 3, "text": "Neap tides come between.\n\nSpring tides follow the new and the full moon."}
    ]


def test_fetch_reads_other_formats_from_their_extracted_content() -> None:
    api = RecordedApi()
    result = run(api, lambda client: client.call_tool("fetch", {"document_id": "01JMD", "page": 1, "neighbours": 1}))
    assert api.calls == [("call", "GET /documents/01JMD/content")]
    assert result.structured_content["pages"] == [
        {"page": 1, "text": "page 1 heading\n\npage 1 body"},
        {"page": 2, "text": "page 2 heading\n\npage 2 body"},
    ]


def test_a_refusal_of_the_api_is_a_tool_error_with_its_reason() -> None:
    result = run(RecordedApi(), lambda client: client.call_tool("fetch", {"document_id": "01JNOTYOURS"}))
    assert result.is_error
    assert "404 Not Found" in result.content[0].text
