"""Where traces come from: a trace file or directory (gzip and rotated files too), or Jaeger.

Everything goes through the one OTLP JSON parser in ``llmtrace.analysis.otlp``, or, when it is
installed, the native reader, which implements the same rules (``llmtrace.analysis.native``):
Jaeger's /api/v3 answers are OTLP JSON too, so they are read natively like files.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import httpx
import orjson

from llmtrace.analysis import native
from llmtrace.analysis.collect import TraceList, check_root_key, root_text
from llmtrace.analysis.model import NANOS, Trace, TraceSet, cyclic_gc_paused
from llmtrace.analysis.otlp import (
    OTLPFormatError,
    SpanCollector,
    documents_from_stream,
    documents_from_text,
)
from llmtrace.errors import SourceError

MAX_WARNINGS = 50
JAEGER_PAGE = 500
JAEGER_DEFAULT_LOOKBACK = timedelta(hours=1)
JAEGER_DEFAULT_LIMIT = 2000
# Services a Jaeger install reports about itself; never the application under study.
_JAEGER_OWN_SERVICES = frozenset(
    {"jaeger", "jaeger-query", "jaeger-all-in-one", "jaeger-collector"}
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_TRACE_FILE = re.compile(r".*\.(jsonl|json)(\.\d+)?(\.gz)?$")


def parse_duration(text: str) -> timedelta:
    """``15m``, ``2h``, ``90s``, ``1d`` → timedelta."""
    match = _DURATION.match(text)
    if not match:
        raise SourceError(
            f"invalid duration {text!r}: use a number and a unit, e.g. 30s, 15m, 2h, 1d"
        )
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """An ISO 8601 time (``2025-01-31T12:00``, UTC unless it says otherwise) or ``2h`` (ago)."""
    now = now or datetime.now(UTC)
    if text.strip() == "now":
        return now
    if _DURATION.match(text):
        return now - parse_duration(text)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SourceError(
            f"invalid time {text!r}: use ISO 8601 (2025-01-31T12:00:00Z) or a time ago (2h)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _as_time(value: datetime | str | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return parse_time(value)


def _as_duration(value: timedelta | str | None) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    return parse_duration(value)


def is_jaeger_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def load_traces(
    source: str,
    *,
    service: str | None = None,
    lookback: timedelta | str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    limit: int | None = None,
    trace_id: str | None = None,
    attributes: dict[str, str] | None = None,
) -> TraceSet:
    """Read traces from a file, a directory of trace files, or a Jaeger base URL.

    Filters: ``service`` keeps traces with a span of that service; ``attributes`` keeps traces
    whose root span carries every (key, value) as a string (the request context
    ``llmtrace.context()`` sets on every span of a request, so the root is enough); ``lookback`` / ``since`` /
    ``until`` keep traces whose root started in the window; ``limit`` keeps the most recent N;
    ``trace_id`` reads one trace. Raises ``SourceError`` when the source cannot be read.
    """
    since_time = _as_time(since)
    until_time = _as_time(until)
    lookback_span = _as_duration(lookback)
    if lookback_span is not None:
        since_time = (until_time or datetime.now(UTC)) - lookback_span
    if trace_id is not None:
        trace_id = trace_id.strip().lower()
    if limit is not None and limit <= 0:
        raise SourceError(f"invalid limit {limit}: use a positive number of traces")
    wanted = {check_root_key(key): value for key, value in (attributes or {}).items()}
    with cyclic_gc_paused():
        if native.available() and is_jaeger_url(source):
            traceset = _load_jaeger_native(
                source, service, since_time, until_time, limit, trace_id, wanted
            )
        elif native.available():
            # The native reader applies the same filters while it links the traces.
            traceset = _load_files_native(
                Path(source),
                trace_id,
                service,
                _nanos(since_time),
                _nanos(until_time),
                limit,
                wanted,
            )
        else:
            if is_jaeger_url(source):
                traces, traceset = _load_jaeger(
                    source, service, since_time, until_time, limit, trace_id
                )
            else:
                traces, traceset = _load_files(Path(source))
            chosen = _filter(traces, service, since_time, until_time, limit, trace_id, wanted)
            read = traceset.collector
            assert isinstance(read, TraceList)
            traceset.collector = TraceList(chosen, read.families, read.unassigned_spans)
    traceset.service = service
    traceset.filters = wanted
    return traceset


def _nanos(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * NANOS)


def _filter(
    traces: list[Trace],
    service: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    trace_id: str | None,
    attributes: dict[str, str],
) -> list[Trace]:
    if trace_id is not None:
        traces = [trace for trace in traces if trace.trace_id == trace_id]
    if service is not None:
        traces = [
            trace for trace in traces if any(span.service == service for span in trace.spans())
        ]
    for key, value in attributes.items():
        traces = [trace for trace in traces if root_text(trace, key) == value]
    if since is not None:
        low = int(since.timestamp() * NANOS)
        traces = [trace for trace in traces if trace.root.start >= low]
    if until is not None:
        high = int(until.timestamp() * NANOS)
        traces = [trace for trace in traces if trace.root.start < high]
    if limit is not None and len(traces) > limit:
        traces = sorted(traces, key=lambda trace: trace.root.start)[-limit:]
    return traces


# --- files -------------------------------------------------------------------------------------


def trace_files(path: Path) -> list[Path]:
    """The trace files of a directory: ``*.jsonl``, rotated ``*.jsonl.1``…, ``.json``, gzip."""
    files = [p for p in path.iterdir() if p.is_file() and _TRACE_FILE.match(p.name)]
    return sorted(files, key=_rotation_order)


def rotated_family(path: Path) -> list[Path]:
    """A trace file and the files its exporter rotated away (``FILE.1``, ``FILE.2.gz``, ...)."""
    pattern = re.compile(re.escape(path.name) + r"\.\d+(\.gz)?$")
    rotated = [p for p in path.parent.iterdir() if p.is_file() and pattern.match(p.name)]
    return [*sorted(rotated, key=_rotation_order), path]


def _rotation_order(path: Path) -> tuple[str, int]:
    # traces.jsonl.3 is older than traces.jsonl.1, which is older than traces.jsonl
    match = re.search(r"\.(\d+)(\.gz)?$", path.name)
    base = path.name[: match.start()] if match else re.sub(r"\.gz$", "", path.name)
    return (base, -int(match.group(1)) if match else 0)


def _open(path: Path) -> BinaryIO:
    handle = path.open("rb")
    if handle.read(2) == b"\x1f\x8b":
        handle.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    handle.seek(0)
    return handle


def read_trace_lines(
    lines: Iterable[bytes], name: str, collector: SpanCollector, warnings: list[str]
) -> int:
    """Feed OTLP JSON lines to ``collector``; a bad line becomes a warning, the rest is read."""
    bad = 0
    loads = orjson.loads
    add = collector.add_document
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            add(loads(line))
        except json.JSONDecodeError as exc:
            bad += 1
            _warn(warnings, f"{name}:{number}: not valid JSON ({exc.msg} at column {exc.colno})")
        except (OTLPFormatError, KeyError, TypeError, ValueError, AttributeError) as exc:
            bad += 1
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            _warn(warnings, f"{name}:{number}: not OTLP trace data ({detail})")
    return bad


def _warn(warnings: list[str], message: str) -> None:
    if len(warnings) < MAX_WARNINGS:
        warnings.append(message)
    elif len(warnings) == MAX_WARNINGS:
        warnings.append("… further problems not shown")


def _read_file(path: Path, collector: SpanCollector, warnings: list[str]) -> None:
    try:
        with _open(path) as handle:
            if path.suffix == ".json" or path.name.endswith(".json.gz"):
                # A whole-file JSON document (pretty-printed OTLP, a saved Jaeger answer), or
                # several back to back; when it is not, it is read line by line instead.
                data = handle.read()
                if not _read_documents(data, collector):
                    read_trace_lines(data.split(b"\n"), str(path), collector, warnings)
                return
            read_trace_lines(handle, str(path), collector, warnings)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        _warn(warnings, f"{path}: cannot read ({exc})")


def _read_documents(data: bytes, collector: SpanCollector) -> bool:
    """Add the spans of a whole-file JSON text, all or nothing: False when it is not OTLP."""
    try:
        documents = list(documents_from_text(data.decode()))
        SpanCollector().add_documents(documents)  # a trial run: a bad span anywhere adds nothing
    except (OTLPFormatError, KeyError, TypeError, ValueError, AttributeError):
        return False
    collector.add_documents(documents)
    return True


def _source_files(path: Path) -> list[Path]:
    if not path.exists():
        raise SourceError(
            f"no traces at {path}: run an application with llmtrace.init() first, or pass a "
            "trace file, a directory of trace files or a Jaeger URL (http://host:16686)"
        )
    files = trace_files(path) if path.is_dir() else rotated_family(path)
    if not files:
        raise SourceError(f"no trace files (*.jsonl, *.jsonl.N, *.json, *.gz) in {path}")
    return files


def _load_files_native(
    path: Path,
    trace_id: str | None,
    service: str | None,
    since: int | None,
    until: int | None,
    limit: int | None,
    attributes: dict[str, str],
) -> TraceSet:
    traces, excluded_open, problems = native.read_files(
        _source_files(path),
        trace_id=trace_id,
        service=service,
        since=since,
        until=until,
        limit=limit,
        attributes=attributes,
    )
    warnings: list[str] = []
    for problem in problems:
        _warn(warnings, problem)
    return TraceSet(str(path), traces, excluded_open=excluded_open, warnings=warnings)


def _load_files(path: Path) -> tuple[list[Trace], TraceSet]:
    """Every trace of the files at ``path``, and the set to hand them in once filtered."""
    files = _source_files(path)
    collector = SpanCollector()
    warnings: list[str] = []
    for file in files:
        _read_file(file, collector, warnings)
    traces, excluded_open = collector.assemble()
    return traces, TraceSet(
        str(path),
        TraceList([], collector.families, collector.unassigned),
        excluded_open=excluded_open,
        warnings=warnings,
    )


# --- Jaeger ------------------------------------------------------------------------------------


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JaegerClient:
    """Jaeger's query API v3 (``/api/v3``), which answers in OTLP JSON."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        try:
            self._http = httpx.Client(base_url=self.base_url, timeout=timeout)
        except httpx.InvalidURL as exc:
            raise SourceError(
                f"{self.base_url} is not a valid Jaeger URL ({exc}); pass the Jaeger UI/query "
                "URL, e.g. http://localhost:16686"
            ) from None

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, params: dict[str, str] | None = None) -> httpx.Response:
        try:
            return self._http.get(path, params=params)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = str(exc) or type(exc).__name__
            raise SourceError(
                f"cannot reach Jaeger at {self.base_url} ({reason}): is the Jaeger query "
                "service running, and is this its URL (default port 16686)?"
            ) from None

    def _not_jaeger(self, path: str, response: httpx.Response) -> SourceError:
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        return SourceError(
            f"{self.base_url} does not look like Jaeger's query service: GET {path} answered "
            f"HTTP {response.status_code} ({kind}); pass the Jaeger UI/query URL, "
            "e.g. http://localhost:16686"
        )

    def services(self) -> list[str]:
        path = "/api/v3/services"
        response = self._get(path)
        try:
            body = response.json()
        except ValueError:
            raise self._not_jaeger(path, response) from None
        if response.status_code != 200 or not isinstance(body, dict) or "services" not in body:
            raise self._not_jaeger(path, response)
        services = body.get("services") or []
        return [str(name) for name in services]

    def _documents(self, path: str, response: httpx.Response) -> list[Any]:
        if response.status_code == 404 and '"error"' in response.text:
            return []  # Jaeger answers {"error": {"httpCode": 404, ...}} when no trace matches
        if response.status_code != 200:
            raise SourceError(
                f"Jaeger at {self.base_url} answered HTTP {response.status_code} to GET {path}: "
                f"{response.text.strip()[:200]}"
            )
        try:
            documents = list(documents_from_stream(response.text))
        except json.JSONDecodeError:
            raise self._not_jaeger(path, response) from None
        for document in documents:
            if isinstance(document, dict) and "error" in document:
                error = document["error"]
                message = error.get("message", error) if isinstance(error, dict) else error
                if isinstance(error, dict) and error.get("httpCode") == 404:
                    return []
                raise SourceError(f"Jaeger at {self.base_url} reported an error: {message}")
        return documents

    def _answer(self, path: str, response: httpx.Response, raw: bool) -> list[Any] | bytes:
        """The documents of an answer, or with ``raw`` an answer of trace data as its bytes
        (``{"result": ...}`` documents back to back) for the native reader to decode."""
        if (
            raw
            and response.status_code == 200
            and response.content[:20].lstrip().startswith(b'{"result"')
        ):
            return response.content
        return self._documents(path, response)

    def trace(self, trace_id: str, *, raw: bool = False) -> list[Any] | bytes:
        path = f"/api/v3/traces/{trace_id}"
        return self._answer(path, self._get(path), raw)

    def find(
        self, service: str, start: datetime, end: datetime, count: int, *, raw: bool = False
    ) -> list[Any] | bytes:
        path = "/api/v3/traces"
        params = {
            "query.service_name": service,
            "query.start_time_min": _rfc3339(start),
            "query.start_time_max": _rfc3339(end),
            "query.num_traces": str(count),
            "query.search_depth": str(count),
        }
        return self._answer(path, self._get(path, params), raw)


