"""A FastAPI service traced end to end: llmtrace's ASGI middleware makes each request's SERVER
span (continuing the caller's trace from its ``traceparent``), a decorated prompt step and the
streamed model call sit under it.

    OPENAI_BASE_URL=http://localhost:8080/v1 OPENAI_API_KEY=unused PORT=8000 \
        python examples/fastapi_service.py
    curl -s localhost:8000/ask -H 'content-type: application/json' -d '{"question": "Battery?"}'
    llmtrace report

Or measure it under load: ``llmtrace bench --url http://localhost:8000/ask --body
'{"question": "{question}"}' --questions examples/bench_questions.txt --concurrency 4``.
Spans are flushed when the server stops (Ctrl-C). tests/examples runs it against the suite's
model server.
"""

import os

import uvicorn
from fastapi import FastAPI
from openai import AsyncOpenAI
from pydantic import BaseModel

import llmtrace
from llmtrace.server import LLMTraceMiddleware

llmtrace.init(service_name="answer-service")

client = AsyncOpenAI()
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
app = FastAPI()
app.add_middleware(LLMTraceMiddleware, excluded_paths=["/health"])


class Question(BaseModel):
    question: str


@llmtrace.stage("prompt")
def build_prompt(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": question},
    ]


@app.get("/health")
async def health() -> dict[str, bool]:
    return {"ok": True}


@app.post("/ask")
async def ask(body: Question) -> dict[str, str | None]:
    stream = await client.chat.completions.create(
        model=MODEL, stream=True, messages=build_prompt(body.question)
    )
    text = "".join(
        [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    )
    return {"answer": text, "trace_id": llmtrace.current_trace_id()}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
