"""Rule 1 of DESIGN.md: instrumentation that fails is caught, logged once, and the call goes on."""

from __future__ import annotations

import logging
import threading

_logged: set[str] = set()
_lock = threading.Lock()


def log_once(logger: logging.Logger, what: str) -> None:
    """Log the exception being handled, once per ``what`` for the life of the process.

    Call from an ``except`` block. A failing hook on a hot path must not flood the log, but its
    first occurrence is always visible with its traceback.
    """
    with _lock:
        if what in _logged:
            return
        _logged.add(what)
    logger.warning("llmtrace: %s (the application is not affected)", what, exc_info=True)


def reset_logged() -> None:
    """Forget what was logged (tests)."""
    with _lock:
        _logged.clear()
