"""What a person sees in Jaeger's web UI, checked in headless Chromium on the native stack.

A RAG app (tests/integration/jaeger_e2e_app.py, its own process: a retrieval step, a tool step
and a streamed chat completion with the real ``openai`` client against the simulated model
server) serves two requests through the real Collector into the real Jaeger, whose UI
scripts/backends.sh built, while a real Prometheus scrapes the Collector's span metrics for the
Monitor tab. The model server refuses the first request's first attempt (429), so its client
retries and the model span carries a ``llmtrace.retry`` event. Then the browser opens the search
page, a trace's page, the Monitor tab, and an HTML report's link to a trace.

The driver is Selenium with Debian's ``chromium-driver``: that package is built from the same
source as Debian's ``chromium``, so driver and browser always speak the same protocol version,
and both come from the one registry this machine reaches for browsers (apt). Playwright pins a
browser build of its own that cannot be downloaded here, and would drive Debian's newer Chromium
over a protocol it does not promise to keep; a hand-written DevTools client would have to
reimplement the waiting and the real mouse clicks that Ant Design's menus need.

Screenshots of every page (and of whatever a failing test was waiting for) go to
``$LLMTRACE_ARTIFACTS/jaeger-ui`` when that variable is set, else to a pytest temporary
directory that the first test prints; a failure names what was missing and the screenshot.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from llmtrace import semconv
from tests.analysis.conftest import run_llmtrace
from tests.backends.fixtures import TracingStack, spans_in_file, wait_for_spans
from tests.browser.chromium import Browser, artifacts_dir
from tests.integration.test_jaeger_e2e import APP, MODEL, TOKENS, _app_environment
from tests.servers.model_server import ModelServer

pytestmark = [pytest.mark.integration, pytest.mark.browser]

ROOT = "answer_question"
RETRIEVAL = "retrieval handbook"
TOOL = "execute_tool order_status"
CHAT = f"chat {MODEL}"
STAGE_OF = {ROOT: "other", RETRIEVAL: "retrieval", TOOL: "tool", CHAT: semconv.LLM_STAGE}
INTERNAL_OPERATIONS = (ROOT, RETRIEVAL, TOOL)
ARRIVAL_SECONDS = 30.0


@dataclass(frozen=True)
class Served:
    service: str
    jaeger_url: str
    trace_ids: list[str]
    """In request order; the first one's model call was retried."""
    trace_file: Path
    """The same spans as Jaeger holds, as the app's own trace file."""


def _scraped_calls(prometheus_url: str, service: str) -> float:
    query = f'sum(traces_span_metrics_calls_total{{service_name="{service}"}})'
    answer = httpx.get(f"{prometheus_url}/api/v1/query", params={"query": query}, timeout=5)
    results = answer.json()["data"]["result"]
    return float(results[0]["value"][1]) if results else 0.0


def _until_scraped(prometheus_url: str, service: str, calls: float) -> None:
    deadline = time.monotonic() + ARRIVAL_SECONDS
    while _scraped_calls(prometheus_url, service) < calls:
        assert time.monotonic() < deadline, f"Prometheus never scraped {calls} calls of {service}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def served(monitored_stack: TracingStack, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """Two requests of the RAG app, in Jaeger, in Prometheus and in the app's trace file."""
    assert monitored_stack.prometheus_server_url is not None
    service = f"rag-ui-{uuid.uuid4().hex[:6]}"
    trace_file = tmp_path_factory.mktemp("rag-ui") / "traces.jsonl"
    model = ModelServer().start()
    model.configure(
        model=MODEL,
        tokens=TOKENS,
        input_tokens=42,
        first_token_delay=0.08,
        token_delay=0.01,
        refusals=[(429, {"retry-after-ms": "50"})],
    )
    env = _app_environment(monitored_stack, "grpc", service)
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"  # spans leave at once rather than every 5 s
    command = [sys.executable, str(APP), model.base_url, MODEL, "--per-line"]
    command += ["--max-retries", "1", "--trace-file", str(trace_file)]
    trace_ids = []
    try:
        with subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        ) as app:
            assert app.stdin is not None and app.stdout is not None
            # The Monitor tab's rates are increases between scrapes: the first request makes
            # the series, the second, scraped after it, increases them.
            for calls in (4, 8):
                app.stdin.write("\n")
                app.stdin.flush()
                trace_ids.append(json.loads(app.stdout.readline())["trace_id"])
                _until_scraped(monitored_stack.prometheus_server_url, service, calls)
            app.stdin.close()
            assert app.wait(timeout=60) == 0
    finally:
        model.stop()
    wait_for_spans(monitored_stack.jaeger_url, service, spans_in_file(trace_file))
    return Served(service, monitored_stack.jaeger_url, trace_ids, trace_file)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    directory = artifacts_dir(tmp_path_factory.mktemp("jaeger-ui-screenshots"))
    print(f"\nJaeger UI screenshots: {directory}")
    browser = Browser(directory)
    try:
        yield browser
    finally:
        browser.quit()


