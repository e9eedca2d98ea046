"""The ``llmtrace`` command: report | compare | bench | demo | doctor.

Each subcommand lives in ``llmtrace.commands.<name>`` and exposes ``HELP`` (one line),
``EXAMPLES`` (realistic command lines for its ``--help``), ``add_arguments(parser)`` and
``run(args) -> int``. A command module imports only light modules at its top (argparse, the
standard library, ``llmtrace.errors``): what a command needs to run (the analysis, rich, the
OpenTelemetry SDK, the demo's numpy) is imported inside ``run``. Building the whole parser is
then cheap, so ``llmtrace --help`` and ``llmtrace report FILE`` start fast and the commands that
need an optional extra (``demo``) fail only when they run.

The shared vocabulary: ``--otlp URL`` where spans are sent, ``--jaeger URL`` where a Jaeger is
(read, checked, or linked to from a report of a trace file), ``--html FILE`` where an HTML
report is written. Renamed flags stay as hidden aliases.

An expected failure (bad arguments, a missing or unreadable file, an unreachable Jaeger, a bad
configuration) is one line on stderr and exit status 2, never a traceback; Ctrl-C exits with
130 and says nothing more. A traceback means a bug in llmtrace.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from llmtrace import __version__
from llmtrace.errors import LLMTraceError

COMMANDS: tuple[str, ...] = ("report", "compare", "bench", "demo", "doctor")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

EXIT_STATUS_HELP = f"""\
exit status:
  {EXIT_OK:<4} done
  {EXIT_FAILED:<4} a check failed (doctor, compare --fail-if-slower), no bench request
       completed, or the program reading the output quit early (llmtrace report | head)
  {EXIT_ERROR:<4} an error, printed as one line on stderr: bad arguments, a missing or unreadable
       file, an unreachable Jaeger, an invalid configuration value
  {EXIT_INTERRUPTED:<4} interrupted (Ctrl-C)
"""

EXAMPLES = (
    "llmtrace report",
    "llmtrace report --jaeger http://localhost:16686 --service support-bot --lookback 1h",
    "llmtrace compare .llmtrace/runs/before.json .llmtrace/runs/after.json",
)


class _VersionAction(argparse.Action):
    """``--version``: the version, then which reader reads trace files (an install from source
    without Rust has only the pure-Python one: slower, same results)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version and which trace-file reader this install has, then exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        from llmtrace.analysis.native import reader_notice

        print(f"llmtrace {__version__}\n{reader_notice()}")
        parser.exit(EXIT_OK)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def examples_help(examples: Sequence[str]) -> str:
    """The "example:" section of a ``--help``: one command line per line."""
    heading = "example:" if len(examples) == 1 else "examples:"
    return "\n".join([heading, *(f"  {line}" for line in examples)]) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="llmtrace",
        description="Where did a slow LLM request's time go? Per-stage latency from OpenTelemetry traces.",
        epilog=examples_help(EXAMPLES) + "\n" + EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"llmtrace.commands.{name}")
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=examples_help(module.EXAMPLES) + "\n" + EXIT_STATUS_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _os_error_text(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    command = "llmtrace"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return EXIT_ERROR
        command = f"llmtrace {args.command}"
        return int(args._run(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of our output went away (`llmtrace report | head`): nothing to tell it.
        # Point stdout at devnull so the interpreter's final flush does not fail again; the
        # status is rich's for the same case, so table and JSON output end alike.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except LLMTraceError as exc:
        print(f"{command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"{command}: error: {_one_line(_os_error_text(exc))}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
