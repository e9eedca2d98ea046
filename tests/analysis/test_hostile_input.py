"""Hostile trace files never crash the reader.

Whatever a trace file holds (nesting 200,000 levels deep, parent cycles, ids of any length,
times that are not numbers, NaN, bytes that are not UTF-8, a gzip file cut short), both readers
read it without crashing, hanging or raising, report the same, and still report the well-formed
traces in it. The readers run in a child process, so that a crash fails the test instead of
taking the test run down with it.

Without the native reader (an install where Rust was not built) the Python reader, then all a
user has, is held to the same properties on its own; only the comparison of the two is left out.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtrace.analysis import native
from llmtrace.analysis.otlp import HASHED_ATTRIBUTES, KEPT_ATTRIBUTES
from tests.analysis.otlp_lines import T0, request_line, simple_trace

pytestmark = pytest.mark.computes

# The readers this install has: the Python one always, the native one when it was built.
READERS = ("native", "python") if native.available() else ("python",)

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # seconds for one file read both ways: far more than any of these takes

# Reads each file it is sent with both readers and answers with both reports (or the traceback).
_READER = r"""
import json, os, sys, traceback
from llmtrace.analysis.report import build_report
from llmtrace.analysis.sources import load_traces

for request in sys.stdin:
    answer = {}
    for reader in os.environ["HOSTILE_READERS"].split(","):
        os.environ["LLMTRACE_NATIVE"] = "1" if reader == "native" else "0"
        try:
            traceset = load_traces(request.strip())
            native = type(traceset.collector).__name__ == "NativeTraces"
            assert native == (reader == "native")
            report = build_report(traceset).to_json()
            report.pop("generated_at")
            trace_ids = sorted(trace.trace_id for trace in traceset.traces)
            answer[reader] = {"report": report, "trace_ids": trace_ids}
        except BaseException:
            answer[reader] = {"traceback": traceback.format_exc()}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


class ReaderProcess:
    """A child process reading trace files with both readers, restarted after a crash."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())

    def _start(self) -> subprocess.Popen[bytes]:
        self._stderr.seek(0)
        self._stderr.truncate()
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYTHONFAULTHANDLER": "1",
            "HOSTILE_READERS": ",".join(READERS),
        }
        return subprocess.Popen(
            [sys.executable, "-c", _READER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )

    def read(self, path: Path) -> dict[str, Any]:
        """Each reader's report of ``path``; fails the test on a crash, a hang or a traceback."""
        if self._process is None or self._process.poll() is not None:
            self._process = self._start()
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(f"{path}\n".encode())
        process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            ready = selector.select(TIMEOUT)
        if not ready:
            process.kill()
            process.wait()
            pytest.fail(f"reading {path} took longer than {TIMEOUT:.0f} s")
        line = process.stdout.readline()
        if not line:
            code = process.wait()
            self._stderr.seek(0)
            output = self._stderr.read().decode(errors="replace")[-3000:]
            pytest.fail(f"the readers crashed on {path} (exit status {code}):\n{output}")
        answer: dict[str, Any] = json.loads(line)
        for reader, result in answer.items():
            assert "traceback" not in result, f"{reader} reader:\n{result['traceback']}"
        return answer

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._stderr.close()


@pytest.fixture(scope="module")
def readers() -> Iterator[ReaderProcess]:
    process = ReaderProcess()
    yield process
    process.close()


_PROBLEM = re.compile(r"^(.*?: (?:not valid JSON|not OTLP trace data|cannot read))( \(.*)?$", re.S)


def _problem_kind(warning: str) -> str:
    """``FILE:LINE: not valid JSON`` without the parser's own words, which differ by reader."""
    match = _PROBLEM.match(warning)
    return match.group(1) if match else warning


def _canonical(report: dict[str, Any], *, exact_warnings: bool = False) -> str:
    report = dict(report)
    if not exact_warnings:
        report["warnings"] = [_problem_kind(w) for w in report["warnings"]]
    # as text: NaN compares equal to itself there
    return json.dumps(report, sort_keys=True)