class Answers(Protocol):
    """Where Jaeger's answers go: the Python reader's collector, or the native reader's store."""

    raw: bool  # whether the client hands answers over as bytes

    def trace_ids(self, answer: Any) -> set[str]:
        """The traces an answer holds (it is not kept)."""
        ...

    def keep(self, answer: Any) -> None:
        """Keep an answer's spans."""
        ...

    def empty(self) -> bool: ...


class PythonAnswers:
    """Answers decoded in Python and kept by a ``SpanCollector``."""

    raw = False

    def __init__(self) -> None:
        self.collector = SpanCollector()

    def trace_ids(self, answer: Any) -> set[str]:
        collector = SpanCollector()
        collector.add_documents(answer)
        return set(collector.by_trace)

    def keep(self, answer: Any) -> None:
        self.collector.add_documents(answer)

    def empty(self) -> bool:
        return not self.collector.by_trace


class NativeAnswers:
    """Answers decoded and kept by the native reader."""

    raw = True

    def __init__(self) -> None:
        self.store = native.new_store()
        self._kept = False

    def _read(self, answer: Any, keep: bool) -> set[str]:
        if not isinstance(answer, bytes):  # documents Python decoded (an answer of no traces)
            answer = b"".join(orjson.dumps(document) for document in answer)
        try:
            return set(self.store.read_answer(answer, keep))
        except ValueError as exc:
            raise OTLPFormatError(str(exc)) from None

    def trace_ids(self, answer: Any) -> set[str]:
        return self._read(answer, keep=False)

    def keep(self, answer: Any) -> None:
        self._kept = bool(self._read(answer, keep=True)) or self._kept

    def empty(self) -> bool:
        return not self._kept


