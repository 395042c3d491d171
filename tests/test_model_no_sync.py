"""The forward never reads a device value on the host, so it can run ahead of the host
and be captured in a CUDA graph.

On CPU this is checked by intercepting every aten op of a forward: none of those
that need a device value on the host (``.item()``, ``nonzero``, boolean-mask
indexing, ...) may appear.
"""
from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.model.loader import load_model
from photon_trace.engine.model.batch import make_forward_batch

SYNCING_OPS = {"_local_scalar_dense", "item", "nonzero", "masked_select", "unique", "_unique2",
               "is_nonzero", "equal", "allclose", "repeat_interleave", "bincount", "index with a bool mask"}


class OpRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("index", "index_put", "index_put_") and any(
                i is not None and i.dtype == torch.bool for i in args[1]):
            name = "index with a bool mask"  # its shape depends on the mask's values
        self.ops.add(name)
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny")


@pytest.mark.parametrize("kind", ["prefill", "decode"])
def test_forward_uses_no_op_that_syncs_with_the_host(tiny, kind):
    if kind == "prefill":
        rows = [(list(range(10, 30)), 0, [3, 1]), (list(range(5)), 4, [2]), ([0], 0, [0])]
    else:
        rows = [([7], 20, [3, 1]), ([9], 8, [2]), ([0], 0, [0])]
    batch = make_forward_batch(rows, page_size=16, pages_per_row=2)
    kv = KVPool(tiny.config, 4, 16)
    out = torch.empty(3, tiny.config.vocab_size)
    recorder = OpRecorder()
    with torch.inference_mode(), recorder:
        tiny.model(batch, kv, out_logits=out)
    assert recorder.ops, "the recorder saw no ops"
    assert not recorder.ops & SYNCING_OPS, f"host-syncing ops in forward: {recorder.ops & SYNCING_OPS}"
    assert torch.isfinite(out).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_decode_forward_captures_in_a_cuda_graph_and_replays_exactly():
    loaded = load_model("tiny", device="cuda")
    model, config = loaded.model, loaded.config
    rows = [([7], 20, [3, 1]), ([9], 8, [2]), ([0], 0, [0])]
    batch = make_forward_batch(rows, page_size=16, pages_per_row=2, device="cuda")
    kv = KVPool(config, 4, 16, device="cuda")
    out = torch.empty(3, config.vocab_size, device="cuda")
    with torch.inference_mode():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), _sync_is_an_error():
            model(batch, kv, out_logits=out)  # warm-up outside the graph
        torch.cuda.current_stream().wait_stream(stream)
        eager = out.clone()
        graph = torch.cuda.CUDAGraph()
        # Not under sync debug "error": torch.cuda.graph synchronizes before it captures. The
        # capture itself fails on any op that would make the host wait.
        with torch.cuda.graph(graph):
            model(batch, kv, out_logits=out)
        out.zero_()
        with _sync_is_an_error():
            graph.replay()
    torch.testing.assert_close(out, eager)


@contextmanager
def _sync_is_an_error():
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")
