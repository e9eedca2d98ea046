"""The Jaeger source against real HTTP servers on loopback (no mocks): errors, and how the
trace budget is shared when no service is named."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from llmtrace.analysis.sources import load_traces
from llmtrace.errors import SourceError
from tests.analysis.otlp_lines import attribute, otlp_span
from tests.http_server import QuietHandler, serving


class _NotJaeger(QuietHandler):
    def do_GET(self) -> None:
        body = b"<html><body>Welcome to a web site</body></html>"
        self.send_body(404 if self.path.startswith("/api") else 200, body, "text/html")


@pytest.fixture
def web_server() -> Iterator[str]:
    with serving(_NotJaeger) as url:
        yield url


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


# --- the trace budget across services ------------------------------------------------------------

START = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)


class _FakeJaeger(QuietHandler):
    """Jaeger's query API v3 over a fixed set of one-span traces, newest first as Jaeger answers.

    ``traces`` maps a service to the start times of its traces.
    """

    traces: ClassVar[dict[str, list[datetime]]] = {}

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/api/v3/services":
            self._answer(200, {"services": [*self.traces, "jaeger-all-in-one"]})
        elif url.path == "/api/v3/traces":
            self._find(parse_qs(url.query))
        else:
            self._answer(404, {"error": {"httpCode": 404, "message": "not found"}})

    def _find(self, query: dict[str, list[str]]) -> None:
        service = query["query.service_name"][0]
        low = datetime.fromisoformat(query["query.start_time_min"][0])
        high = datetime.fromisoformat(query["query.start_time_max"][0])
        count = int(query["query.num_traces"][0])
        matching = sorted(
            (
                (moment, index)
                for index, moment in enumerate(self.traces.get(service, []))
                if low <= moment <= high
            ),
            reverse=True,
        )[:count]
        if not matching:
            self._answer(404, {"error": {"httpCode": 404, "message": "trace not found"}})
            return
        spans = [_one_span_trace(service, index, moment) for moment, index in matching]
        resource = {"attributes": [attribute("service.name", service)]}
        document = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
        self._answer(200, {"result": document})

    def _answer(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_body(status, payload, "application/json")


def _trace_id(service: str, index: int) -> str:
    return f"{service.encode().hex()[:16]:0>16}{index:016x}"


def _one_span_trace(service: str, index: int, moment: datetime) -> dict[str, Any]:
    start = int(moment.timestamp()) * 1_000_000_000
    return otlp_span(
        _trace_id(service, index), f"{index + 1:016x}", None, "answer", start, start + 10**8
    )


@pytest.fixture
def fake_jaeger() -> Iterator[type[_FakeJaeger]]:
    handler = type("FakeJaeger", (_FakeJaeger,), {"traces": {}})
    with serving(handler) as url:
        handler.url = url  # type: ignore[attr-defined]
        yield handler


def _traces_per_service(
    jaeger: type[_FakeJaeger], counts: dict[str, int], *, limit: int
) -> dict[str, list[int]]:
    """Store ``counts`` traces per service (the first service's are the newest), read them back
    without ``service`` and say which traces of each service were read (0 = its newest)."""
    for order, (service, count) in enumerate(counts.items()):
        newest = START - timedelta(hours=order)
        jaeger.traces[service] = [newest - timedelta(seconds=i) for i in range(count)]
    traceset = load_traces(
        jaeger.url,  # type: ignore[attr-defined]
        since=START - timedelta(days=1),
        until=START + timedelta(minutes=1),
        limit=limit,
    )
    read: dict[str, list[int]] = {service: [] for service in counts}
    for trace in traceset.traces:
        service = trace.root.service or ""
        assert trace.trace_id.startswith(_trace_id(service, 0)[:16])
        read[service].append(int(trace.trace_id[16:], 16))
    return {service: sorted(indexes) for service, indexes in read.items()}


def test_without_a_service_every_service_gets_an_equal_share_of_the_limit(
    fake_jaeger: type[_FakeJaeger],
) -> None:
    read = _traces_per_service(fake_jaeger, {"alpha": 30, "beta": 30, "gamma": 30}, limit=21)
    assert read == {service: list(range(7)) for service in ("alpha", "beta", "gamma")}


def test_the_share_a_small_service_leaves_goes_to_the_others(
    fake_jaeger: type[_FakeJaeger],
) -> None:
    read = _traces_per_service(fake_jaeger, {"alpha": 30, "beta": 30, "gamma": 3}, limit=20)
    assert read["gamma"] == [0, 1, 2]
    assert sorted(len(indexes) for indexes in (read["alpha"], read["beta"])) == [8, 9]
    # Each service's traces are its most recent ones.
    assert all(indexes == list(range(len(indexes))) for indexes in read.values())


def test_a_service_read_over_several_rounds_continues_where_it_stopped(
    fake_jaeger: type[_FakeJaeger],
) -> None:
    read = _traces_per_service(fake_jaeger, {"alpha": 2, "beta": 600, "gamma": 2}, limit=520)
    assert read["alpha"] == read["gamma"] == [0, 1]
    assert read["beta"] == list(range(516))
