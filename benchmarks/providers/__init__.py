"""One module per model provider for ``benchmarks/overhead_clients.py``.

Each module here defines ``case(server, tracer) -> ProviderCase``: the provider's real client
pointed at the simulated model server (its wire format registered on ``server``), one plain
non-streamed call, the same call inside a hand-written OpenTelemetry span recording the
attributes llmtrace records for it, and (when the API streams) one streamed call that reads the
whole stream. ``overhead_clients.py`` times each alike: no instrumentation, the hand-written span,
llmtrace; and per streamed chunk, llmtrace against none.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from tests.servers.model_server import ModelServer


@dataclass
class ProviderCase:
    name: str  # as the README's table names the client: "google-genai", "boto3 bedrock", ...
    instrument: list[str]  # registry names to instrument for the llmtrace variant
    call: Callable[[], Any]  # one non-streamed model call
    hand_written: Callable[[], Any]  # the same call inside a hand-written span
    stream: Callable[[], int] | None = None  # one streamed call, read to the end; chunks read
    notes: list[str] = field(default_factory=list)


CaseFactory = Callable[[ModelServer, trace.Tracer], ProviderCase]


def factories() -> list[tuple[str, CaseFactory]]:
    """Every provider module's ``case``, by module name (a module whose client is not installed
    is left out, and said so by the caller)."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.append((info.name, module.case))
    return found
