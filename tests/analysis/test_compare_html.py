"""``llmtrace compare --html``: one self-contained page, checked in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path

from tests.analysis.browser import load_page
from tests.analysis.conftest import run_llmtrace
from tests.analysis.test_compare_gate import write_bench_run


def test_compare_html_shows_both_runs_their_stage_bars_the_changes_and_the_verdicts(
    tmp_path: Path,
) -> None:
    settings = {"llmtrace__bench__concurrency": 2}
    before = write_bench_run(
        tmp_path / "before.jsonl", "top-k-8", 12, 30, gen_ai__retrieval__top_k=8, **settings
    )
    after = write_bench_run(
        tmp_path / "after.jsonl", "top-k-40", 12, 90, gen_ai__retrieval__top_k=40, **settings
    )
    page = tmp_path / "comparison.html"
    result = run_llmtrace("compare", str(before), str(after), "--html", str(page))
    assert "retrieval" in result.stdout  # the table still goes to the terminal
    html = page.read_text()
    assert not re.search(r"""(src|href)=["']https?://""", html)  # self-contained
    loaded = load_page(page, tmp_path)
    assert loaded.console == []
    assert loaded.screenshot.stat().st_size > 20_000
    dom = loaded.dom
    # who is compared: the run names and the setting that differs, not two file names
    assert re.search(r'<tr data-run="baseline">.*?<b>top-k-8</b>.*?concurrency 2', dom)
    assert re.search(r'<tr data-run="candidate">.*?<b>top-k-40</b>', dom)
    assert re.search(r'id="changed">.*?top_k 8 → 40', dom)
    # one stacked column per run, on one scale: the slower run's column is taller
    heights = {
        run: sum(
            float(h)
            for h in re.findall(
                rf'<rect class="stage-bar" data-run="{run}" [^>]*height="([\d.]+)"', dom
            )
        )
        for run in ("baseline", "candidate")
    }
    assert 0 < heights["baseline"] < heights["candidate"]
    assert re.search(r'data-run="candidate" data-stage="retrieval"', dom)
    # each statistic's change with its interval and verdict, and the row's verdict
    retrieval = re.search(r'<tr data-stage="retrieval">(.*?)</tr>', dom)
    assert retrieval is not None
    row = retrieval.group(1)
    assert re.search(
        r'class="cell slower" data-statistic="p50">.*?\[\+[\d.]+ ms, \+[\d.]+ ms\]', row
    )
    assert re.search(
        r'class="cell not-enough" data-statistic="p95">.*?not enough data \(needs ≥ 72 requests per run\)',
        row,
    )
    assert re.search(r'<td class="verdict slower">slower</td>', row)
    assert 'id="not-enough"' in dom and "P95 ≥ 72" in dom
