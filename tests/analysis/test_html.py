"""The HTML report opens in headless Chromium without console errors and draws its charts."""

from __future__ import annotations

import re
from pathlib import Path

from tests.analysis.browser import load_page
from tests.analysis.conftest import run_llmtrace


def test_broken_page_is_caught_by_the_console_check(tmp_path: Path) -> None:
    # proves the check below can fail: a script error must show up in the console lines
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction()</script></body></html>")
    assert any("undefinedFunction" in line for line in load_page(page, tmp_path).console)


def test_html_report_renders_its_charts_without_console_errors(
    delayed_traces: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    run_llmtrace("report", str(delayed_traces), "--format", "html", "--output", str(page))
    html = page.read_text()
    assert not re.search(r"""(src|href)=["']https?://""", html)  # self-contained
    loaded = load_page(page, tmp_path)
    assert loaded.console == []
    assert loaded.screenshot.stat().st_size > 20_000
    for chart in ("chart-stage-shares", "chart-percentiles", "chart-ttft", "chart-waterfall"):
        assert f'id="{chart}"' in loaded.dom, chart
    assert len(re.findall(r'<rect class="share"', loaded.dom)) == 7
    assert len(re.findall(r'<rect class="bin"', loaded.dom)) == 20
    assert len(re.findall(r'<rect class="span"', loaded.dom)) == 6  # the slowest trace's spans
    assert "Bottleneck: generation" in loaded.dom
