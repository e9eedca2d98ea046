"""A release's version is written once (llmtrace/_version.py), and CHANGELOG.md's newest release is
that version (docs/versioning.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import llmtrace

REPO = Path(__file__).resolve().parents[2]
# A Keep a Changelog heading: "## [0.1.0] - 2027-01-15", or "- Unreleased" until the day.
RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\] - (?P<date>\d{4}-\d\d-\d\d|Unreleased)$", re.M)


def test_the_changelog_s_newest_release_is_the_version_llmtrace_reports() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    releases = [match["version"] for match in RELEASE.finditer(changelog)]
    assert releases, "CHANGELOG.md has no release heading"
    assert releases[0] == llmtrace.__version__
    assert f"[{releases[0]}]: " in changelog  # the heading's link
    sections = re.findall(r"^### (\w+)$", changelog, re.M)
    assert set(sections) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_version_is_written_only_in_llmtrace_version_py() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "llmtrace._version.__version__"
    }
    # The native reader's crate is only ever built into llmtrace's wheels: no version of its own.
    crate = tomllib.loads((REPO / "native" / "Cargo.toml").read_text())
    assert crate["package"]["publish"] is False
    assert "version" not in crate["package"]
    assigned = [
        path.relative_to(REPO).as_posix()
        for path in (REPO / "llmtrace").rglob("*.py")
        if re.search(r"^__version__ = ", path.read_text(), re.M)
    ]
    assert assigned == ["llmtrace/_version.py"]


def test_the_versioning_policy_the_changelog_points_to_exists() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "(docs/versioning.md)" in changelog
    policy = (REPO / "docs" / "versioning.md").read_text()
    assert "llmtrace.__all__" in policy and "llmtrace/_version.py" in policy
