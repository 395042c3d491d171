"""The engine thread: the one thread that owns the engine.

The engine is single-threaded. Web handlers never mutate it or read its live
state: they post commands (add a request, abort one) to a queue this thread drains
at the top of every tick, read their request's output from a ``RequestStream`` the
thread feeds, and read counters from ``Engine.stats()``, the snapshot the engine
publishes at the end of each tick. (What they do call directly is thread-safe by
design: ``compile_format``, and the config and tokenizer, fixed at start-up.) The commands and
mailboxes are in ``mailbox.py``: per tick, the deltas bound for one asyncio loop go over in a
single ``call_soon_threadsafe``. The thread's own time between ticks is a ``serve`` span in the
trace, with the thread's counters (``between_ticks.py``). With no work and no commands the
thread sleeps on a condition (no spin) through ``Engine.wait_for_work`` (a ``no_work`` span in
the trace) and records each sleep: both keep the time with nothing to do out of the idle
figures. It checks the engine's invariants each time it goes idle (every page, row and slot
free); asleep, it checks every ``IDLE_WATCH_S`` that the device is alive: a worker dead while
idle is healed then.

The loop heals: when a tick raises (the device worker was killed or ran out of
memory, a CUDA error, a bug) and the loop was given a factory, it fails only the
requests in flight (an error update saying so), discards the engine's device, builds
a fresh engine with the same factory (the same weights and settings) and serves
again; ``status`` is ``"degraded"`` meanwhile and ``restarts`` counts the rebuilds.
More than ``max_restarts`` failures within ``restart_window_s`` (a crash loop), or
a factory that fails, leave the loop stopped (``"unavailable"``). What callers see
of a failure is ``public_error``: the kind of failure, never its traceback.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from photon_trace.engine.outputs import RequestOutput
from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.tracer import RequestEvent, now_ns

from photon_trace.server.between_ticks import BetweenTicks
from photon_trace.server.mailbox import RequestStream, Update, _Abort, _Add, _post
from photon_trace.server.served_engine import ServedEngine

__all__ = ["EngineLoop", "RequestStream", "Update", "IDLE_WATCH_S"]

log = logging.getLogger(__name__)

IDLE_WATCH_S = 0.5   # how soon /health says "degraded" after an idle worker dies (a check: a waitpid)


def _describe_failure(e: BaseException) -> str:
    """What a client may read about a failure: its kind, not its message (a worker's
    traceback, file paths); the server log has the rest."""
    return f"the engine failed ({type(e).__name__})"


class EngineLoop:
    """Runs ``engine.step()`` on a dedicated thread.

    ``engine``: an ``Engine``, or a zero-argument callable that builds one (then it is
    built on this thread, rebuilt after a failure, and closed when the loop stops).
    Called on the engine thread: ``on_added(req_id, prompt, params, span)`` for every
    request the engine took, ``on_tokens(deltas)`` with every tick's deltas (metrics per
    token), ``on_finished(output)`` for every finished request (metrics), ``on_failed(req_id)``
    for every request a failure ended. A hook that raises is logged; the engine goes on.
    """

    def __init__(self, engine: ServedEngine | Callable[[], ServedEngine], *,
                 on_finished: Callable[[RequestOutput], None] | None = None,
                 on_added: Callable[[int, list[int], SamplingParams, dict | None], None] | None = None,
                 on_tokens: Callable[[list], None] | None = None,
                 on_failed: Callable[[int], None] | None = None, name: str = "photon-engine",
                 max_restarts: int = 5, restart_window_s: float = 60.0) -> None:
        self._factory = engine if callable(engine) and not hasattr(engine, "step") else None
        self.engine: ServedEngine | None = None if self._factory else engine
        self._on_added, self._on_tokens = on_added, on_tokens
        self._on_finished, self._on_failed = on_finished, on_failed
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.restarts = 0
        self._restart_times: deque[float] = deque()
        self.degraded: str | None = None            # why the engine is being rebuilt, while it is
        self.last_failure: str | None = None        # public_error of the last failure healed
        self.retired = {"steps": 0, "tokens": 0, "zombie_rows": 0}   # counters of replaced engines
        self._cond = threading.Condition()
        self._commands: deque = deque()
        self._streams: dict[int, RequestStream] = {}
        self._stopping = False
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.error: BaseException | None = None    # why the loop died, if it did
        self.sleeps: deque[tuple[int, int]] = deque(maxlen=4096)  # (t0, t1) monotonic ns, engine idle
        self.sleeping_since: int | None = None
        self.invariant_error: str | None = None    # the last idle check's failure, None when it passed
        self.idle_checks = 0
        self._between = BetweenTicks()

    # -- lifecycle --------------------------------------------------------------------
    def start(self, timeout_s: float = 600.0) -> None:
        """Start the thread and wait until the engine is built; re-raise what stopped it."""
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"the engine did not start within {timeout_s:.0f} s")
        if self.error is not None:
            raise RuntimeError(f"the engine failed to start: {self.error!r}") from self.error

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop ticking; requests still running get an error update. Closes an engine it built."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self.error is None and not self._stopping

    @property
    def status(self) -> str:
        """``ok``, ``degraded`` (a failed engine is being replaced) or ``unavailable``."""
        if not self.alive:
            return "unavailable"
        return "degraded" if self.degraded is not None else "ok"

    @property
    def public_error(self) -> str | None:
        """Why the loop stopped or is rebuilding, fit for a response body."""
        if self.error is not None:
            return _describe_failure(self.error)
        return self.degraded

    @property
    def active_requests(self) -> int:
        return len(self._streams)

    # -- called from any thread -------------------------------------------------------
    def submit(self, prompt: list[int], params: SamplingParams, response_format: Any,
               stream: RequestStream, span: dict | None = None) -> Future:
        """Queue a request; the future gets its engine id, or the engine's ValueError.
        While a failed engine is being replaced, requests wait for the new one."""
        fut: Future = Future()
        with self._cond:
            if not self.alive:
                reason = _describe_failure(self.error) if self.error is not None else "the server is stopping"
                fut.set_exception(RuntimeError(f"the engine is not running: {reason}"))
                return fut
            self._commands.append(_Add(prompt, params, response_format, stream, fut, span))
            self._cond.notify()
        return fut

    def abort(self, stream: RequestStream) -> None:
        """Abort the request behind ``stream`` (no-op if it already finished, or ran on an engine
        since replaced); its pages and slots are freed by the engine."""
        with self._cond:
            self._commands.append(_Abort(stream))
            self._cond.notify()

    def idle_intervals(self, now: int) -> list[tuple[int, int]]:
        """The engine's sleeps, the current one up to ``now`` included."""
        out = list(self.sleeps)
        since = self.sleeping_since
        if since is not None:
            out.append((since, now))
        return out

    # -- the thread -------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if self._factory is not None:
                self.engine = self._factory()
        except BaseException as e:  # reported by start()
            self.error = e
            self._ready.set()
            return
        self._ready.set()
        engine = self.engine
        try:
            while True:
                try:
                    self._serve(engine)
                    break                      # stopping
                except Exception as e:
                    log.exception("photon_trace: the engine failed")
                    engine = self._heal(engine, e)
                    if engine is None:
                        break
        except BaseException as e:
            log.exception("photon_trace: the engine loop failed")
            self.error = e
        finally:
            self._shutdown(self.engine)

    def _serve(self, engine) -> None:
        between = self._between     # the loop's own time between ticks: ``serve`` spans
        between.begin(engine)
        try:
            while True:
                commands = self._next_commands(engine)
                if commands is None:
                    return
                for c in commands:
                    self._apply(engine, c)
                between.end()
                deltas = engine.step()
                between.begin(engine)
                self._dispatch(engine, deltas)
        finally:
            between.end()

    def _heal(self, engine, e: Exception):
        """Fail the requests in flight, drop ``engine``'s device, build a new engine; None if not."""
        now = time.monotonic()
        while self._restart_times and now - self._restart_times[0] > self.restart_window_s:
            self._restart_times.popleft()
        reason = _describe_failure(e)
        self._fail_streams(f"{reason}; the request was not completed")
        if self._factory is None or len(self._restart_times) >= self.max_restarts:
            self.error = e
            return None
        self.degraded = f"{reason}; a new engine is starting"
        stats = engine.stats()
        for k in self.retired:
            self.retired[k] += getattr(stats, k)
        _discard(engine)
        with self._cond:      # aborts name requests of the failed engine: nothing to do any more
            self._commands = deque(c for c in self._commands if isinstance(c, _Add))
        try:
            new = self._factory()
        except Exception as e2:
            log.exception("photon_trace: building a new engine failed")
            self.error = e2
            return None
        self._restart_times.append(now)
        self.restarts += 1
        self.engine = new
        self.last_failure, self.degraded = reason, None
        log.warning("photon_trace: engine replaced after a failure (%d restarts)", self.restarts)
        return new

    def _fail_streams(self, message: str, failed: bool = True) -> None:
        """End every request in flight with an error update (and tell the tracer they ended);
        ``failed``: a failure ended them (not a shutdown)."""
        engine = self.engine
        tracer = getattr(engine, "tracer", None)
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for rid, stream in self._streams.items():
            by_loop.setdefault(stream.loop, []).append((stream, Update([], finished=True, error=message)))
            if tracer is not None:
                tracer.request(rid, RequestEvent.ABORTED, now_ns())
            if failed:
                _notify(self._on_failed, rid)
        self._streams.clear()
        for loop, batch in by_loop.items():
            _post(loop, batch)

    def _next_commands(self, engine) -> list | None:
        """The queued commands; sleeps while the engine is idle and nothing is queued (a device
        found dead meanwhile raises here, as a failed tick would, and is healed)."""
        with self._cond:
            if not self._commands and not self._stopping and engine.idle:
                self._check_idle(engine)
                self._between.end()     # the sleep is no_work, not the loop's host time
                engine.wait_for_work(lambda: self._sleep(engine))   # the trace's no_work span
                self._between.begin(engine)
            if self._stopping:
                return None
            commands = list(self._commands)
            self._commands.clear()
            return commands

    def _sleep(self, engine) -> None:
        """Wait (holding ``_cond``) for a command or the stop, checking the device every ``IDLE_WATCH_S``."""
        self.sleeping_since = t0 = time.monotonic_ns()
        try:
            while not self._commands and not self._stopping:
                if not self._cond.wait(IDLE_WATCH_S):
                    self._cond.release()    # a check may take a while: submit() must not wait on it
                    try:
                        engine.check_alive()
                    finally:
                        self._cond.acquire()
        finally:
            self.sleeping_since = None
            self.sleeps.append((t0, time.monotonic_ns()))

    def _check_idle(self, engine) -> None:
        self.idle_checks += 1
        try:
            engine.check_invariants()
        except AssertionError as e:
            self.invariant_error = str(e) or "invariant failed"
            log.error("photon_trace: engine invariant failed while idle: %s", self.invariant_error)
        else:
            self.invariant_error = None

    def _apply(self, engine, c) -> None:
        if isinstance(c, _Abort):
            rid = c.stream.req_id
            if self._streams.get(rid) is c.stream:   # still running on this engine
                engine.abort(rid)
            return
        if not c.future.set_running_or_notify_cancel():
            return
        try:
            rid = engine.add_request(c.prompt, c.params, c.response_format)
        except Exception as e:   # a ValueError for bad input; the engine is unchanged
            c.future.set_exception(e)
            return
        c.stream.req_id = rid
        self._streams[rid] = c.stream
        _notify(self._on_added, rid, c.prompt, c.params, c.span)
        c.future.set_result(rid)

    def _dispatch(self, engine, deltas) -> None:
        if not deltas:
            return
        _notify(self._on_tokens, deltas)
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for d in deltas:
            stream = self._streams.get(d.req_id)
            if stream is None:
                if d.finished:
                    engine.requests.forget(d.req_id)
                continue
            if not d.finished and not stream.deltas:
                continue
            update = Update(d.token_ids, d.finished, logprobs=d.logprobs)
            if d.finished:
                del self._streams[d.req_id]
                update.output = engine.requests.output(d.req_id, forget=True)
                _notify(self._on_finished, update.output)
            by_loop.setdefault(stream.loop, []).append((stream, update))
        for loop, batch in by_loop.items():
            _post(loop, batch)

    def _shutdown(self, engine) -> None:
        with self._cond:
            self._stopping = True
            pending, self._commands = list(self._commands), deque()
        reason = _describe_failure(self.error) if self.error else "the server is shutting down"
        for c in pending:
            if isinstance(c, _Add) and c.future.set_running_or_notify_cancel():
                c.future.set_exception(RuntimeError(reason))
        self._fail_streams(reason, failed=self.error is not None)
        if self._factory is not None and engine is not None:
            try:
                engine.close()
            except Exception:
                log.exception("photon_trace: closing the engine failed")
                _discard(engine)
                engine.tracer.close()


def _discard(engine) -> None:
    """Release a failed engine's device (the worker process, its shared memory) and nothing
    else: ``Engine.close`` would also close the tracer, which the server and the next
    engine share, and would first try to commit a step the dead device never finished."""
    try:
        engine.device.close()
    except Exception:
        log.exception("photon_trace: closing a failed device failed")


def _notify(hook: Callable | None, *args) -> None:
    """Call a caller's hook on the engine thread: its failure is logged, and is not the engine's."""
    if hook is not None:
        try:
            hook(*args)
        except Exception:
            log.exception("photon_trace: the hook %s failed", getattr(hook, "__name__", repr(hook)))
