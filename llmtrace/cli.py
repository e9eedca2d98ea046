"""The ``llmtrace`` command: report | compare | bench | demo | doctor.

Each subcommand lives in ``llmtrace.commands.<name>`` and exposes ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``; they are imported only when used so that
``llmtrace --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from llmtrace import __version__
from llmtrace.errors import CommandError

COMMANDS: tuple[str, ...] = ("report", "compare", "bench", "demo", "doctor")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmtrace",
        description="Where did a slow LLM request's time go? Per-stage latency from OpenTelemetry traces.",
    )
    parser.add_argument("--version", action="version", version=f"llmtrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"llmtrace.commands.{name}")
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args))
    except CommandError as exc:
        print(f"llmtrace {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"llmtrace {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
