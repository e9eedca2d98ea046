"""Transport security of the OTLP exporters: decided as the OpenTelemetry SDK decides it, per
signal, with headers per signal. The real Collector with TLS and mutual TLS is in
tests/backends/test_tls_export.py."""

from __future__ import annotations

import pytest

from llmtrace import options
from llmtrace.errors import ConfigError

from .otlp_receiver import OTLPReceiver
from .test_config import run_script


def _settings(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> options.Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return options.from_environment(options.Settings(exporter="otlp"))


@pytest.mark.parametrize(
    ("env", "secure"),
    [
        # gRPC: a scheme-less endpoint is TLS, as in the SDK (it used to be sent in clear text)
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector.example.com:4317"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4317"}, True),
        # INSECURE decides for an endpoint without scheme ...
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317",
                "OTEL_EXPORTER_OTLP_INSECURE": "true",
            },
            False,
        ),
        # ... and never turns https:// into plaintext
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4317",
                "OTEL_EXPORTER_OTLP_INSECURE": "true",
            },
            True,
        ),
        # the SDK lets INSECURE=false make an http:// gRPC endpoint TLS
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
                "OTEL_EXPORTER_OTLP_INSECURE": "false",
            },
            True,
        ),
        # the signal's own variable wins over the generic one
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317",
                "OTEL_EXPORTER_OTLP_INSECURE": "true",
                "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "false",
            },
            True,
        ),
        # no endpoint: the SDK's default, http://localhost:4317
        ({}, False),
        # OTLP/HTTP: the scheme alone decides
        (
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318",
                "OTEL_EXPORTER_OTLP_INSECURE": "true",
            },
            True,
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            },
            False,
        ),
    ],
)
def test_traces_transport_is_decided_as_the_sdk_decides(monkeypatch, env, secure):
    s = _settings(monkeypatch, env)
    assert options.transport(s, "traces").secure is secure


def test_each_signal_has_its_own_insecure_certificate_and_headers(monkeypatch, tmp_path):
    ca, traces_ca = tmp_path / "ca.pem", tmp_path / "traces-ca.pem"
    ca.write_text("x")
    traces_ca.write_text("x")
    s = _settings(
        monkeypatch,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317",
            "OTEL_EXPORTER_OTLP_METRICS_INSECURE": "true",
            "OTEL_EXPORTER_OTLP_CERTIFICATE": str(ca),
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": str(traces_ca),
            "OTEL_EXPORTER_OTLP_HEADERS": "x-team=llm",
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-metrics=1",
        },
    )
    assert options.transport(s, "traces") == options.Transport(
        secure=True, certificate=str(traces_ca)
    )
    assert options.transport(s, "metrics") == options.Transport(secure=False)
    assert dict(s.headers) == {"x-team": "llm"}
    assert dict(s.metrics_headers) == {"x-metrics": "1"}
    options.validate(s)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_EXPORTER_OTLP_CERTIFICATE": "/no/such/ca.pem"}, "is not a readable file"),
        ({"OTEL_EXPORTER_OTLP_CLIENT_KEY": "{key}"}, "mutual TLS for traces needs both"),
        ({"OTEL_EXPORTER_OTLP_INSECURE": "maybe"}, "is not a boolean"),
        (
            {"OTEL_EXPORTER_OTLP_METRICS_HEADERS": "novalue"},
            "in OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        ),
    ],
)
def test_bad_tls_settings_are_config_errors(monkeypatch, tmp_path, env, message):
    key = tmp_path / "key.pem"
    key.write_text("x")
    env = {name: value.format(key=key) for name, value in env.items()}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "collector:4317"
    with pytest.raises(ConfigError, match=message):
        options.validate(_settings(monkeypatch, env))


def test_metrics_get_their_own_headers_and_spans_theirs(tmp_path):
    with OTLPReceiver() as receiver:
        result = run_script(
            """
            import llmtrace
            llmtrace.init(service_name="headers", exporter="otlp", instrument=False)
            from llmtrace.sdk.metrics import record_model_call
            record_model_call({"gen_ai.request.model": "m"}, 0.5)

            @llmtrace.workflow
            def answer():
                return 42

            answer()
            """,
            tmp_path,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_HEADERS": "x-common=both",
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-signal=traces",
                "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-signal=metrics",
            },
        )
        assert result.returncode == 0, result.stderr
        by_path = receiver.received.headers_by_path
    assert {h.get("x-signal") for h in by_path["/v1/traces"]} == {"traces"}
    assert {h.get("x-signal") for h in by_path["/v1/metrics"]} == {"metrics"}
    # a signal's own variable replaces the generic one, as in the SDK
    assert all("x-common" not in h for hs in by_path.values() for h in hs)


def test_init_after_shutdown_gives_spans_and_metrics_the_new_service_name(tmp_path):
    # llmtrace's providers are set once; their resource answers with the latest init()'s
    # attributes (public API only), the request histograms joined under that same resource.
    with OTLPReceiver() as receiver:
        result = run_script(
            """
            import llmtrace
            from llmtrace.sdk.metrics import record_model_call

            @llmtrace.workflow
            def answer():
                with llmtrace.span("look", stage="retrieval"):
                    return 42

            for name in ("first", "second"):
                llmtrace.init(service_name=name, exporter="otlp", instrument=False)
                record_model_call({"gen_ai.request.model": "m"}, 0.5)
                answer()
                llmtrace.force_flush()
                llmtrace.shutdown()
            """,
            tmp_path,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
        )
        assert result.returncode == 0, result.stderr
        received = receiver.received
    assert sorted(received.span_services) == [
        ("first", "answer"),
        ("first", "look"),
        ("second", "answer"),
        ("second", "look"),
    ]
    # The meter provider outlives shutdown() (its points are exported at exit): what it exports
    # after the second init() is under the second service, in one resource with the request
    # histograms joined to the SDK's own metrics (the GenAI client duration).
    assert received.metric_resources
    for service, names in received.metric_resources:
        assert service == "second"
        assert {"llmtrace.request.stage.duration", "gen_ai.client.operation.duration"} <= set(names)
