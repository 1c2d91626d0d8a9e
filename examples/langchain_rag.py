"""A RAG application with LangChain over rag-ingest: retriever -> prompt -> LLM (docs/integrations.md).

RAG_INGEST_API_URL and RAG_INGEST_TOKEN (a user's ID token) say where and as whom. With BEDROCK_MODEL_ID
set (langchain-aws installed, AWS credentials) the prompt goes to that model; without it (offline:
there is no LLM here) the script prints the passages and the prompt it would send."""

import os
import sys

from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from rag_ingest_client.retrievers.langchain import RagIngestRetriever

retriever = RagIngestRetriever(
    api_url=os.environ["RAG_INGEST_API_URL"],
    token=os.environ["RAG_INGEST_TOKEN"],
    k=3,
    mode="hybrid",
    filter={"equals": {"key": "customer", "value": os.environ.get("CUSTOMER", "acme")}},
)
prompt = ChatPromptTemplate.from_messages(
    [("system", "Answer from the context only; cite [file p.N].\n\n{context}"), ("human", "{question}")]
)


def context(documents: list[Document]) -> str:
    return "\n\n".join(f"[{d.metadata['filename']} p.{d.metadata['page_start']}] {d.page_content}" for d in documents)


question = " ".join(sys.argv[1:]) or "Who made the lens that lighthouses use, and when?"
documents = retriever.invoke(question)
for d in documents:
    print(f"{d.metadata['score']:.4f} {d.metadata['filename']} pp. {d.metadata['page_start']}-{d.metadata['page_end']}")
messages = prompt.invoke({"context": context(documents), "question": question})
if model := os.environ.get("BEDROCK_MODEL_ID"):  # in AWS: pip install langchain-aws
    from langchain_aws import ChatBedrockConverse

    print(ChatBedrockConverse(model=model).invoke(messages).content)
else:  # offline: no LLM, so show what it would be asked
    print(messages.to_string())
