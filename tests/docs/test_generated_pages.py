"""The pages written from the code when the documentation is built (docs/hooks/generated.py)
miss nothing: every option and variable llmtrace reads, every command and flag, every
instrumentation with its range, each on the page a user looks for it."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import llmtrace
from llmtrace import cli
from llmtrace.instrumentation import registry

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks" / "generated.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _load_hooks()


def rendered(page: str) -> str:
    return str(hooks.render((DOCS / page).read_text()))


def variables_read_by_the_package() -> set[str]:
    """Every ``OTEL_*`` / ``LLMTRACE_*`` name written as a whole string in llmtrace's source."""
    names = set()
    for path in (REPO / "llmtrace").rglob("*.py"):
        names |= set(re.findall(r"[\"']((?:OTEL|LLMTRACE)_[A-Z0-9_]+)[\"']", path.read_text()))
    return names


def test_the_configuration_page_has_every_argument_of_init() -> None:
    page = rendered("configuration.md")
    for name in inspect.signature(llmtrace.init).parameters:
        assert f"| `{name}` |" in page, name


def test_the_configuration_page_has_every_variable_llmtrace_reads() -> None:
    page = rendered("configuration.md")
    variables = variables_read_by_the_package()
    assert "LLMTRACE_REQUEST_METRICS_MAX_SPANS" in variables  # the scan finds them
    missing = sorted(name for name in variables if f"`{name}`" not in page)
    assert not missing, (
        f"not on docs/configuration.md (add them to options_reference.OPTIONS): {missing}"
    )


def test_the_configuration_defaults_are_the_code_s() -> None:
    from llmtrace import options
    from llmtrace.options_reference import OPTIONS

    rows = {option.argument: option for option in OPTIONS if option.argument}
    assert rows["content_max_bytes"].default == str(options.Settings().content_max_bytes)
    assert rows["service_name"].default == f"`{options.Settings().service_name}`"
    assert rows["exporter"].default == f"`{options.Settings().exporter}`"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def test_the_cli_page_has_every_command_and_every_flag() -> None:
    page = rendered("cli.md")
    commands = _parsers()
    assert set(commands) == set(cli.COMMANDS)
    for name, parser in commands.items():
        assert f"## `llmtrace {name}`" in page, name
        section = page.split(f"## `llmtrace {name}`", 1)[1].split("\n## `llmtrace ", 1)[0]
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:  # renamed flags, kept as hidden aliases
                continue
            for flag in action.option_strings:
                assert f"`{flag}" in section, (name, flag)


def test_the_cli_page_leaves_out_the_hidden_aliases() -> None:
    bench = rendered("cli.md").split("## `llmtrace bench`", 1)[1].split("\n## `llmtrace ", 1)[0]
    assert "--source" not in bench


def test_every_instrumentation_has_an_integration_page_that_shows_its_range() -> None:
    pages = {
        path.relative_to(DOCS).as_posix(): path.read_text()
        for path in (DOCS / "integrations").glob("*.md")
    }
    for name, cls in hooks.instrumentations():
        marker = f"<!-- llmtrace:supported {name} -->"
        (page,) = [page for page, text in pages.items() if marker in text]
        shown = rendered(page)
        if cls.package:
            assert f"`{cls.package}` {cls.supported}" in shown, name


def test_the_supported_table_has_every_registry_entry_with_its_range() -> None:
    table = rendered("integrations/index.md")
    for name, cls in hooks.instrumentations():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{name}` |"))
        assert cls.supported in row or not cls.package, row
    assert len(hooks.instrumentations()) == len(registry.INSTRUMENTATIONS)


def test_the_supported_table_shows_the_locked_version_the_suite_runs() -> None:
    locked = hooks.locked_versions()
    table = rendered("integrations/index.md")
    row = next(line for line in table.splitlines() if line.startswith("| `openai` |"))
    assert row.endswith(f"| {locked['openai']} |")


def test_an_unknown_marker_fails_the_build() -> None:
    with pytest.raises(ValueError, match="unknown documentation marker"):
        hooks.render("<!-- llmtrace:nothing -->")
    with pytest.raises(ValueError, match="no instrumentation named"):
        hooks.render("<!-- llmtrace:supported nothing -->")


def test_the_front_page_is_the_readme_with_its_links_into_the_site() -> None:
    page = rendered("index.md")
    assert page.startswith("# llmtrace")
    assert "](docs/" not in page
    assert "](getting-started.md#install)" in page


def test_the_readme_stays_a_front_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    assert "pip install llmtrace-otel" in readme
    assert "make demo" in readme and "make test" in readme
