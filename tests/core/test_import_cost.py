"""``import llmtrace`` and the ``llmtrace`` command load only what they use: no OpenTelemetry SDK,
gRPC or numpy to print a help or read a trace file, and every command but ``demo`` works on an
install without the demo extra. Each case runs in a fresh interpreter, whose ``sys.modules``
starts empty of llmtrace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import llmtrace
from tests.analysis.otlp_lines import request_line, simple_trace

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("opentelemetry.sdk", "grpc", "numpy")


def run_python(code: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO), "COLUMNS": "100"},
        cwd=cwd,
        timeout=120,
    )


def loaded_after(code: str) -> set[str]:
    """The heavy modules (and llmtrace's demo and bench) imported by running ``code``."""
    result = run_python(
        textwrap.dedent(code)
        + textwrap.dedent(
            """
            import json, sys
            watched = ("opentelemetry.sdk", "grpc", "numpy", "llmtrace.demo", "llmtrace.bench")
            print(json.dumps(sorted(m for m in watched if m in sys.modules)), file=sys.stderr)
            """
        )
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stderr.splitlines()[-1]))


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(request_line(simple_trace(i)) + "\n" for i in range(3)))
    return path


def test_import_llmtrace_loads_nothing_heavy() -> None:
    assert loaded_after("import llmtrace\n") == set()


def test_building_the_command_line_parser_loads_nothing_heavy() -> None:
    code = "from llmtrace.cli import build_parser\nbuild_parser()\n"
    assert loaded_after(code) == set()


def test_report_on_a_file_loads_no_sdk_and_no_grpc(trace_file: Path) -> None:
    code = f"""
        from llmtrace.cli import main
        assert main(["report", {str(trace_file)!r}, "--format", "json"]) == 0
        """
    assert loaded_after(code) == set()


def test_the_public_names_resolve_on_first_use() -> None:
    code = """
        import sys
        import llmtrace
        assert "llmtrace.sdk.config" not in sys.modules
        from llmtrace import workflow
        from llmtrace.sdk.decorators import workflow as defined
        assert workflow is defined
        assert llmtrace.init is sys.modules["llmtrace.sdk.config"].init
        assert set(llmtrace.__all__) <= set(dir(llmtrace))
        for name in llmtrace.__all__:
            getattr(llmtrace, name)
        try:
            llmtrace.no_such_name
        except AttributeError as exc:
            assert "no_such_name" in str(exc)
        else:
            raise AssertionError("an unknown name must raise AttributeError")
        """
    result = run_python(code)
    assert result.returncode == 0, result.stderr


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from llmtrace import *", namespace)
    assert set(llmtrace.__all__) <= set(namespace)


# --- an install without the demo extra ------------------------------------------------------------

_WITHOUT_NUMPY = """
import importlib.abc
import sys


class NoNumpy(importlib.abc.MetaPathFinder):
    # As if the demo extra were not installed: numpy cannot be imported.
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NoNumpy())
sys.argv = ["llmtrace", *{arguments!r}]
from llmtrace.cli import main

sys.exit(main())
"""


def without_numpy(*arguments: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_python(_WITHOUT_NUMPY.format(arguments=list(arguments)), cwd=cwd)


def test_without_numpy_help_report_compare_and_doctor_work(trace_file: Path) -> None:
    assert without_numpy("--help").returncode == 0
    assert without_numpy("demo", "--help").returncode == 0
    assert without_numpy("report", str(trace_file)).returncode == 0
    compared = without_numpy("compare", str(trace_file), str(trace_file))
    assert compared.returncode == 0, compared.stderr
    # Nothing listens on port 9 of the loopback: the check fails, the command itself works.
    doctor = without_numpy("doctor", "--otlp", "http://127.0.0.1:9")
    assert doctor.returncode == 1, doctor.stderr
    assert "Nothing answers at 127.0.0.1:9" in doctor.stdout


def test_without_numpy_demo_names_the_extra_to_install(tmp_path: Path) -> None:
    result = without_numpy("demo", "--output-dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "llmtrace demo: error: the demo needs numpy, which is not installed: "
        "pip install 'llmtrace-otel[demo]'\n"
    )
