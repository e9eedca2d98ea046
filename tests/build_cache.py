"""Where the set-up scripts keep what they build (virtualenvs, binaries, wheels), for the tests
that use it: ``$LLMTRACE_CACHE``, or ``~/.cache/llmtrace`` as in ``scripts/*.sh``."""

from __future__ import annotations

import os
from pathlib import Path

CACHE = Path(os.environ.get("LLMTRACE_CACHE", Path.home() / ".cache" / "llmtrace"))
