"""The local embedding service: Bedrock Runtime's ``InvokeModel`` for Titan Text Embeddings v2, on loopback.

Stands in for Amazon Bedrock in the local stack: one process with one MiniLM model in memory,
serving every Embed worker and the API's query embedding through the same ``BedrockTitanEmbedder``
code that calls Bedrock in AWS. Concurrent requests that arrive within a few milliseconds share one
ONNX run (:mod:`local.embedding_server.batcher`); above an in-flight quota it answers
``ThrottlingException`` as Bedrock does (:mod:`local.embedding_server.server`). A profile
(``bedrock``, ``bedrock-low-quota``) adds Bedrock's per-model quotas and latency, and a switch
answers deterministic vectors without a model (:mod:`local.embedding_server.settings`).

It is its own package (not part of ``local.runtime``) because it is a separate service: it runs in
its own process, started and stopped by the local stack (:mod:`local.embedding_server.process`),
so its ONNX threads and its GIL never compete with moto's interpreter in the ``serve`` process.
"""
