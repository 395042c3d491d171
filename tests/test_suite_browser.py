"""The suite starts Chromium once (``conftest.pages``, session-scoped): a module that starts
Playwright itself fails while the session's instance lives ("Sync API inside the asyncio
loop") in whichever order the tests run, and costs a browser start. Browser modules take the
``pages`` fixture and open pages of their own on it."""
from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_only_conftest_starts_playwright():
    starters = sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
                      if p.name not in ("conftest.py", Path(__file__).name)
                      and "sync_playwright(" in p.read_text(encoding="utf-8"))
    assert starters == [], f"take the session's `pages` fixture instead: {starters}"
