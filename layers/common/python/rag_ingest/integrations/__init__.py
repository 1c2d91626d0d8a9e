"""Retrievers for LangChain and LlamaIndex over rag-ingest's HTTP API (``POST /search``), for the
applications people already write with those libraries (docs/integrations.md).

- :mod:`rag_ingest.integrations.client`: the search call, standard library only (``urllib``), and
  the typed error an API refusal raises.
- :mod:`rag_ingest.integrations.langchain`: ``RagIngestRetriever``, a LangChain ``BaseRetriever``
  (``pip install ".[langchain]"``).
- :mod:`rag_ingest.integrations.llamaindex`: ``RagIngestRetriever``, a LlamaIndex ``BaseRetriever``
  (``pip install ".[llamaindex]"``).

They run on the application's machine, never in Lambda: like the CLI, this package is left out of
the Lambda layer (``tools/build_layer.py``, ``NOT_IN_LAYER``). They talk to the API over HTTP only,
so they import none of the service's code, and no AWS client.

May import: nothing of rag_ingest (the standard library, and langchain-core or llama-index-core).
"""