def _first_difference(ours: Any, theirs: Any, path: str = "report") -> tuple[str, Any, Any]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            if json.dumps(ours.get(key)) != json.dumps(theirs.get(key)):
                return _first_difference(ours.get(key), theirs.get(key), f"{path}.{key}")
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for index, (mine, other) in enumerate(zip(ours, theirs, strict=True)):
            if json.dumps(mine) != json.dumps(other):
                return _first_difference(mine, other, f"{path}[{index}]")
    return path, ours, theirs


def assert_read_alike(
    answer: dict[str, Any], well_formed: list[str], *, exact_warnings: bool = False
) -> None:
    theirs = answer["python"]
    missing = set(well_formed) - set(theirs["trace_ids"])
    assert not missing, f"well-formed traces not reported: {sorted(missing)}"
    ours = answer.get("native")
    if ours is None:
        return  # no native reader on this install: nothing to compare the Python one with
    assert ours["trace_ids"] == theirs["trace_ids"]
    ours_text = _canonical(ours["report"], exact_warnings=exact_warnings)
    theirs_text = _canonical(theirs["report"], exact_warnings=exact_warnings)
    if ours_text != theirs_text:
        path, native_value, python_value = _first_difference(
            json.loads(ours_text), json.loads(theirs_text)
        )
        pytest.fail(
            f"the reports differ at {path}: native {native_value!r}, python {python_value!r}"
        )


# --- what a hostile file holds -------------------------------------------------------------------

GOOD_TRACES = 3  # well-formed traces in every file; hostile ones never use their ids


def good_lines() -> tuple[list[str], list[str]]:
    """Well-formed lines and the ids of their traces."""
    lines = [request_line(simple_trace(i)) for i in range(GOOD_TRACES)]
    return lines, [f"{i + 1:032x}" for i in range(GOOD_TRACES)]


def nested(depth: int, inner: str = "1", *, kind: str = "array") -> str:
    if kind == "array":
        return "[" * depth + inner + "]" * depth
    return '{"a":' * depth + inner + "}" * depth


# Printable text: Python's repr() escapes the rest by a Unicode database the native reader does not
# carry in full (an array attribute's text can reach the report through str()).
PRINTABLE = st.characters(categories=["L", "M", "N", "P", "S"], include_characters=" ")
TRACE_IDS = st.sampled_from(
    [
        "f" * 32,
        "F" * 31 + "E",  # upper case: the same trace as its lower-case spelling
        "fe" * 16,
        "q" * 32,  # the right length, not hex
        "f" * 31,
        "f" * 33,
        "",
        "/+8AAAAAAAAAAAAAAAAAAA==",  # base64 of 16 bytes
        "ÄÖÜäöü" * 5 + "ÄÖ",  # 32 characters, 64 bytes
        "é" * 16,  # 16 characters, 32 bytes
    ]
)
SPAN_IDS = st.one_of(
    st.sampled_from(
        [
            "a" * 16,
            "b" * 16,
            "cccccccccccccccc",
            "CCCCCCCCCCCCCCCC",  # the same span as the one above
            "zzzzzzzzzzzzzzzz",
            "a" * 15,
            "a" * 17,
            "",
            "qrvM3e7/AAA=",  # base64 of 8 bytes
            "qrvM",  # base64 of 3 bytes
            "====",
            "AB=C",
            "Σσς" * 5 + "Σ",
        ]
    ),
    st.text(PRINTABLE, max_size=18),
)


def mostly(usual: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]) -> Any:
    """Usual values four times in five: a span with every field hostile would only ever test
    the first check it fails."""
    return st.integers(0, 4).flatmap(lambda n: hostile if n == 0 else usual)


