"""Before/after: did the candidate run get faster or slower than the baseline, stage by stage?

Every row (end-to-end time and each stage) and every statistic in it (mean, P50, P90, P95) gets
one of four verdicts:

- **faster** / **slower**: a two-sided permutation test finds the change at ``ALPHA`` (5%)
  *and* the change is large enough to matter (at least 1 ms and 5% of the baseline value: with
  thousands of traces a 0.1 ms shift can be "significant" and still mean nothing to anyone);
- **no significant change**: there were enough requests to judge, and the change is within what
  relabelling the requests between the two runs produces by chance, or below that size;
- **not enough data**: a run has fewer requests than the statistic needs
  (:func:`~llmtrace.analysis.stats.requests_needed`: 4 for the mean, 6 for the P50, 36 for the
  P90, 72 for the P95). "No change" would claim something the data cannot show.

A permutation test asks how often moving whole requests between the two runs at random gives a
difference as large as the one observed; when both runs come from one distribution it is wrong
at most ``ALPHA`` of the time, at any sample size, which a bootstrap interval is not at 10
requests. The interval shown with each change is that test inverted (the change ± the margin
relabellings exceed 5% of the time), so it excludes zero exactly when the test finds the change.
The row's own verdict comes from one rank test (the same permutation test on the requests'
ranks, i.e. Mann-Whitney), the most powerful of these at small n, with the mean or the median
required to have moved by the practical amount in the same direction. Each verdict is a
separate 5% test: in a table of many rows one false "faster"/"slower" among them is likely, so a
decision (``--fail-if-slower``) names its row and statistic in advance.

**Paired by question.** When both runs asked the same question set and say which question each
request asked (runs from ``llmtrace bench`` and the demo record it), the row's verdict compares
each question with itself instead: per question, the candidate's mean time minus the baseline's,
tested by flipping the signs of random pairs (Wilcoxon's signed-rank statistic; see
:func:`~llmtrace.analysis.stats.sign_flip_tests`). How long a question takes on its own (a long
answer, a large context) no longer hides the change, so a shift that moves every question is
found with far fewer requests; it needs 6 questions asked in both runs. The statistics' own
verdicts (mean, P50, P90, P95 of the runs) stay two-sample tests: a percentile is a property of a
run, not of a question.

A row whose verdict is faster or slower names, from each run, the requests where that row took
longest (the report's exemplars: for end-to-end, its slowest at or above P95), with their stage
times and Jaeger links, so that the change can be opened trace by trace.

**From histograms.** Runs read from Prometheus (``compare --prometheus``) carry no request's own
time, only how many requests fell in each bucket, so every test is made on the buckets, both runs
first cut to the bucket bounds they share. The row's verdict and the mean's: each request stands
for its bucket, and the same permutation tests move whole bucketed requests between the runs.
Relabelling is valid for any values that are exchangeable under "no change", and bucketed requests
from one distribution are, so the level stays exactly 5% whatever the bucket widths; the row's rank
test becomes Mann-Whitney with ties (all requests of one bucket share their midrank), the standard
test for grouped data. The mean's interval is the test's margin widened by the average bucket
width. A percentile is judged by its interval instead: each run's distribution-free interval for it
(binomial order statistics, 97.5% each so that both hold together at 95%) read out to the edges of
the buckets those ranks fell in; the change's interval runs from the candidate's lowest minus the
baseline's highest to the reverse, so it is wrong at most 5% of the time whatever the buckets, and
holds their whole width. The reported figures stay the histograms' own (the exact mean from the
sums, percentiles interpolated as Prometheus does), and so does the practical threshold; the
requests a statistic needs are counted in the histograms, and a percentile's are those its two
97.5% intervals need (P50 7, P90 42, P95 86).

Randomness is seeded from the samples, so the same two runs always get the same verdicts.
Runs above ``MAX_TESTED`` requests are tested on a fixed sample of that many: more only sharpens
changes far below the practical threshold, and costs seconds.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from llmtrace import semconv as sc
from llmtrace.analysis.histograms import (
    Buckets,
    bucketed_requests,
    mean_width,
    quantile,
    quantile_interval,
    relative_width,
    shared_layout,
)
from llmtrace.analysis.report_model import END_TO_END as END_TO_END  # the rows' name, here too
from llmtrace.analysis.report_model import Report, TraceExemplar
from llmtrace.analysis.stats import (
    MEAN,
    Interval,
    PermutationTest,
    Statistic,
    midranks,
    permutation_tests,
    requests_needed,
    sign_flip_tests,
    sign_flips_needed,
)

SCHEMA = "llmtrace.comparison/2"
ALPHA = 0.05
PERMUTATIONS = 499  # with ALPHA = 0.05 the test's level is exactly 5% (25 of 500)
MAX_TESTED = 1000
MIN_EFFECT_SECONDS = 0.001
MIN_EFFECT_SHARE = 0.05
COMPARED = (MEAN, Statistic("p50", 0.50), Statistic("p90", 0.90), Statistic("p95", 0.95))
RANKS = Statistic("ranks")

FASTER = "faster"
SLOWER = "slower"
NO_CHANGE = "no significant change"
NOT_ENOUGH_DATA = "not enough data"


def practical(baseline: float, change: float) -> bool:
    """Whether a change is large enough to matter: at least 1 ms and 5% of the baseline."""
    return abs(change) >= max(MIN_EFFECT_SECONDS, MIN_EFFECT_SHARE * abs(baseline))


@dataclass(slots=True)
class Delta:
    """Candidate minus baseline of one statistic (seconds), its interval, p-value and verdict."""

    statistic: str  # mean | p50 | p90 | p95
    baseline: float
    candidate: float
    interval: Interval
    p_value: float
    needs: int  # requests per run the statistic needs before it can be judged
    verdict: str
    # from histograms: the bucket (low, high) the percentile fell in, in each run
    buckets: tuple[tuple[float, float], tuple[float, float]] | None = None

    @property
    def change(self) -> float:
        return self.candidate - self.baseline

    @property
    def enough_traces(self) -> bool:
        return self.verdict != NOT_ENOUGH_DATA

    def significant(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    def verdict_text(self) -> str:
        return verdict_text(self.verdict, self.needs)


@dataclass(slots=True)
class SeriesComparison:
    """One row: end-to-end time or a stage, its rank test's verdict and each statistic's."""

    name: str  # a stage, or "end_to_end"
    deltas: list[Delta]
    verdict: str
    p_value: float = math.nan
    needs: int = 0
    # P(a candidate request takes longer than a baseline one), ties counted half: 0.5 = no shift
    probability_slower: float = math.nan
    # a row judged faster or slower: the requests where it took longest, in each run
    exemplars: tuple[list[TraceExemplar], list[TraceExemplar]] | None = None

    def delta(self, statistic: str) -> Delta:
        return next(delta for delta in self.deltas if delta.statistic == statistic)

    def verdict_text(self) -> str:
        return verdict_text(self.verdict, self.needs)


def verdict_text(verdict: str, needs: int) -> str:
    if verdict == NOT_ENOUGH_DATA:
        return f"{NOT_ENOUGH_DATA} (needs ≥ {needs} requests per run)"
    return verdict


@dataclass(slots=True)
class RunSide:
    """What one side of a comparison is: a name people recognise and the settings it ran with."""

    name: str  # the bench run's name, else the trace source
    source: str
    traces: int
    settings: dict[str, Any]  # question_set, concurrency, model, max_tokens, top_k, ...

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "traces": self.traces,
            "settings": dict(self.settings),
        }


@dataclass(slots=True)
class SettingChange:
    setting: str
    baseline: Any
    candidate: Any


@dataclass(slots=True)
class BucketedFigures:
    """A comparison of two histograms: each run's bucket layout, and how wide its buckets were
    where its requests fell (the median width as a share of the bucket's upper bound)."""

    layouts: tuple[str, str]
    relative_widths: tuple[float, float]

    def to_json(self) -> dict[str, Any]:
        return {
            role: {"layout": layout, "relative_width": width}
            for role, layout, width in zip(
                ("baseline", "candidate"), self.layouts, self.relative_widths, strict=True
            )
        }


@dataclass(slots=True)
class Comparison:
    baseline: Report
    candidate: Report
    series: list[SeriesComparison]
    warnings: list[str] = field(default_factory=list)
    sides: tuple[RunSide, RunSide] | None = None
    changed_settings: list[SettingChange] = field(default_factory=list)
    # questions asked in both runs, when the rows' verdicts compare each question with itself
    paired_questions: int | None = None
    # the runs were histograms (Prometheus), not requests: the test was made on their buckets
    bucketed: BucketedFigures | None = None

    def row(self, name: str) -> SeriesComparison | None:
        return next((item for item in self.series if item.name == name), None)

    def run_sides(self) -> tuple[RunSide, RunSide]:
        return self.sides or (describe_run(self.baseline), describe_run(self.candidate))

    def to_json(self) -> dict[str, Any]:
        base_side, cand_side = self.run_sides()
        return {
            "schema": SCHEMA,
            "method": {
                "test": self._test_name(),
                "figures": "samples" if self.bucketed is None else "histograms",
                "histograms": None if self.bucketed is None else self.bucketed.to_json(),
                "paired_questions": self.paired_questions,
                "alpha": ALPHA,
                "permutations": PERMUTATIONS,
                "max_tested_per_run": MAX_TESTED,
                "min_effect_seconds": MIN_EFFECT_SECONDS,
                "min_effect_share": MIN_EFFECT_SHARE,
            },
            "baseline": {**base_side.to_json(), "run": self.baseline.run},
            "candidate": {**cand_side.to_json(), "run": self.candidate.run},
            "changed_settings": [
                {"setting": c.setting, "baseline": c.baseline, "candidate": c.candidate}
                for c in self.changed_settings
            ],
            "warnings": list(self.warnings),
            "series": {
                item.name: {
                    "verdict": item.verdict,
                    "p_value": item.p_value,
                    "needs": item.needs,
                    "probability_slower": item.probability_slower,
                    "exemplars": None
                    if item.exemplars is None
                    else {
                        role: [trace.to_json() for trace in traces]
                        for role, traces in zip(
                            ("baseline", "candidate"), item.exemplars, strict=True
                        )
                    },
                    **{
                        delta.statistic: {
                            "baseline": delta.baseline,
                            "candidate": delta.candidate,
                            "delta": delta.change,
                            "ci_low": delta.interval.low,
                            "ci_high": delta.interval.high,
                            "p_value": delta.p_value,
                            "verdict": delta.verdict,
                            "needs": delta.needs,
                            "significant": delta.significant(),
                            "enough_traces": delta.enough_traces,
                            **_buckets_json(delta),
                        }
                        for delta in item.deltas
                    },
                }
                for item in self.series
            },
        }

    def _test_name(self) -> str:
        if self.bucketed is not None:
            return (
                "two-sided permutation test over the requests' buckets; rows: on ranks with "
                "ties (Mann-Whitney)"
            )
        return "two-sided permutation test; rows: " + (
            "paired by question (Wilcoxon signed-rank, sign flips)"
            if self.paired_questions is not None
            else "on ranks (Mann-Whitney)"
        )


def _buckets_json(delta: Delta) -> dict[str, Any]:
    if delta.buckets is None:
        return {}
    return {
        "buckets": {
            role: list(bucket)
            for role, bucket in zip(("baseline", "candidate"), delta.buckets, strict=True)
        }
    }


def describe_run(report: Report) -> RunSide:
    """The run's name and settings, as recorded in its traces (or a saved bench run).

    The name is the bench run's (``llmtrace.bench.run`` on the root spans, or a saved run's
    metadata); without one, the trace source. Settings come from the run's metadata and from the
    model calls' and retrievals' own attributes (``gen_ai.request.max_tokens``,
    ``gen_ai.retrieval.top_k``), so they are there for traces from files and Jaeger alike.
    """
    run = report.run or {}
    settings: dict[str, Any] = {}
    for key, label in (("question_set_hash", "question_set"), ("concurrency", "concurrency")):
        if run.get(key) is not None:
            settings[label] = run[key]
    model = run.get("model") or ", ".join(sorted(report.models))
    if model:
        settings["model"] = model
    for label, value in (
        ("max_tokens", report.evidence.max_tokens_mean),
        ("top_k", report.evidence.retrieval_top_k_mean),
    ):
        if value is not None:
            settings[label] = int(value) if float(value).is_integer() else round(value, 1)
    for key in ("repeat", "warmup", "rate", "timeout"):
        if run.get(key) is not None:
            settings[key] = run[key]
    name = run.get("name") or _window_name(report)
    return RunSide(str(name) if name else report.source, report.source, report.traces, settings)


def _window_name(report: Report) -> str | None:
    """A report read from Prometheus is named by its window: ``600 s to 2026-01-01T10:00:00``."""
    origin = report.figures_from or {}
    if "until" not in origin or "window_seconds" not in origin:
        return None
    return f"{float(origin['window_seconds']):g} s to {origin['until']}"


def changed_settings(baseline: RunSide, candidate: RunSide) -> list[SettingChange]:
    """Settings both runs recorded, with different values (what the change under test was)."""
    return [
        SettingChange(key, value, candidate.settings[key])
        for key, value in baseline.settings.items()
        if key in candidate.settings and candidate.settings[key] != value
    ]


def run_warnings(baseline: Report, candidate: Report) -> list[str]:
    """Differences that make a comparison unfair: question set, concurrency, model."""
    warnings = []
    base_run = baseline.run or {}
    cand_run = candidate.run or {}
    for key, label in (
        ("question_set_hash", "question set"),
        ("concurrency", "concurrency"),
        ("model", "model"),
    ):
        before, after = base_run.get(key), cand_run.get(key)
        if before is not None and after is not None and before != after:
            warnings.append(f"the runs differ in {label}: {before} vs {after}")
    if "model" not in base_run or "model" not in cand_run:
        before_models, after_models = set(baseline.models), set(candidate.models)
        if before_models and after_models and before_models != after_models:
            warnings.append(
                "the runs used different models: "
                f"{', '.join(sorted(before_models))} vs {', '.join(sorted(after_models))}"
            )
    if not _from_histograms(baseline, candidate) and (
        not baseline.samples.get("end_to_end") or not candidate.samples.get("end_to_end")
    ):
        warnings.append(
            "a report has no per-trace samples: no change can be tested (not enough data)"
        )
    return warnings


def _series(report: Report, name: str) -> list[float]:
    samples = report.samples or {}
    if name == END_TO_END:
        return [float(v) for v in samples.get("end_to_end", [])]
    values = (samples.get("stages") or {}).get(name)
    if values is None:
        return [0.0] * len(samples.get("end_to_end", []))
    return [float(v) for v in values]


def _tested(series: list[list[float]]) -> list[list[float]]:
    """At most ``MAX_TESTED`` whole traces of one run (a fixed sample), every series alike."""
    count = len(series[0]) if series else 0
    if count <= MAX_TESTED:
        return series
    keep = sorted(random.Random(0).sample(range(count), MAX_TESTED))
    return [[values[i] for i in keep] for values in series]


def compare(baseline: Report, candidate: Report, *, permutations: int = PERMUTATIONS) -> Comparison:
    """Verdicts for end-to-end time and each stage: the row's, and its mean's, P50's, P90's and
    P95's, each change with its 95% interval (see the module's docstring for the method)."""
    names = [END_TO_END] + [
        stage for stage in sc.STAGES if stage in baseline.stages or stage in candidate.stages
    ]
    if _from_histograms(baseline, candidate):
        return _compare_histograms(baseline, candidate, names, permutations)
    base_series = _tested([_series(baseline, name) for name in names])
    cand_series = _tested([_series(candidate, name) for name in names])
    n_base, n_cand = len(base_series[0]), len(cand_series[0])
    rank_base, rank_cand = [], []
    for base, cand in zip(base_series, cand_series, strict=True):
        ranks = midranks([*base, *cand])
        rank_base.append(ranks[:n_base])
        rank_cand.append(ranks[n_base:])
    statistics = [list(COMPARED)] * len(names) + [[RANKS]] * len(names)
    tests = permutation_tests(
        base_series + rank_base,
        cand_series + rank_cand,
        statistics,
        permutations=permutations,
        alpha=ALPHA,
    )
    smaller_run = min(n_base, n_cand)
    paired = question_differences(baseline, candidate, names)
    paired_tests = (
        sign_flip_tests(paired, permutations=permutations, alpha=ALPHA)
        if paired is not None
        else None
    )
    series = []
    for k, name in enumerate(names):
        deltas = [
            _delta(
                statistic,
                _reported(baseline, name, statistic.name),
                _reported(candidate, name, statistic.name),
                test,
                smaller_run,
            )
            for statistic, test in zip(COMPARED, tests[k], strict=True)
        ]
        if paired is not None and paired_tests is not None:
            series.append(_paired_row(name, deltas, paired_tests[k], paired[k]))
            continue
        (rank_test,) = tests[len(names) + k]
        series.append(_row(name, deltas, rank_test, smaller_run, n_base + n_cand))
    for item in series:
        if item.verdict in (FASTER, SLOWER):
            item.exemplars = (
                baseline.exemplars.get(item.name, []),
                candidate.exemplars.get(item.name, []),
            )
    return _comparison(
        baseline, candidate, series, paired_questions=len(paired[0]) if paired else None
    )


def _comparison(
    baseline: Report,
    candidate: Report,
    series: list[SeriesComparison],
    *,
    paired_questions: int | None = None,
    bucketed: BucketedFigures | None = None,
) -> Comparison:
    """The judged rows with both runs' names, settings and what makes them unlike."""
    sides = (describe_run(baseline), describe_run(candidate))
    return Comparison(
        baseline,
        candidate,
        series,
        run_warnings(baseline, candidate),
        sides,
        changed_settings(*sides),
        paired_questions,
        bucketed,
    )


def _questions(report: Report) -> list[str] | None:
    """The question each sampled request asked, when the run recorded it for every one."""
    samples = report.samples or {}
    questions = samples.get("questions")
    if not isinstance(questions, list) or len(questions) != len(samples.get("end_to_end", [])):
        return None
    if not questions or not all(isinstance(q, str) for q in questions):
        return None
    return questions


def _per_question(report: Report, questions: list[str], names: list[str]) -> dict[str, list[float]]:
    """Each question's mean time per series (a question asked more than once: ``--repeat``)."""
    series = [_series(report, name) for name in names]
    sums: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for i, question in enumerate(questions):
        totals = sums.setdefault(question, [0.0] * len(names))
        for k, values in enumerate(series):
            totals[k] += values[i]
        counts[question] = counts.get(question, 0) + 1
    return {q: [total / counts[q] for total in totals] for q, totals in sums.items()}


def question_differences(
    baseline: Report, candidate: Report, names: list[str]
) -> list[list[float]] | None:
    """Per series, candidate minus baseline of each question's mean time, over the questions both
    runs asked (at most ``MAX_TESTED``, a fixed sample); None when the runs cannot be paired:
    either did not record its questions, or they asked different question sets."""
    base_questions, cand_questions = _questions(baseline), _questions(candidate)
    if base_questions is None or cand_questions is None:
        return None
    base_set = (baseline.run or {}).get("question_set_hash")
    cand_set = (candidate.run or {}).get("question_set_hash")
    if base_set != cand_set:
        return None
    before = _per_question(baseline, base_questions, names)
    after = _per_question(candidate, cand_questions, names)
    common = sorted(set(before) & set(after))
    if not common:
        return None
    if len(common) > MAX_TESTED:
        common = sorted(random.Random(0).sample(common, MAX_TESTED))
    return [[after[q][k] - before[q][k] for q in common] for k in range(len(names))]


def _delta(
    statistic: Statistic, before: float, after: float, test: PermutationTest, smaller_run: int
) -> Delta:
    needs = requests_needed(statistic, ALPHA)
    change = after - before
    interval = Interval(change, change - test.margin, change + test.margin)
    if smaller_run < needs:
        verdict = NOT_ENOUGH_DATA
    elif interval.excludes_zero() and practical(before, change) and test.estimate * change > 0:
        verdict = SLOWER if change > 0 else FASTER
    else:
        verdict = NO_CHANGE
    return Delta(statistic.name, before, after, interval, test.p_value, needs, verdict)


def _row(
    name: str, deltas: list[Delta], rank_test: PermutationTest, smaller_run: int, pooled: int
) -> SeriesComparison:
    # the difference of mean ranks is N * (P(candidate slower) - 1/2): Mann-Whitney's U scaled
    probability = 0.5 + rank_test.estimate / pooled if pooled else math.nan
    return _judged_row(
        name, deltas, rank_test, smaller_run, requests_needed(RANKS, ALPHA), probability
    )


def _paired_row(
    name: str, deltas: list[Delta], test: PermutationTest, differences: list[float]
) -> SeriesComparison:
    """The row's verdict from the questions asked in both runs (see the module's docstring)."""
    slower = sum(1.0 if d > 0 else 0.5 if d == 0 else 0.0 for d in differences)
    probability = slower / len(differences) if differences else math.nan
    return _judged_row(name, deltas, test, len(differences), sign_flips_needed(ALPHA), probability)


def _judged_row(
    name: str,
    deltas: list[Delta],
    test: PermutationTest,
    count: int,
    needs: int,
    probability: float,
) -> SeriesComparison:
    """The row's verdict: its test found a change, and the mean or the median moved by the
    practical amount the same way; ``count`` (requests, or paired questions) at least ``needs``."""
    if count < needs:
        verdict = NOT_ENOUGH_DATA
    elif test.significant() and any(
        delta.change * test.estimate > 0 and practical(delta.baseline, delta.change)
        for delta in deltas
        if delta.statistic in ("mean", "p50")
    ):
        verdict = SLOWER if test.estimate > 0 else FASTER
    else:
        verdict = NO_CHANGE
    return SeriesComparison(name, deltas, verdict, test.p_value, needs, probability)


def _reported(report: Report, name: str, statistic: str) -> float:
    """The statistic as the report states it (computed on all traces, not the sample)."""
    if name == END_TO_END:
        return report.end_to_end.at(statistic) if report.end_to_end else 0.0
    summary = report.stages.get(name)
    return summary.distribution.at(statistic) if summary else 0.0


def _from_histograms(baseline: Report, candidate: Report) -> bool:
    """Both runs are histograms without requests of their own (reports read from Prometheus)."""
    return all(
        report.histograms.get(END_TO_END) is not None and not report.samples.get("end_to_end")
        for report in (baseline, candidate)
    )


def _row_histograms(baseline: Report, candidate: Report, name: str) -> tuple[Buckets, Buckets]:
    """Both runs' histograms of one row; a stage one run lacks is all zeros in it."""
    base, cand = baseline.histograms.get(name), candidate.histograms.get(name)
    if base is None and cand is not None:
        base = Buckets(cand.bounds, [float(baseline.traces)] * len(cand.bounds), 0.0, cand.layout)
    if cand is None and base is not None:
        cand = Buckets(base.bounds, [float(candidate.traces)] * len(base.bounds), 0.0, base.layout)
    assert base is not None and cand is not None, name
    return base, cand


def _compare_histograms(
    baseline: Report, candidate: Report, names: list[str], permutations: int
) -> Comparison:
    """Verdicts for two runs read from histograms (see "From histograms" in the module's
    docstring): per row, the permutation tests over the requests as their buckets."""
    smaller_run = min(baseline.traces, candidate.traces)
    series = []
    for name in names:
        own = _row_histograms(baseline, candidate, name)
        base, cand = (bucketed_requests(side, MAX_TESTED) for side in shared_layout(*own))
        ranks = midranks([*base, *cand])
        values_test, rank_test = permutation_tests(
            [base, ranks[: len(base)]],
            [cand, ranks[len(base) :]],
            [list(COMPARED), [RANKS]],
            permutations=permutations,
            alpha=ALPHA,
        )
        # the average bucket width of the pooled requests: how far a bucketed mean can be off
        widths = [mean_width(side) * side.count for side in own]
        pooled_width = sum(widths) / max(own[0].count + own[1].count, 1.0)
        deltas = [
            _bucketed_delta(
                statistic,
                _reported(baseline, name, statistic.name),
                _reported(candidate, name, statistic.name),
                test,
                smaller_run,
                own,
                pooled_width,
            )
            for statistic, test in zip(COMPARED, values_test, strict=True)
        ]
        series.append(_row(name, deltas, rank_test[0], smaller_run, len(base) + len(cand)))
    end_to_end = _row_histograms(baseline, candidate, END_TO_END)
    return _comparison(
        baseline,
        candidate,
        series,
        bucketed=BucketedFigures(
            (end_to_end[0].layout, end_to_end[1].layout),
            (relative_width(end_to_end[0]), relative_width(end_to_end[1])),
        ),
    )


def _bucketed_delta(
    statistic: Statistic,
    before: float,
    after: float,
    test: PermutationTest,
    smaller_run: int,
    buckets: tuple[Buckets, Buckets],
    pooled_width: float,
) -> Delta:
    """One statistic's change between two histograms, with an interval that holds whatever the
    buckets allow (see "From histograms" in the module's docstring).

    The mean: the permutation test on the bucketed requests decides, the interval is its margin
    widened by the average bucket width. A percentile: its interval is the difference of the two
    runs' distribution-free intervals (order statistics, each at 97.5%, so that both hold
    together at 95%), read out to the edges of their buckets, and the verdict is that interval
    excluding zero. The permutation test of a percentile is no use here: with every request of
    a run in one or two buckets, relabelling gives a percentile difference as large as the
    observed one far more than 5% of the time, however far apart the runs are. Its two intervals
    at 97.5% need more requests to be bounded than one at 95% (P50 7, P90 42, P95 86): below
    that, "not enough data", never a "no change" no interval could have contradicted.
    """
    q = statistic.quantile
    needs = requests_needed(statistic, ALPHA if q is None else ALPHA / 2)
    change = after - before
    fell_in = None
    p_value = test.p_value
    if q is None:
        reach = test.margin + pooled_width
        low, high = change - reach, change + reach
        found = test.significant() and test.estimate * change > 0
    else:
        fell_in = (quantile(q, buckets[0])[1], quantile(q, buckets[1])[1])
        base_low, base_high = quantile_interval(buckets[0], q, ALPHA / 2)
        cand_low, cand_high = quantile_interval(buckets[1], q, ALPHA / 2)
        low, high = min(cand_low - base_high, change), max(cand_high - base_low, change)
        found = (low > 0 or high < 0) and (low > 0) == (change > 0)
        p_value = math.nan  # judged by the interval, not a p-value
    if smaller_run < needs:
        verdict = NOT_ENOUGH_DATA
    elif found and practical(before, change):
        verdict = SLOWER if change > 0 else FASTER
    else:
        verdict = NO_CHANGE
    interval = Interval(change, low, high)
    return Delta(statistic.name, before, after, interval, p_value, needs, verdict, fell_in)
