"""From an instrumented app through the real OpenTelemetry Collector to the real Jaeger.

The app (jaeger_e2e_app.py, its own process) runs a decorated workflow: a retrieval step, a tool
step and a streamed chat completion with the real ``openai`` client against the simulated model
server. It exports over OTLP (gRPC, then HTTP) to the collector started from
collector-config/otel-collector.yaml, which forwards to Jaeger started from
collector-config/jaeger.yaml. The trace is read back from Jaeger's /api/v3/traces, and the
collector's spanmetrics from its Prometheus endpoint.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmtrace import semconv
from tests.backends.fixtures import TracingStack
from tests.servers.model_server import ModelServer

pytestmark = pytest.mark.integration

APP = Path(__file__).with_name("jaeger_e2e_app.py")
REPO = Path(__file__).resolve().parents[2]
MODEL = "sim-model-e2e"
TOKENS = ["Your", " order", " A-1001", " has", " shipped", "."]
INPUT_TOKENS = 42
FIRST_TOKEN_DELAY = 0.08
TOKEN_DELAY = 0.01
ARRIVAL_TIMEOUT_SECONDS = 30.0
HISTOGRAM = "traces_span_metrics_duration_milliseconds"


@dataclass(frozen=True)
class JaegerSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    start: int = 0
    # (name, unix ns) of each span event, as Jaeger lists them under the span's Logs
    events: tuple[tuple[str, int], ...] = ()


def _otlp_value(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])  # OTLP JSON carries 64-bit integers as strings
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_otlp_value(item) for item in value["arrayValue"].get("values", [])]
    return None


def _attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: _otlp_value(item.get("value", {})) for item in items or []}


def _hex_id(value: str | None) -> str:
    """OTLP JSON ids are hex; some protobuf JSON encoders write them base64: accept both."""
    if not value:
        return ""
    if re.fullmatch(r"[0-9a-f]{16}|[0-9a-f]{32}", value):
        return value
    return base64.b64decode(value).hex()


def _spans_of(payload: dict[str, Any]) -> list[JaegerSpan]:
    spans = []
    for resource_spans in payload.get("result", {}).get("resourceSpans", []):
        resource = _attributes(resource_spans.get("resource", {}).get("attributes"))
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                spans.append(
                    JaegerSpan(
                        trace_id=_hex_id(span.get("traceId")),
                        span_id=_hex_id(span.get("spanId")),
                        parent_span_id=_hex_id(span.get("parentSpanId")),
                        name=span["name"],
                        attributes=_attributes(span.get("attributes")),
                        resource=resource,
                        start=int(span.get("startTimeUnixNano", 0)),
                        events=tuple(
                            (event["name"], int(event["timeUnixNano"]))
                            for event in span.get("events", [])
                        ),
                    )
                )
    return spans


def _app_environment(stack: TracingStack, protocol: str, service: str) -> dict[str, str]:
    endpoint = stack.otlp_grpc_endpoint if protocol == "grpc" else stack.otlp_http_endpoint
    env = {
        **os.environ,
        "OTEL_SERVICE_NAME": service,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    # The test suite's file path setting must not redirect the app's exporter away from OTLP.
    env.pop("LLMTRACE_EXPORTER", None)
    return env


def _run_app(stack: TracingStack, model_server: ModelServer, protocol: str, service: str) -> str:
    """Runs the instrumented app against the collector; returns its trace id."""
    result = subprocess.run(
        [sys.executable, str(APP), model_server.base_url, MODEL],
        env=_app_environment(stack, protocol, service),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"the app failed:\n{result.stderr}"
    output = json.loads(result.stdout.strip().splitlines()[-1])
    assert output["answer"] == "".join(TOKENS)
    return str(output["trace_id"])


@contextlib.contextmanager
def _running_app(
    stack: TracingStack, model_server: ModelServer, service: str
) -> Iterator[Callable[[], None]]:
    """The app as a service: one process answering a request each time the function is called.

    Spanmetrics count per process, so only a process that lives across scrapes shows rates.
    """
    env = _app_environment(stack, "grpc", service)
    # Spans leave at once rather than every 5 s.
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    app = subprocess.Popen(
        [sys.executable, str(APP), model_server.base_url, MODEL, "--per-line"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert app.stdin is not None and app.stdout is not None
    stdin, stdout = app.stdin, app.stdout

    def request() -> None:
        stdin.write("\n")
        stdin.flush()
        assert json.loads(stdout.readline())["answer"] == "".join(TOKENS)

    try:
        yield request
    finally:
        stdin.close()
        assert app.wait(timeout=60) == 0


def _find_trace(
    jaeger_url: str, service: str, trace_id: str, started: datetime
) -> list[JaegerSpan]:
    """Searches Jaeger by service until the trace has arrived with all its spans."""
    params = {
        "query.service_name": service,
        "query.start_time_min": (started - timedelta(minutes=1)).isoformat(),
        "query.start_time_max": (datetime.now(UTC) + timedelta(minutes=1)).isoformat(),
        "query.num_traces": "20",
    }
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
    spans: list[JaegerSpan] = []
    while time.monotonic() < deadline:
        response = httpx.get(f"{jaeger_url}/api/v3/traces", params=params, timeout=5)
        # Jaeger answers 404 until the service has any trace.
        if response.status_code == 200:
            spans = [span for span in _spans_of(response.json()) if span.trace_id == trace_id]
            if len(spans) >= 4:
                return spans
        time.sleep(0.5)
    pytest.fail(f"trace {trace_id} of {service} not complete in Jaeger: {[s.name for s in spans]}")


@pytest.fixture
def slow_model(model_server: ModelServer) -> ModelServer:
    return model_server.configure(
        model=MODEL,
        tokens=TOKENS,
        input_tokens=INPUT_TOKENS,
        first_token_delay=FIRST_TOKEN_DELAY,
        token_delay=TOKEN_DELAY,
    )


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_workflow_trace_arrives_in_jaeger_with_stages_and_timings(
    tracing_stack: TracingStack, slow_model: ModelServer, protocol: str
) -> None:
    service = f"llmtrace-e2e-{protocol.replace('/', '-')}"
    started = datetime.now(UTC)

    trace_id = _run_app(tracing_stack, slow_model, protocol, service)
    spans = _find_trace(tracing_stack.jaeger_url, service, trace_id, started)

    by_name = {span.name: span for span in spans}
    root = by_name["answer_question"]
    retrieval = by_name["retrieval handbook"]
    tool = by_name["execute_tool order_status"]
    chat = by_name[f"chat {MODEL}"]

    assert root.parent_span_id == ""
    assert {retrieval.parent_span_id, tool.parent_span_id, chat.parent_span_id} == {root.span_id}
    assert {span.resource.get("service.name") for span in spans} == {service}

    assert root.attributes[semconv.STAGE] == "other"
    assert retrieval.attributes[semconv.STAGE] == "retrieval"
    assert tool.attributes[semconv.STAGE] == "tool"
    assert chat.attributes[semconv.STAGE] == semconv.LLM_STAGE
    for span in spans:
        assert span.attributes.get(semconv.STAGE) in semconv.SPAN_STAGES, span.name
    for span in (retrieval, tool, chat):
        assert semconv.GEN_AI_OPERATION_NAME in span.attributes, span.name
    assert chat.attributes[semconv.GEN_AI_REQUEST_STREAM] is True

    assert retrieval.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == "handbook"
    assert retrieval.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert chat.attributes[semconv.GEN_AI_REQUEST_MODEL] == MODEL
    assert chat.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == INPUT_TOKENS
    assert chat.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == len(TOKENS)
    time_to_first_token = chat.attributes[semconv.TIME_TO_FIRST_TOKEN]
    # The server never sends the first token earlier; loopback and client overhead add little.
    assert FIRST_TOKEN_DELAY <= time_to_first_token < FIRST_TOKEN_DELAY + 1.0
    assert chat.attributes[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] <= time_to_first_token
    # The last token leaves the server after the others' gaps (a late first one shortens the rest).
    generation = chat.attributes[semconv.GENERATION_TIME]
    assert time_to_first_token + generation >= FIRST_TOKEN_DELAY + TOKEN_DELAY * (len(TOKENS) - 1)
    assert generation > 0
    # The first token is a tick on the model span's bar, where the attribute puts it.
    events = dict(chat.events)
    assert (events[semconv.FIRST_TOKEN_EVENT] - chat.start) / 1e9 == pytest.approx(
        time_to_first_token, abs=0.003
    )
    assert chat.start < events[semconv.RESPONSE_HEADERS_EVENT] <= events[semconv.FIRST_TOKEN_EVENT]


def _histogram_samples(metrics_text: str, suffix: str) -> list[tuple[dict[str, str], float]]:
    samples = []
    for line in metrics_text.splitlines():
        if not line.startswith(f"{HISTOGRAM}_{suffix}{{"):
            continue
        labels_text, _, value = line.rpartition("} ")
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels_text))
        samples.append((labels, float(value)))
    return samples


def test_collector_exposes_latency_histogram_per_stage(
    tracing_stack: TracingStack, slow_model: ModelServer
) -> None:
    service = "llmtrace-e2e-spanmetrics"
    _run_app(tracing_stack, slow_model, "grpc", service)

    wanted = {"other", "retrieval", "tool", semconv.LLM_STAGE}
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
    counts: dict[str, float] = {}
    while time.monotonic() < deadline:
        text = httpx.get(tracing_stack.prometheus_url, timeout=5).text
        counts = {
            labels["llmtrace_stage"]: value
            for labels, value in _histogram_samples(text, "count")
            if labels.get("service_name") == service and "llmtrace_stage" in labels
        }
        if wanted <= counts.keys():
            break
        time.sleep(0.5)
    assert wanted <= counts.keys(), f"stages in spanmetrics: {sorted(counts)}"
    assert all(counts[stage] >= 1 for stage in wanted)

    buckets = {
        labels["le"]
        for labels, _ in _histogram_samples(text, "bucket")
        if labels.get("service_name") == service
    }
    # Milliseconds up to minutes: a cache hit and a long generation fall in different buckets.
    assert {"5", "1000", "300000", "+Inf"} <= buckets

    # The app's own GenAI client metrics arrive over OTLP too (exported when the app exits).
    genai = ""
    while time.monotonic() < deadline:
        text = httpx.get(tracing_stack.prometheus_url, timeout=5).text
        genai = "\n".join(
            line
            for line in text.splitlines()
            if line.startswith("gen_ai_client_operation_duration_seconds_count{")
            and f'job="{service}"' in line
        )
        if genai:
            break
        time.sleep(0.5)
    assert 'gen_ai_operation_name="chat"' in genai, text[-3000:]


def _wait_for_calls(prometheus_url: str, service: str, at_least: float) -> None:
    """Until Prometheus has scraped ``at_least`` calls of the service from the collector."""
    query = f'sum(traces_span_metrics_calls_total{{service_name="{service}"}})'
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
    calls = 0.0
    while time.monotonic() < deadline:
        body = httpx.get(f"{prometheus_url}/api/v1/query", params={"query": query}, timeout=5)
        results = body.json()["data"]["result"]
        calls = float(results[0]["value"][1]) if results else 0.0
        if calls >= at_least:
            return
        time.sleep(0.5)
    pytest.fail(f"Prometheus scraped {calls} of {at_least} calls of {service}")


def _monitor_values(jaeger_url: str, metric: str, service: str, **params: str) -> dict[str, float]:
    """What Jaeger's Monitor tab shows for ``metric`` (latencies, calls, errors): the latest finite
    value of each operation of the service's client and internal spans."""
    response = httpx.get(
        f"{jaeger_url}/api/metrics/{metric}",
        params={
            "service": service,
            "groupByOperation": "true",
            # llmtrace's spans are CLIENT (model calls) and INTERNAL; the tab's default is server.
            "spanKind": ["client", "internal"],
            # What the tab asks for by default: the last hour, a point a minute, rates over 10 min.
            "lookback": "3600000",
            "step": "60000",
            "ratePer": "600000",
            **params,
        },
        timeout=10,
    )
    assert response.status_code == 200, response.text
    values = {}
    for series in response.json()["metrics"]:
        labels = {label["name"]: label["value"] for label in series["labels"]}
        points = [float(point["gaugeValue"]["doubleValue"]) for point in series["metricPoints"]]
        finite = [value for value in points if math.isfinite(value)]
        if finite:
            values[labels["operation"]] = finite[-1]
    return values