INTEGERS = st.one_of(
    st.integers(-(2**64), 2**65),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64]),
)
TIMES = mostly(
    # start and end drawn apart: reversed half of the time
    st.one_of(st.integers(T0 - 10**12, T0 + 10**12).map(str), st.integers(T0, T0 + 10**12)),
    st.one_of(
        INTEGERS,
        INTEGERS.map(str),
        st.sampled_from(
            ["", "0", "abc", " 12 ", "1_000", "1__0", "_1", "0x10", "1e9", "12.5", "NaN", "Inf"]
        ),
        st.sampled_from(["-0", "+5", "١٢٣", None, True, False, [], {}]),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
)
NUMBERS = mostly(
    st.one_of(st.floats(0, 100), st.integers(0, 5000)),
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(-(2**70), 2**70),
        st.sampled_from(["NaN", "nan", "Infinity", "-Infinity", "inf", " 2.5 ", "1_0", "x"]),
        st.sampled_from([True, None, "", [], {}]),
    ),
)
HUGE_TEXT = "x" * 300_000
STRINGS = mostly(
    st.one_of(
        st.text(PRINTABLE, max_size=12),
        st.sampled_from(["ttft", "retrieval", "queue", "tool", "chat", "proxy", "m-small"]),
    ),
    st.sampled_from(["", HUGE_TEXT, "a'b", 'a"b', "a'\"b", "tab\tnew\nline"]),
)


def _value(kind: str, value: Any) -> dict[str, Any]:
    return {kind: value}


