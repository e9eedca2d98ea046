"""Building the report: per-stage statistics across traces, the bottleneck, the tail and advice.

``build_report`` turns a ``TraceSet`` into a :class:`~llmtrace.analysis.report_model.Report`
(the data model and its JSON live in :mod:`llmtrace.analysis.report_model`). It reads the
traces only through their collector's per-trace columns (:mod:`llmtrace.analysis.collect`),
whichever reader produced them.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from datetime import UTC, datetime
from itertools import compress
from typing import Any

from llmtrace._version import __version__
from llmtrace.analysis.advice import Evidence, StageFigures, advise_caching, advise_stage
from llmtrace.analysis.breakdown import (
    critical_path,
    declared_stage,
    is_hop,
    is_model_call,
    is_remote,
    remote_stage,
)
from llmtrace.analysis.collect import TraceColumns, check_root_key
from llmtrace.analysis.evidence import ModelCall
from llmtrace.analysis.model import NANOS, Span, Trace, TraceSet, cyclic_gc_paused
from llmtrace.analysis.report_model import (
    END_TO_END,
    Bottleneck,
    Group,
    Grouping,
    ModelUsage,
    Report,
    ServiceSummary,
    StageSummary,
    Tail,
    TraceExemplar,
    UserPerceivedTTFT,
    Waterfall,
    WaterfallSpan,
    linked,
)
from llmtrace.analysis.stats import Distribution, distribution, histogram

SLOWEST = 10
EXEMPLARS = 3  # traces named per stage, and slowest requests at or above P95
_ANY_TIME = math.ulp(0.0)  # the smallest positive time: a stage the request spent any time in
MAX_SAMPLES = 5000
MAX_WATERFALL_SPANS = 300
MAX_GROUPS = 20  # --group-by: the largest groups shown; the rest are counted


# --- building ----------------------------------------------------------------------------------


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _evidence(acc: TraceColumns) -> Evidence:
    sink = acc.sink
    calls: list[ModelCall] = sink.model_calls
    evidence = Evidence(model_calls=len(calls))
    if acc.durations:
        evidence.model_calls_per_trace = len(calls) / len(acc.durations)
    evidence.input_tokens_mean = _mean(
        [c.input_tokens for c in calls if c.input_tokens is not None]
    )
    evidence.output_tokens_mean = _mean(
        [c.output_tokens for c in calls if c.output_tokens is not None]
    )
    evidence.output_tokens_per_second_mean = _mean(
        [c.output_tokens_per_second for c in calls if c.output_tokens_per_second]
    )
    evidence.max_tokens_mean = _mean([c.max_tokens for c in calls if c.max_tokens is not None])
    evidence.non_streamed_calls = sum(1 for c in calls if c.streamed is False)
    evidence.first_token_unrecorded = sum(
        1 for c in calls if c.time_to_first_token is None and c.streamed is not False
    )
    evidence.length_finished_calls = sum(1 for c in calls if "length" in c.finish_reasons)
    connects = [c.connect for c in calls if c.connect is not None and c.connect > 0]
    evidence.new_connection_calls = len(connects)
    evidence.connect_mean = _mean(connects)
    retried = [c for c in calls if c.retry_error_types]
    evidence.retried_calls = len(retried)
    evidence.retry_mean = _mean([c.retry for c in retried])
    evidence.retry_error_counts = dict(
        Counter(error_type for c in retried for error_type in c.retry_error_types)
    )
    evidence.superseded_calls = len(sink.superseded_errors)
    evidence.superseded_error_counts = dict(Counter(sink.superseded_errors))
    joined = [c for c in calls if c.server_joined]
    evidence.server_joined_calls = len(joined)
    evidence.server_queue_mean = _mean([c.queue for c in joined])
    evidence.retrieval_calls = max(len(sink.retrieval_returned), len(sink.retrieval_top_k))
    evidence.retrieval_returned_mean = _mean([float(n) for n in sink.retrieval_returned])
    evidence.retrieval_top_k_mean = _mean([float(n) for n in sink.retrieval_top_k])
    evidence.rerank_inputs_mean = _mean([float(n) for n in sink.rerank_inputs])
    evidence.embedding_inputs_mean = _mean([float(n) for n in sink.embedding_inputs])
    evidence.prompt_chars_mean = _mean([float(n) for n in sink.prompt_chars])
    prompt_hashes = [c.input_hash for c in calls if c.input_hash is not None]
    evidence.hashed_prompts = len(prompt_hashes)
    evidence.repeated_prompts = len(prompt_hashes) - len(set(prompt_hashes))
    query_hashes = sink.retrieval_query_hashes
    evidence.hashed_queries = len(query_hashes)
    evidence.repeated_queries = len(query_hashes) - len(set(query_hashes))
    if sink.tool_durations:
        name, durations = max(sink.tool_durations.items(), key=lambda item: math.fsum(item[1]))
        evidence.slowest_tool = {"name": name, "mean": _mean(durations), "calls": len(durations)}
    if acc.unclaimed and acc.durations:
        ranked = sorted(acc.unclaimed.items(), key=lambda item: item[1], reverse=True)[:3]
        evidence.unclaimed_spans = [
            {"name": name, "mean": total / len(acc.durations)} for name, total in ranked
        ]
    return evidence


def _models(calls: list[ModelCall]) -> dict[str, ModelUsage]:
    by_model: dict[str, list[ModelCall]] = {}
    for call in calls:
        by_model.setdefault(call.model, []).append(call)
    return {
        model: ModelUsage(
            calls=len(group),
            input_tokens=distribution(
                [c.input_tokens for c in group if c.input_tokens is not None]
            ),
            output_tokens=distribution(
                [c.output_tokens for c in group if c.output_tokens is not None]
            ),
            time_to_first_token=distribution(
                [c.time_to_first_token for c in group if c.time_to_first_token is not None]
            ),
            output_tokens_per_second=distribution(
                [c.output_tokens_per_second for c in group if c.output_tokens_per_second]
            ),
        )
        for model, group in sorted(by_model.items(), key=lambda item: -len(item[1]))
    }


def _tail(durations: list[float], columns: dict[str, list[float]], p95: float) -> Tail | None:
    tail_index = [i for i, d in enumerate(durations) if d > p95]
    if not tail_index:
        return None
    order = sorted(range(len(durations)), key=durations.__getitem__)
    # The "median trace" is the middle fifth of traces by end-to-end time (one trace at least),
    # so a single odd trace at the median does not decide the comparison.
    width = max(1, len(order) // 5)
    first = max(0, (len(order) - width) // 2)
    median_index = order[first : first + width]
    growth = {}
    for stage, values in columns.items():
        tail_mean = math.fsum(values[i] for i in tail_index) / len(tail_index)
        median_mean = math.fsum(values[i] for i in median_index) / len(median_index)
        growth[stage] = tail_mean - median_mean
    stage = max(growth, key=growth.__getitem__)
    return Tail(
        stage=stage,
        growth=growth[stage],
        threshold=p95,
        traces=len(tail_index),
        tail_mean=math.fsum(durations[i] for i in tail_index) / len(tail_index),
        median_mean=math.fsum(durations[i] for i in median_index) / len(median_index),
        stages=growth,
    )


def effective_stages(root: Span) -> dict[int, str]:
    """Each span's stage after inheritance (keyed by ``id(span)``); model calls show ``ttft``, a
    remote span never ``network``, a hop ``network`` (the rules of ``breakdown``)."""
    result: dict[int, str] = {}
    stack: list[tuple[Span, str, Span | None]] = [(root, "other", None)]
    while stack:
        span, inherited, parent = stack.pop()
        stage = declared_stage(span) or inherited
        if parent is not None and is_remote(span, parent):
            stage = remote_stage(stage)
        elif is_hop(span):
            stage = "network"
        if is_model_call(span):
            stage = "ttft"
        result[id(span)] = stage
        stack.extend((child, stage, span) for child in span.children)
    return result


def waterfall(trace: Trace) -> Waterfall:
    """The slowest trace's spans on one time axis, with its critical path by stage."""
    root = trace.root
    stages = effective_stages(root)
    rows: list[WaterfallSpan] = []
    stack: list[tuple[Span, int]] = [(root, 0)]
    while stack and len(rows) < MAX_WATERFALL_SPANS:
        span, depth = stack.pop()
        rows.append(
            WaterfallSpan(
                name=span.name,
                stage=stages[id(span)],
                start=(span.start - root.start) / NANOS,
                duration=max(span.duration, 0.0),
                depth=depth,
                service=span.service,
            )
        )
        children = sorted(span.children, key=lambda child: child.start, reverse=True)
        stack.extend((child, depth + 1) for child in children)
    path = [
        (s.stage, (s.start - root.start) / NANOS, (s.end - root.start) / NANOS)
        for s in critical_path(trace)
    ]
    return Waterfall(trace.trace_id, trace.duration, rows, path, truncated=bool(stack))


