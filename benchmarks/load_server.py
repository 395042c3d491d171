"""Load on the HTTP server: many concurrent streaming clients, some leaving early.

Starts ``python -m photon_trace.cli serve`` on a free loopback port (its own process, so
the clients here do not share its GIL), waits for /health, warms it up, then runs
``--rounds`` rounds of ``--clients`` concurrent streaming completions (httpx, async):
prompts of mixed length, ``max_tokens`` drawn from ``--lengths`` (``ignore_eos``, so
lengths are what was asked), and every ``--disconnect-every``-th client closing its
stream after a few chunks. After each round it waits for the engine to go idle.

Prints requests/s, tokens/s, client-side TTFT and TPOT p50/p99, the device idle
fraction during the round (from /metrics counters), the server's resident memory
(server + device worker) before and after each round, and the machine's load.
Never fails on speed; exits 1 on a correctness failure: a server error (5xx, an
error event, a broken stream), a finished stream that is not whole, or pages, rows
or slots still held once the server is idle. Bounded: ``--clients`` per round and
``--deadline-s`` for everything.

    python benchmarks/load_server.py --model tiny --clients 256 --rounds 2
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Result:
    ok: bool = False               # finished with [DONE] and the asked length
    left_early: bool = False
    error: str | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens: int = 0


@dataclass
class Round:
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the device worker), in MB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, StopIteration, ProcessLookupError):
            continue
    return total / 1024


def cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of a process and of each of its children, by role."""
    tick = os.sysconf("SC_CLK_TCK")

    def one(p: int) -> float:
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    out = {"server": one(pid), "device worker": 0.0}
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            for c in f.read().split():
                try:
                    out["device worker"] += one(int(c))
                except FileNotFoundError:
                    pass
    out["clients"] = sum(os.times()[:2])
    return out


def scrape(url: str) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=30).text):
        for s in fam.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def server_errors(m: dict[str, float]) -> int:
    return int(sum(v for k, v in m.items() if k.startswith("photon_http_requests_total") and "status=5" in k))


async def one_client(c: httpx.AsyncClient, i: int, rng: random.Random, args) -> Result:
    res = Result()
    max_tokens = rng.choice(args.lengths)
    prompt = "".join(rng.choice("abcdefghij klmnop") for _ in range(rng.randint(4, args.max_prompt)))
    leave_after = rng.randint(1, 4) if args.disconnect_every and i % args.disconnect_every == 0 else None
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 1.0, "seed": i, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first = last = None
    events = 0
    try:
        async with c.stream("POST", "/v1/completions", json=body) as r:
            if r.status_code != 200:
                res.error = f"HTTP {r.status_code}: {(await r.aread())[:200]!r}"
                return res
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    res.ok = res.tokens == max_tokens
                    if not res.ok:
                        res.error = f"asked {max_tokens} tokens, got {res.tokens}"
                    break
                obj = json.loads(data)
                if "error" in obj:
                    res.error = obj["error"]["message"]
                    return res
                now = time.perf_counter()
                if obj.get("usage"):
                    res.tokens = obj["usage"]["completion_tokens"]
                    continue
                first = first or now
                last = now
                events += 1
                if leave_after is not None and events >= leave_after:
                    res.left_early = True
                    return res
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        res.error = f"{type(e).__name__}: {e}"
        return res
    if res.ok and first is not None:
        res.ttft_s = first - t0
        res.tpot_s = (last - first) / (res.tokens - 1) if res.tokens > 1 else None
    elif res.ok:
        res.error = "no chunk before [DONE]"
        res.ok = False
    return res


async def run_round(url: str, args, seed: int) -> Round:
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=args.clients + 16, max_keepalive_connections=args.clients + 16)
    timeout = httpx.Timeout(args.deadline_s, connect=30)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as c:
        t0 = time.perf_counter()
        results = await asyncio.gather(*(one_client(c, i, random.Random(rng.random()), args)
                                         for i in range(args.clients)))
        return Round(list(results), time.perf_counter() - t0)


