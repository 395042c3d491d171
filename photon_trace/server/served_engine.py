"""What the server relies on of an engine, in one place.

The server drives an engine from its one thread (``loop.EngineLoop``: add, abort,
step, read outputs, check, close) and reads its fixed settings once at start-up
(``state.ServerState.start``). ``ServedEngine`` names every member either uses, so
an engine change the server would feel shows here. ``photon_trace.engine.engine.Engine``
is the implementation; it is named only for type checkers, so that loading the web
side does not load torch.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from photon_trace.engine.constraints import ResponseFormat
    from photon_trace.engine.engine_config import EngineConfig
    from photon_trace.engine.model.config import ModelConfig
    from photon_trace.engine.model.tokenizer import Tokenizer
    from photon_trace.engine.outputs import EngineStats, RequestDelta
    from photon_trace.engine.params import SamplingParams
    from photon_trace.engine.request_book import RequestBook
    from photon_trace.telemetry.recording.recorder import RecordingTracer
    from photon_trace.telemetry.tracer import Tracer


@runtime_checkable
class ServedEngine(Protocol):
    """The engine as the server uses it (``Engine`` is one)."""

    config: EngineConfig          # model, max_context, backend; the trace header's settings
    model_config: ModelConfig     # vocab_size: the bound on prompt token ids
    tokenizer: Tokenizer          # prompts in, streamed text out
    sampling_defaults: dict       # generation_config.json's, for fields a request leaves unset
    tracer: Tracer                # a RecordingTracer feeds /metrics' device side and /v1/trace/recent
    requests: RequestBook         # finished outputs, read and forgotten on the engine thread
    device: Any                   # closed on its own when a failed engine is discarded

    @property
    def idle(self) -> bool: ...

    def add_request(self, prompt: list[int], params: SamplingParams,
                    response_format: ResponseFormat | None) -> int: ...

    def abort(self, req_id: int) -> bool: ...

    def step(self) -> list[RequestDelta]: ...

    def stats(self) -> EngineStats: ...

    def compile_format(self, response_format: ResponseFormat) -> None: ...

    def check_invariants(self) -> None: ...

    def check_alive(self) -> None: ...   # raises when the device died; watched while idle

    def wait_for_work(self, wait: Callable[[], Any]) -> Any: ...   # the idle wait, traced as no_work

    def close(self) -> None: ...


# Called on the engine thread with the server's tracer: at start-up, and again to
# replace an engine whose device died.
EngineFactory = Callable[["RecordingTracer"], ServedEngine]

# What ``create_app`` takes: an engine the caller built (and closes), or a factory.
EngineSource = ServedEngine | EngineFactory