def _samples(acc: TraceColumns) -> dict[str, Any]:
    durations, columns = acc.durations, acc.columns
    index = list(range(len(durations)))
    if len(index) > MAX_SAMPLES:
        # A fixed seed keeps a saved report reproducible; compare tests on these.
        index = sorted(random.Random(0).sample(index, MAX_SAMPLES))
    return {
        "end_to_end": [round(durations[i], 6) for i in index],
        "stages": {
            stage: [round(values[i], 6) for i in index] for stage, values in columns.items()
        },
        # which request each sample is: a bench run maps them to its questions, so that compare
        # can pair the questions two runs asked
        "trace_ids": [acc.info(i).trace_id for i in index],
    }


def _run_metadata(
    acc: TraceColumns, run: str | None, calls: list[ModelCall]
) -> dict[str, Any] | None:
    names = {name for name in acc.bench_runs if name}
    if run is None and len(names) != 1:
        return None
    name = run if run is not None else next(iter(names))
    concurrency = Counter(value for value in acc.concurrency if value)
    question_sets = Counter(value for value in acc.question_sets if value)
    models = Counter(call.model for call in calls)
    return {
        "name": name,
        "question_set_hash": question_sets.most_common(1)[0][0] if question_sets else None,
        "concurrency": concurrency.most_common(1)[0][0] if concurrency else None,
        "model": models.most_common(1)[0][0] if models else None,
        "started_at": _iso(acc.started) if acc.started is not None else None,
        "ended_at": _iso(acc.ended) if acc.ended is not None else None,
    }


