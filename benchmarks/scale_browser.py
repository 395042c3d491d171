"""Page open to drawn timeline in headless Chromium, the dashboard's app in its own process
(``bench_scale.py --browser``; needs /usr/bin/chromium and Playwright)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
READY = ("() => { const gd = document.querySelector('#timeline .js-plotly-plot'); "
         "return gd && gd._fullData && gd._fullData.length > 0 && gd.layout.meta; }")


def browser_draw(path: Path, timeout_s: float = 600) -> float | None:
    """Seconds from navigation to a drawn timeline (second visit, fresh context: the first waits
    for the server's load and analysis); None without Chromium."""
    if not os.path.exists(CHROMIUM):
        return None
    from playwright.sync_api import sync_playwright
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("import sys; from photon_trace.dashboard.app import create_app; "
            "create_app([sys.argv[1]], [sys.argv[2]], None).run(host='127.0.0.1', port=int(sys.argv[3]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(path.parent), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:    # the server's port opens: a readiness poll, not a timing
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True)
            out = []
            for _ in range(2):
                ctx = b.new_context(viewport={"width": 1600, "height": 1000})
                pg = ctx.new_page()
                t0 = time.perf_counter()
                pg.goto(f"http://127.0.0.1:{port}/")
                pg.wait_for_function(READY, timeout=timeout_s * 1000)
                out.append(time.perf_counter() - t0)
                ctx.close()
            b.close()
        print(f"  browser: first visit (the server reading the file) {out[0]:.2f} s, second {out[1]:.2f} s",
              flush=True)
        return out[-1]
    finally:
        proc.terminate()
        proc.wait(10)
