"""A LangChain RAG chain, traced with no change to the chain: retriever, prompt, model, parser.

Any OpenAI-compatible server serving chat completions and embeddings will do:

    OPENAI_BASE_URL=http://localhost:8080/v1 OPENAI_API_KEY=unused \
        python examples/langchain_rag.py "How much does the hub cost?"
    llmtrace report

Building the index is a trace of its own (``embeddings MODEL``). Each question is one trace: the
chain's run (``RunnableSequence``) over ``retrieval InMemoryVectorStore`` (and the query's
embedding) and ``chat MODEL``, the model call split at its first token into ``ttft`` and
``generation``. tests/examples runs it against the suite's model server.
"""

import os
import sys

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

import llmtrace

llmtrace.init(service_name="langchain-rag")  # instruments LangChain and the openai client

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
EMBEDDING_MODEL = os.environ.get("OPENAI_EMBEDDING_MODEL", "text-embedding-3-small")
HANDBOOK = [
    "The hub costs 129 euros.",
    "The backup battery lasts 12 hours.",
    "The hub speaks Zigbee, Z-Wave and Thread.",
]

# A server other than OpenAI's has no tiktoken vocabulary to check lengths against.
embeddings = OpenAIEmbeddings(model=EMBEDDING_MODEL, check_embedding_ctx_length=False)
retriever = InMemoryVectorStore.from_texts(HANDBOOK, embeddings).as_retriever(
    search_kwargs={"k": 2}
)
prompt = ChatPromptTemplate.from_template(
    "Answer from the handbook.\n{context}\n\nQuestion: {question}"
)


def join(documents: list[Document]) -> str:
    return "\n".join(document.page_content for document in documents)


chain = (
    {"context": retriever | join, "question": RunnablePassthrough()}
    | prompt
    | ChatOpenAI(model=MODEL, streaming=True)
    | StrOutputParser()
)

if __name__ == "__main__":
    for question in sys.argv[1:] or ["How much does the hub cost?"]:
        print(f"{question}\n  {chain.invoke(question)}")
