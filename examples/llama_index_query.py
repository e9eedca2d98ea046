"""A LlamaIndex query engine over an in-memory vector index, traced with no change to it.

Any OpenAI-compatible server serving chat completions and embeddings will do:

    OPENAI_BASE_URL=http://localhost:8080/v1 OPENAI_API_KEY=unused \
        python examples/llama_index_query.py "How much does the hub cost?"
    llmtrace report

The model is reached through LlamaIndex's LiteLLM model (``openai/MODEL`` at the same base URL):
LlamaIndex's own OpenAI model package caps ``openai`` below 3. Building the index is a trace of
its own. Each question is one trace: the query over LlamaIndex's retrieval (and the query's
embedding) and the model call, split at its first token into ``ttft`` and ``generation``.
tests/examples runs it against the suite's model server.
"""

import os
import sys

# LiteLLM fetches its cost map from the internet at import unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.embeddings.openai import OpenAIEmbedding
from llama_index.llms.litellm import LiteLLM

import llmtrace

llmtrace.init(service_name="llama-index-query")  # instruments LlamaIndex, LiteLLM and openai

BASE_URL = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
API_KEY = os.environ.get("OPENAI_API_KEY", "")
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
EMBEDDING_MODEL = os.environ.get("OPENAI_EMBEDDING_MODEL", "text-embedding-3-small")
HANDBOOK = [
    "The hub costs 129 euros.",
    "The backup battery lasts 12 hours.",
    "The hub speaks Zigbee, Z-Wave and Thread.",
]

Settings.embed_model = OpenAIEmbedding(
    model_name=EMBEDDING_MODEL, api_base=BASE_URL, api_key=API_KEY
)
Settings.llm = LiteLLM(model=f"openai/{MODEL}", api_base=BASE_URL, api_key=API_KEY)
index = VectorStoreIndex.from_documents([Document(text=text) for text in HANDBOOK])
query_engine = index.as_query_engine(similarity_top_k=2, streaming=True)

if __name__ == "__main__":
    for question in sys.argv[1:] or ["How much does the hub cost?"]:
        response = query_engine.query(question)
        print(f"{question}\n  {''.join(response.response_gen)}")
