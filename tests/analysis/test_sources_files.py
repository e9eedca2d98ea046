from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from llmtrace.analysis.sources import load_traces
from llmtrace.errors import SourceError
from tests.analysis.otlp_lines import MS, T0, otlp_span, request_line, simple_trace

# Every test here runs with the native reader and with the Python reader.
pytestmark = pytest.mark.usefixtures("reader")


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_collector_file_exporter_format_is_read(tmp_path: Path) -> None:
    # kind as an enum name and as an int, integers as strings, arrays, hex ids
    spans = [
        otlp_span(
            "ab" * 16,
            "01" * 8,
            None,
            "answer",
            T0,
            T0 + 200 * MS,
            kind="SPAN_KIND_SERVER",
            llmtrace__stage="other",
        ),
        otlp_span(
            "ab" * 16,
            "02" * 8,
            "01" * 8,
            "chat m",
            T0 + 50 * MS,
            T0 + 200 * MS,
            kind=3,
            llmtrace__stage="ttft",
            llmtrace__time_to_first_token=0.05,
            gen_ai__usage__input_tokens=1200,
            gen_ai__response__finish_reasons=["stop"],
            gen_ai__request__stream=True,
        ),
    ]
    traceset = load_traces(str(write(tmp_path / "traces.jsonl", [request_line(spans)])))
    (trace,) = traceset.traces
    assert trace.trace_id == "ab" * 16
    assert trace.root.kind == 2 and trace.root.service == "svc"
    (chat,) = trace.root.children
    assert chat.kind == 3
    assert chat.attributes["gen_ai.usage.input_tokens"] == 1200
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert chat.attributes["gen_ai.request.stream"] is True
    assert chat.duration == pytest.approx(0.15)


def test_malformed_line_is_reported_with_file_and_line_and_the_rest_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path / "traces.jsonl",
        [
            request_line(simple_trace(0)),
            '{"resourceSpans": [ {"truncated',
            request_line(simple_trace(1)),
            '{"something": "else"}',
            request_line(simple_trace(2)),
        ],
    )
    traceset = load_traces(str(path))
    assert len(traceset.traces) == 3
    assert len(traceset.warnings) == 2
    assert traceset.warnings[0].startswith(f"{path}:2: not valid JSON")
    assert traceset.warnings[1].startswith(f"{path}:4: not OTLP trace data")


def test_gzip_and_rotated_files_in_a_directory_are_all_read(tmp_path: Path) -> None:
    write(tmp_path / "traces.jsonl", [request_line(simple_trace(0))])
    write(tmp_path / "traces.jsonl.1", [request_line(simple_trace(1))])
    write(tmp_path / "traces.jsonl.2", [request_line(simple_trace(2))])
    with gzip.open(tmp_path / "old.jsonl.gz", "wt") as handle:
        handle.write(request_line(simple_trace(3)) + "\n")
    (tmp_path / "traces.jsonl.lock").write_text("")
    (tmp_path / "notes.txt").write_text("not traces")
    traceset = load_traces(str(tmp_path))
    assert sorted(t.trace_id for t in traceset.traces) == [f"{i + 1:032x}" for i in range(4)]
    assert traceset.warnings == []


def test_spans_of_one_trace_split_across_files_are_joined(tmp_path: Path) -> None:
    child, root = simple_trace(0)
    write(tmp_path / "traces.jsonl.1", [request_line([child])])
    write(tmp_path / "traces.jsonl", [request_line([root])])
    (trace,) = load_traces(str(tmp_path)).traces
    assert not trace.orphan and len(trace.root.children) == 1


def test_base64_ids_are_normalised_to_hex(tmp_path: Path) -> None:
    trace_id = base64.b64encode(bytes.fromhex("0af7651916cd43dd8448eb211c80319c")).decode()
    span_id = base64.b64encode(bytes.fromhex("b7ad6b7169203331")).decode()
    line = request_line([otlp_span(trace_id, span_id, None, "answer", T0, T0 + MS)])
    (trace,) = load_traces(str(write(tmp_path / "t.jsonl", [line]))).traces
    assert trace.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert trace.root.span_id == "b7ad6b7169203331"


def test_jaeger_answer_saved_to_a_file_is_read(tmp_path: Path) -> None:
    document = {"result": json.loads(request_line(simple_trace(0)))}
    path = tmp_path / "jaeger.json"
    path.write_text(json.dumps(document, indent=2))
    assert len(load_traces(str(path)).traces) == 1


def test_open_root_is_excluded_and_counted(tmp_path: Path) -> None:
    child, root = simple_trace(0)
    root["endTimeUnixNano"] = "0"
    late = simple_trace(1)
    late[1]["endTimeUnixNano"] = str(int(late[1]["startTimeUnixNano"]) - 1)
    traceset = load_traces(
        str(write(tmp_path / "t.jsonl", [request_line([child, root]), request_line(late)]))
    )
    assert traceset.traces == []
    assert traceset.excluded_open == 2


def test_orphan_subtree_is_its_own_trace(tmp_path: Path) -> None:
    child, _root_never_arrived = simple_trace(0)
    (trace,) = load_traces(str(write(tmp_path / "t.jsonl", [request_line([child])]))).traces
    assert trace.orphan and trace.root.name == "search"


def test_filters_service_window_limit_and_trace_id(tmp_path: Path) -> None:
    lines = [request_line(simple_trace(i), service="a" if i % 2 else "b") for i in range(6)]
    path = str(write(tmp_path / "t.jsonl", lines))
    assert len(load_traces(path, service="a").traces) == 3
    assert [t.trace_id for t in load_traces(path, limit=2).traces] == [f"{5:032x}", f"{6:032x}"]
    assert [t.trace_id for t in load_traces(path, trace_id=f"{3:032X}").traces] == [f"{3:032x}"]
    since = "2023-11-14T22:13:22Z"  # T0 is 22:13:20; traces start one second apart
    assert len(load_traces(path, since=since).traces) == 4


def test_missing_path_is_a_clear_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no traces at"):
        load_traces(str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no trace files"):
        load_traces(str(tmp_path / "empty"))


def test_invalid_lookback_is_a_clear_error(tmp_path: Path) -> None:
    path = str(write(tmp_path / "t.jsonl", [request_line(simple_trace(0))]))
    with pytest.raises(SourceError, match="invalid duration"):
        load_traces(path, lookback="fortnight")


def test_a_trace_file_includes_its_rotated_files(tmp_path: Path) -> None:
    write(tmp_path / "traces.jsonl", [request_line(simple_trace(0))])
    write(tmp_path / "traces.jsonl.1", [request_line(simple_trace(1))])
    write(tmp_path / "other.jsonl", [request_line(simple_trace(2))])
    traces = load_traces(str(tmp_path / "traces.jsonl")).traces
    assert sorted(t.trace_id for t in traces) == [f"{1:032x}", f"{2:032x}"]
