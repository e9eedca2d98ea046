"""Instrumentation that fails is caught, counted, logged, and the call goes on (the first rule
every instrumentation obeys: never change the application's result or exception).

Every failure is counted by kind (``internal_failures()``), for the life of the process. It is
logged with its traceback the first time, and again at most once per kind per
``LOG_INTERVAL_SECONDS`` with the number of occurrences since it was last logged: a failing hook
on a hot path must not flood the log, and a failure that keeps happening must not fall silent
after its first line either.
"""

from __future__ import annotations

import logging
import threading
import time

LOG_INTERVAL_SECONDS = 60.0
# Kinds are a fixed set of messages, some naming a decorated function: past this many, further
# kinds are counted together (the table's memory stays bounded whatever the application does).
MAX_KINDS = 1000
OTHER_KINDS = "other failures (too many kinds to list)"


class _Kind:
    __slots__ = ("count", "logged_at", "unlogged")

    def __init__(self) -> None:
        self.count = 0
        self.unlogged = 0
        self.logged_at = float("-inf")


_kinds: dict[str, _Kind] = {}
_lock = threading.Lock()


def log_once(logger: logging.Logger, what: str) -> None:
    """Count the exception being handled as a failure of kind ``what``, and log it unless this
    kind was logged less than ``LOG_INTERVAL_SECONDS`` ago.

    Call from an ``except`` block.
    """
    now = time.monotonic()
    with _lock:
        kind = _kinds.get(what)
        if kind is None:
            if len(_kinds) >= MAX_KINDS:
                what = OTHER_KINDS
                kind = _kinds.get(what)
            if kind is None:
                kind = _kinds[what] = _Kind()
        kind.count += 1
        if now - kind.logged_at < LOG_INTERVAL_SECONDS:
            kind.unlogged += 1
            return
        count, since, kind.unlogged, kind.logged_at = kind.count, kind.unlogged, 0, now
    if count == 1:  # the first occurrence is always logged, with its traceback alone
        logger.warning("llmtrace: %s (the application is not affected)", what, exc_info=True)
    else:
        logger.warning(
            "llmtrace: %s again, %d times in all, %d since it was last logged (the application "
            "is not affected)",
            what,
            count,
            since + 1,
            exc_info=True,
        )


def internal_failures() -> dict[str, int]:
    """How often each kind of internal failure happened since the process started (or since
    ``reset_logged()``): llmtrace caught each one and the application went on unaffected."""
    with _lock:
        return {what: kind.count for what, kind in _kinds.items()}


def reset_logged() -> None:
    """Forget what was counted and logged (tests)."""
    with _lock:
        _kinds.clear()