def _span_rows(browser: Browser, count: int) -> dict[str, WebElement]:
    """The trace page's span rows by operation, once all ``count`` are drawn."""

    def rows() -> dict[str, WebElement] | None:
        found = {
            row.find_element(By.CSS_SELECTOR, ".endpoint-name").text: row
            for row in browser.all(".span-row")
        }
        return found if len(found) >= count else None

    return browser.wait_for(f"{count} span rows", rows)


def _open_span(browser: Browser, operation: str) -> WebElement:
    """Clicks a span's row and returns its detail panel."""
    row = _span_rows(browser, 4)[operation]
    row.find_element(By.CSS_SELECTOR, ".span-name").click()
    return browser.one(f"the detail panel of {operation}", ".detail-row", operation)


def _tags(browser: Browser, detail: WebElement, operation: str) -> dict[str, str]:
    """Expands the span's Tags and reads its key-value table."""
    header = detail.find_element(By.CSS_SELECTOR, ".AccordianKeyValues--header")
    header.click()

    def table() -> dict[str, str] | None:
        rows = detail.find_elements(By.CSS_SELECTOR, ".KeyValueTable--row")
        pairs = {}
        for row in rows:
            cells = row.find_elements(By.TAG_NAME, "td")
            if len(cells) >= 2:
                pairs[cells[0].text.strip()] = cells[1].text.strip()
        return pairs or None

    return browser.wait_for(f"the expanded tags of {operation}", table)


def test_search_page_lists_the_service_and_its_traces(served: Served, browser: Browser) -> None:
    browser.open(f"{served.jaeger_url}/search")
    browser.choose("the Service select", "div[name=service]", served.service)
    browser.one("the Find Traces button", "button", "Find Traces").click()

    def titles() -> list[str] | None:
        shown = [item.text for item in browser.all(".ResultItemTitle")]
        return shown if len(shown) >= len(served.trace_ids) else None

    shown = browser.wait_for(f"{len(served.trace_ids)} traces of {served.service}", titles)
    browser.screenshot("search")
    for trace_id in served.trace_ids:
        # A result's title is "service: root operation" and the trace id's first 7 digits.
        assert any(f"{served.service}: {ROOT}" in t and trace_id[:7] in t for t in shown), (
            f"no result for trace {trace_id} among {shown}"
        )


def test_trace_page_shows_each_span_with_its_stage_tag_and_the_critical_path(
    served: Served, browser: Browser
) -> None:
    trace_id = served.trace_ids[0]
    browser.open(f"{served.jaeger_url}/trace/{trace_id}")
    rows = _span_rows(browser, len(STAGE_OF))
    assert set(rows) == set(STAGE_OF), f"span rows: {sorted(rows)}"
    header = browser.one("the trace's title", ".TracePageHeader--titleRow", trace_id[:7])
    assert ROOT in header.text

    # The critical path: the root waits on the retrieval, the tool, then the model call, so
    # Jaeger draws its segment over each of their bars.
    for operation in STAGE_OF:
        assert rows[operation].find_elements(By.CSS_SELECTOR, ".SpanBar--criticalPath"), (
            f"no critical-path segment drawn on the bar of {operation}"
        )
    browser.screenshot("trace-critical-path")

    for operation, stage in STAGE_OF.items():
        detail = _open_span(browser, operation)
        tags = _tags(browser, detail, operation)
        assert tags.get(semconv.STAGE) == stage, (
            f"{operation}'s tags show {semconv.STAGE}={tags.get(semconv.STAGE)!r}, "
            f"not {stage!r}: {tags}"
        )
        if operation == CHAT:
            assert tags.get(semconv.GEN_AI_OPERATION_NAME) == "chat", tags
            assert tags.get(semconv.GEN_AI_REQUEST_MODEL) == MODEL, tags
        browser.screenshot(f"trace-tags-{stage}", detail)
        _span_rows(browser, 4)[operation].find_element(By.CSS_SELECTOR, ".span-name").click()