def _iso(nanos: int) -> str:
    return datetime.fromtimestamp(nanos / NANOS, UTC).isoformat()


def build_report(
    traceset: TraceSet, *, run: str | None = None, group_by: str | None = None
) -> Report:
    """Statistics, bottleneck, tail and advice for every complete trace in ``traceset``.

    ``run`` keeps only the traces of one benchmark run (spans with ``llmtrace.bench.run``).
    Warm-up requests of a benchmark (``llmtrace.bench.warmup``) are left out and counted.
    ``group_by`` adds a stage table per value of that root attribute (``grouping``).
    """
    if group_by is not None:
        check_root_key(group_by)
    with cyclic_gc_paused():
        acc = traceset.collector.collect(run, group_by)
    columns = acc.columns
    end_to_end, stages = _stage_summaries(acc.durations, columns)
    calls = acc.sink.model_calls
    ttfts = [c.time_to_first_token for c in calls if c.time_to_first_token is not None]
    ttft = distribution(ttfts)
    evidence = _evidence(acc)
    tail = _tail(acc.durations, columns, end_to_end.p95) if end_to_end else None
    bottleneck = None
    if stages:
        top = max(stages, key=lambda stage: stages[stage].share)
        advice = advise_stage(_figures(top, stages[top]), evidence)
        if tail is not None and tail.stage != top and tail.stage in stages:
            for line in advise_stage(_figures(tail.stage, stages[tail.stage]), evidence):
                advice.append(f"Slowest 5% ({tail.stage}): {line}")
        advice.extend(advise_caching(evidence))
        bottleneck = Bottleneck(top, stages[top].share, advice)
        if len(acc.services) > 1:
            bottleneck.service, bottleneck.service_share = _stage_service(acc.services, top)
    order = sorted(range(len(acc.durations)), key=acc.durations.__getitem__, reverse=True)
    slowest = [_exemplar(acc, i) for i in order[:SLOWEST]]
    report = Report(
        source=traceset.source,
        service=traceset.service,
        traces=len(acc.durations),
        end_to_end=end_to_end,
        stages=stages,
        ttft=ttft,
        bottleneck=bottleneck,
        tail=tail,
        slowest=slowest,
        generation=distribution(
            [c.generation_time for c in calls if c.generation_time is not None]
        ),
        output_tokens_per_second=distribution(
            [c.output_tokens_per_second for c in calls if c.output_tokens_per_second]
        ),
        models=_models(calls),
        evidence=evidence,
        ttft_histogram=histogram(ttfts),
        waterfall=waterfall(acc.full_trace(order[0])) if order else None,
        excluded_open=traceset.excluded_open,
        excluded_warmup=acc.excluded_warmup,
        orphans=acc.orphans,
        warnings=list(traceset.warnings),
        run=_run_metadata(acc, run, calls),
        samples=_samples(acc),
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        llmtrace_version=__version__,
        grouping=_grouping(group_by, acc) if group_by is not None else None,
        filters=dict(traceset.filters),
        instrumentations=dict(sorted(acc.families.items(), key=lambda item: (-item[1], item[0]))),
        unassigned_spans=acc.unassigned_spans,
        user_ttft=user_perceived_ttft(
            [seconds for seconds in acc.first_bytes if seconds is not None],
            [seconds for seconds in acc.first_events if seconds is not None],
            ttft,
        ),
        exemplars=exemplars(acc, end_to_end.p95 if end_to_end else math.inf),
        services=_service_summaries(acc.durations, acc.services),
    )
    jaeger = traceset.jaeger_url
    return linked(report, jaeger) if jaeger else report


