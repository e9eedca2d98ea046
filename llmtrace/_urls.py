"""What a URL implies when it does not say it."""

from __future__ import annotations

import functools
from urllib.parse import urlsplit


def default_port(scheme: str) -> int:
    """The port a URL of ``scheme`` reaches when it names none: 443 for ``https``, else 80."""
    return 443 if scheme == "https" else 80


@functools.lru_cache(maxsize=64)
def server_of(url: str) -> tuple[str, int]:
    """(host, port) of a base URL; the port the scheme implies when none is given. Cached: a
    client's base URL is asked on every call it makes."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or default_port(parts.scheme)


def jaeger_trace_url(jaeger_url: str, trace_id: str) -> str:
    """The page of one trace in the Jaeger UI at ``jaeger_url`` (``<jaeger>/trace/<id>``)."""
    return f"{jaeger_url.rstrip('/')}/trace/{trace_id}"


def is_web_url(url: str) -> bool:
    """Whether ``url`` is an http(s) URL with a host: the only kind llmtrace links to."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)
