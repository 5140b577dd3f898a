"""Playwright on Debian's Chromium (`/usr/bin/chromium`, installed by `make browser`; a browser
build is never downloaded). `page(...)` yields a fresh page; `shot(page, name)` saves a screenshot
under `$MUARL_SCREENSHOTS_DIR` when it is set (docs/screenshots is made that way)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def need_chromium() -> None:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.fail("Chromium is missing: run `make browser` (apt-get install -y chromium)")


@asynccontextmanager
async def browser_page(width: int = 1200, height: int = 900) -> AsyncIterator[object]:
    from playwright.async_api import async_playwright

    need_chromium()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = await browser.new_context(viewport={"width": width, "height": height})
            page = await context.new_page()
            page.set_default_timeout(15_000)
            yield page
        finally:
            await browser.close()


async def shot(page: object, name: str, *, full_page: bool = True) -> None:
    where = os.environ.get("MUARL_SCREENSHOTS_DIR")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=full_page)  # type: ignore[attr-defined]