def exemplars(acc: TraceColumns, p95: float) -> dict[str, list[TraceExemplar]]:
    """The requests that show each row: for each stage, the ``EXEMPLARS`` where it took longest
    (of those where it took any time); for end-to-end, the slowest at or above its ``p95``.

    Ties go to the slower request, then to the lower trace id, so both readers (which may hand
    the traces over in different orders) name the same ones.
    """
    rows = {END_TO_END: (acc.durations, p95)}
    rows.update((stage, (values, _ANY_TIME)) for stage, values in acc.columns.items())
    found = {}
    for row, (values, floor) in rows.items():
        chosen = _largest(acc, values, floor)
        if chosen:
            found[row] = [_exemplar(acc, i) for i in chosen]
    return found


def _largest(acc: TraceColumns, values: list[float], floor: float) -> list[int]:
    """Indices of the ``EXEMPLARS`` largest ``values`` at or above ``floor``, largest first."""
    top = heapq.nlargest(EXEMPLARS, values)
    if not top or top[0] < floor:
        return []
    threshold = max(top[-1], floor)
    # every index at or above the threshold (more than EXEMPLARS only on ties), found in C
    candidates = list(compress(range(len(values)), map(threshold.__le__, values)))
    durations = acc.durations
    candidates.sort(key=lambda i: (-values[i], -durations[i], acc.info(i).trace_id))
    return candidates[:EXEMPLARS]


def user_perceived_ttft(
    first_bytes: list[float], first_events: list[float], model_ttft: Distribution | None
) -> UserPerceivedTTFT | None:
    """The client's first sight of streamed answers next to the model's TTFT (None: nothing was
    streamed). The difference is taken percentile by percentile: client and model times come
    from different spans, and a request's model call may be one of several."""
    first_byte, first_event = distribution(first_bytes), distribution(first_events)
    user_sees = first_event or first_byte
    if user_sees is None:
        return None
    return UserPerceivedTTFT(
        requests=user_sees.count,
        first_byte=first_byte,
        first_event=first_event,
        model_ttft=model_ttft,
        service_adds_p50=user_sees.p50 - model_ttft.p50 if model_ttft else None,
        service_adds_p95=user_sees.p95 - model_ttft.p95 if model_ttft else None,
    )


