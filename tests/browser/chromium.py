"""Debian's headless Chromium driven through Debian's chromedriver, for the Jaeger UI tests.

``Browser`` wraps one Selenium session with what the tests need of it: waiting until a page
shows something, and saying what was missing when it does not, with a screenshot beside it.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.analysis.browser import chromium

T = TypeVar("T")

# Debian's chromium-driver package is built from the same source as its chromium package, so
# the two always speak the same protocol version.
CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
WINDOW = (1400, 1000)
WAIT_SECONDS = 20.0


def chromedriver() -> str:
    for candidate in (shutil.which("chromedriver"), *CHROMEDRIVER_CANDIDATES):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError(
        "chromedriver is needed for the Jaeger UI tests: apt-get install -y chromium-driver "
        "(scripts/test.sh installs it)"
    )


class PageMissing(AssertionError):
    """What a page did not show in time: raised with its URL, its text and a screenshot."""


class Browser:
    def __init__(self, artifacts: Path) -> None:
        self.artifacts = artifacts
        options = webdriver.ChromeOptions()
        options.binary_location = chromium()
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--lang=en-US",
        ):
            options.add_argument(flag)
        # Given a driver, Selenium does not look for (or try to download) one of its own.
        self.driver = webdriver.Chrome(options=options, service=Service(chromedriver()))

    def quit(self) -> None:
        self.driver.quit()

    def open(self, url: str) -> None:
        self.driver.get(url)

    def screenshot(self, name: str, element: WebElement | None = None) -> Path:
        """The whole window, or one element cropped, saved as ``name``.png in the artifacts."""
        path = self.artifacts / f"{name}.png"
        if element is None:
            self.driver.save_screenshot(str(path))
        else:
            element.screenshot(str(path))
        return path

    def wait_for(
        self, what: str, found: Callable[[], T | None], timeout: float = WAIT_SECONDS
    ) -> T:
        """Until ``found`` returns something truthy; else fails naming ``what`` was missing.

        ``found`` may raise NoSuchElementException or StaleElementReferenceException while the
        page renders: both mean "not yet".
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                result = found()
            except (NoSuchElementException, StaleElementReferenceException):
                result = None
            if result:
                return result
            if time.monotonic() > deadline:
                raise self.missing(what)
            time.sleep(0.1)

    def missing(self, what: str) -> PageMissing:
        name = "missing-" + re.sub(r"[^\w]+", "-", what.lower()).strip("-")[:80]
        shot = self.screenshot(name)
        text = self.driver.find_element(By.TAG_NAME, "body").text
        return PageMissing(
            f"{what}: not on {self.driver.current_url}\n"
            f"screenshot: {shot}\npage text (start):\n{text[:1500]}"
        )

    def all(self, css: str, within: WebElement | None = None) -> list[WebElement]:
        return (within or self.driver).find_elements(By.CSS_SELECTOR, css)  # type: ignore[return-value]

    def one(self, what: str, css: str, text: str | None = None) -> WebElement:
        """The first element matching ``css`` (whose text contains ``text``), waited for."""

        def first() -> WebElement | None:
            for element in self.all(css):
                if text is None or text in element.text:
                    return element
            return None

        return self.wait_for(what, first)

    def choose(self, what: str, select_css: str, option: str) -> None:
        """Picks ``option`` in an Ant Design select, as a user does: open it, click the option."""
        self.one(what, select_css).click()
        self.one(
            f"{what}: the option {option!r}",
            ".ant-select-dropdown:not(.ant-select-dropdown-hidden) .ant-select-item-option",
            option,
        ).click()
        self.wait_for(
            f"{what} showing {option!r}",
            lambda: option in self.driver.find_element(By.CSS_SELECTOR, select_css).text,
        )


def artifacts_dir(default: Path) -> Path:
    """``$LLMTRACE_ARTIFACTS/jaeger-ui`` when that variable is set, else ``default``."""
    base = os.environ.get("LLMTRACE_ARTIFACTS")
    directory = Path(base) / "jaeger-ui" if base else default
    directory.mkdir(parents=True, exist_ok=True)
    return directory
