"""init() / shutdown(): options, environment variables, errors, provider reuse, flush at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

import llmtrace
from llmtrace import options
from llmtrace.sdk import config
from llmtrace.sdk.exporters.file import OTLPJsonFileExporter

REPO = Path(__file__).resolve().parents[2]


def run_script(
    code: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def spans_in(path: Path) -> list[dict]:
    spans = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            service = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}["service.name"]
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    spans.append({**span, "service": service["stringValue"]})
    return spans


def test_short_script_writes_the_embedded_file_by_default_and_flushes_at_exit(tmp_path):
    result = run_script(
        """
        import llmtrace
        llmtrace.init(service_name="support-bot", instrument=False)

        @llmtrace.workflow
        def answer():
            return 42

        answer()
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    spans = spans_in(tmp_path / ".llmtrace" / "traces.jsonl")
    assert [(s["name"], s["service"]) for s in spans] == [("answer", "support-bot")]


def test_environment_variables_configure_everything(tmp_path):
    result = run_script(
        """
        import llmtrace
        llmtrace.init(instrument=False)
        s = llmtrace.settings()
        print(s.service_name, s.exporter, s.file_path, s.sampler, s.sample_ratio, s.capture_content)
        with llmtrace.span("x", stage="tool"):
            pass
        """,
        tmp_path,
        {
            "OTEL_SERVICE_NAME": "from-env",
            "LLMTRACE_EXPORTER": "file",
            "LLMTRACE_FILE_PATH": "out/t.jsonl",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "1.0",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        },
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "from-env",
        "file",
        "out/t.jsonl",
        "parentbased_traceidratio",
        "1.0",
        "True",
    ]
    assert spans_in(tmp_path / "out" / "t.jsonl")[0]["service"] == "from-env"


def test_arguments_win_over_environment(monkeypatch):
    monkeypatch.setenv("OTEL_SERVICE_NAME", "env-name")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=abc%20def,x-team=llm")
    s = options.from_environment(options.Settings())
    assert s.endpoint == "http://collector:4318"
    assert s.protocol == "http/protobuf"
    assert dict(s.headers) == {"api-key": "abc def", "x-team": "llm"}
    assert options.resolved_exporter(s) == "otlp"  # auto: an endpoint is configured
    exporter = config.make_exporter(s)
    assert isinstance(exporter, HttpExporter)
    assert exporter._endpoint == "http://collector:4318/v1/traces"
    grpc = config.make_exporter(options.Settings(exporter="otlp", endpoint="http://localhost:4317"))
    assert isinstance(grpc, GrpcExporter)
    assert isinstance(config.make_exporter(options.Settings()), OTLPJsonFileExporter)
    assert config.make_exporter(options.Settings(exporter="none")) is None


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        (
            {"exporter": "jaeger"},
            {},
            "exporter='jaeger' is not known; accepted: auto, otlp, file, console, none",
        ),
        (
            {"protocol": "http/json"},
            {},
            "protocol='http/json' is not supported; accepted: grpc, http/protobuf",
        ),
        ({"sample_ratio": 1.5}, {}, "sample_ratio=1.5 is out of range; accepted: 0.0 to 1.0"),
        (
            {},
            {"OTEL_TRACES_SAMPLER": "sometimes"},
            "OTEL_TRACES_SAMPLER='sometimes' is not supported",
        ),
        ({}, {"OTEL_TRACES_SAMPLER_ARG": "half"}, "OTEL_TRACES_SAMPLER_ARG='half' is not a number"),
        (
            {},
            {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "maybe"},
            "is not a capture mode; accepted: no_content, span_only, event_only",
        ),
        ({}, {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "has no '='"),
        (
            {"instrument": ["openai", "nosuchlib"]},
            {},
            "instrument=['nosuchlib'] names no known instrumentation",
        ),
    ],
)
def test_bad_configuration_raises_config_error_naming_value_and_accepted(
    monkeypatch, kwargs, env, message
):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(llmtrace.ConfigError) as caught:
        llmtrace.init(**kwargs)
    assert message in str(caught.value)
    assert not config.initialized()


def _exporting_processors(provider) -> list[object]:
    # The request-context processor is added once per provider and stays: it exports nothing.
    from llmtrace.sdk._attached import attached
    from llmtrace.sdk.request_context import RequestContextProcessor

    return [p for p in attached(provider) if not isinstance(p, RequestContextProcessor)]


