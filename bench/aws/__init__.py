"""`make bench-aws`: rag-ingest, LangChain and LlamaIndex against the Bedrock emulation's quotas and
latency (measurement only); docs/benchmarks.md has the method and the figures."""
