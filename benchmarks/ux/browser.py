"""Headless Chromium (the Debian package ``chromium``) for the pages a user looks at: a
screenshot of a page, and a page's geometry measured as the browser lays it out.

Used by benchmarks/ux/screenshots.py and tests/python/present/test_report_browser.py.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome")
# A root's sandbox needs user namespaces the CI containers lack; the pages are our own files.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"]

# Runs once the page (its embedded chart too) has loaded: the geometry, as the page's title.
_MEASURE = """<script>addEventListener("load", () => {
  const d = document.documentElement, box = s => document.querySelector(s)?.getBoundingClientRect();
  document.title = JSON.stringify({
    scroll_width: d.scrollWidth, client_width: d.clientWidth, page_height: d.scrollHeight,
    verdict_bottom: box(".verdict")?.bottom ?? null, chart_bottom: box("img")?.bottom ?? null,
    chart_height: box("img")?.height ?? null,
    tables_past_the_edge: [...document.querySelectorAll("table")]
      .filter(t => t.getBoundingClientRect().right > d.clientWidth).length});
});</script>"""


def chromium() -> str | None:
    """The browser's command, or None when none is installed."""
    return next((path for path in map(shutil.which, NAMES) if path), None)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    browser = chromium()
    if browser is None:
        raise RuntimeError("no headless browser: apt-get install chromium")
    return subprocess.run([browser, *FLAGS, *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def screenshot(url: str, png: Path, width: int, height: int, *, wait_ms: int = 0,
               timeout: float = 120) -> Path:
    """A `width` x `height` screenshot of `url`; `wait_ms` of virtual time lets a script-driven
    page (TensorBoard) draw first."""
    args = [f"--window-size={width},{height}", "--hide-scrollbars", f"--screenshot={png}"]
    if wait_ms:
        args.append(f"--virtual-time-budget={wait_ms}")
    done = _run([*args, url], timeout)
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot of {url}: {done.stderr[-500:]}")
    return png


def dump_dom(url: str, width: int, height: int, *, wait_ms: int = 5000, timeout: float = 120) -> str:
    """The page's DOM after it ran its scripts for `wait_ms` of virtual time."""
    done = _run([f"--window-size={width},{height}", f"--virtual-time-budget={wait_ms}",
                 "--dump-dom", url], timeout)
    return done.stdout


def measure(page: Path, width: int = 1280, height: int = 800) -> dict[str, Any]:
    """A local HTML page's geometry in a `width` x `height` window (a copy of it, with a
    measuring script, is what the browser opens): its scroll and client widths, its height,
    where the verdict and the chart end, how many tables reach past the window's edge."""
    text = page.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / page.name
        copy.write_text(text.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
        dom = dump_dom(copy.as_uri(), width, height)
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    if title is None or not title.group(1).startswith("{"):
        raise RuntimeError(f"the page was not measured (chromium's DOM: {dom[:300]!r})")
    return json.loads(html.unescape(title.group(1)))
