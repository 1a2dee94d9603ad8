"""Debian's headless Chromium for the browser tests: where it is, how it is launched (a fresh
profile each time), the marks that skip a module without it, and screenshots into ``test-artifacts/``.

Playwright is imported only when a browser is launched: a module that needs it skips itself with
``pytest.importorskip("playwright.sync_api", ...)``, and this module imports without it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

#: Debian's Chromium, driven by Playwright through ``executable_path`` (never a downloaded browser).
CHROMIUM = Path("/usr/bin/chromium")
#: The marks of every browser test module: ``browser``, ``slow``, skipped without Debian's Chromium.
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium)"),
]
#: Nothing reaches past 127.0.0.1 (no QUIC, background networking, component updates or sync).
#: Smooth scrolling off: a wheel or scrollIntoView scroll otherwise animates after the call
#: returns, and a drag measured meanwhile starts beside the text it aimed at (a flaky first item).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-smooth-scrolling"]
#: How long any wait on a page (and any ``expect``) gives up after: the MLflow UI's first render
#: on a loaded 2-core machine takes tens of seconds.
UI_TIMEOUT_MS = 60_000
#: The window of the MLflow UI screenshots (docs/images/ and the README show them at this size).
VIEWPORT = {"width": 1600, "height": 1000}

REPO = Path(__file__).resolve().parents[2]
#: Where every screenshot goes; ``RAGEXP_UPDATE_SCREENSHOT=1`` also copies it to :data:`DOCS_IMAGES`.
ARTIFACTS = REPO / "test-artifacts"
DOCS_IMAGES = REPO / "docs" / "images"
UPDATE_SCREENSHOTS = os.environ.get("RAGEXP_UPDATE_SCREENSHOT") == "1"
#: The close button of the "MLflow Assistant" side panel, which MLflow opens on a first visit.
MLFLOW_ASSISTANT_CLOSE = '[data-component-id="mlflow.assistant.chat_panel.close"]'


@contextmanager
def launched() -> Iterator[Browser]:
    """A headless :data:`CHROMIUM` with :data:`CHROMIUM_ARGS` and a fresh temporary profile (no
    stored UI state: every launch is a first visit); closed on exit, however the block ends."""
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Browser, viewport: dict | None = None, timeout_ms: float = UI_TIMEOUT_MS) -> Page:
    """A page of ``browser`` (``viewport``, :data:`VIEWPORT` by default) whose waits and every
    ``expect`` (a process-wide Playwright setting) give up after ``timeout_ms``."""
    from playwright import sync_api

    page = browser.new_page(viewport=viewport or VIEWPORT)
    page.set_default_timeout(timeout_ms)
    sync_api.expect.set_options(timeout=timeout_ms)
    return page


@contextmanager
def fresh_page(viewport: dict | None = None) -> Iterator[Page]:
    """:func:`new_page` of its own :func:`launched` browser: a first visit, closed on exit."""
    with launched() as browser:
        yield new_page(browser, viewport)


def screenshot(page: Page, name: str, element: Locator | None = None) -> Path:
    """``element`` (the whole window by default) into ``test-artifacts/name``, the mouse moved out
    of the way first (no hover state); also into ``docs/images/`` with ``RAGEXP_UPDATE_SCREENSHOT=1``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.mouse.move(0, 0)
    (element or page).screenshot(path=ARTIFACTS / name)
    if UPDATE_SCREENSHOTS:
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / name, DOCS_IMAGES / name)
    return ARTIFACTS / name


def close_mlflow_assistant(page: Page) -> None:
    """Hide the "MLflow Assistant" side panel (open by default) so the page gets the width: click
    its close button when it shows within 10 s, then wait until it is gone and the table has
    re-laid out (the panel slides out). Nothing when it never shows."""
    from playwright import sync_api

    close = page.locator(MLFLOW_ASSISTANT_CLOSE)
    try:
        close.wait_for(state="visible", timeout=10_000)
        close.click()
        close.wait_for(state="hidden")
        page.wait_for_timeout(500)
    except sync_api.TimeoutError:
        pass
