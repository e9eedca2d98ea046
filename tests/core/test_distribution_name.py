"""llmtrace is published as ``llmtrace-otel``: the name ``llmtrace`` on PyPI belongs to an unrelated
project, so every install command a user reads must name ``llmtrace-otel`` (the import name and
the command stay ``llmtrace``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from llmtrace.commands.demo import INSTALL_HINT

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
DISTRIBUTION = "llmtrace-otel"
# `llmtrace` as a requirement on a pip command line: bare, quoted or with extras, but not the
# start of llmtrace-otel, of a wheel's file name (llmtrace_otel-...) or of a path.
BARE_NAME = re.compile(r"""(?<![\w./-])llmtrace(?![\w./-])""")


def test_the_distribution_is_llmtrace_otel_and_its_extras_refer_to_it_by_that_name() -> None:
    assert PROJECT["name"] == DISTRIBUTION
    own = [
        Requirement(line)
        for lines in PROJECT["optional-dependencies"].values()
        for line in lines
        if Requirement(line).name.startswith("llmtrace")
    ]
    assert own, "the all and demo extras name the project's other extras"
    assert {requirement.name for requirement in own} == {DISTRIBUTION}


def test_the_demo_names_the_extra_to_install_under_the_distribution_s_name() -> None:
    assert f"pip install '{DISTRIBUTION}[demo]'" == INSTALL_HINT


def test_every_pip_install_line_in_the_documentation_names_llmtrace_otel() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    pages += sorted((REPO / "examples").rglob("*.md"))
    wrong = [
        f"{page.relative_to(REPO)}:{number}: {line.strip()}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if "pip install" in line
        and BARE_NAME.search(line.split("pip install", 1)[1].split("#", 1)[0])
    ]
    assert not wrong, "\n".join(wrong)
    assert any(
        f"pip install {DISTRIBUTION}" in line
        for line in (REPO / "README.md").read_text().splitlines()
    )
