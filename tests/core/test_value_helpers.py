"""The shared checks every instrumentation applies to what an SDK hands over: a count is an int
and not a bool, and a URL without a port reaches the one its scheme implies."""

from __future__ import annotations

import enum
from fractions import Fraction

import pytest

from llmtrace._checks import is_int
from llmtrace._urls import default_port, server_of


class _Status(enum.IntEnum):
    OK = 200


@pytest.mark.parametrize("value", [0, 7, -1, 2**70, _Status.OK])
def test_an_int_or_int_subclass_is_an_int(value: object) -> None:
    assert is_int(value)


@pytest.mark.parametrize("value", [True, False, 3.0, "3", None, Fraction(3), b"3"])
def test_a_bool_float_or_string_is_not_an_int(value: object) -> None:
    assert not is_int(value)


@pytest.mark.parametrize(("scheme", "port"), [("https", 443), ("http", 80), ("", 80)])
def test_the_scheme_implies_the_port(scheme: str, port: int) -> None:
    assert default_port(scheme) == port


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("https://api.openai.com/v1", ("api.openai.com", 443)),
        ("http://localhost:8080/v1", ("localhost", 8080)),
        ("http://[::1]/", ("::1", 80)),
        ("not a url", ("", 80)),
    ],
)
def test_a_base_url_gives_its_host_and_port(url: str, server: tuple[str, int]) -> None:
    assert server_of(url) == server
