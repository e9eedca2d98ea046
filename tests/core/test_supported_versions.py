"""Every instrumentation is one table row with one supported version range, and that range is
the one pyproject.toml declares; a version outside it is not instrumented, and that is said."""

from __future__ import annotations

import importlib
import logging
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from llmtrace.instrumentation import registry
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor

REPO = Path(__file__).resolve().parents[2]


def _instrumentors() -> dict[str, type[LibraryInstrumentor]]:
    classes = {}
    for name, (module_name, class_name, _library) in registry.INSTRUMENTATIONS.items():
        cls = getattr(
            importlib.import_module(f"llmtrace.instrumentation.{module_name}"), class_name
        )
        assert issubclass(cls, LibraryInstrumentor), name
        classes[name] = cls
    return classes


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[Requirement]] = {
    name: [Requirement(line) for line in lines]
    for name, lines in PROJECT["optional-dependencies"].items()
}
# Extras that are not one instrumented library or framework.
NOT_A_LIBRARY = {"all", "demo", "dev"}


def test_every_instrumentation_declares_the_range_pyproject_declares():
    declared = {
        requirement.name: requirement.specifier
        for extra in EXTRAS.values()
        for requirement in extra
        if requirement.name != PROJECT["name"]  # `all` and `demo` name other extras
    }
    declared.update(
        {Requirement(line).name: Requirement(line).specifier for line in PROJECT["dependencies"]}
    )
    for name, cls in _instrumentors().items():
        if not cls.package:  # the standard library
            continue
        supported = SpecifierSet(cls.supported.replace(" ", ""))
        if cls.package in declared:
            assert declared[cls.package] == supported, (name, declared[cls.package], supported)
        else:
            # Not an install requirement (sentence-transformers needs torch): still a real range.
            assert supported and any(s.operator == "<" for s in supported), name


def test_each_instrumented_library_has_an_extra_named_after_it_and_all_has_every_one():
    libraries = {name for name in EXTRAS if name not in NOT_A_LIBRARY}
    (everything,) = EXTRAS["all"]
    assert everything.name == PROJECT["name"] and everything.extras == libraries
    for name, cls in _instrumentors().items():
        if not cls.package or cls.package == "sentence-transformers" or cls.package == "httpx":
            continue  # the standard library; needs torch; a dependency of llmtrace itself
        owners = [extra for extra in libraries if cls.package in {r.name for r in EXTRAS[extra]}]
        assert len(owners) == 1, (name, owners)
        assert owners[0] == name.replace("_", "-"), (name, owners)


def test_a_plain_install_requires_no_instrumented_library():
    plain = {Requirement(line).name for line in PROJECT["dependencies"]}
    instrumented = {r.name for extra in EXTRAS if extra not in NOT_A_LIBRARY for r in EXTRAS[extra]}
    assert not plain & instrumented


def test_a_version_outside_the_range_is_not_instrumented_and_says_so(monkeypatch, caplog):
    from llmtrace.instrumentation.hops.requests import RequestsInstrumentor

    monkeypatch.setattr(RequestsInstrumentor, "supported", ">= 99")
    with caplog.at_level(logging.WARNING, logger="llmtrace"):
        assert registry.instrument(["requests"]) == []
    (record,) = [r for r in caplog.records if "supports" in r.getMessage()]
    assert "requests" in record.getMessage() and ">= 99" in record.getMessage()
    registry.uninstrument()


@pytest.mark.parametrize("name", ["openai", "anthropic", "httpx", "httpx2", "requests"])
def test_installed_client_libraries_are_in_range_and_instrumented(name):
    try:
        assert registry.instrument([name]) == [name]
    finally:
        registry.uninstrument()
