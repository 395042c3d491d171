"""How long the Panels tab takes to show its tables, in headless Chromium.

The page is served in this process (``tests/helpers/browser.Server``) on HTA's two-rank
``trace_filter`` job (tests/data/kineto), whose Panels hold about 4,000 table cells (the
diagnosis, device ops and bubbles of long NCCL kernel names, and the tables across ranks).
Per round: a fresh page, the timeline drawn, then the time from clicking "Panels" to the rank
table and the bubble table being in the page. Printed, never judged. Usage::

    .venv/bin/python benchmarks/bench_panels_tables.py --rounds 3
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the browser helpers live with the tests
DATA = ROOT / "tests" / "data" / "kineto"
RANKS = [DATA / "trace_filter_sampled_rank-0.json.gz", DATA / "trace_filter_sampled_rank-1.json.gz"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from helpers.browser import CHROMIUM, CHROMIUM_ARGS, READ_FIGURE, Server
    folder = Path(tempfile.mkdtemp()) / "job"
    folder.mkdir()
    for p in RANKS:
        shutil.copy(p, folder / p.name)
    server = Server([folder], [folder.parent])
    took = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            for n in range(args.rounds):
                ctx = browser.new_context(viewport={"width": 1500, "height": 900})
                page = ctx.new_page()
                page.goto(server.url)
                page.wait_for_function(f"() => {{ const f = ({READ_FIGURE})('#timeline'); "
                                       f"return f !== null && f.meta.analysed !== false; }}", timeout=120_000)
                t = time.perf_counter()
                page.get_by_text("Panels", exact=True).click()
                page.wait_for_selector("#rank-table", timeout=300_000)
                page.wait_for_selector("#bubble-table", timeout=300_000)
                took.append(time.perf_counter() - t)
                cells = page.evaluate("() => document.querySelectorAll('#panel-tables td').length")
                print(f"round {n + 1}: Panels tables in {took[-1]:.2f} s ({cells:,} cells)", flush=True)
                ctx.close()
            browser.close()
    finally:
        server.close()
    print(f"median {statistics.median(took):.2f} s (min {min(took):.2f}, max {max(took):.2f}) over {len(took)} rounds")


if __name__ == "__main__":
    main()
