"""llmtrace's exception classes; each message says what was wrong and what is accepted."""

from __future__ import annotations


class LLMTraceError(Exception):
    """Base class of every error llmtrace raises on purpose."""


class ConfigError(LLMTraceError, ValueError):
    """A configuration value is invalid: the message names the value and the accepted ones."""


class CommandError(LLMTraceError):
    """A command-line failure: printed as one line (no traceback), exit status 2."""


class SourceError(CommandError):
    """A trace source cannot be read (missing file, unreachable or non-Jaeger URL)."""