def _find_window(
    client: JaegerClient,
    service: str,
    start: datetime,
    end: datetime,
    wanted: int,
    answers: Answers,
    seen: set[str],
) -> tuple[int, datetime]:
    """Read up to ``wanted`` traces not read yet, started in [start, end), newest first.

    Returns how many new traces were read and the frontier: every trace of ``service`` started in
    [frontier, end) has been read. A frontier equal to ``start`` means the window is exhausted;
    any other frontier means exactly ``wanted`` traces were read and the rest lie before it.

    Jaeger caps one answer at the requested number of traces; when an answer is full the window
    is split in halves (newer half first) so that a large window is read in pages.
    """
    page = min(wanted, JAEGER_PAGE)
    documents = client.find(service, start, end, page, raw=answers.raw)
    returned = answers.trace_ids(documents)
    # A full answer may have left traces out: count what came back, including traces already
    # read through a neighbouring window, or a truncated window would pass for a complete one.
    if len(returned) >= page and end - start > timedelta(milliseconds=2):
        middle = start + (end - start) / 2
        newer, frontier = _find_window(client, service, middle, end, wanted, answers, seen)
        if newer >= wanted:
            return newer, frontier
        older, frontier = _find_window(
            client, service, start, middle, wanted - newer, answers, seen
        )
        return newer + older, frontier
    answers.keep(documents)
    new = len(returned - seen)
    seen.update(returned)
    return new, start


