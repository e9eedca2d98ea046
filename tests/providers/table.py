"""One row per provider whose real SDK the tests in this folder drive over real HTTP.

A row says how the provider's wire format is served on the simulated model server, how its client
is built, one plain call and one streamed call with it (and their async forms), which registry
names instrument it and where its recordings are. The fixtures of ``conftest.py`` and the checks
every provider shares (``test_every_provider.py``) run on these rows; ``test_<provider>.py`` keeps
what is that provider's own. Client libraries are imported when a client is built, so a missing
one fails its own tests only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers import bedrock as bedrock_wire
from tests.servers import cohere as cohere_wire
from tests.servers import gemini as gemini_wire
from tests.servers import groq as groq_wire
from tests.servers import mistral as mistral_wire
from tests.servers import ollama as ollama_wire
from tests.servers.fixtures import cassettes
from tests.servers.model_server import ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]


def _nothing_to_undo(server: ModelServer) -> None:
    return None


def _nothing_to_choose(monkeypatch: pytest.MonkeyPatch, library: str) -> None:
    return None


@dataclass(frozen=True)
class Provider:
    name: str  # the tests' id
    libraries: tuple[str, ...]  # the registry names the ``instrumented`` fixture instruments
    serve: Callable[[ModelServer], None]  # its wire format on the simulated server
    client: Callable[..., Any]  # (server, **options): its client pointed at that server
    whole: Callable[[Any], Any]  # one plain call with that client
    stream: Callable[[Any], Iterable[Any]]  # one streamed call, not yet read
    has_content: Callable[[Any], bool]  # whether a streamed event carries generated output
    recordings: str  # its folder of the recorded fixtures
    recording_count: int  # how many recordings that folder holds, every one replayed
    api_key: str | None = None  # the credential its client sends, which no span may hold
    # What a stream read with ``next()`` and dropped half read ends as.
    dropped_stream_end: str = "abandoned"
    # Undoes what a test left on the server beyond ``ModelServer.reset()``.
    reset: Callable[[ModelServer], None] = _nothing_to_undo
    async_client: Callable[[ModelServer], Any] | None = None
    async_whole: Callable[[Any], Awaitable[Any]] | None = None
    async_stream: Callable[[Any], AsyncIterator[Any]] | None = None
    # The HTTP libraries OpenTelemetry's own instrumentation may see its client send through, and
    # how the client is made to use one of them.
    http_libraries: tuple[str, ...] = ()
    use_http_library: Callable[[pytest.MonkeyPatch, str], None] = _nothing_to_choose
    # Traced at the SDK's public methods: the client decodes each event (1-3 ms for cohere) before
    # the caller sees it, so TTFT is held against the caller's stopwatch (``FirstTokens``).
    first_token_timed_by_caller: bool = False
    # Its client set to retry a refused attempt (None: its client does not retry), and the answer
    # the server refuses the first attempt with, one its retry loop retries.
    retrying: Callable[[ModelServer], Any] | None = None
    retries_streams: bool = True  # whether that client retries a streamed call too
    refusal: tuple[int, dict[str, str]] = (429, {"retry-after-ms": "50"})
    marks: tuple[pytest.MarkDecorator, ...] = ()  # on each of its shared checks

    @property
    def cassettes(self) -> list[Path]:
        return cassettes(self.recordings)

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.api_key,) if self.api_key else ()


# --- boto3 bedrock-runtime ----------------------------------------------------------------------

BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
BEDROCK_MESSAGES = [{"role": "user", "content": [{"text": "Say hello"}]}]
AWS_ACCESS_KEY = "AKIDEXAMPLE"
AWS_SECRET_KEY = "wJalrXUtnFEMI-test-secret"
AWS_SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLE-session-token"


def _bedrock_client(
    server: ModelServer, service: str = "bedrock-runtime", retries: dict[str, Any] | None = None
) -> Any:
    import boto3
    import botocore.config

    return boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url=server.url,
        aws_access_key_id=AWS_ACCESS_KEY,
        aws_secret_access_key=AWS_SECRET_KEY,
        aws_session_token=AWS_SESSION_TOKEN,
        config=botocore.config.Config(retries=retries or {"max_attempts": 1}),
    )


def _bedrock_reset(server: ModelServer) -> None:
    server.bedrock_stream_exception = None  # set by a test that wants an exception event


BEDROCK = Provider(
    name="bedrock",
    libraries=("bedrock",),
    serve=bedrock_wire.register,
    reset=_bedrock_reset,
    client=_bedrock_client,
    whole=lambda client: client.converse(modelId=BEDROCK_MODEL, messages=BEDROCK_MESSAGES),
    stream=lambda client: client.converse_stream(modelId=BEDROCK_MODEL, messages=BEDROCK_MESSAGES)[
        "stream"
    ],
    has_content=lambda event: "contentBlockDelta" in event,
    recordings="bedrock",
    recording_count=36,
    api_key=AWS_SECRET_KEY,
    # botocore's standard mode retries a throttling error code (it ignores retry-after).
    retrying=lambda server: _bedrock_client(
        server, retries={"max_attempts": 2, "mode": "standard"}
    ),
    refusal=(429, {"x-amzn-ErrorType": "ThrottlingException"}),
)


# --- cohere (ClientV2) --------------------------------------------------------------------------


def _cohere_client(server: ModelServer) -> Any:
    import cohere

    # (It retries a 429 or 5xx twice by default, after the provider's retry-after hint.)
    return cohere.ClientV2(api_key=COHERE.api_key, base_url=server.url)


def _cohere_async_client(server: ModelServer) -> Any:
    import cohere

    return cohere.AsyncClientV2(api_key=COHERE.api_key, base_url=server.url)


COHERE = Provider(
    name="cohere",
    libraries=("cohere", "httpx", "httpx2"),
    serve=cohere_wire.register,
    client=_cohere_client,
    whole=lambda client: client.chat(model="m", messages=MESSAGES),
    stream=lambda client: client.chat_stream(model="m", messages=MESSAGES),
    has_content=lambda event: event.type == "content-delta",
    async_client=_cohere_async_client,
    async_whole=lambda client: client.chat(model="m", messages=MESSAGES),
    async_stream=lambda client: client.chat_stream(model="m", messages=MESSAGES),
    recordings="cohere",
    recording_count=17,
    api_key="cohere-secret-key-123",
    http_libraries=("httpx",),
    first_token_timed_by_caller=True,
    retrying=_cohere_client,
    retries_streams=False,  # its ``stream`` takes a ``retries`` argument it never uses
    # cohere parses each event through pydantic's deprecated ``__fields__``: pytest recording
    # those warnings (one per event) would be timed as the client's own work.
    marks=(pytest.mark.filterwarnings("ignore::DeprecationWarning"),),
)


# --- google-genai (Gemini Developer API) ---------------------------------------------------------


def _google_genai_client(server: ModelServer, **options: Any) -> Any:
    from google import genai
    from google.genai import types

    return genai.Client(
        api_key=GOOGLE_GENAI.api_key,
        http_options=types.HttpOptions(base_url=server.url, **options),
    )


def _google_genai_retrying(server: ModelServer) -> Any:
    from google.genai import types

    # Its retries (off unless asked for) wait their own backoff; without jitter, exactly 50 ms.
    retry = types.HttpRetryOptions(
        attempts=2, initial_delay=0.05, jitter=0, http_status_codes=[429, 503]
    )
    return _google_genai_client(server, retry_options=retry)


def _google_genai_reset(server: ModelServer) -> None:
    gemini_wire.replay(server, [])


async def _google_genai_async_stream(client: Any) -> AsyncIterator[Any]:
    async for chunk in await client.aio.models.generate_content_stream(model="m", contents="x"):
        yield chunk


def _google_genai_http_library(monkeypatch: pytest.MonkeyPatch, library: str) -> None:
    monkeypatch.setenv("GOOGLE_GENAI_HTTP_CLIENT", library)


GOOGLE_GENAI = Provider(
    name="google_genai",
    libraries=("google_genai", "httpx", "httpx2"),
    serve=gemini_wire.register,
    reset=_google_genai_reset,
    # A Client no longer referenced closes its HTTP client: a test holds the one it calls.
    client=_google_genai_client,
    whole=lambda client: client.models.generate_content(model="m", contents="x"),
    stream=lambda client: client.models.generate_content_stream(model="m", contents="x"),
    has_content=lambda chunk: bool(chunk.text),
    async_client=_google_genai_client,
    async_whole=lambda client: client.aio.models.generate_content(model="m", contents="x"),
    async_stream=_google_genai_async_stream,
    recordings="google_genai",
    recording_count=35,
    api_key="AIza-test-secret-key",
    # The caller holds the SDK's own generator: dropping it half read closes the SDK's loop over
    # the stream llmtrace wraps below it, so the caller left a loop: closed, as it is dropped.
    dropped_stream_end="closed",
    http_libraries=("httpx", "httpx2"),
    use_http_library=_google_genai_http_library,
    retrying=_google_genai_retrying,
    refusal=(429, {}),
)


# --- groq ---------------------------------------------------------------------------------------


def _groq_client(server: ModelServer, **options: Any) -> Any:
    import groq

    return groq.Groq(base_url=server.url, api_key=GROQ.api_key, **{"max_retries": 0, **options})


def _groq_async_client(server: ModelServer, **options: Any) -> Any:
    import groq

    return groq.AsyncGroq(
        base_url=server.url, api_key=GROQ.api_key, **{"max_retries": 0, **options}
    )


async def _groq_async_stream(client: Any) -> AsyncIterator[Any]:
    async for chunk in await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    ):
        yield chunk


GROQ = Provider(
    name="groq",
    libraries=("groq", "httpx"),
    serve=groq_wire.register,
    client=_groq_client,
    whole=lambda client: client.chat.completions.create(model="m", messages=MESSAGES),
    stream=lambda client: client.chat.completions.create(model="m", messages=MESSAGES, stream=True),
    has_content=lambda chunk: bool(chunk.choices and chunk.choices[0].delta.content),
    async_client=_groq_async_client,
    async_whole=lambda client: client.chat.completions.create(model="m", messages=MESSAGES),
    async_stream=_groq_async_stream,
    recordings="groq",
    recording_count=4,
    api_key="gsk-test-secret-key",
    http_libraries=("httpx",),
    # Its default, two retries after the provider's hint; the rows above set none for the tests.
    retrying=lambda server: _groq_client(server, max_retries=2),
)


# --- mistralai ----------------------------------------------------------------------------------


def _mistralai_client(server: ModelServer, **options: Any) -> Any:
    from mistralai.client import Mistral

    return Mistral(api_key=MISTRALAI.api_key, server_url=mistral_wire.url(server), **options)


def _mistralai_retrying(server: ModelServer) -> Any:
    from mistralai.client.utils.retries import BackoffStrategy, RetryConfig

    # Off unless asked for; its backoff, 50 ms here, without jitter (by default up to a second).
    backoff = BackoffStrategy(
        initial_interval=50, max_interval=200, exponent=1.5, max_elapsed_time=5000, jitter_ms=0
    )
    return _mistralai_client(server, retry_config=RetryConfig("backoff", backoff, False))


async def _mistralai_async_stream(client: Any) -> AsyncIterator[Any]:
    async for event in await client.chat.stream_async(model="m", messages=MESSAGES):
        yield event


MISTRALAI = Provider(
    name="mistralai",
    libraries=("mistralai", "httpx", "httpx2"),
    serve=mistral_wire.register,
    client=_mistralai_client,
    whole=lambda client: client.chat.complete(model="m", messages=MESSAGES),
    stream=lambda client: client.chat.stream(model="m", messages=MESSAGES),
    has_content=lambda event: any(choice.delta.content for choice in event.data.choices),
    async_client=_mistralai_client,
    async_whole=lambda client: client.chat.complete_async(model="m", messages=MESSAGES),
    async_stream=_mistralai_async_stream,
    recordings="mistral",
    recording_count=11,
    api_key="mistral-secret-key-123",
    http_libraries=("httpx2",),
    first_token_timed_by_caller=True,
    retrying=_mistralai_retrying,
)


# --- ollama -------------------------------------------------------------------------------------


def _ollama_client(server: ModelServer, **options: Any) -> Any:
    import ollama

    return ollama.Client(host=server.url, **options)


def _ollama_async_client(server: ModelServer) -> Any:
    import ollama

    return ollama.AsyncClient(host=server.url)


def _ollama_serve(server: ModelServer) -> None:
    ollama_wire.register(server)
    _ollama_reset(server)


def _ollama_reset(server: ModelServer) -> None:
    ollama_wire.set_load_time(server, 0.0)


async def _ollama_async_stream(client: Any) -> AsyncIterator[Any]:
    async for part in await client.chat(model="m", messages=MESSAGES, stream=True):
        yield part


OLLAMA = Provider(
    name="ollama",
    libraries=("ollama", "httpx"),
    serve=_ollama_serve,
    reset=_ollama_reset,
    client=_ollama_client,
    whole=lambda client: client.chat(model="m", messages=MESSAGES),
    stream=lambda client: client.chat(model="m", messages=MESSAGES, stream=True),
    has_content=lambda part: bool(part.message.content),
    async_client=_ollama_async_client,
    async_whole=lambda client: client.chat(model="m", messages=MESSAGES),
    async_stream=_ollama_async_stream,
    recordings="ollama",
    recording_count=19,
    http_libraries=("httpx",),
)


PROVIDERS = [BEDROCK, COHERE, GOOGLE_GENAI, GROQ, MISTRALAI, OLLAMA]
