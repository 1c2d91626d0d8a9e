"""`make bench-peers`: rag-ingest against LangChain and LlamaIndex on the same PDFs (measurement only).

The peers run in their own virtual environment (``.venv-peers``, from bench/requirements-peers.txt),
never in the product's: ``bench.peers.peer_ingest`` is the only module that runs there, and it
imports nothing from this package but itself. docs/benchmarks.md has the method and the figures.
"""
