"""The framework tests' model server runs in their process, sharing its interpreter lock: a
thread the first token wakes waits for that lock up to the switch interval (5 ms by default, the
very bound TTFT is checked to), which a model server in its own process never adds. The tests
switch threads ten times as often."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _short_switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
