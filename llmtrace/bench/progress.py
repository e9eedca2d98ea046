"""The live progress bar of ``llmtrace bench``: done/total, errors, current P50/P95."""

from __future__ import annotations

import math

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from llmtrace.bench.live_stats import LiveStats
from llmtrace.bench.runner import Outcome


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}s"


class ProgressBar:
    """A ``BenchListener`` drawing a rich progress bar; use it as a context manager."""

    def __init__(self, name: str, console: Console | None = None) -> None:
        self.name = name
        self.stats = LiveStats()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._task: TaskID | None = None
        self._warmup_task: TaskID | None = None

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        self._progress.stop()

    def run_started(self, total: int, warmup: int) -> None:
        if warmup:
            self._warmup_task = self._progress.add_task("warmup", total=warmup, status="")
        self._task = self._progress.add_task(self.name, total=total, status=self._status())

    def request_finished(self, outcome: Outcome) -> None:
        self.stats.add(outcome)
        if outcome.warmup:
            if self._warmup_task is not None:
                self._progress.advance(self._warmup_task)
            return
        if self._task is not None:
            self._progress.update(self._task, advance=1, status=self._status())

    def run_stopping(self) -> None:
        if self._task is not None:
            self._progress.update(
                self._task,
                description=f"{self.name} [yellow](finishing; Ctrl-C again to cancel)[/]",
            )

    def _status(self) -> str:
        failed = self.stats.errors + self.stats.timeouts
        colour = "red" if failed else "green"
        return (
            f"[{colour}]errors {failed}[/]  "
            f"P50 {_seconds(self.stats.p50)}  P95 {_seconds(self.stats.p95)}"
        )
