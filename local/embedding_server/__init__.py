"""The local embedding service: Bedrock Runtime's ``InvokeModel`` (Titan Text Embeddings v2) on loopback.

Stands in for Amazon Bedrock in the local stack: one process with one MiniLM model in memory serves
every Embed worker and the API's query embedding through the same ``BedrockTitanEmbedder`` code as
in AWS. Requests arriving together share one ONNX run (:mod:`.batcher`); the HTTP side is
:mod:`.server`; a profile adds Bedrock's quotas and latency (:mod:`.settings`). A package of its
own, run in its own process (:mod:`.process`), so its ONNX threads and GIL stay out of moto's way.
Rationale and settings: docs/local-stack.md, "The embedding server (Bedrock's stand-in)".
"""