def test_monitor_tab_lists_the_services_operations_with_rate_errors_and_latency(
    monitored_stack: TracingStack, slow_model: ModelServer
) -> None:
    service = "llmtrace-e2e-monitor"
    assert monitored_stack.prometheus_server_url is not None
    operations = {"answer_question", "retrieval handbook", "execute_tool order_status"}
    operations.add(f"chat {MODEL}")

    # Rates come from increases between scrapes, and a new series has none: the first request
    # makes the series, the second increases it.
    with _running_app(monitored_stack, slow_model, service) as request:
        request()
        _wait_for_calls(monitored_stack.prometheus_server_url, service, at_least=4)
        request()
        _wait_for_calls(monitored_stack.prometheus_server_url, service, at_least=8)

    jaeger = monitored_stack.jaeger_url
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
    latencies: dict[str, float] = {}
    while time.monotonic() < deadline:
        latencies = _monitor_values(jaeger, "latencies", service, quantile="0.95")
        if operations <= latencies.keys():
            break
        time.sleep(1)
    assert operations <= latencies.keys(), f"operations with a P95: {latencies}"
    calls = _monitor_values(jaeger, "calls", service)
    errors = _monitor_values(jaeger, "errors", service)
    assert operations <= calls.keys() and operations <= errors.keys(), (calls, errors)

    # P95 in milliseconds, interpolated in the collector's buckets: the chat waits at least
    # FIRST_TOKEN_DELAY (in the 50-100 ms bucket or above), the retrieval sleeps 20 ms (10-25).
    assert latencies[f"chat {MODEL}"] >= 50
    assert 10 <= latencies["retrieval handbook"] <= 1000
    assert latencies["answer_question"] >= latencies["retrieval handbook"]
    assert all(calls[operation] > 0 for operation in operations), calls
    assert all(errors[operation] == 0 for operation in operations), errors
