"""A user's type checker sees a decorated function's own signature, not ``Any``."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from tests.build_cache import CACHE

SAMPLE = Path(__file__).with_name("decorated_sample.py")

EXPECTED = [
    'Revealed type is "def (question: str, *, top_k: int =) -> str"',
    'Revealed type is "def (query: str) -> typing.Coroutine[Any, Any, list[str]]"',
    'Revealed type is "def (prompt: str) -> typing.Iterator[str]"',
    'Revealed type is "def (limit: int) -> typing.AsyncIterator[int]"',
    'Revealed type is "def (parts: list[str]) -> str"',
    'Revealed type is "def (text: str) -> list[float]"',
    'Revealed type is "def (candidates: list[str]) -> list[str]"',
    'Revealed type is "def (key: str) -> int"',
]


def _cache_dir() -> Path:
    """mypy's cache, kept between runs in llmtrace's cache (one per environment): checking the
    sample against llmtrace and OpenTelemetry from an empty cache takes 20 s of CPU, from a warm
    one a second or two. mypy checks every cached module against its source and its own
    version, so a stale entry is rebuilt, never trusted."""
    environment = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    return CACHE / "mypy-typing" / environment


def test_decorators_keep_the_signature_for_mypy():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(_cache_dir()),
            str(SAMPLE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    revealed = [
        line.split(": note: ", 1)[1]
        for line in result.stdout.splitlines()
        if ": note: Revealed" in line
    ]
    # Older mypy versions print ``builtins.str`` where newer ones print ``str``.
    revealed = [line.replace("builtins.", "") for line in revealed]
    assert revealed == EXPECTED, result.stdout
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 1, result.stdout
    assert 'Argument 1 to "answer" has incompatible type "int"' in errors[0]
