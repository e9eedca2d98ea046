"""The embedded file exporter: OTLP JSON lines, rotation, many threads and processes at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from llmtrace.sdk.exporters.file import OTLPJsonFileExporter

WRITER = textwrap.dedent(
    """
    import sys, threading
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from llmtrace.sdk.exporters.file import OTLPJsonFileExporter

    path, process_id, threads, per_thread = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    exporter = OTLPJsonFileExporter(path, max_bytes=256 * 1024, backups=1000)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=20000, max_export_batch_size=64, schedule_delay_millis=5))
    tracer = provider.get_tracer("writer")

    def write(thread_id):
        for i in range(per_thread):
            with tracer.start_as_current_span(f"span {process_id}-{thread_id}-{i}") as span:
                span.set_attribute("payload", "x" * (i % 200))

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for w in workers: w.start()
    for w in workers: w.join()
    provider.shutdown()
    """
)


def read_span_names(directory: Path) -> list[str]:
    names = []
    for path in sorted(directory.glob("traces.jsonl*")):
        if path.name.endswith(".lock"):
            continue
        for line in path.read_text().splitlines():
            request = json.loads(line)  # every line parses: no interleaved half-lines
            for resource_spans in request["resourceSpans"]:
                for scope_spans in resource_spans["scopeSpans"]:
                    names.extend(span["name"] for span in scope_spans["spans"])
    return names


def test_four_threads_in_two_processes_lose_no_span(tmp_path):
    path = tmp_path / "traces.jsonl"
    processes = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(p), "4", "1250"])
        for p in range(2)
    ]
    for process in processes:
        assert process.wait(timeout=300) == 0
    names = read_span_names(tmp_path)
    assert len(names) == 10_000
    assert len(set(names)) == 10_000
    assert len(list(tmp_path.glob("traces.jsonl.*[0-9]"))) >= 2  # rotation happened meanwhile


def test_line_is_the_collector_file_exporter_format(tmp_path):
    exporter = OTLPJsonFileExporter(tmp_path / "t.jsonl")
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("scope-a", "1.2")
    with (
        tracer.start_as_current_span("parent", kind=SpanKind.SERVER) as parent,
        tracer.start_as_current_span("child", kind=SpanKind.CLIENT) as child,
    ):
        child.set_attributes({"s": "v", "i": 3, "f": 0.5, "b": True, "a": ["x", "y"]})
        child.set_status(Status(StatusCode.ERROR, "boom"))
    (child_line, parent_line) = (tmp_path / "t.jsonl").read_text().splitlines()
    request = json.loads(child_line)
    resource_spans = request["resourceSpans"][0]
    assert {"key": "service.name", "value": {"stringValue": "svc"}} in resource_spans["resource"][
        "attributes"
    ]
    scope_spans = resource_spans["scopeSpans"][0]
    assert scope_spans["scope"] == {"name": "scope-a", "version": "1.2"}
    span = scope_spans["spans"][0]
    assert span["traceId"] == format(parent.get_span_context().trace_id, "032x")
    assert span["parentSpanId"] == format(parent.get_span_context().span_id, "016x")
    assert span["kind"] == 3
    assert int(span["endTimeUnixNano"]) > int(span["startTimeUnixNano"]) > 0
    attributes = {a["key"]: a["value"] for a in span["attributes"]}
    assert attributes == {
        "s": {"stringValue": "v"},
        "i": {"intValue": "3"},
        "f": {"doubleValue": 0.5},
        "b": {"boolValue": True},
        "a": {"arrayValue": {"values": [{"stringValue": "x"}, {"stringValue": "y"}]}},
    }
    assert span["status"] == {"code": 2, "message": "boom"}
    assert json.loads(parent_line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["kind"] == 2


def test_rotation_keeps_the_configured_number_of_backups(tmp_path):
    exporter = OTLPJsonFileExporter(tmp_path / "traces.jsonl", max_bytes=2000, backups=2)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for i in range(50):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    files = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))
    assert files == ["traces.jsonl", "traces.jsonl.1", "traces.jsonl.2"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.glob("traces.jsonl*"))
    names = read_span_names(tmp_path)
    assert names[-1] == "s49" or "s49" in names


def test_unwritable_path_fails_the_export_and_logs_once(tmp_path, caplog):
    from llmtrace.sdk._safety import reset_logged

    reset_logged()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    exporter = OTLPJsonFileExporter.__new__(OTLPJsonFileExporter)
    OTLPJsonFileExporter.__init__(exporter, tmp_path / "ok" / "t.jsonl")
    exporter.path = blocker / "t.jsonl"
    exporter._lock_path = blocker / "t.jsonl.lock"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for _ in range(3):
        with tracer.start_as_current_span("s"):
            pass
    assert caplog.text.count("could not write spans") == 1
