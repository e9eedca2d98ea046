"""A retrieval step and a streamed OpenAI chat completion, traced: the README's example.

Point it at any OpenAI-compatible server with the usual variables, ask, then read the report:

    OPENAI_BASE_URL=http://localhost:8080/v1 OPENAI_API_KEY=unused \
        python examples/openai_chat.py "How much does the hub cost?" "How long does the battery last?"
    llmtrace report

Each question is one trace: ``answer`` (the workflow) over ``retrieval handbook`` and
``chat MODEL``, the model call split at its first token into ``ttft`` and ``generation``.
tests/examples runs it against the suite's model server.
"""

import os

from openai import OpenAI

import llmtrace

llmtrace.init(service_name="support-bot")  # spans to .llmtrace/traces.jsonl, or OTLP if configured
client = OpenAI()  # reads OPENAI_API_KEY and OPENAI_BASE_URL; every call becomes a model span
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
HANDBOOK = ["The hub costs 129 euros.", "The backup battery lasts 12 hours."]


@llmtrace.retrieval(data_source="handbook", top_k=1)
def search(question: str) -> list[str]:
    words = set(question.lower().split())
    return sorted(HANDBOOK, key=lambda p: -len(words & set(p.lower().split())))[:1]


@llmtrace.workflow
def answer(question: str) -> str:
    prompt = "\n".join([*search(question), question])
    stream = client.chat.completions.create(
        model=MODEL, stream=True, messages=[{"role": "user", "content": prompt}]
    )
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


if __name__ == "__main__":
    import sys

    for question in sys.argv[1:] or ["How much does the hub cost?"]:
        print(f"{question}\n  {answer(question)}")