def _stage_summaries(
    durations: list[float], columns: dict[str, list[float]]
) -> tuple[Distribution | None, dict[str, StageSummary]]:
    """End-to-end distribution and per-stage summaries of traces given as aligned columns."""
    end_to_end = distribution(durations)
    stages: dict[str, StageSummary] = {}
    for stage, values in columns.items():
        summary = distribution(values)
        if summary is None:
            continue
        share = summary.mean / end_to_end.mean if end_to_end and end_to_end.mean > 0 else 0.0
        # stage times are never negative: the traces with time in it are those without a zero
        traces = len(values) - values.count(0.0)
        if traces:
            stages[stage] = StageSummary(summary, share, traces)
    return end_to_end, stages


def _service_summaries(
    durations: list[float], services: dict[str, dict[str, list[float]]]
) -> dict[str, ServiceSummary]:
    """Each service's time on the critical path and its stages, the largest share first; none
    when the paths never leave one service (the stage table says it all then)."""
    if len(services) < 2:
        return {}
    end_to_end, _ = _stage_summaries(durations, {})
    found: dict[str, ServiceSummary] = {}
    for name, columns in services.items():
        _, stages = _stage_summaries(durations, columns)
        totals = [math.fsum(row) for row in zip(*columns.values(), strict=True)]
        summary = distribution(totals)
        if summary is None or not stages:
            continue
        share = summary.mean / end_to_end.mean if end_to_end and end_to_end.mean > 0 else 0.0
        found[name] = ServiceSummary(summary, share, len(totals) - totals.count(0.0), stages)
    return dict(sorted(found.items(), key=lambda item: (-item[1].share, item[0])))


def _stage_service(services: dict[str, dict[str, list[float]]], stage: str) -> tuple[str, float]:
    """The service that spent most of ``stage``'s time on the critical paths, and its part of
    that time (ties to the first by name)."""
    spent = {name: math.fsum(columns.get(stage, ())) for name, columns in services.items()}
    total = math.fsum(spent.values())
    name = max(sorted(spent), key=spent.__getitem__)
    return name, spent[name] / total if total > 0 else 0.0


def _grouping(key: str, acc: TraceColumns) -> Grouping:
    """One stage table per value of the roots' ``key`` attribute, the largest groups first.

    At most ``MAX_GROUPS`` are kept (ties by value, so a report is reproducible); the rest are
    counted, as are the traces whose root does not carry ``key`` as a string.
    """
    members: dict[str, list[int]] = {}
    without = 0
    for i, value in enumerate(acc.groups or ()):
        if value is None:
            without += 1
        else:
            members.setdefault(value, []).append(i)
    ranked = sorted(members.items(), key=lambda item: (-len(item[1]), item[0]))
    groups: dict[str, Group] = {}
    for value, index in ranked[:MAX_GROUPS]:
        durations = [acc.durations[i] for i in index]
        columns = {stage: [values[i] for i in index] for stage, values in acc.columns.items()}
        end_to_end, stages = _stage_summaries(durations, columns)
        groups[value] = Group(traces=len(index), end_to_end=end_to_end, stages=stages)
    left_out = ranked[MAX_GROUPS:]
    return Grouping(
        key=key,
        groups=groups,
        groups_left_out=len(left_out),
        traces_left_out=sum(len(index) for _, index in left_out),
        traces_without_value=without,
    )


def _exemplar(acc: TraceColumns, i: int) -> TraceExemplar:
    info = acc.info(i)
    stages = {stage: values[i] for stage, values in acc.columns.items() if values[i] > 0}
    return TraceExemplar(
        trace_id=info.trace_id,
        duration=acc.durations[i],
        root=info.root,
        stages=dict(sorted(stages.items(), key=lambda item: -item[1])),
        orphan=info.orphan,
    )


def _figures(stage: str, summary: StageSummary) -> StageFigures:
    return StageFigures(stage, summary.distribution.mean, summary.distribution.p95, summary.share)