def wait_idle(url: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        h = httpx.get(url + "/health", timeout=30).json()
        if h.get("running") == 0 and h.get("waiting") == 0 and h.get("streams") == 0:
            time.sleep(0.2)       # let the engine thread reach its idle check
            return httpx.get(url + "/health", timeout=30).json()
        if time.monotonic() > deadline:
            return h
        time.sleep(0.1)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def report(n: int, rnd: Round, m0: dict, m1: dict, rss: tuple[float, float],
           cpu: tuple[dict, dict]) -> list[str]:
    done = [r for r in rnd.results if r.ok]
    left = sum(r.left_early for r in rnd.results)
    errors = [r.error for r in rnd.results if r.error]
    busy = m1["photon_device_busy_seconds_total"] - m0["photon_device_busy_seconds_total"]
    idle = m1["photon_device_idle_seconds_total"] - m0["photon_device_idle_seconds_total"]
    tokens = m1["photon_engine_generated_tokens_total"] - m0["photon_engine_generated_tokens_total"]
    steps = m1["photon_engine_steps_total"] - m0["photon_engine_steps_total"]
    ttft = [r.ttft_s for r in done if r.ttft_s is not None]
    tpot = [r.tpot_s for r in done if r.tpot_s is not None]
    print(f"round {n}: {len(rnd.results)} clients in {rnd.seconds:.1f} s: {len(done)} whole, {left} left early, "
          f"{len(errors)} client errors, {server_errors(m1) - server_errors(m0)} server 5xx")
    print(f"  {len(rnd.results) / rnd.seconds:.1f} requests/s   {tokens / rnd.seconds:.0f} tokens/s (engine, all "
          f"requests)   {steps:.0f} steps, {tokens / max(steps, 1):.1f} tokens/step")
    print(f"  TTFT p50 {pct(ttft, .5) * 1e3:.0f} ms  p99 {pct(ttft, .99) * 1e3:.0f} ms   "
          f"TPOT p50 {pct(tpot, .5) * 1e3:.1f} ms  p99 {pct(tpot, .99) * 1e3:.1f} ms")
    print(f"  device idle fraction {idle / (busy + idle) if busy + idle else float('nan'):.3f} "
          f"(busy {busy:.2f} s, idle {idle:.2f} s)   RSS {rss[0]:.0f} -> {rss[1]:.0f} MB")
    print("  CPU s during the round: " + ", ".join(f"{k} {cpu[1][k] - cpu[0][k]:.1f}" for k in cpu[0]))
    for e in errors[:5]:
        print(f"  error: {e}")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny", choices=("tiny", "small"))
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    ap.add_argument("--max-prompt", type=int, default=200, help="longest prompt, in characters")
    ap.add_argument("--disconnect-every", type=int, default=8, help="every Nth client leaves early (0: none)")
    ap.add_argument("--deadline-s", type=float, default=600.0, help="bound on the whole run")
    ap.add_argument("--server-args", nargs=argparse.REMAINDER, default=[],
                    help="passed on to the server (e.g. --max-rows 64 --max-seqs 128)")
    args = ap.parse_args()
    t_start = time.monotonic()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "photon_trace.cli", "serve", "--model", args.model, "--backend", args.backend,
           "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", *args.server_args]
    print("server:", " ".join(cmd[1:]))
    proc = subprocess.Popen(cmd)
    failed = False
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                print("the server did not come up")
                return 1
            time.sleep(0.5)
        print(f"server up in {time.monotonic() - t_start:.1f} s")
        for i in range(8):     # warm-up: first steps, allocator growth
            httpx.post(url + "/v1/completions", json={"prompt": "warm " * (i + 1), "max_tokens": 16}, timeout=120)
        wait_idle(url, 60)

        for n in range(1, args.rounds + 1):
            remaining = args.deadline_s - (time.monotonic() - t_start)
            if remaining < 30:
                print(f"round {n}: skipped, the deadline is near")
                break
            args.deadline_s = remaining
            m0, rss0, cpu0 = scrape(url), rss_mb(proc.pid), cpu_s(proc.pid)
            rnd = asyncio.run(run_round(url, args, seed=n))
            cpu1 = cpu_s(proc.pid)
            health = wait_idle(url, 60)
            m1, rss1 = scrape(url), rss_mb(proc.pid)
            errors = report(n, rnd, m0, m1, (rss0, rss1), (cpu0, cpu1))
            clean = (health.get("running") == 0 and health.get("kv_pages_used") == 0
                     and health.get("invariants") == "ok" and m1["photon_kv_pages_used"] == 0)
            print(f"  after the round: running {health.get('running')}, waiting {health.get('waiting')}, "
                  f"KV pages in use {health.get('kv_pages_used')}, idle invariants "
                  f"(every page, row and slot free): {health.get('invariants')}")
            failed |= bool(errors) or server_errors(m1) > 0 or not clean
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("load:", open("/proc/loadavg").read().split()[:3], f"on {os.cpu_count()} cores")
    print("FAILED" if failed else "OK: no server errors, every page and slot free after each round")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
