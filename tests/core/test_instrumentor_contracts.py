"""The contracts an OpenTelemetry user expects of an instrumentation library: ``instrument()``
honours the providers it is given, a thread started during a request belongs to it only while
the request is open, and internal failures are counted and logged again over time.

Each scenario runs in its own process, the way users run an application: providers and patches
are per process."""

from __future__ import annotations

import json
import logging
import sys

from llmtrace.sdk import _safety
from tests.subprocesses import clean_environment, run

from .test_config import REPO

PROVIDERS_APP = """
import json, sys
import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import llmtrace

spans = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
reader = InMemoryMetricReader()
meter_provider = MeterProvider(metric_readers=[reader])

# No global provider is set: everything must go to the ones given.
llmtrace.instrument(["openai"], tracer_provider=tracer_provider, meter_provider=meter_provider)
client = openai.OpenAI(base_url=sys.argv[1], api_key="k", max_retries=0)
client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
data = reader.get_metrics_data()
metric_names = sorted(
    metric.name
    for resource in data.resource_metrics
    for scope in resource.scope_metrics
    for metric in scope.metrics
)
print(json.dumps({
    "spans": [span.name for span in spans.get_finished_spans()],
    "metrics": metric_names,
}))
"""


def test_instrument_honours_the_tracer_and_meter_providers_given(tmp_path, model_server):
    (tmp_path / "app.py").write_text(PROVIDERS_APP)
    env = clean_environment(PYTHONPATH=str(REPO), OTEL_METRICS_EXPORTER="none")
    result = run([sys.executable, "app.py", model_server.base_url], tmp_path, env)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["spans"] == ["chat m"]
    assert "gen_ai.client.operation.duration" in seen["metrics"]
    assert "gen_ai.client.token.usage" in seen["metrics"]


THREADS_APP = """
import json, threading, time
import llmtrace
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
llmtrace.init(instrument=["threading"])

jobs = []
worker = None

def work_forever():
    while True:
        job = jobs.pop(0) if jobs else None
        if job is None:
            time.sleep(0.005)
            continue
        if job == "stop":
            return
        with llmtrace.span(job):
            pass
        job_done.set()

job_done = threading.Event()

@llmtrace.workflow(name="request")
def handle(number):
    global worker
    if worker is None:
        # a long-lived worker, started lazily by the first request that needs it
        worker = threading.Thread(target=work_forever, daemon=True)
        worker.start()
    # work done for the request on a thread started for it, joined before it ends
    helper = threading.Thread(target=lambda: llmtrace.span(f"fan-out {number}")(lambda: 0)())
    helper.start()
    helper.join()
    job_done.clear()
    jobs.append(f"during {number}")
    job_done.wait(5)

with llmtrace.context(session_id="first"):
    handle(1)
handle(2)
job_done.clear()
jobs.append("after both")
job_done.wait(5)
jobs.append("stop")
worker.join(5)

everything = spans.get_finished_spans()
finished = {span.name: span for span in everything if span.name != "request"}
requests = {s.context.span_id: s for s in everything if s.name == "request"}
def describe(name):
    span = finished[name]
    parent = span.parent.span_id if span.parent else None
    return {
        "parent": "request" if parent in requests else ("none" if parent is None else "other"),
        "trace_of_request": any(
            r.context.trace_id == span.context.trace_id for r in requests.values()
        ),
        "session": span.attributes.get("session.id"),
    }
print(json.dumps({name: describe(name) for name in finished}))
"""


def test_a_thread_belongs_to_the_request_that_started_it_only_while_that_request_is_open(
    tmp_path,
):
    (tmp_path / "app.py").write_text(THREADS_APP)
    env = clean_environment(PYTHONPATH=str(REPO))
    result = run([sys.executable, "app.py"], tmp_path, env)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    # fan-out threads started for a request are in it
    assert seen["fan-out 1"]["parent"] == "request" and seen["fan-out 1"]["session"] == "first"
    assert seen["fan-out 2"]["parent"] == "request"
    # the lazily started worker's job during the first request is in that request ...
    assert seen["during 1"]["parent"] == "request" and seen["during 1"]["session"] == "first"
    # ... but once that request has ended, its jobs are not parented under it
    assert seen["during 2"]["parent"] == "none", seen["during 2"]
    assert seen["during 2"]["session"] is None
    assert seen["after both"] == {"parent": "none", "trace_of_request": False, "session": None}


def test_internal_failures_are_counted_and_logged_again_after_the_interval(monkeypatch, caplog):
    _safety.reset_logged()
    logger = logging.getLogger("llmtrace.test")
    clock = [1000.0]
    monkeypatch.setattr(_safety.time, "monotonic", lambda: clock[0])

    def fail(times: int) -> None:
        for _ in range(times):
            try:
                raise ValueError("boom")
            except ValueError:
                _safety.log_once(logger, "hook failed")

    with caplog.at_level(logging.WARNING, logger="llmtrace.test"):
        fail(5)
        assert len(caplog.records) == 1
        clock[0] += _safety.LOG_INTERVAL_SECONDS - 1
        fail(3)
        assert len(caplog.records) == 1
        clock[0] += 2
        fail(1)
    assert len(caplog.records) == 2
    assert "9 times in all, 8 since it was last logged" in caplog.records[1].getMessage()
    import llmtrace

    assert llmtrace.internal_failures() == {"hook failed": 9}
    _safety.reset_logged()
    assert llmtrace.internal_failures() == {}
