"""The shape every llmtrace instrumentation has: a supported version range and a patch table.

Kept apart from :mod:`llmtrace.sdk.gate` (which the decorators import for the gate)
so that ``import llmtrace`` does not load OpenTelemetry's instrumentation machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from llmtrace.sdk.gate import Patches


def use_providers(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """The providers ``instrument(tracer_provider=..., meter_provider=...)`` names, as every
    OpenTelemetry instrumentor takes them: llmtrace's instrumentations (all of them, since they
    share one tracer) then record there instead of on the global providers. Not given: nothing
    changes."""
    if tracer_provider is not None:
        from llmtrace.sdk.gate import use_tracer_provider

        use_tracer_provider(tracer_provider)
    if meter_provider is not None:
        from llmtrace.sdk.metrics import use_meter_provider

        use_meter_provider(meter_provider)


# One row of an instrumentation's table: (module, attribute path in it, wrapt-style wrapper).
PatchRow = tuple[str, str, Callable[..., Any]]


class LibraryInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """One instrumented library: the range of its versions llmtrace supports, and a table of the
    methods it wraps. Every instrumentation module has exactly one, shaped alike:

    - ``package``: the distribution name (as pip knows it), and ``supported``: the PEP 440 range
      tested (also the range of the package's optional dependency in ``pyproject.toml``; a test
      keeps the two equal). The registry does not instrument a version outside it, and says so.
    - ``patches()``: the ``(module, attribute path, wrapper)`` rows; an attribute this version of
      the library lacks is skipped, an attribute already wrapped by llmtrace is left alone.

    ``uninstrument()`` restores every original.
    """

    package: str = ""
    supported: str = ""
    _patches: Patches

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._patches = Patches()

    def instrumentation_dependencies(self) -> Collection[str]:
        return (f"{self.package} {self.supported}",) if self.package else ()

    def patches(self) -> Iterable[PatchRow]:
        raise NotImplementedError

    def _instrument(self, **kwargs: Any) -> None:
        use_providers(kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        for module_name, path, wrapper in self.patches():
            self._patches.wrap(module_name, path, wrapper)

    def _uninstrument(self, **kwargs: Any) -> None:
        self._patches.restore()
