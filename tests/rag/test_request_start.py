"""X-Request-Start as nginx and Heroku send it."""

from __future__ import annotations

import pytest

from llmtrace.server.request_start import parse_request_start

MOMENT_NS = 1_700_000_000_123_000_000


@pytest.mark.parametrize(
    "header",
    [
        "t=1700000000.123",  # nginx: t=${msec}
        "t=1700000000123",  # Heroku router: milliseconds
        "1700000000123",  # milliseconds without the prefix
        "t=1700000000123000",  # microseconds
        " t=1700000000.123 ",
    ],
)
def test_every_unit_gives_exact_unix_nanoseconds(header: str) -> None:
    assert parse_request_start(header) == MOMENT_NS


@pytest.mark.parametrize("header", ["", "t=", "t=abc", "t=-1", "0", "t=nan", "t=inf"])
def test_garbage_is_not_a_timestamp(header: str) -> None:
    assert parse_request_start(header) is None
