"""The Jaeger that the fixtures start serves the web UI scripts/backends.sh built, and starts
without it.

The UI is a JavaScript build that is not part of Jaeger's Go module: without it, Jaeger serves a
placeholder page. These tests read what a browser would load: the index page, the script bundle
it names, and the routes the UI answers (a trace's page among them, which llmtrace's links open).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import httpx
import pytest

from llmtrace.cli import main
from llmtrace.commands.doctor import JAEGER_PLACEHOLDER_TEXT, Findings, describe_jaeger_ui
from tests.backends.fixtures import Backends, TracingStack, new_jaeger, stopped_at_exit

pytestmark = pytest.mark.integration

BUNDLE = re.compile(r'<script type="module" crossorigin src="\./(static/index-[\w-]+\.js)">')


def test_backends_script_built_the_ui(backends: Backends) -> None:
    assert backends.jaeger_ui is not None, (
        "scripts/backends.sh built no Jaeger UI; its output says why (jaeger-ui: SKIPPED ...)"
    )
    assert (backends.jaeger_ui / "index.html").is_file()


def test_jaeger_serves_the_built_ui_and_its_bundle(tracing_stack: TracingStack) -> None:
    index = httpx.get(f"{tracing_stack.jaeger_url}/", timeout=10)

    assert index.status_code == 200
    assert JAEGER_PLACEHOLDER_TEXT not in index.text
    assert "<title>Jaeger UI</title>" in index.text
    # Jaeger fills the page's configuration in as it serves it: its version among them.
    assert re.search(
        r"const JAEGER_VERSION = \{\"gitCommit\":\"\",\"gitVersion\":\"v2\.\d+", index.text
    )
    bundle = BUNDLE.search(index.text)
    assert bundle is not None, index.text[:2000]
    script = httpx.get(f"{tracing_stack.jaeger_url}/{bundle[1]}", timeout=10)
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    # The whole application: React, the trace view, the Monitor tab.
    assert len(script.content) > 1_000_000
    assert b"menuEnabled" in script.content


@pytest.mark.parametrize(
    "route", ["/search", "/monitor", "/trace/4bf92f3577b34da6a3ce929d0e0e4736"]
)
def test_every_ui_route_is_the_ui_page(tracing_stack: TracingStack, route: str) -> None:
    # The UI routes in the browser: Jaeger answers each of its pages with index.html.
    page = httpx.get(f"{tracing_stack.jaeger_url}{route}", timeout=10)
    assert page.status_code == 200
    assert BUNDLE.search(page.text), page.text[:500]


def test_jaeger_without_a_ui_build_or_prometheus_starts_with_its_placeholder(
    backends: Backends, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jaeger = new_jaeger(dataclasses.replace(backends, jaeger_ui=None), tmp_path, name="bare")
    assert "JAEGER_UI_ASSETS" not in jaeger.process.env
    assert "JAEGER_PROMETHEUS_ENDPOINT" not in jaeger.process.env
    with stopped_at_exit(jaeger.process):
        jaeger.process.start()
        page = httpx.get(f"{jaeger.query_url}/search", timeout=10)
        services = httpx.get(f"{jaeger.query_url}/api/v3/services", timeout=10)
        describe_jaeger_ui(jaeger.query_url, Findings())

    assert JAEGER_PLACEHOLDER_TEXT in page.text
    assert services.status_code == 200
    notes = capsys.readouterr().out
    assert "Jaeger serves a placeholder page, not its web UI" in notes
    assert "Jaeger's Monitor tab has no span metrics (failed executing metrics query" in notes


def test_doctor_names_the_web_ui(
    tracing_stack: TracingStack, capsys: pytest.CaptureFixture[str]
) -> None:
    jaeger = tracing_stack.jaeger_url
    status = main(["doctor", "--otlp", tracing_stack.otlp_grpc_endpoint, "--jaeger", jaeger])

    output = capsys.readouterr().out
    assert status == 0, output
    assert f"Jaeger's web UI: {jaeger}/search" in output
    assert "placeholder" not in output
