"""``llmtrace.init()`` adds the request breakdown processor: when, with which sampler, and its
options from arguments and environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, TraceIdRatioBased

import llmtrace
from llmtrace.errors import ConfigError
from llmtrace.options import options_from
from llmtrace.sdk import config
from llmtrace.sdk.request_metrics import REQUEST_DURATION, STAGE_DURATION, RecordUnsampled
from tests.core.otlp_receiver import OTLPReceiver, histogram_counts
from tests.core.test_config import run_script


def _points(reader: InMemoryMetricReader, name: str) -> list[dict[str, object]]:
    data = reader.get_metrics_data()
    return [
        {**point.attributes, "count": point.count, "sum": point.sum}  # type: ignore[union-attr]
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def _count(reader: InMemoryMetricReader, name: str, request: str) -> int:
    return sum(
        int(point["count"])  # type: ignore[call-overload]
        for point in _points(reader, name)
        if point.get("llmtrace.request.name") == request
    )


def test_init_breaks_requests_down_on_the_applications_providers(
    provider: TracerProvider, metric_reader: InMemoryMetricReader
) -> None:
    # On the application's own providers, only when asked for.
    llmtrace.init(instrument=False, request_metrics=True)
    try:
        processor = config.request_metrics_processor()
        assert processor is not None

        @llmtrace.workflow(name="init-wired")
        def handle() -> None:
            with llmtrace.stage("retrieval"):
                pass

        before = _count(metric_reader, REQUEST_DURATION, "init-wired")
        handle()
        handle()
        assert _count(metric_reader, REQUEST_DURATION, "init-wired") == before + 2
        stages = {
            point["llmtrace.stage"]
            for point in _points(metric_reader, STAGE_DURATION)
            if point.get("llmtrace.request.name") == "init-wired"
        }
        assert "retrieval" in stages
    finally:
        llmtrace.shutdown()
    assert config.request_metrics_processor() is None
    from llmtrace.sdk._attached import attached

    assert processor not in attached(provider)


@pytest.mark.parametrize("asked", [None, False])
def test_on_the_applications_providers_nothing_is_added_unless_asked(asked: bool | None) -> None:
    llmtrace.init(instrument=False, request_metrics=asked)
    try:
        assert config.request_metrics_processor() is None
    finally:
        llmtrace.shutdown()


def test_options_come_from_arguments_then_environment() -> None:
    environ = {
        "LLMTRACE_REQUEST_METRICS": "true",
        "LLMTRACE_REQUEST_METRICS_UNSAMPLED": "1",
        "LLMTRACE_REQUEST_METRICS_MAX_TRACES": "50",
        "LLMTRACE_REQUEST_METRICS_MAX_SPANS": "20",
        "LLMTRACE_REQUEST_METRICS_ROOT_TIMEOUT": "2.5",
        "LLMTRACE_REQUEST_METRICS_HISTOGRAM": "exponential",
    }
    options = options_from(environ=environ)
    assert (options.enabled, options.unsampled, options.max_traces, options.max_spans) == (
        True,
        True,
        50,
        20,
    )
    assert (options.root_timeout, options.histogram) == (2.5, "exponential")
    assert options_from(False, unsampled=False, environ=environ).enabled is False
    assert options_from(environ={"LLMTRACE_REQUEST_METRICS": "auto"}).enabled is None
    for bad in (
        {"LLMTRACE_REQUEST_METRICS": "maybe"},
        {"LLMTRACE_REQUEST_METRICS_MAX_TRACES": "0"},
        {"LLMTRACE_REQUEST_METRICS_HISTOGRAM": "native"},
    ):
        with pytest.raises(ConfigError, match=r"LLMTRACE_REQUEST_METRICS|histogram"):
            options_from(environ=bad)


def test_record_unsampled_records_what_the_sampler_drops_without_sampling_it() -> None:
    sampler = RecordUnsampled(ParentBased(TraceIdRatioBased(0.0)))
    result = sampler.should_sample(None, 12345, "root")
    assert result.decision is Decision.RECORD_ONLY
    kept = RecordUnsampled(ParentBased(TraceIdRatioBased(1.0))).should_sample(None, 1, "root")
    assert kept.decision is Decision.RECORD_AND_SAMPLE


def test_unsampled_requests_are_counted_and_not_exported_by_init(tmp_path: Path) -> None:
    """A real process: llmtrace's own providers, OTLP metrics to a port nobody listens on are
    replaced by an in-memory reader the script installs first; the file gets sampled spans only."""
    result = run_script(
        """
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        import llmtrace

        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        llmtrace.init(service_name="s", exporter="file", sample_ratio=0.0, instrument=False,
                      request_metrics=True, request_metrics_unsampled=True)

        @llmtrace.workflow(name="w")
        def work():
            return 1

        for _ in range(25):
            work()
        points = [p for rm in reader.get_metrics_data().resource_metrics
                  for sm in rm.scope_metrics for m in sm.metrics
                  if m.name == "llmtrace.request.duration" for p in m.data.data_points]
        print(sum(p.count for p in points))
        from llmtrace.sdk import gate
        print(gate.record_unsampled)
        llmtrace.shutdown()
        print(gate.record_unsampled)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    # the instrumentation gates read gate.record_unsampled: on while in force
    assert result.stdout.split() == ["25", "True", "False"]
    path = tmp_path / ".llmtrace" / "traces.jsonl"
    assert not path.exists() or path.read_text() == ""


