"""``llmtrace doctor`` against nothing, against the wrong thing, and against the real stack."""

from __future__ import annotations

import socket

import pytest

from llmtrace.cli import main
from tests.backends.fixtures import TracingStack


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_endpoint_is_one_plain_failure(capsys: pytest.CaptureFixture[str]) -> None:
    port = _unused_port()

    status = main(["doctor", "--endpoint", f"http://127.0.0.1:{port}"])

    output = capsys.readouterr()
    assert status == 1
    failures = [line for line in output.out.splitlines() if "FAIL" in line]
    assert failures == [f"  FAIL  Nothing answers at 127.0.0.1:{port} (connection refused)."]
    assert "Traceback" not in output.out + output.err


def test_endpoint_without_a_host_is_a_command_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--endpoint", "http://:4317"]) == 2
    assert "not a URL" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_test_span_round_trips_to_jaeger(
    tracing_stack: TracingStack, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = (
        tracing_stack.otlp_grpc_endpoint if protocol == "grpc" else tracing_stack.otlp_http_endpoint
    )

    jaeger = tracing_stack.jaeger_url
    status = main(["doctor", "--endpoint", endpoint, "--protocol", protocol, "--jaeger", jaeger])

    output = capsys.readouterr().out
    assert status == 0, output
    assert f"accepted a test span over OTLP {protocol}" in output
    assert "The test span reached Jaeger" in output
    assert "All checks passed." in output


@pytest.mark.integration
def test_an_http_server_that_is_not_otlp_fails_the_export_check(
    tracing_stack: TracingStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Jaeger's query port speaks HTTP and answers any path, /v1/traces too, with its UI page.
    status = main(["doctor", "--endpoint", tracing_stack.jaeger_url, "--protocol", "http/protobuf"])

    output = capsys.readouterr().out
    assert status == 1
    assert "does not accept OTLP over http/protobuf: it answered POST" in output


@pytest.mark.integration
def test_grpc_endpoint_checked_as_http_fails_the_export_check(
    tracing_stack: TracingStack, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        ["doctor", "--endpoint", tracing_stack.otlp_grpc_endpoint, "--protocol", "http/protobuf"]
    )

    output = capsys.readouterr()
    assert status == 1
    assert "does not accept OTLP over http/protobuf" in output.out
    assert "Traceback" not in output.out + output.err