SCALAR_VALUES = mostly(
    st.one_of(
        st.builds(_value, st.just("stringValue"), STRINGS),
        st.builds(_value, st.just("intValue"), st.integers(0, 5000).map(str)),
        st.builds(_value, st.just("doubleValue"), NUMBERS),
        st.builds(_value, st.just("boolValue"), st.booleans()),
    ),
    st.one_of(
        st.builds(_value, st.just("intValue"), st.one_of(INTEGERS, INTEGERS.map(str), NUMBERS)),
        st.builds(_value, st.just("boolValue"), st.sampled_from(["TRUE", "no", 1, None])),
        st.builds(_value, st.just("bytesValue"), st.sampled_from(["AAAA", "", 5])),
        st.builds(_value, st.just("stringValue"), st.sampled_from([None, 5, ["a"]])),
        st.just({}),
        st.just({"intValue": "3", "doubleValue": 2.5, "stringValue": "both"}),
        st.just({"doubleValue": 2.5, "intValue": "3"}),
        st.just({"stringValue": None, "intValue": "4"}),
        st.just({"intValue": "4", "stringValue": None}),
        st.just({"boolValue": True, "intValue": "x"}),
        st.just({"arrayValue": {"values": [{"doubleValue": 0.5}] * 20_000}}),
        st.just({"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "1"}}] * 5_000}}),
        st.just({"arrayValue": {"values": None}}),
        st.just({"arrayValue": [{"stringValue": "not an object"}]}),
    ),
)
ANY_VALUES = st.recursive(
    SCALAR_VALUES,
    lambda inner: st.one_of(
        st.builds(lambda values: {"arrayValue": {"values": values}}, st.lists(inner, max_size=4)),
        st.builds(
            lambda values: {"kvlistValue": {"values": values}},
            st.lists(
                st.fixed_dictionaries({"key": st.text(PRINTABLE, max_size=4), "value": inner}),
                max_size=3,
            ),
        ),
    ),
    max_leaves=8,
)
ATTRIBUTE_KEYS = st.sampled_from(
    [*sorted(KEPT_ATTRIBUTES | HASHED_ATTRIBUTES), "service.name", "http.url", "", "gen_ai."]
)
ATTRIBUTES = st.lists(
    st.fixed_dictionaries({"key": ATTRIBUTE_KEYS, "value": ANY_VALUES}), max_size=6
)
KINDS = mostly(
    st.sampled_from([1, 2, 3, "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"]),
    st.sampled_from(["bogus", None, 2.5, 300, 258, -1, True, 2**70]),
)


@st.composite
def hostile_spans(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Spans of a few traces sharing a few span ids: self-parents, cycles and the same span id
    read twice with different parents come out of this often."""
    span_ids = draw(st.lists(SPAN_IDS, min_size=1, max_size=4))
    spans = []
    for _ in range(draw(st.integers(1, 6))):
        span_id = draw(st.sampled_from(span_ids))
        span: dict[str, Any] = {
            "traceId": draw(TRACE_IDS),
            "spanId": span_id,
            "name": draw(STRINGS),
            "kind": draw(KINDS),
            "startTimeUnixNano": draw(TIMES),
            "endTimeUnixNano": draw(TIMES),
            "attributes": draw(ATTRIBUTES),
        }
        parent = draw(st.one_of(st.sampled_from(span_ids), SPAN_IDS, st.none()))
        if parent is not None:
            span["parentSpanId"] = parent
        for field in draw(st.sets(st.sampled_from(["name", "kind", "startTimeUnixNano"]))):
            del span[field]
        if draw(st.integers(0, 4)) == 0:
            # a field of the wrong type
            span[draw(st.sampled_from([*sorted(span), "parentSpanId"]))] = draw(WRONG_TYPES)
        spans.append(span)
    return spans


WRONG_TYPES = st.sampled_from([None, "", "x", 0, 1, 2.5, True, False, [], [1], {}, {"a": 1}])


@st.composite
def hostile_requests(draw: st.DrawFn) -> str:
    """A request whose resource or containers may hold the wrong types too."""
    spans = draw(hostile_spans())
    document = json.loads(request_line(spans, service=draw(st.sampled_from(["svc", "other"]))))
    resource_span = document["resourceSpans"][0]
    where = draw(st.integers(0, 12))
    if where == 0:
        resource_span["resource"] = draw(WRONG_TYPES)
    elif where == 1:
        resource_span["resource"]["attributes"] = draw(WRONG_TYPES)
    elif where == 2:
        resource_span["resource"]["attributes"].insert(0, draw(WRONG_TYPES))
    elif where == 3:
        resource_span["resource"]["attributes"][0]["value"] = draw(
            st.one_of(WRONG_TYPES, SCALAR_VALUES)
        )
    elif where == 4:
        resource_span["scopeSpans"] = draw(WRONG_TYPES)
    elif where == 5:
        resource_span["scopeSpans"][0]["spans"] = draw(WRONG_TYPES)
    elif where == 6:
        document["resourceSpans"] = draw(WRONG_TYPES)
    elif where == 7 and spans:
        attributes = resource_span["scopeSpans"][0]["spans"][0].setdefault("attributes", [])
        if isinstance(attributes, list):
            attribute = draw(st.fixed_dictionaries({"key": ATTRIBUTE_KEYS, "value": ANY_VALUES}))
            field = draw(st.sampled_from(["key", "value", None]))
            if field is None:
                attribute = draw(WRONG_TYPES)
            else:
                attribute[field] = draw(WRONG_TYPES)
            attributes.insert(draw(st.integers(0, len(attributes))), attribute)
    elif where == 8 and spans:
        # a span written as an array of its fields
        scope_spans = resource_span["scopeSpans"][0]["spans"]
        scope_spans[0] = list(scope_spans[0].values())
    return json.dumps(document, separators=(",", ":"), ensure_ascii=draw(st.booleans()))


def _spoil(line: str, how: str, where: float) -> bytes:
    """One way to break an otherwise readable line."""
    data = line.encode()
    at = int(where * len(data))
    if how == "truncated":
        return data[:at]
    if how == "invalid utf-8":
        quote = data.find(b'"', at)
        at = quote + 1 if quote >= 0 else at
        return data[:at] + b"\xff\xc3" + data[at:]
    if how == "surrogate":
        quote = data.find(b'"', at)
        at = quote + 1 if quote >= 0 else at
        escape = [rb"\ud800", rb"\udc00", rb"\ud800\u0041", rb"\ud83d\ude00", rb"\\ud800"][
            int(where * 1000) % 5
        ]
        return data[:at] + escape + data[at:]
    if how == "nan literal":
        return re.sub(
            rb'"(startTimeUnixNano|doubleValue)":"?[^,}"]*"?', rb'"\1":NaN', data, count=1
        )
    if how == "deep inside":
        return data.replace(b'"kind":', b'"status":' + nested(5000).encode() + b',"kind":', 1)
    return data


HOW = st.sampled_from(["truncated", "invalid utf-8", "surrogate", "nan literal", "deep inside"])
DEEP = st.sampled_from([1023, 1024, 1025, 5000, 200_000])
JUNK = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(
        [
            b"[1, 2, 3]",
            b"null",
            b'{"something": "else"}',
            b'{"resourceSpans": null}',
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "no ids"}]}]}]}',
            b"\xef\xbb\xbf" + request_line(simple_trace(90)).encode(),  # a byte order mark
            b"   \t",
            b"{" * 3000,
        ]
    ),
)


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 9))
    if choice <= 4:
        return draw(hostile_requests()).encode()
    if choice <= 6:
        line = draw(hostile_requests())
        return _spoil(line, draw(HOW), draw(st.floats(0, 1)))
    if choice == 7:
        kind = draw(st.sampled_from(["array", "object"]))
        return nested(draw(DEEP), kind=kind).encode()
    if choice == 8:
        # an attribute value nested deep inside a span
        depth = draw(st.sampled_from([20, 100, 300, 400]))
        value = '{"arrayValue":{"values":[' * depth + '{"intValue":"1"}' + "]}}" * depth
        span = {"traceId": "f" * 32, "spanId": "d" * 16, "endTimeUnixNano": "9", "attributes": 0}
        line = request_line([span]).replace(
            '"attributes":0', f'"attributes":[{{"key":"gen_ai.request.model","value":{value}}}]'
        )
        return line.encode()
    return draw(JUNK)


@st.composite
def hostile_files(draw: st.DrawFn) -> list[bytes]:
    """Lines of a trace file: the well-formed ones among hostile ones, in any order."""
    good, _ = good_lines()
    lines = [line.encode() for line in good] + draw(st.lists(hostile_lines(), max_size=6))
    return draw(st.permutations(lines))


HOSTILE = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@HOSTILE
@given(lines=hostile_files())
def test_hostile_lines_are_read_alike_and_spare_the_well_formed_traces(
    lines: list[bytes], readers: ReaderProcess
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "traces.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        assert_read_alike(readers.read(path), good_lines()[1])


@HOSTILE
@given(lines=hostile_files(), cut=st.floats(0.05, 1.0))
def test_a_gzip_file_cut_short_is_read_as_far_as_it_goes(
    lines: list[bytes], cut: float, readers: ReaderProcess
) -> None:
    text = b"\n".join(lines) + b"\n"
    compressed = gzip.compress(text)
    kept = compressed[: max(2, int(cut * len(compressed)))]
    # what can be decompressed from the part kept: its complete lines are read
    decompressor = zlib.decompressobj(wbits=31)
    try:
        readable = decompressor.decompress(kept)
    except zlib.error:
        readable = b""
    complete = readable[: readable.rfind(b"\n") + 1]
    _, trace_ids = good_lines()
    well_formed = [
        trace_id
        for line, trace_id in zip(good_lines()[0], trace_ids, strict=True)
        if line.encode() + b"\n" in complete
    ]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "traces.jsonl.gz"
        path.write_bytes(kept)
        assert_read_alike(readers.read(path), well_formed)


@HOSTILE
@given(lines=hostile_files(), pretty=hostile_requests(), separator=st.sampled_from([b"\n", b""]))
def test_a_whole_document_file_is_read_alike_whatever_it_holds(
    lines: list[bytes], pretty: str, separator: bytes, readers: ReaderProcess
) -> None:
    # documents back to back (read whole when all are OTLP, else line by line), and one of them
    # pretty-printed over many lines
    try:
        indented = json.dumps(json.loads(pretty), indent=2).encode()
    except ValueError:
        indented = pretty.encode()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "traces.json"
        path.write_bytes(separator.join([*lines, indented]))
        well_formed = good_lines()[1] if separator else []
        assert_read_alike(readers.read(path), well_formed)


def test_a_file_read_on_every_core_is_read_alike(tmp_path: Path, readers: ReaderProcess) -> None:
    # more than a megabyte is parsed by several threads of the native reader
    good, trace_ids = good_lines()
    nested_value = '{"arrayValue":{"values":[' * 330 + '{"intValue":"1"}' + "]}}" * 330
    deep_attribute = good[0].replace(
        '{"stringValue":"retrieval"}', nested_value, 1
    )  # 1006 levels: read
    filler = [request_line(simple_trace(i)) for i in range(100, 4100)]
    lines = [*filler[:1000], nested(200_000), *filler[1000:], deep_attribute, *good[1:]]
    path = _write_lines(tmp_path, "large.jsonl", lines)
    assert path.stat().st_size > 2 << 20
    answer = readers.read(path)
    assert_read_alike(answer, trace_ids[1:], exact_warnings=True)
    assert answer["python"]["report"]["traces"] == 4002 + 1


def _write_lines(directory: Path, name: str, lines: list[str | bytes]) -> Path:
    path = directory / name
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n")
    return path


@pytest.mark.parametrize("kind", ["array", "object"])
def test_a_line_nested_200000_levels_deep_is_reported_and_skipped(
    kind: str, tmp_path: Path, readers: ReaderProcess
) -> None:
    good, trace_ids = good_lines()
    path = _write_lines(tmp_path, "deep.jsonl", [good[0], nested(200_000, kind=kind), *good[1:]])
    answer = readers.read(path)
    assert_read_alike(answer, trace_ids, exact_warnings=True)
    (warning,) = answer["python"]["report"]["warnings"]
    assert warning.startswith(f"{path}:2: not valid JSON (depth limit exceeded at column ")


def test_nesting_up_to_the_limit_is_read_and_past_it_is_reported(
    tmp_path: Path, readers: ReaderProcess
) -> None:
    good, trace_ids = good_lines()
    # a span's status is 8 levels deep in a line: 1016 more reach the limit, 1017 pass it
    at_limit = good[1].replace('"status":{}', '"status":' + nested(1016, "{}"), 1)
    past_limit = good[2].replace('"status":{}', '"status":' + nested(1017, "{}"), 1)
    assert at_limit != good[1] and past_limit != good[2]
    innermost = past_limit.index('"status":') + len('"status":') + 1017
    path = _write_lines(tmp_path, "limit.jsonl", [good[0], at_limit, past_limit])
    answer = readers.read(path)
    assert_read_alike(answer, trace_ids[:2], exact_warnings=True)
    assert answer["python"]["report"]["warnings"] == [
        f"{path}:3: not valid JSON (depth limit exceeded at column {innermost + 2})"
    ]


def test_a_whole_document_file_nested_too_deep_is_read_as_lines(
    tmp_path: Path, readers: ReaderProcess
) -> None:
    good, trace_ids = good_lines()
    path = _write_lines(tmp_path, "deep.json", [good[0], nested(200_000), good[1]])
    assert_read_alike(readers.read(path), trace_ids[:2], exact_warnings=True)


def test_parent_cycles_and_self_parents_end_no_walk(tmp_path: Path, readers: ReaderProcess) -> None:
    def span(span_id: str, parent: str | None) -> dict[str, Any]:
        record: dict[str, Any] = {
            "traceId": "f" * 32,
            "spanId": span_id,
            "name": span_id[:1],
            "startTimeUnixNano": str(T0),
            "endTimeUnixNano": str(T0 + 5),
        }
        if parent is not None:
            record["parentSpanId"] = parent
        return record

    a, b, c, d = ("a" * 16, "b" * 16, "c" * 16, "d" * 16)
    hostile = request_line([span(a, b), span(b, c), span(c, a), span(d, d)])
    # the same span id twice, each claiming the other as parent
    twice = request_line([span(a, d), span(d, a)])
    good, trace_ids = good_lines()
    path = _write_lines(tmp_path, "cycles.jsonl", [hostile, twice, *good])
    answer = readers.read(path)
    assert_read_alike(answer, trace_ids, exact_warnings=True)
    # the self-parent is a trace of its own; the cycle has no root and is not a trace
    assert "f" * 32 in answer["python"]["trace_ids"]


def test_the_command_line_prints_no_traceback_for_a_hostile_file(tmp_path: Path) -> None:
    good, _ = good_lines()
    lines: list[str | bytes] = [
        nested(200_000),
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"\xff"}]}]}]}',
        *good,
    ]
    path = _write_lines(tmp_path, "hostile.jsonl", lines)
    for reader in ("1", "0"):
        result = subprocess.run(
            [sys.executable, "-m", "llmtrace", "report", str(path), "--format", "json"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), "LLMTRACE_NATIVE": reader},
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr + result.stdout
        assert json.loads(result.stdout)["traces"] == GOOD_TRACES
