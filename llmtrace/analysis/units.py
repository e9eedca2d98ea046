"""How durations and counts are written for people (advice text and renderers share it)."""

from __future__ import annotations

import math


def format_seconds(seconds: float | None) -> str:
    """``1.24 s``, ``312 ms``, ``4.2 ms``, ``85 µs``: three significant figures at most."""
    if seconds is None or math.isnan(seconds):
        return "-"
    magnitude = abs(seconds)
    if magnitude >= 100:
        return f"{seconds:.0f} s"
    if magnitude >= 1:
        return f"{seconds:.2f} s"
    if magnitude >= 0.1:
        return f"{seconds * 1000:.0f} ms"
    if magnitude >= 0.001:
        return f"{seconds * 1000:.1f} ms"
    if magnitude == 0:
        return "0 ms"
    return f"{seconds * 1_000_000:.0f} µs"


def format_signed_seconds(seconds: float) -> str:
    return ("+" if seconds > 0 else "") + format_seconds(seconds)


def format_count(value: float | None) -> str:
    """``3,200`` for counts, one decimal below 10."""
    if value is None or math.isnan(value):
        return "-"
    if abs(value) < 10 and value != int(value):
        return f"{value:.1f}"
    return f"{value:,.0f}"


def format_share(share: float) -> str:
    return f"{share * 100:.1f}%"
