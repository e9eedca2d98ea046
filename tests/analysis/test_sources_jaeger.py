"""Jaeger source errors, against real HTTP servers on loopback (no mocks)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmtrace.analysis.sources import load_traces
from llmtrace.errors import SourceError


class _NotJaeger(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body>Welcome to a web site</body></html>"
        self.send_response(404 if self.path.startswith("/api") else 200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotJaeger)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_jaeger_is_one_clear_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(SourceError) as caught:
        load_traces(url)
    message = str(caught.value)
    assert message.startswith(f"cannot reach Jaeger at {url}")
    assert "\n" not in message


def test_a_web_server_that_is_not_jaeger_is_one_clear_error(web_server: str) -> None:
    with pytest.raises(SourceError) as caught:
        load_traces(web_server, service="svc")
    message = str(caught.value)
    assert "does not look like Jaeger's query service" in message
    assert "HTTP 404 (text/html)" in message
    assert "\n" not in message
