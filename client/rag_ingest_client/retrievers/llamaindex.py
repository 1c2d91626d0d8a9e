"""A LlamaIndex retriever over rag-ingest (``pip install "./client[llamaindex]"``; docs/integrations.md).

    retriever = RagIngestRetriever(api_url=API_URL, token=get_id_token, k=5, mode="hybrid")
    nodes = retriever.retrieve("What is the notice period?")

Each :class:`~llama_index.core.schema.NodeWithScore` is one passage: ``score`` the API's score, the
node a :class:`~llama_index.core.schema.TextNode` with the chunk id, the text, and the document's
metadata plus the passage's fields (``Passage.describe``, but the score); an LLM or an embedder is
shown the filename, the pages and the user's metadata, not rag-ingest's ids and lists.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from rag_ingest_client.http import ApiError, RagIngestError, search_body
from rag_ingest_client.retrievers.passages import (
    EXPANDS,
    MODES,
    Passage,
    SearchClient,
    TokenProvider,
)

__all__ = ["ApiError", "RagIngestError", "RagIngestRetriever", "to_node"]

#: Metadata an LLM prompt or an embedding does not need (ids, the retrieval's own bookkeeping, and
#: the provenance an application uses to show where a passage stands).
HIDDEN_KEYS = [
    "document_id", "chunk_id", "score", "heading_path", "retrieved_by",
    "document_format", "anchor", "paragraph_index", "boxes", "figure_sources", "copies",
    "expanded", "chunk_ids", "truncated",
]  # fmt: skip


class RagIngestRetriever(BaseRetriever):
    """The passages ``POST /search`` returns for a query, as LlamaIndex nodes with scores, best first.

    A refusal of the API (a bad filter, an expired token, another tenant) raises
    :class:`~rag_ingest_client.http.ApiError` with the API's status, code and message; nothing is swallowed.
    """

    def __init__(
        self,
        api_url: str,
        token: TokenProvider,
        *,
        k: int = 5,
        mode: str = "hybrid",
        filter: dict[str, Any] | None = None,
        rerank: bool | None = None,
        expand: str | None = None,
        timeout: float = 30.0,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if expand is not None and expand not in EXPANDS:
            raise ValueError(f"expand must be one of {', '.join(EXPANDS)}, not {expand!r}")
        self.k = k
        self.mode = mode
        self.filter = filter
        self.rerank = rerank
        self.expand = expand
        self._search = SearchClient(api_url, token, timeout)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _body(self, query_bundle: QueryBundle) -> dict[str, Any]:
        return search_body(
            query_bundle.query_str,
            k=self.k,
            mode=self.mode,
            filter=self.filter,
            rerank=self.rerank,
            expand=self.expand,
        )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(passage) for passage in self._search.search(self._body(query_bundle))]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(passage) for passage in await self._search.asearch(self._body(query_bundle))]


def to_node(passage: Passage) -> NodeWithScore:
    metadata = passage.describe()
    del metadata["score"]  # the NodeWithScore's own
    node = TextNode(
        id_=passage.chunk_id,
        text=passage.text,
        metadata=metadata,
        excluded_llm_metadata_keys=list(HIDDEN_KEYS),
        excluded_embed_metadata_keys=list(HIDDEN_KEYS),
        # The source document, so LlamaIndex's ref_doc_id (and its response synthesizers) name it.
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=passage.document_id)},
    )
    return NodeWithScore(node=node, score=passage.score)
