"""The native reader (``llmtrace._native``) against the Python reader: the same traces, the same
report, to the last bit, on files of every shape the breakdown rules distinguish."""

from __future__ import annotations

import base64
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from llmtrace import semconv as sc
from llmtrace.analysis import native
from llmtrace.analysis.evidence import ModelCall
from llmtrace.analysis.model import Trace, TraceSet
from llmtrace.analysis.native import NativeTraces
from llmtrace.analysis.otlp import HASHED_ATTRIBUTES, KEPT_ATTRIBUTES
from llmtrace.analysis.report import build_report
from llmtrace.analysis.sources import load_traces
from tests.analysis.otlp_lines import MS, T0, attribute, otlp_span, request_line

STAGES = ["queue", "retrieval", "rerank", "prompt", "tool", "postprocess", "embedding", "cache"]


class TraceWriter:
    """Random traces of the shapes llmtrace records: nested and parallel spans, model calls with
    and without first-token times, HTTP phases, joined vLLM and llmtrace server spans on a skewed
    clock, reported server timings, bench runs and warm-up, orphans, open spans, stage-less
    wrappers recorded beside the work they started."""

    def __init__(self, seed: int, model_stage: str = sc.LLM_STAGE) -> None:
        self.rng = random.Random(seed)
        # the tag of a model call's span: today's, or ``ttft`` as earlier releases wrote it
        self.model_stage = model_stage
        self.spans: list[dict[str, Any]] = []
        self.next_id = 1

    def _id(self) -> str:
        self.next_id += 1
        return f"{self.rng.getrandbits(40):010x}{self.next_id:06x}"

    def _span(
        self, trace: str, parent: str | None, name: str, start: int, end: int, **attrs: Any
    ) -> str:
        span_id = self._id()
        kind = attrs.pop("kind", 1)
        self.spans.append(otlp_span(trace, span_id, parent, name, start, end, kind=kind, **attrs))
        return span_id

    def model_call(self, trace: str, parent: str, start: int, end: int) -> None:
        rng = self.rng
        duration = (end - start) / 1e9
        attrs: dict[str, Any] = {
            "gen_ai__operation__name": rng.choice(["chat", "text_completion", "embeddings"]),
            "gen_ai__request__model": rng.choice(["m-small", "m-large", ""]),
        }
        if rng.random() < 0.8:
            attrs["llmtrace__stage"] = self.model_stage
        first = rng.uniform(0, duration * 1.2)
        if rng.random() < 0.6:
            attrs["llmtrace__time_to_first_token"] = first
        elif rng.random() < 0.5:
            attrs["gen_ai__response__time_to_first_chunk"] = first
        if rng.random() < 0.5:
            attrs["gen_ai__response__model"] = rng.choice(["m-small-2024", "m-large-2025"])
            attrs["gen_ai__usage__input_tokens"] = rng.randint(10, 5000)
            attrs["gen_ai__usage__output_tokens"] = rng.choice([0, rng.randint(1, 900)])
            attrs["gen_ai__response__finish_reasons"] = [rng.choice(["stop", "length"])]
        if rng.random() < 0.4:
            attrs["llmtrace__generation_time"] = rng.uniform(0, duration)
        if rng.random() < 0.2:
            attrs["llmtrace__output_tokens_per_second"] = rng.uniform(5, 90)
        if rng.random() < 0.5:
            attrs["gen_ai__request__stream"] = rng.random() < 0.7
        if rng.random() < 0.3:
            attrs["gen_ai__request__max_tokens"] = rng.choice([64, 256, 1024])
        if rng.random() < 0.5:
            attrs["gen_ai__input__messages"] = rng.choice(["hello", "[1, 2]", "same question"])
        for phase in (
            "llmtrace__http__connect",
            "llmtrace__http__tls",
            "llmtrace__http__request_sent",
        ):
            if rng.random() < 0.3:
                attrs[phase] = rng.choice([0.0, rng.uniform(0, 0.05), -0.001])
        if rng.random() < 0.2:
            attrs["llmtrace__server__queue_time"] = rng.uniform(0, 0.1)
            attrs["llmtrace__server__prompt_time"] = rng.uniform(0, 0.1)
            if rng.random() < 0.5:
                attrs["llmtrace__server__generation_time"] = rng.uniform(0, 0.5)
        elif rng.random() < 0.1:
            attrs["llmtrace__server__inference_time"] = rng.uniform(0, 0.5)
        elif rng.random() < 0.1:
            attrs["llmtrace__server__processing_time"] = rng.uniform(0, duration)
        call = self._span(trace, parent, "chat", start, end, kind=3, **attrs)
        if rng.random() < 0.5:
            self._server(trace, call, start, end)

    def _server(self, trace: str, client: str, start: int, end: int) -> None:
        rng = self.rng
        skew = rng.randint(-5000, 5000) * MS  # another host's clock
        inner_start = start + (end - start) // 10 + skew
        inner_end = end - (end - start) // 10 + skew
        http = self._span(trace, client, "POST", start, end, kind=3)
        if rng.random() < 0.5:
            attrs = {"gen_ai__latency__time_in_queue": rng.uniform(0, 0.05)}
            if rng.random() < 0.7:
                attrs["gen_ai__latency__time_to_first_token"] = rng.uniform(0, 0.3)
            if rng.random() < 0.7:
                attrs["gen_ai__latency__e2e"] = (inner_end - inner_start) / 1e9
            self._span(trace, http, "llm_request", inner_start, inner_end, kind=2, **attrs)
            return
        attrs = {}
        if rng.random() < 0.5:
            attrs["llmtrace__server__proxy_queue_time"] = rng.uniform(0, 0.02)
        if rng.random() < 0.5:
            attrs["llmtrace__server__time_to_first_token"] = rng.uniform(0, 0.3)
        server = self._span(
            trace, http, "POST /v1/chat", inner_start, inner_end, kind="SPAN_KIND_SERVER", **attrs
        )
        if rng.random() < 0.7:
            queued = inner_start + rng.randint(0, 20) * MS
            name = {"llmtrace__queue__name": "proxy"} if rng.random() < 0.3 else {}
            self._span(trace, server, "wait", inner_start, queued, llmtrace__stage="queue", **name)

    def hop(self, trace: str, parent: str, start: int, end: int, depth: int) -> None:
        """A call to another service on a skewed clock: a client span (another
        instrumentation's, or llmtrace's network span), the service's SERVER or CONSUMER span,
        sometimes longer than the call (clocks run apart), and work under it."""
        rng = self.rng
        skew = rng.randint(-5000, 5000) * MS
        stage = {"llmtrace__stage": "network"} if rng.random() < 0.4 else {}
        client = self._span(trace, parent, "GET", start, end, kind=rng.choice([3, 3, 4]), **stage)
        margin = (end - start) // rng.choice([5, 10, 50, -20])
        inner_start, inner_end = start + margin + skew, end - margin + skew
        declared = rng.choice(
            [{}, {}, {"llmtrace__stage": "other"}, {"llmtrace__stage": "network"}]
        )
        kind = rng.choice([2, 2, 5, 1])
        server = self._span(
            trace, client, "GET /work", inner_start, inner_end, kind=kind, **declared
        )
        if inner_end > inner_start + 2 * MS:
            self.subtree(trace, server, inner_start, inner_end, depth + 1)

    def subtree(self, trace: str, parent: str, start: int, end: int, depth: int) -> None:
        rng = self.rng
        cursor = start
        while cursor < end and rng.random() < 0.85:
            length = rng.randint(1, max(1, (end - cursor) // MS)) * MS
            child_start = cursor + rng.randint(0, 3) * MS
            child_end = min(child_start + length, end + rng.choice([0, 0, 5 * MS]))
            if rng.random() < 0.2:
                child_start = start + rng.randint(0, max(1, (end - start) // MS)) * MS  # parallel
            if rng.random() < 0.15 and child_end > child_start:
                # a function run recorded beside the work it started (LangGraph's call_model
                # under OpenInference): a stage-less leaf a little wider, or much wider, than it
                before = rng.choice([0, 1, 2, 30]) * MS
                after = rng.choice([0, 1, 2, 30]) * MS
                wrapper = {"llmtrace__stage": "other"} if rng.random() < 0.5 else {}
                self._span(
                    trace, parent, "call_model", child_start - before, child_end + after, **wrapper
                )
            if rng.random() < 0.25:
                self.model_call(trace, parent, child_start, child_end)
            elif rng.random() < 0.1 and depth < 3 and child_end > child_start + 4 * MS:
                self.hop(trace, parent, child_start, child_end, depth)
            else:
                attrs: dict[str, Any] = {}
                stage = rng.choice([*STAGES, None, None, "no-such-stage"])
                if stage is not None:
                    attrs["llmtrace__stage"] = stage
                if stage in ("retrieval", None) and rng.random() < 0.5:
                    attrs["llmtrace__retrieval__returned"] = rng.randint(1, 40)
                    attrs["gen_ai__retrieval__top_k"] = rng.choice([5, 10, 40.0])
                    attrs["gen_ai__retrieval__query__text"] = rng.choice(["q1", "q2", "q3"])
                if stage in ("rerank", None) and rng.random() < 0.5:
                    attrs["llmtrace__rerank__input_count"] = rng.randint(1, 40)
                if stage in ("prompt", "embedding") and rng.random() < 0.7:
                    attrs["llmtrace__prompt__chars"] = rng.randint(100, 20000)
                    attrs["llmtrace__embedding__input_count"] = rng.randint(1, 8)
                if stage == "tool" and rng.random() < 0.7:
                    attrs["gen_ai__tool__name"] = rng.choice(["search", "lookup", ""])
                if rng.random() < 0.03:
                    child_end = 0  # still open when exported
                child = self._span(
                    trace,
                    parent,
                    rng.choice(["step", "fetch", "format"]),
                    child_start,
                    child_end,
                    **attrs,
                )
                if depth < 3 and child_end > child_start + 2 * MS:
                    self.subtree(trace, child, child_start, child_end, depth + 1)
            cursor = child_end if child_end > cursor else cursor + MS

    def trace(self, index: int) -> None:
        rng = self.rng
        trace = f"{rng.getrandbits(96):024x}{index:08x}"
        start = T0 + index * 37 * MS
        end = start + rng.randint(20, 3000) * MS
        attrs: dict[str, Any] = {}
        if rng.random() < 0.3:
            attrs["llmtrace__bench__run"] = rng.choice(["base", "cand"])
            attrs["llmtrace__bench__concurrency"] = rng.choice([1, 4])
            attrs["llmtrace__bench__question_set_hash"] = "abc123"
            attrs["llmtrace__bench__warmup"] = rng.random() < 0.2
            # when the bench client first saw a streamed answer, of every type a file may hold
            for client in ("byte", "event"):
                if rng.random() < 0.7:
                    attrs[f"llmtrace__client__time_to_first_{client}"] = rng.choice(
                        [rng.uniform(0, 0.5), rng.uniform(0, 0.5), 1, True, "0.2"]
                    )
        if rng.random() < 0.3:
            attrs["llmtrace__stage"] = rng.choice(STAGES)
        root_end = 0 if rng.random() < 0.03 else end
        parent = None if rng.random() > 0.05 else "ffffffffffffffff"  # orphan: parent never came
        root = self._span(
            trace, parent, rng.choice(["answer", "POST /chat"]), start, root_end, **attrs
        )
        self.subtree(trace, root, start, end, 0)

    @classmethod
    def lines_of(
        cls, seed: int, traces: int, per_line: int = 37, model_stage: str = sc.LLM_STAGE
    ) -> list[str]:
        """``traces`` random traces as OTLP JSON lines of ``per_line`` spans."""
        writer = cls(seed, model_stage)
        for index in range(traces):
            writer.trace(index)
        return writer.lines(per_line)

    def lines(self, per_line: int = 37) -> list[str]:
        spans = self.spans[:]
        self.rng.shuffle(spans)  # a batch exporter writes children before parents, in any order
        return [
            request_line(spans[i : i + per_line], service=self.rng.choice(["api", "worker"]))
            for i in range(0, len(spans), per_line)
        ]


def _report(
    path: Path, reader: str, monkeypatch: pytest.MonkeyPatch, **filters: Any
) -> dict[str, Any]:
    monkeypatch.setenv("LLMTRACE_NATIVE", "1" if reader == "native" else "0")
    run = filters.pop("run", None)
    traceset = load_traces(str(path), **filters)
    assert isinstance(traceset.collector, NativeTraces) == (reader == "native")
    data = build_report(traceset, run=run).to_json()
    data.pop("generated_at")
    return data


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TraceSet, TraceSet]:
    """The traces at ``path`` read natively, then by the Python reader."""
    monkeypatch.setenv("LLMTRACE_NATIVE", "1")
    ours = load_traces(str(path))
    monkeypatch.setenv("LLMTRACE_NATIVE", "0")
    theirs = load_traces(str(path))
    assert isinstance(ours.collector, NativeTraces)
    assert not isinstance(theirs.collector, NativeTraces)
    return ours, theirs


def _assert_same(native_report: dict[str, Any], python_report: dict[str, Any]) -> None:
    for key in python_report:
        assert native_report[key] == python_report[key], key
    assert native_report == python_report


def test_the_native_reader_is_installed_and_used() -> None:
    # scripts/setup.sh builds it into the package; without it every report here would take the
    # Python path.
    assert native.available(), "llmtrace._native is not built: run scripts/setup.sh"
    assert native.reader_notice() == "trace files are read by the native reader"


def test_the_notice_names_the_python_reader_when_the_native_one_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLMTRACE_NATIVE", "0")
    assert not native.available()
    assert "pure-Python reader" in native.reader_notice()
    assert "LLMTRACE_NATIVE" in native.reader_notice()


def test_the_native_reader_knows_the_stage_vocabulary_and_the_attributes_read() -> None:
    # Both are contracts spelled out in Rust too (native/src/model.rs): they must not drift.
    from llmtrace import _native

    assert tuple(_native.STAGES) == sc.STAGES
    assert set(_native.MODEL_CALL_STAGES) == sc.MODEL_CALL_STAGES
    assert set(_native.ATTRIBUTES) == KEPT_ATTRIBUTES | HASHED_ATTRIBUTES


def test_the_native_model_call_fields_are_those_of_model_call() -> None:
    # Model calls cross as flat tuples (a NamedTuple each is made without names): the order
    # Rust writes them in is named once in native/src/lib.rs and must be ModelCall's.
    from llmtrace import _native

    assert tuple(_native.MODEL_CALL_FIELDS) == ModelCall._fields


@pytest.mark.parametrize("seed", range(6))
def test_the_same_report_from_random_traces(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(TraceWriter.lines_of(seed, 120)) + "\n")
    python_report = _report(path, "python", monkeypatch)
    assert python_report["traces"] > 50 and python_report["models"]
    assert python_report["user_ttft"]["requests"] > 0
    _assert_same(_report(path, "native", monkeypatch), python_report)


def test_files_with_the_earlier_model_call_tag_read_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Releases before the ``model`` tag wrote ``ttft`` on a model call's span: the same traces
    # with either tag give the same report, from either reader, split into ttft and generation.
    today = tmp_path / "today.jsonl"
    today.write_text("\n".join(TraceWriter.lines_of(11, 120)) + "\n")
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text("\n".join(TraceWriter.lines_of(11, 120, model_stage="ttft")) + "\n")
    assert '"stringValue":"model"' in today.read_text().replace(" ", "")
    assert '"stringValue":"model"' not in earlier.read_text().replace(" ", "")
    for reader in ("python", "native"):
        before = _report(earlier, reader, monkeypatch)
        now = _report(today, reader, monkeypatch)
        assert before["stages"]["ttft"]["mean"] > 0 and before["stages"]["generation"]["mean"] > 0
        assert "model" not in now["stages"]
        assert (before.pop("source"), now.pop("source")) == (str(earlier), str(today))
        assert now == before, reader


@pytest.mark.parametrize(
    "filters",
    [
        {"service": "worker"},
        {"limit": 17},
        {"since": "2023-11-14T22:13:21Z", "until": "2023-11-14T22:13:22Z"},
        {"run": "base"},
        {"run": "cand", "limit": 40},
    ],
)
def test_the_same_report_with_filters(
    filters: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(TraceWriter.lines_of(99, 150)) + "\n")
    python_report = _report(path, "python", monkeypatch, **filters)
    assert python_report["traces"] > 0
    _assert_same(_report(path, "native", monkeypatch, **filters), python_report)


def _span_rows(trace: Trace) -> list[tuple[Any, ...]]:
    return [
        (
            span.span_id,
            span.parent_id,
            span.name,
            span.kind,
            span.start,
            span.end,
            span.service,
            {k: v for k, v in span.attributes.items() if k not in HASHED_ATTRIBUTES},
            sorted(k for k in span.attributes if k in HASHED_ATTRIBUTES),
            [child.span_id for child in span.children],
        )
        for span in trace.spans()
    ]


def _spans_by_id(traceset: TraceSet) -> dict[str, tuple[Any, ...]]:
    return {row[0]: row for trace in traceset.traces for row in _span_rows(trace)}


def test_the_same_traces_from_a_directory_of_rotated_and_gzip_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = TraceWriter.lines_of(7, 60, per_line=11)
    third = len(lines) // 3
    directory = tmp_path / "traces"
    directory.mkdir()
    (directory / "traces.jsonl").write_text("\n".join(lines[:third]) + "\n")
    with gzip.open(directory / "traces.jsonl.2.gz", "wt") as handle:
        handle.write("\n".join(lines[third : 2 * third]) + "\n")
    # the last part twice: overlapping files repeat spans, which are read once
    (directory / "traces.jsonl.1").write_text("\n".join(lines[2 * third :] + lines[-3:]))
    native_traces, python_traces = _both(directory, monkeypatch)
    assert len(native_traces.traces) == len(python_traces.traces) > 40
    assert native_traces.excluded_open == python_traces.excluded_open
    for ours, theirs in zip(native_traces.traces, python_traces.traces, strict=True):
        assert (ours.trace_id, ours.orphan) == (theirs.trace_id, theirs.orphan)
        assert _span_rows(ours) == _span_rows(theirs)


def test_encodings_the_parser_accepts_are_read_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    b64 = base64.b64encode(bytes.fromhex(trace_id)).decode()
    root = otlp_span(
        b64,
        base64.b64encode(bytes.fromhex("b7ad6b7169203331")).decode(),
        None,
        "answer",
        T0,
        T0 + 90 * MS,
    )
    root["kind"] = "SPAN_KIND_SERVER"
    # upper-case hex joins the same trace (ids are compared in lower case)
    child = otlp_span(
        trace_id.upper(), "00000000000000AA", "B7AD6B7169203331", "search", T0 + MS, T0 + 40 * MS
    )
    child["startTimeUnixNano"] = T0 + MS  # an integer, not a string
    child["attributes"] = [
        {"key": "llmtrace.stage", "value": {"stringValue": "retrieval"}},
        {"key": "llmtrace.retrieval.returned", "value": {"intValue": 12}},
        {"key": "gen_ai.retrieval.top_k", "value": {"doubleValue": "8"}},
        {"key": "gen_ai.request.stream", "value": {"boolValue": "true"}},
        {"value": {"stringValue": "text"}, "key": "gen_ai.tool.name"},  # value before key
        {
            "key": "gen_ai.response.finish_reasons",
            "value": {"kvlistValue": {"values": [{"key": "a", "value": {"intValue": "1"}}]}},
        },
        {"key": "http.url", "value": {"stringValue": "https://example.com/?q=\\u00e9"}},
        attribute("llmtrace.prompt.chars", 1200),
    ]
    lines = [
        json.dumps(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [{"spans": [child]}],
                        "resource": {"attributes": [attribute("service.name", "svc")]},
                    }
                ]
            }
        ),
        json.dumps({"resource_spans": [{"scopeSpans": [{"spans": [root]}]}]}),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    native_traces, python_traces = _both(path, monkeypatch)
    ((ours,), (theirs,)) = native_traces.traces, python_traces.traces
    assert ours.trace_id == trace_id and ours.root.kind == 2
    assert _span_rows(ours) == _span_rows(theirs)


def test_malformed_lines_are_reported_alike_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = TraceWriter.lines_of(3, 30, per_line=5)
    lines[2] = lines[2][:-20]  # cut short
    lines[5] = '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "no ids"}]}]}]}'
    lines[7] = '{"something": "else"}'
    # spans before a span without ids are kept (both readers), those after it are not
    good = json.loads(lines[8])["resourceSpans"][0]["scopeSpans"][0]["spans"]
    bad = {"name": "no ids", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    lines[8] = request_line([*good[:3], bad, *good[3:]])
    lines[9] = "[1, 2, 3]"
    lines.insert(11, "")
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    ours, theirs = _both(path, monkeypatch)
    where = [w.split(": ")[0] for w in ours.warnings]
    assert (
        where
        == [w.split(": ")[0] for w in theirs.warnings]
        == [f"{path}:{n}" for n in (3, 6, 8, 9, 10)]
    )
    assert [w.split(": ", 1)[1].split(" (")[0] for w in ours.warnings] == [
        "not valid JSON",
        "not OTLP trace data",
        "not OTLP trace data",
        "not OTLP trace data",
        "not OTLP trace data",
    ]
    assert len(ours.traces) == len(theirs.traces) > 0
    assert _spans_by_id(ours) == _spans_by_id(theirs)
    kept = {span["spanId"] for span in good[:3]} | {span["spanId"] for span in good[3:]}
    assert kept & set(_spans_by_id(ours)) == {span["spanId"] for span in good[:3]}


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_a_very_deep_trace_is_broken_down(
    depth: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a chain of nested spans deeper than Python's recursion limit or a thread's stack
    spans = [
        otlp_span(
            "ab" * 16, f"{i + 1:016x}", f"{i:016x}" if i else None, "s", T0 + i, T0 + 2 * depth - i
        )
        for i in range(depth)
    ]
    path = tmp_path / "deep.jsonl"
    path.write_text(request_line(spans) + "\n")
    report = _report(path, "native", monkeypatch)
    assert report["traces"] == 1 and report["end_to_end"]["p50"] == pytest.approx(2 * depth * 1e-9)
    if depth <= 5_000:
        _assert_same(report, _report(path, "python", monkeypatch))
