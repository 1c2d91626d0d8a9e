"""The LangChain and LlamaIndex retrievers against a canned ``POST /search`` on a loopback server:
the body they send (``filter`` and ``rerank`` only when given), the bearer token (a string or a
function), how each passage maps to a Document / NodeWithScore, and that a refusal raises the typed
error with the API's code and message instead of returning nothing. The canned answer is built
with the API's own response model, so a change of its shape shows here.
(tests/e2e/test_retrievers_on_stack.py runs both against the local stack.)"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pydantic
import pytest
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, NodeWithScore
from rag_ingest.core.parsed import DocumentFormat, PassageBox
from rag_ingest.retrieval.search import PassageCopyView, PassageView, SearchMode, SearchResponse
from rag_ingest_client.http import ApiError, RagIngestError, api_error
from rag_ingest_client.retrievers import langchain as lc
from rag_ingest_client.retrievers import llamaindex as li
from rag_ingest_client.retrievers.passages import MODES, SearchClient

pytestmark = pytest.mark.unit

FILTER = {"equals": {"key": "customer", "value": "acme"}}


def canned_answer() -> dict[str, Any]:
    def passage(number: int, score: float, pages: tuple[int, int], metadata: dict[str, Any]) -> PassageView:
        return PassageView(
            chunk_id=f"doc{number}#0000{number}",
            document_id=f"doc{number}",
            filename=f"contract-{number}.pdf",
            page_start=pages[0],
            page_end=pages[1],
            heading_path=["Terms", "Notice"],
            score=score,
            text=f"Passage {number}: either party may end the contract with 30 days' notice.",
            highlights=["<em>notice</em>"],
            retrieved_by=["bm25", "knn"],
            metadata=metadata,
            boxes=[PassageBox(page=pages[0], x0=0.1, y0=0.2, x1=0.9, y1=0.23)],
        )

    response = SearchResponse(
        query="notice period",
        mode=SearchMode.HYBRID,
        k=2,
        passages=[
            passage(1, 0.0325, (3, 4), {"customer": "acme", "year": 2024, "tags": ["legal"]}),
            passage(2, 0.0161, (7, 7), {}),
        ],
    )
    return response.model_dump(mode="json")


REAL_METADATA = {
    "customer": "Zürich AG",
    "signed": "2024-03-01",
    "delta": -3,
    "ratio": -0.25,
    "tags": ["nda", "2024"],
    "draft": False,
    "zip": "02134",
}
REAL_COPY = PassageCopyView(
    chunk_id="docB:ab12:3", document_id="docB", filename="copy of lease.pdf", page_start=2, page_end=2
)
# Passages of the other formats: (format, file, page or slide, heading path, anchor, paragraph).
OTHER_FORMATS = [
    ("docx", "harbour-manual.docx", 1, ["Harbour dues", "Vessels"], "vessels", 2),
    ("pptx", "orchard-survey.pptx", 4, ["Orchard yields"], None, None),
    ("html", "lighthouse-keeping.html", 1, ["Keeping", "Lamps"], "lamps", 1),
    ("markdown", "sourdough-starter.md", 1, ["Starter"], "starter", None),
]


def real_answer() -> dict[str, Any]:
    """A POST /search answer as the API's own model writes it, with what real documents give: a PDF
    passage with boxes on two pages and a folded copy (the same file uploaded twice), a Word section,
    a slide, an HTML paragraph and a Markdown heading, and metadata of every type."""
    pdf = PassageView(
        chunk_id="docA:cd34:3",
        document_id="docA",
        filename="lease.pdf",
        page_start=2,
        page_end=3,
        heading_path=["Terms"],
        score=0.51,
        text="Either party may end the lease.",
        highlights=["<em>lease</em>"],
        retrieved_by=["bm25", "knn"],
        copies=[REAL_COPY],
        metadata=REAL_METADATA,
        boxes=[
            PassageBox(page=2, x0=0.1, y0=0.8, x1=0.9, y1=0.82),
            PassageBox(page=3, x0=0.1, y0=0.05, x1=0.5, y1=0.07),
        ],
    )
    others = [
        PassageView(
            chunk_id=f"doc{kind}:ef56:0",
            document_id=f"doc{kind}",
            filename=name,
            page_start=page,
            page_end=page,
            heading_path=path,
            document_format=DocumentFormat(kind),
            anchor=anchor,
            paragraph_index=paragraph,
            score=0.4 - rank / 10,
            text=f"Passage of {name}.",
            highlights=[],
            retrieved_by=["knn"],
        )
        for rank, (kind, name, page, path, anchor, paragraph) in enumerate(OTHER_FORMATS)
    ]
    response = SearchResponse(query="lease", mode=SearchMode.HYBRID, k=5, passages=[pdf, *others])
    return response.model_dump(mode="json")


def test_every_field_of_a_real_answer_reaches_both_libraries(api: Api) -> None:
    """What the API returns is all there, for every format: its text as the content, every other field
    but the highlights (HTML for a page's display) in the metadata, beside the document's own."""
    answer = real_answer()
    api.answers = [(200, answer)]
    own = ("text", "highlights", "metadata")
    expected = [
        {**passage["metadata"], **{key: value for key, value in passage.items() if key not in own}}
        for passage in answer["passages"]
    ]
    documents = lc.RagIngestRetriever(api_url=api.url, token="t", k=5).invoke("lease")
    assert [document.page_content for document in documents] == [passage["text"] for passage in answer["passages"]]
    assert [document.metadata for document in documents] == expected
    assert documents[0].metadata["copies"] == [copy.model_dump() for copy in [REAL_COPY]]
    nodes = li.RagIngestRetriever(api.url, "t", k=5).retrieve("lease")
    assert [node.score for node in nodes] == [passage["score"] for passage in answer["passages"]]
    assert [node.node.metadata for node in nodes] == [
        {key: value for key, value in fields.items() if key != "score"} for fields in expected
    ]
    shown = nodes[1].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "filename: harbour-manual.docx" in shown and "customer" not in shown and "anchor" not in shown


@dataclass
class Api:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    # What the next answers are: (status, body), consumed in order; the last one repeats.
    answers: list[tuple[int, Any]] = field(default_factory=list)


@pytest.fixture
def api() -> Iterator[Api]:
    state = Api(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "authorization": self.headers["Authorization"], "body": body})
            status, answer = state.answers.pop(0) if len(state.answers) > 1 else state.answers[0]
            raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/"
    state.answers = [(200, canned_answer())]
    yield state
    server.shutdown()
    server.server_close()


def test_langchain_documents_carry_text_score_pages_and_metadata(api: Api) -> None:
    retriever = lc.RagIngestRetriever(api_url=api.url, token="id-token", k=2, mode="bm25", filter=FILTER)
    documents = retriever.invoke("notice period")
    assert [request["body"] for request in api.requests] == [
        {"query": "notice period", "k": 2, "mode": "bm25", "filter": FILTER}  # no rerank field: None sends none
    ]
    assert api.requests[0]["path"] == "/search" and api.requests[0]["authorization"] == "Bearer id-token"
    assert all(isinstance(document, Document) for document in documents)
    first, second = documents
    assert first.id == "doc1#00001"
    assert first.page_content.startswith("Passage 1: either party")
    assert first.metadata == {
        "customer": "acme",
        "year": 2024,
        "tags": ["legal"],
        "document_id": "doc1",
        "filename": "contract-1.pdf",
        "page_start": 3,
        "page_end": 4,
        "chunk_id": "doc1#00001",
        "score": 0.0325,
        "heading_path": ["Terms", "Notice"],
        "retrieved_by": ["bm25", "knn"],
        "document_format": "pdf",
        "anchor": None,
        "paragraph_index": None,
        "boxes": [{"page": 3, "x0": 0.1, "y0": 0.2, "x1": 0.9, "y1": 0.23}],
        "figure_sources": None,
        "cell_range": None,
        "copies": [],
        "source_uri": None,
        "expanded": "none",
        "chunk_ids": ["doc1#00001"],
        "truncated": False,
    }
    assert second.metadata["filename"] == "contract-2.pdf" and (second.metadata["page_start"], 7) == (7, 7)
    assert first.metadata["score"] > second.metadata["score"]


def test_langchain_async_and_rerank_sent_only_when_given(api: Api) -> None:
    tokens = iter(["first", "second"])
    retriever = lc.RagIngestRetriever(api_url=api.url, token=lambda: next(tokens), rerank=False)
    documents = asyncio.run(retriever.ainvoke("notice period"))
    assert [document.metadata["document_id"] for document in documents] == ["doc1", "doc2"]
    assert api.requests[0]["body"] == {"query": "notice period", "k": 5, "mode": "hybrid", "rerank": False}
    retriever.rerank = True
    retriever.invoke("notice period")
    assert api.requests[1]["body"]["rerank"] is True
    # A function gives the token, asked again for each search.
    assert [request["authorization"] for request in api.requests] == ["Bearer first", "Bearer second"]


def test_llamaindex_nodes_carry_text_score_pages_and_metadata(api: Api) -> None:
    retriever = li.RagIngestRetriever(api.url, "id-token", k=2, mode="knn", filter=FILTER, rerank=True)
    nodes = retriever.retrieve("notice period")
    sent = api.requests[0]["body"]
    assert sent == {"query": "notice period", "k": 2, "mode": "knn", "filter": FILTER, "rerank": True}
    assert all(isinstance(node, NodeWithScore) for node in nodes)
    first, second = nodes
    assert (first.score, second.score) == (0.0325, 0.0161)
    assert first.node.node_id == "doc1#00001" and first.node.ref_doc_id == "doc1"
    assert first.node.get_content().startswith("Passage 1: either party")
    assert first.node.metadata == {
        "customer": "acme",
        "year": 2024,
        "tags": ["legal"],
        "document_id": "doc1",
        "filename": "contract-1.pdf",
        "page_start": 3,
        "page_end": 4,
        "chunk_id": "doc1#00001",
        "heading_path": ["Terms", "Notice"],
        "retrieved_by": ["bm25", "knn"],
        "document_format": "pdf",
        "anchor": None,
        "paragraph_index": None,
        "boxes": [{"page": 3, "x0": 0.1, "y0": 0.2, "x1": 0.9, "y1": 0.23}],
        "figure_sources": None,
        "cell_range": None,
        "copies": [],
        "source_uri": None,
        "expanded": "none",
        "chunk_ids": ["doc1#00001"],
        "truncated": False,
    }
    # What an LLM is shown: the filename, the pages and the user's metadata, not rag-ingest's ids.
    shown = first.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "filename: contract-1.pdf" in shown and "page_start: 3" in shown and "customer: acme" in shown
    assert "doc1#00001" not in shown and "retrieved_by" not in shown and "boxes" not in shown
    assert "copies" not in shown


def test_both_retrievers_send_expand_only_when_given_and_keep_what_was_merged(api: Api) -> None:
    lc.RagIngestRetriever(api_url=api.url, token="t").invoke("notice period")
    assert "expand" not in api.requests[0]["body"]
    answer = canned_answer()
    answer["passages"][0].update(expanded="section", chunk_ids=["doc1#00001", "doc1#00003"], truncated=True)
    api.answers = [(200, answer), (200, answer)]
    [first, _] = lc.RagIngestRetriever(api_url=api.url, token="t", expand="section").invoke("notice period")
    assert api.requests[1]["body"]["expand"] == "section"
    assert (first.metadata["expanded"], first.metadata["chunk_ids"], first.metadata["truncated"]) == (
        "section",
        ["doc1#00001", "doc1#00003"],
        True,
    )
    [node, _] = li.RagIngestRetriever(api.url, "t", expand="page").retrieve("notice period")
    assert api.requests[2]["body"]["expand"] == "page" and node.node.metadata["chunk_ids"][1] == "doc1#00003"
    assert "doc1#00003" not in node.node.get_content(metadata_mode=MetadataMode.LLM)
    with pytest.raises(ValueError, match="expand must be one of"):
        li.RagIngestRetriever(api.url, "t", expand="chapter")


def test_llamaindex_async(api: Api) -> None:
    retriever = li.RagIngestRetriever(api.url, lambda: "fresh")
    nodes = asyncio.run(retriever.aretrieve("notice period"))
    assert [node.node.metadata["filename"] for node in nodes] == ["contract-1.pdf", "contract-2.pdf"]
    assert api.requests[0]["authorization"] == "Bearer fresh"


BAD_FILTER = {"error": {"code": "INVALID_REQUEST", "message": "filter.orAll: at least 2 filters"}}


def test_a_refusal_raises_the_api_code_and_message_from_both(api: Api) -> None:
    api.answers = [(400, BAD_FILTER)]
    with pytest.raises(ApiError) as raised:
        lc.RagIngestRetriever(api_url=api.url, token="t").invoke("x")
    assert (raised.value.status, raised.value.code) == (400, "INVALID_REQUEST")
    assert raised.value.message == "filter.orAll: at least 2 filters"
    assert str(raised.value) == "400 INVALID_REQUEST: filter.orAll: at least 2 filters"
    with pytest.raises(ApiError, match=r"^400 INVALID_REQUEST: filter\.orAll: "):
        li.RagIngestRetriever(api.url, "t").retrieve("x")
    with pytest.raises(ApiError, match="INVALID_REQUEST"):
        asyncio.run(li.RagIngestRetriever(api.url, "t").aretrieve("x"))


def test_a_401_asks_a_token_function_once_more_but_not_a_fixed_token(api: Api) -> None:
    unauthorized = (401, {"message": "Unauthorized"})  # API Gateway's authorizer answers in its own shape
    api.answers = [unauthorized, (200, canned_answer())]
    tokens = iter(["expired", "renewed"])
    assert len(SearchClient(api.url, lambda: next(tokens)).search({"query": "x"})) == 2
    assert [request["authorization"] for request in api.requests] == ["Bearer expired", "Bearer renewed"]
    api.answers = [unauthorized]
    with pytest.raises(ApiError) as raised:
        SearchClient(api.url, "expired").search({"query": "x"})
    assert (raised.value.status, raised.value.code, raised.value.message) == (401, "", "Unauthorized")


def test_an_answer_that_is_not_a_search_is_an_error_not_an_empty_list(api: Api) -> None:
    api.answers = [(200, {"items": []})]
    with pytest.raises(RagIngestError, match="without passages"):
        lc.RagIngestRetriever(api_url=api.url, token="t").invoke("x")
    api.answers = [(200, {"passages": [{"text": "no ids"}]})]
    with pytest.raises(RagIngestError, match="without 'chunk_id'"):
        li.RagIngestRetriever(api.url, "t").retrieve("x")
    api.answers = [(200, b"<html>proxy error</html>")]
    with pytest.raises(RagIngestError, match="not JSON"):
        SearchClient(api.url, "t").search({"query": "x"})


def test_an_unreachable_api_is_an_error_naming_it() -> None:
    with pytest.raises(RagIngestError, match=r"cannot reach http://127\.0\.0\.1:9/search"):
        SearchClient("http://127.0.0.1:9", "t", timeout=5).search({"query": "x"})


def test_a_mode_the_api_does_not_name_is_refused_before_any_call() -> None:
    with pytest.raises(pydantic.ValidationError):
        lc.RagIngestRetriever(api_url="http://127.0.0.1:9", token="t", mode="semantic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be one of hybrid, knn, bm25"):
        li.RagIngestRetriever("http://127.0.0.1:9", "t", mode="semantic")
    assert set(MODES) == {mode.value for mode in SearchMode}  # the API's names, no more, no fewer


@pytest.mark.parametrize(
    ("status", "raw", "code", "message"),
    [
        (400, b'{"error": {"code": "INVALID_REQUEST", "message": "k: too big"}}', "INVALID_REQUEST", "k: too big"),
        (429, b'{"message": "Too Many Requests"}', "", "Too Many Requests"),
        (502, b"", "", "Bad Gateway"),
    ],
)
def test_error_bodies(status: int, raw: bytes, code: str, message: str) -> None:
    error = api_error(status, raw, "http://api/search")
    assert (error.status, error.code, error.message) == (status, code, message)


def test_the_doc_shows_the_example_applications_as_they_are() -> None:
    """docs/integrations.md pastes examples/*.py whole; tests/e2e/test_retrievers_on_stack.py runs them."""
    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "integrations.md").read_text()
    for example in ("langchain_rag.py", "llamaindex_rag.py"):
        source = (repo / "examples" / example).read_text()
        assert f"`examples/{example}`:\n\n```python\n{source}```" in doc, example
        # About 20 lines of application, the docstring and blank lines aside.
        code = [line for line in source.split('"""', 2)[2].splitlines() if line.strip()]
        assert len(code) <= 30, (example, len(code))
