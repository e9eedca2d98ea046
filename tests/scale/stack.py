"""Backends of the scalable layout on loopback: the binaries scripts/backends.sh builds (with
Prometheus), and Prometheus started on a config from collector-config/ with only its scrape
targets and interval changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.backends.fixtures import BACKENDS_SCRIPT, LOOPBACK, BackendProcess, Backends, _free_ports


def binaries() -> dict[str, Path]:
    """``jaeger``, ``otelcol`` and ``prometheus``, built (or found current) by backends.sh."""
    result = subprocess.run(
        ["bash", str(BACKENDS_SCRIPT), "--with-prometheus"],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return {
        name: Path(path)
        for name, path in (line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    }


def as_backends(found: dict[str, Path]) -> Backends:
    return Backends(jaeger=found["jaeger"], otelcol=found["otelcol"])


def prometheus(
    binary: Path, config: Path, targets: list[str], log_dir: Path
) -> tuple[BackendProcess, str]:
    """A Prometheus (not started yet) on ``config`` scraping ``targets`` every second, with its
    OTLP receiver on; and its URL."""
    (port,) = _free_ports(1)
    settings = yaml.safe_load(config.read_text())
    settings["global"]["scrape_interval"] = "1s"
    settings["scrape_configs"][0]["static_configs"] = [{"targets": targets}]
    written = log_dir / f"prometheus-{port}.yml"
    written.write_text(yaml.safe_dump(settings))
    url = f"http://{LOOPBACK}:{port}"
    process = BackendProcess(
        f"prometheus-{port}",
        [
            str(binary),
            f"--config.file={written}",
            f"--storage.tsdb.path={log_dir / f'prometheus-data-{port}'}",
            f"--web.listen-address={LOOPBACK}:{port}",
            "--web.enable-otlp-receiver",
        ],
        {},
        f"{url}/-/ready",
        log_dir,
    )
    return process, url


def llmtrace_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m llmtrace ARGS`` to completion, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "llmtrace", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
