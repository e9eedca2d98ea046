"""The parts of the documentation the code already holds, written when the site is built.

A page asks for one with a marker on a line of its own, replaced before the page is rendered:

    <!-- llmtrace:readme -->              README.md, its links into docs/ made relative to docs/
    <!-- llmtrace:options -->             every option and variable (llmtrace.options_reference.OPTIONS)
    <!-- llmtrace:cli -->                 every command and flag (llmtrace.cli.build_parser())
    <!-- llmtrace:supported-table -->     every instrumentation in the registry with its range
    <!-- llmtrace:supported NAME -->      one instrumentation's range, on its integration page

Nothing generated is committed: the tables cannot drift from the code they describe. A marker
this module does not know fails the build, as a broken link does. tests/docs calls the same
functions.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Document the checkout being built, whichever llmtrace the environment has installed.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
MARKER = re.compile(r"^<!-- llmtrace:([a-z-]+)(?: ([A-Za-z0-9_]+))? -->$", re.MULTILINE)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def readme() -> str:
    """README.md as the site's front page: one text for GitHub and the site."""
    return (ROOT / "README.md").read_text().replace("](docs/", "](")


def options_table() -> str:
    """docs/configuration.md's table: one row per entry of ``llmtrace.options_reference.OPTIONS``."""
    from llmtrace.options_reference import OPTIONS

    rows = ["| option | environment | default | meaning |", "|---|---|---|---|"]
    for option in OPTIONS:
        argument = f"`{option.argument}`" if option.argument else ""
        rows.append(
            f"| {argument} | {_cell(option.environment)} | {_cell(option.default)} "
            f"| {_cell(option.meaning)} |"
        )
    return "\n".join(rows)


def locked_versions() -> dict[str, str]:
    """The versions the suite runs: requirements/dev.lock's pins, by normalised name."""
    versions = {}
    for line in (ROOT / "requirements" / "dev.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^]]*\])?==([^\s;]+)", line)
        if match:
            versions[_normalise(match.group(1))] = match.group(2)
    return versions


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def instrumentations() -> list[tuple[str, Any]]:
    """(registry name, instrumentor class) for every entry of the registry, in its order."""
    from llmtrace.instrumentation import registry

    found = []
    for name, (module_name, class_name, _library) in registry.INSTRUMENTATIONS.items():
        module = importlib.import_module(f"llmtrace.instrumentation.{module_name}")
        found.append((name, getattr(module, class_name)))
    return found


def _tested(package: str, locked: dict[str, str]) -> str:
    if not package:
        return "the Python of `.venv`"
    version = locked.get(_normalise(package))
    if version:
        return version
    # sentence-transformers needs torch, which .venv never installs (see Limitations).
    return "in its own virtualenv (`scripts/torch_venv.sh`, see [Limitations](../limitations.md))"


def supported_table() -> str:
    """Every instrumentation: its name for ``instrument=``, the package, the range it supports
    (its ``supported``, which pyproject.toml's extra repeats, tests/core checks) and the version
    the suite runs (the lock's)."""
    locked = locked_versions()
    rows = [
        "| name | package | supported versions | the suite runs |",
        "|---|---|---|---|",
    ]
    for name, cls in instrumentations():
        package = f"`{cls.package}`" if cls.package else "the standard library"
        supported = cls.supported or "any"
        rows.append(f"| `{name}` | {package} | {supported} | {_tested(cls.package, locked)} |")
    return "\n".join(rows)


def supported_line(name: str) -> str:
    """One integration page's line: the package and range the registry declares for ``name``."""
    for entry, cls in instrumentations():
        if entry == name:
            if not cls.package:
                return (
                    f'!!! info "Supported versions"\n    The standard library (instrumentation '
                    f"`{name}`): every Python llmtrace runs on."
                )
            line = (
                f"`{cls.package}` {cls.supported} (instrumentation `{name}`; the suite runs "
                f"{_tested(cls.package, locked_versions())})."
            )
            extra = name.replace("_", "-")
            if extra in _extras():
                line += f" Installed with its pin by `pip install 'llmtrace-otel[{extra}]'`."
            return f'!!! info "Supported versions"\n    {line}'

    raise ValueError(f"no instrumentation named {name!r} in the registry")


def _extras() -> set[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"])


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        action
        for action in parser._actions
        if action.help != argparse.SUPPRESS and not isinstance(action, argparse._SubParsersAction)
    ]


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    metavar = ""
    if action.nargs != 0:
        metavar = " " + str(action.metavar or action.dest.upper())
    return ", ".join(f"`{option}{metavar}`" for option in action.option_strings)


def cli_reference() -> str:
    """Every command of ``llmtrace``, its arguments and flags with their help, and its examples,
    read from the parser the command itself builds (hidden aliases left out)."""
    from llmtrace import cli

    parser = cli.build_parser()
    formatter = parser._get_formatter()
    out = [
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        str(parser.description),
        "",
    ]
    for name, sub in _subcommands(parser).items():
        out += [f"## `llmtrace {name}`", "", str(sub.description), "", "```text"]
        out += [sub.format_usage().strip(), "```", ""]
        out += ["| argument | meaning |", "|---|---|"]
        for action in _visible(sub):
            text = formatter._expand_help(action) if action.help else ""
            out.append(f"| {_flag(action)} | {_cell(text)} |")
        out += ["", "```text", str(sub.epilog).split("\n\nexit status:")[0].strip(), "```", ""]
    return "\n".join(out)


def render(markdown: str) -> str:
    """``markdown`` with every marker replaced by what it names."""

    def replace(match: re.Match[str]) -> str:
        kind, argument = match.group(1), match.group(2)
        if kind == "readme":
            return readme()
        if kind == "options":
            return options_table()
        if kind == "cli":
            return cli_reference()
        if kind == "supported-table":
            return supported_table()
        if kind == "supported" and argument:
            return supported_line(argument)
        raise ValueError(f"unknown documentation marker: {match.group(0)}")

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The MkDocs hook: every page goes through :func:`render`."""
    return render(markdown)