def test_reuses_the_applications_provider_and_is_idempotent(spans, provider, tmp_path):
    processors_before = _exporting_processors(provider)
    llmtrace.init(exporter="file", file_path=tmp_path / "t.jsonl", instrument=False)
    try:
        llmtrace.init(exporter="file", file_path=tmp_path / "other.jsonl", instrument=False)
        from opentelemetry import trace

        assert trace.get_tracer_provider() is provider
        assert len(_exporting_processors(provider)) == len(processors_before) + 1
        with llmtrace.span("both", stage="tool"):
            pass
        llmtrace.force_flush()
    finally:
        llmtrace.shutdown()
    assert _exporting_processors(provider) == processors_before
    assert [s.name for s in spans.get_finished_spans()] == ["both"]  # the app's exporter got it
    assert [s["name"] for s in spans_in(tmp_path / "t.jsonl")] == ["both"]  # and llmtrace's file
    assert not (tmp_path / "other.jsonl").exists()


def test_auto_exporter_adds_nothing_to_an_applications_provider(provider):
    before = _exporting_processors(provider)
    llmtrace.init(instrument=False)
    try:
        assert _exporting_processors(provider) == before
    finally:
        llmtrace.shutdown()


def test_sample_ratio_zero_records_nothing_and_calls_still_work(tmp_path):
    result = run_script(
        """
        import llmtrace
        llmtrace.init(service_name="s", sample_ratio=0.0, instrument=False)

        @llmtrace.tool(name="t")
        def work(x):
            return x * 2

        @llmtrace.llm(model="m")
        def stream():
            yield "a"

        assert work(21) == 42
        assert list(stream()) == ["a"]
        with llmtrace.stage("queue"):
            pass
        print("ok")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    path = tmp_path / ".llmtrace" / "traces.jsonl"
    assert not path.exists() or path.read_text() == ""


def test_children_of_an_unsampled_parent_are_skipped(spans):
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    parent = NonRecordingSpan(
        SpanContext(trace_id=1, span_id=2, is_remote=True, trace_flags=TraceFlags(0))
    )
    with trace.use_span(parent), llmtrace.stage("retrieval") as span:
        assert span is trace.INVALID_SPAN
        assert trace.get_current_span() is parent
    assert spans.get_finished_spans() == ()


def test_signal_specific_endpoints_are_used_as_given_and_metrics_never_use_the_traces_url(
    monkeypatch,
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/custom/traces")
    s = options.from_environment(options.Settings())
    assert options.traces_endpoint(s) == "http://collector:4318/custom/traces"
    assert options.metrics_endpoint(s) is None  # the metrics exporter's own default
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    s = options.from_environment(options.Settings())
    assert options.traces_endpoint(s) == "http://collector:4318/custom/traces"
    assert options.metrics_endpoint(s) == "http://collector:4318/v1/metrics"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://metrics:9000/in")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf")
    s = options.from_environment(options.Settings())
    assert options.metrics_endpoint(s) == "http://metrics:9000/in"
    # A base endpoint given as the traces URL is still understood as the base.
    s = options.Settings(protocol="http/protobuf", endpoint="http://c:4318/v1/traces")
    assert options.traces_endpoint(s) == "http://c:4318/v1/traces"
    assert (
        options.metrics_endpoint(
            options.Settings(metrics_protocol="http/protobuf", endpoint="http://c:4318/v1/traces")
        )
        == "http://c:4318/v1/metrics"
    )


def test_otel_sdk_disabled_turns_llmtrace_off_entirely(tmp_path):
    result = run_script(
        """
        import llmtrace, requests
        from opentelemetry import trace
        from llmtrace.instrumentation import registry

        llmtrace.init(service_name="off")

        @llmtrace.workflow
        def answer():
            return 42

        assert answer() == 42
        print(type(trace.get_tracer_provider()).__name__, sorted(registry._active))
        print(hasattr(requests.Session.send, "__wrapped__"))
        """,
        tmp_path,
        {"OTEL_SDK_DISABLED": "true"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ProxyTracerProvider", "[]", "False"]
    assert not (tmp_path / ".llmtrace").exists()


def test_init_after_shutdown_takes_the_new_service_name_and_sampler(tmp_path):
    result = run_script(
        """
        import llmtrace
        llmtrace.init(service_name="first", instrument=False)
        with llmtrace.span("one", stage="tool"):
            pass
        llmtrace.shutdown()
        llmtrace.init(service_name="second", sample_ratio=0.0, instrument=False)
        with llmtrace.span("dropped", stage="tool"):
            pass
        llmtrace.shutdown()
        llmtrace.init(service_name="third", sample_ratio=1.0, instrument=False)
        with llmtrace.span("three", stage="tool"):
            pass
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    spans = spans_in(tmp_path / ".llmtrace" / "traces.jsonl")
    assert [(s["name"], s["service"]) for s in spans] == [("one", "first"), ("three", "third")]


def test_shutdown_timeout_option_and_variable(monkeypatch):
    assert options.Settings().shutdown_timeout == 5.0
    monkeypatch.setenv("LLMTRACE_SHUTDOWN_TIMEOUT", "1.5")
    assert options.from_environment(options.Settings()).shutdown_timeout == 1.5
    monkeypatch.setenv("LLMTRACE_SHUTDOWN_TIMEOUT", "soon")
    with pytest.raises(llmtrace.ConfigError, match="LLMTRACE_SHUTDOWN_TIMEOUT='soon'"):
        options.from_environment(options.Settings())
    with pytest.raises(llmtrace.ConfigError, match="shutdown_timeout"):
        options.validate(options.Settings(shutdown_timeout=-1))


def test_the_jaeger_url_links_lead_to_is_init_s_else_the_variable(monkeypatch):
    monkeypatch.setenv("LLMTRACE_JAEGER_URL", "http://from-env:16686")
    assert options.jaeger_url() == "http://from-env:16686"
    llmtrace.init(exporter="none", instrument=False, jaeger_url="https://jaeger.example")
    try:
        assert options.jaeger_url() == "https://jaeger.example"
    finally:
        llmtrace.shutdown()
    monkeypatch.setenv("LLMTRACE_JAEGER_URL", "localhost:16686")
    with pytest.raises(llmtrace.ConfigError, match=r"jaeger_url='localhost:16686'.*http://"):
        options.jaeger_url()
    with pytest.raises(llmtrace.ConfigError, match="jaeger_url='javascript:x'"):
        options.validate(options.Settings(jaeger_url="javascript:x"))


def test_instrument_and_uninstrument_reject_unknown_names():
    with pytest.raises(llmtrace.ConfigError, match=r"\['opneai'\].*accepted: .*openai"):
        llmtrace.instrument(["opneai"])
    with pytest.raises(llmtrace.ConfigError, match="opneai"):
        llmtrace.uninstrument(["opneai"])


def test_uninstrument_takes_names():
    import httpx
    import requests

    from llmtrace.instrumentation import registry
    from llmtrace.sdk.gate import is_wrapped_by_llmtrace

    assert llmtrace.instrument(["requests", "httpx"]) == ["requests", "httpx"]
    try:
        llmtrace.uninstrument(["requests"])
        assert registry.instrumented() == ["httpx"]
        assert not is_wrapped_by_llmtrace(requests.Session.__dict__["send"])
        assert is_wrapped_by_llmtrace(httpx.Client.__dict__["send"])
    finally:
        llmtrace.uninstrument()
    assert registry.instrumented() == []


def test_resource_attributes_sampler_and_extra_exporters(tmp_path):
    result = run_script(
        """
        import logging
        import llmtrace
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

        seen, extra = InMemorySpanExporter(), InMemorySpanExporter()
        llmtrace.init(
            instrument=False,
            resource_attributes={"deployment.environment.name": "staging"},
            sampler=ALWAYS_ON,
            sample_ratio=0.0,  # the sampler wins
            span_processors=[SimpleSpanProcessor(seen)],
            exporters=[extra],
        )
        with llmtrace.span("kept", stage="tool"):
            pass
        llmtrace.force_flush()
        (span,) = seen.get_finished_spans()
        print(span.resource.attributes["deployment.environment.name"])
        print(span.resource.attributes["service.name"])
        print([s.name for s in extra.get_finished_spans()], llmtrace.delivery_stats().delivered)
        llmtrace.shutdown()
        llmtrace.init(instrument=False, sampler=ALWAYS_OFF)
        with llmtrace.span("dropped", stage="tool"):
            pass
        print(len(seen.get_finished_spans()))
        """,
        tmp_path,
        {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource-env,team=search"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["staging", "from-resource-env", "['kept'] 2", "1"]


def test_options_the_applications_provider_owns_are_said_to_have_no_effect(tmp_path):
    result = run_script(
        """
        import llmtrace
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())
        llmtrace.init(service_name="ignored", sample_ratio=0.5, instrument=False)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "cannot take effect" in line]
    assert len(warnings) == 1, result.stderr
    assert "service_name, sample_ratio" in warnings[0]