def _find_shared(
    client: JaegerClient,
    services: list[str],
    start: datetime,
    end: datetime,
    budget: int,
    answers: Answers,
) -> None:
    """Read up to ``budget`` traces started in [start, end), shared fairly among ``services``.

    The budget is read in rounds: each round divides what is left of it equally among the
    services that may still hold traces (when it does not divide evenly, the services first in
    the list get one more), and each service reads its share, newest first, continuing where
    it stopped in the round before. A service that holds fewer traces than its share drops out,
    and the next round gives what it left to the others. A trace with spans of several services
    counts once, for the service it was read through first.
    """
    seen: set[str] = set()
    # Per service still in the running: every one of its traces in [frontier, end) is read.
    frontiers = dict.fromkeys(services, end)
    while frontiers and budget > 0:
        share, extra = divmod(budget, len(frontiers))
        for position, service in enumerate(list(frontiers)):
            quota = share + (1 if position < extra else 0)
            if quota == 0:
                break
            read, frontier = _find_window(
                client, service, start, frontiers[service], quota, answers, seen
            )
            budget -= read
            if frontier <= start:
                del frontiers[service]
            else:
                frontiers[service] = frontier


def _read_jaeger(
    base_url: str,
    service: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    trace_id: str | None,
    answers: Answers,
) -> None:
    """One trace by id, or up to ``limit`` traces (default 2000) started in the window: those of
    ``service``, or without it, those of every application service, the limit shared fairly
    among them (``_find_shared``) so that one busy service cannot crowd out the others."""
    client = JaegerClient(base_url)
    try:
        services = client.services()  # also proves the URL is Jaeger's query service
        if trace_id is not None:
            answers.keep(client.trace(trace_id, raw=answers.raw))
            if answers.empty():
                raise SourceError(f"trace {trace_id} not found in Jaeger at {client.base_url}")
        else:
            end = until or datetime.now(UTC)
            start = since or end - JAEGER_DEFAULT_LOOKBACK
            wanted = limit or JAEGER_DEFAULT_LIMIT
            if service is not None:
                targets = [service]
            else:
                targets = [name for name in services if name not in _JAEGER_OWN_SERVICES]
            _find_shared(client, targets, start, end, wanted, answers)
    except OTLPFormatError as exc:
        raise SourceError(
            f"Jaeger at {client.base_url} answered with unexpected data: {exc}"
        ) from None
    finally:
        client.close()


def _load_jaeger(
    base_url: str,
    service: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    trace_id: str | None,
) -> tuple[list[Trace], TraceSet]:
    """Traces read from Jaeger by the Python reader (``_read_jaeger``), before the filters."""
    answers = PythonAnswers()
    _read_jaeger(base_url, service, since, until, limit, trace_id, answers)
    collector = answers.collector
    traces, excluded_open = collector.assemble()
    url = base_url.rstrip("/")
    read = TraceList([], collector.families, collector.unassigned)
    return traces, TraceSet(url, read, excluded_open=excluded_open, jaeger_url=url)


def _load_jaeger_native(
    base_url: str,
    service: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    trace_id: str | None,
    attributes: dict[str, str],
) -> TraceSet:
    """Traces read from Jaeger by the native reader, which also applies the filters."""
    answers = NativeAnswers()
    _read_jaeger(base_url, service, since, until, limit, trace_id, answers)
    traces = native.assembled(
        answers.store,
        trace_id=trace_id,
        service=service,
        since=_nanos(since),
        until=_nanos(until),
        limit=limit,
        attributes=attributes,
    )
    url = base_url.rstrip("/")
    return TraceSet(url, traces, excluded_open=answers.store.excluded_open, jaeger_url=url)
