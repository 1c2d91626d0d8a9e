"""A LangChain retriever over rag-ingest (``pip install "./client[langchain]"``; docs/integrations.md).

    retriever = RagIngestRetriever(api_url=API_URL, token=get_id_token, k=5,
                                   filter={"equals": {"key": "customer", "value": "acme"}})
    documents = retriever.invoke("What is the notice period?")

Each :class:`~langchain_core.documents.Document` is one passage: ``page_content`` its text, ``id``
its chunk id, ``metadata`` the document's own metadata plus the passage's fields (``Passage.describe``).
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from rag_ingest_client.http import ApiError, RagIngestError, search_body
from rag_ingest_client.retrievers.passages import (
    Passage,
    SearchClient,
    TokenProvider,
)

__all__ = ["ApiError", "RagIngestError", "RagIngestRetriever", "to_document"]


class RagIngestRetriever(BaseRetriever):
    """The passages ``POST /search`` returns for a query, as LangChain documents, best first.

    A refusal of the API (a bad filter, an expired token, another tenant) raises
    :class:`~rag_ingest_client.http.ApiError` with the API's status, code and message; nothing is swallowed.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: The API's base URL (the stack's ``ApiUrl`` output; the local stack's is in .local/runtime/outputs.json).
    api_url: str
    #: The user's ID token, or a function that returns a valid one (called before each search).
    token: TokenProvider = Field(repr=False)
    #: How many passages (1..50, the API's bounds).
    k: int = 5
    #: hybrid (BM25 and k-NN fused by reciprocal rank), knn or bm25.
    mode: Literal["hybrid", "knn", "bm25"] = "hybrid"
    #: A RetrievalFilter-shaped filter on metadata and built-ins, as POST /search takes it (docs/api.md, Filters).
    filter: dict[str, Any] | None = None
    #: Rerank the fused candidates; None sends no field, so the stack's default applies.
    rerank: bool | None = None
    #: Small-to-big: return each passage's section or page (docs/api.md); None sends no field.
    expand: Literal["none", "section", "page"] | None = None
    #: Seconds before a search gives up.
    timeout: float = 30.0

    def _client(self) -> SearchClient:
        return SearchClient(self.api_url, self.token, self.timeout)

    def _body(self, query: str) -> dict[str, Any]:
        return search_body(query, k=self.k, mode=self.mode, filter=self.filter, rerank=self.rerank, expand=self.expand)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [to_document(passage) for passage in self._client().search(self._body(query))]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [to_document(passage) for passage in await self._client().asearch(self._body(query))]


def to_document(passage: Passage) -> Document:
    return Document(id=passage.chunk_id, page_content=passage.text, metadata=passage.describe())
