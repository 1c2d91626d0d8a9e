"""Retrievers for LangChain and LlamaIndex over rag-ingest's ``POST /search`` (docs/integrations.md).

- :mod:`rag_ingest_client.retrievers.passages`: the search call and the passages it returns;
- :mod:`rag_ingest_client.retrievers.langchain`: a LangChain ``BaseRetriever`` (``pip install "./client[langchain]"``);
- :mod:`rag_ingest_client.retrievers.llamaindex`: a LlamaIndex ``BaseRetriever`` (``"./client[llamaindex]"``).

May import: ``rag_ingest_client.http``, langchain-core, llama-index-core; nothing of rag_ingest.
"""
