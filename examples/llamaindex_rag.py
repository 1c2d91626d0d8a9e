"""A RAG application with LlamaIndex over rag-ingest: retriever -> prompt -> LLM (docs/integrations.md).

RAG_INGEST_API_URL and RAG_INGEST_TOKEN (a user's ID token) say where and as whom. With BEDROCK_MODEL_ID
set (llama-index-llms-bedrock-converse installed, AWS credentials) the prompt goes to that model;
without it (offline: there is no LLM here) the script prints the passages and the prompt it would send."""

import os
import sys

from llama_index.core import PromptTemplate
from llama_index.core.schema import MetadataMode
from rag_ingest_client.retrievers.llamaindex import RagIngestRetriever

retriever = RagIngestRetriever(
    os.environ["RAG_INGEST_API_URL"],
    token=os.environ["RAG_INGEST_TOKEN"],
    k=3,
    mode="hybrid",
    filter={"equals": {"key": "customer", "value": os.environ.get("CUSTOMER", "acme")}},
)
prompt = PromptTemplate("Answer from the context only; cite the file and page.\n\n{context}\n\nQuestion: {question}")

question = " ".join(sys.argv[1:]) or "Who made the lens that lighthouses use, and when?"
nodes = retriever.retrieve(question)
for n in nodes:
    meta = n.node.metadata
    print(f"{n.score:.4f} {meta['filename']} pp. {meta['page_start']}-{meta['page_end']}")
# Each passage as an LLM sees it: its filename, pages and user metadata, then its text.
context = "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes)
text = prompt.format(context=context, question=question)
if model := os.environ.get("BEDROCK_MODEL_ID"):  # in AWS: pip install llama-index-llms-bedrock-converse
    from llama_index.llms.bedrock_converse import BedrockConverse

    print(BedrockConverse(model=model).complete(text))
else:  # offline: no LLM, so show what it would be asked
    print(text)
