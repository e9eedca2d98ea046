"""A user's type checker sees a decorated function's own signature, not ``Any``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_decorators_keep_the_signature_for_mypy(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
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
