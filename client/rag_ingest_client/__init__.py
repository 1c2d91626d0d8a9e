"""rag-ingest's client: the ``rag-ingest`` command and the LangChain and LlamaIndex retrievers.

They reach the service over its HTTP API only (httpx, PyJWT), so ``pip install ./client`` is all
they need; only the MCP tools (``mcp_server``, ``http``) also run in Lambda, from the MCP function's
own layer (docs/mcp.md). The operator's tools (redrive, replay, reap, reconcile, preflight, the
deployed smoke test) need the domain package, boto3 and the checkout: they live in
:mod:`rag_ingest_client.operator`, imported only when one of them runs (docs/cli.md, "Packaging").

May import: ``rag_ingest`` and ``infra`` only inside ``operator``; boto3 inside ``operator`` and ``aws``.
"""