def test_an_unsampled_requests_children_keep_their_stages(tmp_path: Path) -> None:
    """The instrumentation gates let children of an unsampled request record while unsampled
    requests are recorded for their breakdown: its retrieval is counted as retrieval, not as the
    workflow's time."""
    result = run_script(
        """
        import time
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        import llmtrace

        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        llmtrace.init(service_name="s", exporter="file", sample_ratio=0.0, instrument=False,
                      request_metrics=True, request_metrics_unsampled=True)

        @llmtrace.retrieval(data_source="docs")
        def search():
            time.sleep(0.01)

        @llmtrace.workflow(name="w")
        def work():
            search()

        for _ in range(5):
            work()
        counts = {}
        for rm in reader.get_metrics_data().resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == "llmtrace.request.stage.duration":
                        for p in m.data.data_points:
                            stage = p.attributes["llmtrace.stage"]
                            counts[stage] = counts.get(stage, 0) + p.count
                            if stage == "retrieval":
                                print("mean", p.sum / p.count >= 0.01)
        print(counts.get("retrieval"))
        llmtrace.shutdown()
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["mean", "True", "5"]


_SERVICE = """
import random, urllib.request
random.seed(11)
import openai
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
import llmtrace
from llmtrace.server import LLMTraceMiddleware
from tests.rag.asgi_server import serve

llmtrace.init(service_name="svc", endpoint={receiver!r}, protocol="http/protobuf",
              sample_ratio=0.1, instrument=["openai", "httpx2"]{options})
client = openai.AsyncOpenAI(base_url={model!r}, api_key="k", max_retries=0)


async def answer(request):
    reply = await client.chat.completions.create(
        model="svc-model", messages=[{{"role": "user", "content": "hi"}}])
    return PlainTextResponse(reply.choices[0].message.content)


app = Starlette(routes=[Route("/answer", answer)])
app.add_middleware(LLMTraceMiddleware)
with serve(app) as url:
    for _ in range(200):
        urllib.request.urlopen(url + "/answer").read()
# spans and metrics are flushed to the receiver at exit
"""


@pytest.mark.parametrize(
    "options", ["", ", request_metrics_unsampled=False"], ids=["default", "off"]
)
def test_a_service_at_a_tenth_sampled_counts_every_request_by_default(
    model_server, tmp_path: Path, options: str
) -> None:  # type: ignore[no-untyped-def]
    """A real ASGI service behind the middleware, llmtrace's defaults with OTLP: every request is
    in the request metrics (the dropped ones recorded for their breakdown only, never exported),
    unless ``request_metrics_unsampled=False``; every model call is in the GenAI metrics either
    way, while about a tenth of the requests are exported."""
    with OTLPReceiver() as receiver:
        code = _SERVICE.format(receiver=receiver.url, model=model_server.base_url, options=options)
        result = run_script(code, tmp_path)
        assert result.returncode == 0, result.stderr
        exported = [name for name in receiver.received.span_names if name == "GET /answer"]
        model_spans = [name for name in receiver.received.span_names if name.startswith("chat ")]
        requests = histogram_counts(receiver.received, REQUEST_DURATION)
        calls = histogram_counts(receiver.received, "gen_ai.client.operation.duration")
    # Binomial(200, 0.1): fewer than 6 or more than 39 happens once in tens of thousands
    assert 6 <= len(exported) <= 39
    assert len(model_spans) == len(exported)
    assert [count for _, count in calls] == [200]
    (request_attributes, counted), *others = requests
    assert not others
    assert request_attributes["llmtrace.request.name"] == "/answer"
    assert request_attributes["gen_ai.request.model"] == "svc-model"
    assert counted == (200 if not options else len(exported))
