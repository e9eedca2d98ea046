"""Native reader and per-trace analysis for ``llmtrace report`` (see llmtrace/analysis/native.py)."""

from typing import Any

ATTRIBUTES: list[str]
STAGES: list[str]

class TraceStore:
    def __init__(self) -> None: ...
    def read_file(self, path: str, whole_document: bool) -> list[str]: ...
    def assemble(
        self,
        trace_id: str | None = None,
        service: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int | None = None,
    ) -> int: ...
    @property
    def excluded_open(self) -> int: ...
    def selected(self) -> list[tuple[str, str, bool, str]]: ...
    def collect(
        self, run: str | None = None
    ) -> tuple[
        tuple[
            list[int],
            list[float],
            list[tuple[str, list[float]]],
            tuple[list[str | None], list[int | None], list[str | None]],
            int,
            int | None,
            int | None,
        ],
        tuple[
            list[tuple[Any, ...]],
            list[list[int]],
            list[tuple[str, list[float]]],
        ],
        list[tuple[str, float]],
        int,
    ]: ...
    def trace_spans(
        self, index: int
    ) -> list[tuple[str, str | None, str, int, int, int, dict[str, Any], str | None]]: ...