def test_the_retried_model_span_lists_its_retry_under_logs(
    served: Served, browser: Browser
) -> None:
    browser.open(f"{served.jaeger_url}/trace/{served.trace_ids[0]}")
    row = _span_rows(browser, 4)[CHAT]
    assert row.find_elements(By.CSS_SELECTOR, ".SpanBar--logMarker"), (
        f"no event tick drawn on the bar of {CHAT}"
    )
    detail = _open_span(browser, CHAT)
    logs = browser.one(f"the Logs of {CHAT}", ".AccordianLogs", "Logs")
    # The panel opens with the span's logs listed: each event's name and its attributes (other
    # events may be listed beside the retry).
    event = browser.wait_for(
        f"the {semconv.RETRY_EVENT} event under Logs",
        lambda: semconv.RETRY_EVENT in logs.text and logs.text,
    )
    assert "http.response.status_code" in event and "429" in event, event
    browser.screenshot("trace-model-span-logs", detail)


def _monitor_latencies(
    browser: Browser, jaeger_url: str, service: str, kind: str, operations: tuple[str, ...]
) -> dict[str, str]:
    """The Monitor tab's operations of ``service`` for one span kind: name to P95 latency.

    The tab reads Prometheus once when opened: until every operation has a latency there (the
    second scrape of a new series), it is opened again.
    """
    deadline = time.monotonic() + ARRIVAL_SECONDS
    while True:
        browser.open(f"{jaeger_url}/monitor")
        browser.choose("the Monitor tab's Service select", ".select-a-service-input", service)
        browser.choose("the Monitor tab's Span Kind select", ".span-kind-selector", kind)

        def table() -> dict[str, str] | None:
            latencies = {}
            for row in browser.all(".ant-table-row"):
                cells = row.find_elements(By.TAG_NAME, "td")
                if len(cells) >= 2 and cells[1].text.strip():
                    latencies[cells[0].text.strip()] = cells[1].text.strip()
            return latencies if set(operations) <= latencies.keys() else None

        try:
            return browser.wait_for(
                f"the P95 latency of {', '.join(operations)} in the Monitor tab ({kind})",
                table,
                timeout=5,
            )
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def test_monitor_tab_lists_the_services_operations_with_latency(
    served: Served, browser: Browser
) -> None:
    for kind, operations in (("Internal", INTERNAL_OPERATIONS), ("Client", (CHAT,))):
        latencies = _monitor_latencies(browser, served.jaeger_url, served.service, kind, operations)
        for operation in operations:
            assert re.fullmatch(r"[\d.]+(ms|s)", latencies[operation]), (
                f"Monitor tab ({kind}) shows no P95 latency for {operation}: {latencies}"
            )
        browser.screenshot(f"monitor-{kind.lower()}")


def test_a_link_in_the_html_report_opens_that_trace_in_jaeger(
    served: Served, browser: Browser, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    run_llmtrace(
        "report", str(served.trace_file), "--jaeger", served.jaeger_url, "--html", str(page)
    )
    browser.open(page.resolve().as_uri())
    link = browser.one("a link to a trace in the report's slowest requests", "#slowest a")
    href = link.get_attribute("href") or ""
    trace_id = href.rsplit("/", 1)[-1]
    assert href == f"{served.jaeger_url}/trace/{trace_id}" and trace_id in served.trace_ids, href
    windows = set(browser.driver.window_handles)
    link.click()
    opened = set(browser.driver.window_handles) - windows
    if opened:  # a link that opens a new tab
        browser.driver.switch_to.window(opened.pop())
    browser.wait_for(
        f"Jaeger's page of trace {trace_id}",
        lambda: browser.driver.current_url.startswith(served.jaeger_url),
    )
    header = browser.one(
        f"the title of trace {trace_id}", ".TracePageHeader--titleRow", trace_id[:7]
    )
    assert ROOT in header.text
    assert set(_span_rows(browser, len(STAGE_OF))) == set(STAGE_OF)
    browser.screenshot("report-link-opened")


def test_the_model_span_lists_its_first_token_under_logs(served: Served, browser: Browser) -> None:
    # semconv.FIRST_TOKEN_EVENT comes with the first-token span event (the span-truth change).
    first_token = semconv.FIRST_TOKEN_EVENT
    browser.open(f"{served.jaeger_url}/trace/{served.trace_ids[1]}")
    assert _span_rows(browser, 4)[CHAT].find_elements(By.CSS_SELECTOR, ".SpanBar--logMarker"), (
        f"no first-token tick drawn on the bar of {CHAT}"
    )
    detail = _open_span(browser, CHAT)
    logs = browser.one(f"the Logs of {CHAT}", ".AccordianLogs", "Logs")
    browser.wait_for(f"the {first_token} event under Logs", lambda: first_token in logs.text)
    browser.screenshot("trace-model-span-first-token", detail)
