"""Runs one bench with the live progress bar, its own trace file and clean Ctrl-C handling.

First Ctrl-C: no new requests, the ones in flight finish and are reported. Second: those are
cancelled too. Either way the run ends normally and its report is built from what completed.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

from rich.console import Console

from llmtrace.bench.progress import ProgressBar
from llmtrace.bench.questions import QuestionSet
from llmtrace.bench.runner import BenchListener, BenchPlan, BenchResult, BenchRunner
from llmtrace.bench.targets import Target
from llmtrace.bench.tracing import RunTraceFile


async def run_bench(
    questions: QuestionSet,
    target: Target,
    plan: BenchPlan,
    *,
    traces_file: Path,
    console: Console | None = None,
    show_progress: bool = True,
) -> BenchResult:
    """Replays ``questions`` against ``target``; every span of the run ends up in ``traces_file``."""
    with RunTraceFile(traces_file) as trace_file:
        bar = ProgressBar(plan.name, console=console) if show_progress else None
        listener: BenchListener | None = bar
        runner = BenchRunner(questions, target, plan, listener=listener)
        try:
            if bar is not None:
                with bar:
                    result = await _run_interruptible(runner)
            else:
                result = await _run_interruptible(runner)
        finally:
            await asyncio.to_thread(trace_file.flush)
    return result


async def _run_interruptible(runner: BenchRunner) -> BenchResult:
    loop = asyncio.get_running_loop()

    def on_interrupt() -> None:
        if runner.stopping:
            runner.cancel()
        else:
            runner.stop()

    installed = False
    # Signal handlers can only be installed from the main thread.
    if threading.current_thread() is threading.main_thread():
        try:
            loop.add_signal_handler(signal.SIGINT, on_interrupt)
            installed = True
        except (NotImplementedError, RuntimeError):
            installed = False
    try:
        return await runner.run()
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
