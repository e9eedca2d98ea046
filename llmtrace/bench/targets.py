"""What ``llmtrace bench`` sends questions to: a Python callable or an HTTP endpoint."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
from opentelemetry import propagate

from llmtrace.bench.questions import Question
from llmtrace.errors import CommandError

QUESTION_PLACEHOLDER = "{question}"
ID_PLACEHOLDER = "{id}"
DEFAULT_BODY = '{"question": "{question}"}'


class Target(Protocol):
    """Answers one question; raising counts the request as an error."""

    description: str

    async def __call__(self, question: Question) -> object: ...

    async def aclose(self) -> None: ...


class HTTPStatusError(Exception):
    """The endpoint answered with a 4xx/5xx status."""

    def __init__(self, status_code: int, body: str) -> None:
        super().__init__(f"HTTP {status_code}: {body[:200]}")
        self.status_code = status_code


@dataclass(frozen=True)
class HTTPAnswer:
    """An HTTP target's answer and when the client first saw it (seconds from the request)."""

    text: str
    time_to_first_byte: float | None = None  # streamed bodies only (SSE or chunked)
    time_to_first_event: float | None = None  # SSE only: the first complete ``data:`` line

    def __str__(self) -> str:
        return self.text


class FirstEvent:
    """Finds the first complete SSE ``data:`` line in a body fed chunk by chunk.

    Only the unfinished last line is kept between chunks; once found, nothing more is scanned.
    """

    def __init__(self) -> None:
        self._partial = b""
        self.seen_at: float | None = None

    def feed(self, chunk: bytes) -> bool:
        """Whether ``chunk`` completes the body's first ``data:`` line."""
        lines = (self._partial + chunk).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._partial = lines.pop()
        return any(line.startswith(b"data:") for line in lines)


class CallableTarget:
    """A sync or async function called with the question's text.

    Sync functions run in a worker thread so that ``--concurrency`` means the same thing for
    both; ``asyncio.to_thread`` copies the context, so the function's spans join the request's.
    """

    def __init__(self, function: Callable[[str], Any], description: str) -> None:
        self.function = function
        self.description = description

    async def __call__(self, question: Question) -> object:
        if inspect.iscoroutinefunction(self.function):
            return await self.function(question.text)
        result = await asyncio.to_thread(self.function, question.text)
        # A decorated coroutine function can hide from iscoroutinefunction; its call then
        # returns an awaitable that still has to run on the loop.
        if inspect.isawaitable(result):
            return await result
        return result

    async def aclose(self) -> None:
        return None


def load_callable(spec: str) -> CallableTarget:
    """Resolve ``package.module:function`` (``module:object.method`` works too)."""
    module_name, _, attribute_path = spec.partition(":")
    if not module_name or not attribute_path:
        raise CommandError(f"target {spec!r} must look like package.module:function")
    # Like uvicorn and gunicorn: a module next to where the command runs is importable.
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandError(f"cannot import {module_name!r} for target {spec!r}: {exc}") from None
    except Exception as exc:
        # The module itself failed while loading: say where, in one line.
        frames = [
            frame
            for frame in traceback.extract_tb(exc.__traceback__)
            if not frame.filename.startswith("<")  # importlib's frozen frames
        ]
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise CommandError(
            f"importing {module_name!r} for target {spec!r} failed{where}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    for name in attribute_path.split("."):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            raise CommandError(f"{module_name!r} has no attribute {attribute_path!r}") from None
    if not callable(obj):
        raise CommandError(f"target {spec!r} is not callable")
    return CallableTarget(obj, spec)


class HTTPTarget:
    """POSTs (or sends ``method``) a JSON body built from a template to one URL.

    The template is JSON in which ``{question}`` and ``{id}`` inside string values are
    replaced by the question's text and id; the text is JSON-escaped by the encoder, never
    pasted into raw JSON.
    """

    def __init__(
        self,
        url: str,
        body_template: str = DEFAULT_BODY,
        *,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise CommandError(f"--url must start with http:// or https:// (got {url!r})")
        try:
            self.template: Any = json.loads(body_template)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--body is not valid JSON ({exc.msg}): {body_template}") from None
        if QUESTION_PLACEHOLDER not in body_template:
            raise CommandError(f"--body must contain {QUESTION_PLACEHOLDER} in a string value")
        self.url = url
        self.method = method.upper()
        self.headers = dict(headers or {})
        self.description = f"{self.method} {url}"
        # No client-side timeout: the runner's --timeout applies to the whole request.
        self._client = httpx.AsyncClient(timeout=None)

    def body_for(self, question: Question) -> Any:
        return _fill(self.template, question)

    async def __call__(self, question: Question) -> HTTPAnswer:
        headers = dict(self.headers)
        # The service's own spans join the bench request's trace.
        propagate.inject(headers)
        started = time.perf_counter()
        first_byte: float | None = None
        events = FirstEvent()
        body: list[bytes] = []
        async with self._client.stream(
            self.method, self.url, json=self.body_for(question), headers=headers
        ) as response:
            sse = response.headers.get("content-type", "").startswith("text/event-stream")
            async for chunk in response.aiter_bytes():
                if first_byte is None:
                    first_byte = time.perf_counter() - started
                if sse and events.seen_at is None and events.feed(chunk):
                    events.seen_at = time.perf_counter() - started
                body.append(chunk)
            text = b"".join(body).decode(response.encoding or "utf-8", errors="replace")
            # A body sent whole (Content-Length, not SSE) reaches the user all at once: its first
            # byte is no earlier sight of the answer than its end, so it is not reported.
            streamed = sse or "content-length" not in response.headers
        if response.status_code >= 400:
            raise HTTPStatusError(response.status_code, text)
        return HTTPAnswer(text, first_byte if streamed else None, events.seen_at)

    async def aclose(self) -> None:
        await self._client.aclose()


def parse_headers(values: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise CommandError(f"--header must look like 'Name: value' (got {value!r})")
        headers[name.strip()] = content.strip()
    return headers


def _fill(template: Any, question: Question) -> Any:
    if isinstance(template, str):
        return template.replace(QUESTION_PLACEHOLDER, question.text).replace(
            ID_PLACEHOLDER, question.id
        )
    if isinstance(template, list):
        return [_fill(item, question) for item in template]
    if isinstance(template, dict):
        return {key: _fill(value, question) for key, value in template.items()}
    return template
