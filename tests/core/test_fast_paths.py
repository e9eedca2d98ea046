"""The fast paths past other libraries' public APIs (``llmtrace.sdk._compat``): each holds only on
the releases it was verified on, the environment can turn them off, and with every one off
llmtrace gives the same spans, attributes, phases and request metrics (checked on a real
application, in real subprocesses, and by running the core checks of the suite that way)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llmtrace.sdk import _compat

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("version", "lowest", "newest", "inside"),
    [
        ("1.45.2", "1.30.0", "1.45", True),
        ("1.30.0", "1.30.0", "1.45", True),
        ("1.29.9", "1.30.0", "1.45", False),
        ("1.46.0", "1.30.0", "1.45", False),
        ("2.0.0", "1.30.0", "1.45", False),
        ("1.46.0rc1", "1.30.0", "1.45", False),
        ("1.0.9", "1.0.9", "1.0", True),
        ("1.0.10", "1.0.9", "1.0", True),
        ("1.1.0", "1.0.9", "1.0", False),
        ("not a version", "1.0.9", "1.0", False),
    ],
)
def test_a_release_is_verified_only_inside_its_range(version, lowest, newest, inside):
    assert _compat.within(version, lowest, newest) is inside


def test_every_fast_path_names_its_distribution_range_uses_and_fallback():
    for name, path in _compat.FAST_PATHS.items():
        assert path.name == name
        assert path.uses and path.fallback
        assert _compat.within(path.lowest, path.lowest, path.newest), name


def test_the_locked_releases_are_inside_every_range():
    # requirements/dev.lock is what the suite runs on: every range covers its releases.
    pinned = dict(
        line.split("==", 1)
        for line in (REPO / "requirements" / "dev.lock").read_text().splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    )
    for name, path in _compat.FAST_PATHS.items():
        version = pinned.get(path.distribution)
        assert version is not None, f"{name}: {path.distribution} is not in the lock"
        assert _compat.within(version.strip(), path.lowest, path.newest), (name, version)


def test_outside_its_range_or_when_turned_off_a_fast_path_gives_way(monkeypatch):
    monkeypatch.delenv(_compat.ENVIRONMENT, raising=False)
    monkeypatch.setattr(_compat, "installed", lambda distribution: "99.0.0")
    taken, why = _compat.state("span-store")
    assert not taken
    assert "opentelemetry-sdk 99.0.0 is outside the releases verified (1.30.0 to " in why
    assert "Span.set_attributes" in why
    monkeypatch.setenv(_compat.ENVIRONMENT, "on")
    assert _compat.state("span-store")[0]
    monkeypatch.setenv(_compat.ENVIRONMENT, "on,-span-store")
    assert _compat.state("span-store") == (False, f"off by {_compat.ENVIRONMENT}")
    assert _compat.state("context-variable")[0]
    monkeypatch.setenv(_compat.ENVIRONMENT, "off")
    assert not any(_compat.state(name)[0] for name in _compat.FAST_PATHS)


def test_an_unknown_switch_is_named_and_ignored(monkeypatch, caplog):
    monkeypatch.setenv(_compat.ENVIRONMENT, "-span-stor")
    assert _compat.state("span-store")[0]
    assert "LLMTRACE_FAST_PATHS: '-span-stor' is not a fast path; ignored" in caplog.text


# One application: a decorated RAG request with a retrieval, a non-streaming and a streaming
# OpenAI call, an Anthropic stream, a plain httpx request and work in a thread pool, traced to
# a file with the request metrics on; printed: the spans and metric points with what varies
# from run to run (ids, times, durations) reduced to its kind.
_APP = textwrap.dedent(
    """
    import json, sys
    from concurrent.futures import ThreadPoolExecutor

    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    import anthropic, httpx, openai
    import llmtrace
    from llmtrace.sdk import _compat

    base, trace_file = sys.argv[1], sys.argv[2]
    llmtrace.init(service_name="same", exporter="file", file_path=trace_file, request_metrics=True)

    @llmtrace.retrieval(data_source="docs")
    def search(question):
        return ["a", "b"]

    @llmtrace.workflow(name="answer")
    def answer(question):
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(search, [question, question]))
        client = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
        messages = [{"role": "user", "content": question}]
        client.chat.completions.create(model="m", messages=messages)
        for _ in client.chat.completions.create(model="m", messages=messages, stream=True):
            pass
        claude = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        with claude.messages.stream(model="c", max_tokens=16, messages=messages) as stream:
            for _ in stream.text_stream:
                pass
        httpx.get(base + "/health")

    for question in ("one", "two"):
        answer(question)
    llmtrace.force_flush()
    points = []
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    count = getattr(point, "count", None)
                    points.append([metric.name, sorted(point.attributes.items()), count])
    llmtrace.shutdown()
    taken = {name: _compat.state(name)[0] for name in _compat.FAST_PATHS}
    print(json.dumps({"taken": taken, "points": sorted(points, key=json.dumps)}))
    """
)


def _shape(value: dict) -> object:
    """An OTLP JSON attribute value, durations and other floats reduced to their kind."""
    kind, inner = next(iter(value.items()))
    if kind == "doubleValue":
        return "double"
    if kind == "arrayValue":
        return [_shape(item) for item in inner.get("values", [])]
    return inner


def _spans(trace_file: Path) -> list[object]:
    spans = []
    for line in trace_file.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    spans.append(span)
    names = {span["spanId"]: span["name"] for span in spans}
    shaped = []
    for span in spans:
        attributes = {
            a["key"]: _shape(a["value"])
            for a in span.get("attributes", [])
            # the server's free port, and the ids it counts up from run to run
            if a["key"] not in ("server.port", "url.full", "gen_ai.response.id")
        }
        shaped.append(
            [
                span["name"],
                span["kind"],
                names.get(span.get("parentSpanId", "")),
                sorted(attributes.items(), key=str),
                [event["name"] for event in span.get("events", [])],
                span.get("status", {}).get("code"),
            ]
        )
    return sorted(shaped, key=json.dumps)


# Which of a request's calls is its main one depends on their timing, and with it the model a
# request is labelled with and whether it has a time to first token (the main call streamed).
_TIMING_DEPENDENT_METRICS = {"llmtrace.request.time_to_first_token"}


def _points(points: list[list]) -> dict[str, int]:
    """Metric points summed by name and attributes, what depends on which call is a request's
    main one left out (see _TIMING_DEPENDENT_METRICS)."""
    summed: dict[str, int] = {}
    for name, attributes, count in points:
        if name in _TIMING_DEPENDENT_METRICS:
            continue
        key = json.dumps([name, [pair for pair in attributes if pair[0] != "gen_ai.request.model"]])
        summed[key] = summed.get(key, 0) + (count if count is not None else 1)
    return summed


def _below_the_suite() -> None:
    # These runs add a busy process beside the suite's own workers: at the lowest priority they
    # do not slow the suite's timing checks (a 0.3 s retrieval read 0.33-0.37 s beside them).
    os.nice(19)


def _run_app(tmp_path: Path, base: str, switch: str) -> tuple[dict, list[object]]:
    trace_file = tmp_path / f"{switch}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), _compat.ENVIRONMENT: switch}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    result = subprocess.run(
        [sys.executable, "-c", _APP, base, str(trace_file)],
        preexec_fn=_below_the_suite,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1]), _spans(trace_file)


def test_with_every_fast_path_off_the_spans_phases_and_metrics_are_the_same(model_server, tmp_path):
    # "on": the fast paths whatever the releases (the newest-releases job runs this too)
    fast, fast_spans = _run_app(tmp_path, model_server.url, "on")
    public, public_spans = _run_app(tmp_path, model_server.url, "off")
    # Each run took the paths it was meant to.
    assert all(fast["taken"].values()), fast["taken"]
    assert not any(public["taken"].values())
    assert len(public_spans) == len(fast_spans)
    for public_span, fast_span in zip(public_spans, fast_spans, strict=True):
        assert public_span == fast_span
    assert _points(public["points"]) == _points(fast["points"])
    # and they hold what the comparison is about: phases, time to first token, stage breakdown
    attributes = {key for span in fast_spans for key, _ in span[3]}  # type: ignore[index]
    assert {"llmtrace.http.response_headers", "llmtrace.time_to_first_token", "llmtrace.stage"} <= (
        attributes
    )
    assert any(point[0] == "llmtrace.request.stage.duration" for point in fast["points"])


# The core checks of the suite: what llmtrace records (decorators, streams, request context,
# request metrics, export) and the HTTP phases of the instrumentations.
_CORE_CHECKS = [
    "tests/core/test_decorators.py",
    "tests/core/test_streaming.py",
    "tests/core/test_cheap_recording.py",
    "tests/core/test_request_context.py",
    "tests/core/test_races.py",
    "tests/core/test_delivery.py",
    "tests/core/test_instrumentor_contracts.py",
    "tests/instrumentation/test_http.py",
    "tests/instrumentation/test_gate.py",
    "tests/instrumentation/test_content_budget.py",
    "tests/scale/test_request_metrics.py",
]


def test_the_core_checks_pass_with_every_fast_path_off(tmp_path):
    env = {**os.environ, _compat.ENVIRONMENT: "off"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *_CORE_CHECKS],
        preexec_fn=_below_the_suite,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=1200,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary, summary
