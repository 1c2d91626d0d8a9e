"""CDK infrastructure of rag-ingest: one stack composed of constructs (see infra/stack.py)."""
