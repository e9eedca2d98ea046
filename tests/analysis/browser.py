"""Headless Chromium for the HTML report tests: found on PATH, installed with apt when missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--window-size=1200,2000",
)


def chromium() -> str:
    """Path of a Chromium binary; installs Debian's ``chromium`` package when none is found."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "chromium"], check=True, env=env, capture_output=True
        )
        found = shutil.which("chromium")
        if found:
            return found
    raise RuntimeError("Chromium is needed for the HTML tests: apt-get install -y chromium")


@dataclass
class PageLoad:
    dom: str
    console: list[str]  # console messages and uncaught errors Chromium logged
    screenshot: Path


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def load_page(page: Path, workdir: Path) -> PageLoad:
    """Open ``page`` in headless Chromium: its DOM after scripts ran, console output, screenshot."""
    binary = chromium()
    url = page.resolve().as_uri()
    screenshot = workdir / "screenshot.png"
    runs = []
    for index, mode in enumerate((f"--screenshot={screenshot}", "--dump-dom")):
        profile = workdir / f"profile-{index}"
        result = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", mode, url],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=workdir,
        )
        runs.append(result)
    return PageLoad(
        dom=runs[1].stdout,
        console=_console_lines(runs[0].stderr) + _console_lines(runs[1].stderr),
        screenshot=screenshot,
    )
