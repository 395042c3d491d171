"""The runtime calls the profiler importer knows by name: CUDA's and HIP's, side by side.

On ROCm the PyTorch profiler writes HIP calls under CUDA's categories (``cuda_runtime``,
``cuda_driver``) and its device ops as ``kernel``, ``gpu_memcpy`` and ``gpu_memset``; only
the names differ (``hipDeviceSynchronize``, ``hipMemcpyWithStream``, ``hipExtModuleLaunchKernel``).
So every rule that goes by a call's name lists both runtimes here, and ``runtime_of`` says
which one a trace used, or that it used one this importer does not know (an XPU's, an
MTIA's, a backend's own ``privateuse1``): its syncs cannot be read then, which is said, never
reported as "0 host waits".
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

BLOCKING_COPY = "a blocking copy"
SYNC_CALLS = {
    # name: what the host waits for
    "cudaDeviceSynchronize": "the whole device", "cuCtxSynchronize": "the whole device",
    "cudaStreamSynchronize": "a stream", "cuStreamSynchronize": "a stream",
    "cudaEventSynchronize": "an event", "cuEventSynchronize": "an event",
    "cudaMemcpy": BLOCKING_COPY, "cudaMemcpy2D": BLOCKING_COPY, "cudaMemcpy3D": BLOCKING_COPY,
    "cudaMemcpyToSymbol": BLOCKING_COPY, "cudaMemcpyFromSymbol": BLOCKING_COPY,
    "cuMemcpy": BLOCKING_COPY, "cuMemcpyDtoH": BLOCKING_COPY, "cuMemcpyHtoD": BLOCKING_COPY,
    "cuMemcpyDtoH_v2": BLOCKING_COPY, "cuMemcpyHtoD_v2": BLOCKING_COPY,
    "cudaFree": "cudaFree (it synchronises the device)", "cudaFreeHost": "cudaFreeHost (it synchronises)",
    # HIP, the same waits under ROCm's names
    "hipDeviceSynchronize": "the whole device", "hipCtxSynchronize": "the whole device",
    "hipStreamSynchronize": "a stream", "hipEventSynchronize": "an event",
    "hipMemcpy": BLOCKING_COPY, "hipMemcpy2D": BLOCKING_COPY, "hipMemcpy3D": BLOCKING_COPY,
    "hipMemcpyToSymbol": BLOCKING_COPY, "hipMemcpyFromSymbol": BLOCKING_COPY,
    "hipMemcpyDtoH": BLOCKING_COPY, "hipMemcpyHtoD": BLOCKING_COPY,
    # what PyTorch calls on ROCm for a copy that is not non_blocking (``.item()``, ``.cpu()``)
    "hipMemcpyWithStream": "a blocking copy on a stream",
    "hipFree": "hipFree (it synchronises the device)", "hipHostFree": "hipHostFree (it synchronises)",
    "hipFreeHost": "hipFreeHost (it synchronises)",
}
DEVICE_WAIT_CALLS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent"})
"""The device waits, the host does not: the bubble it leaves is a wait on another stream."""
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
"""One call that runs a whole graph's kernels: one enqueue for all of them."""
CAPTURE_BEGIN_CALLS = frozenset({"cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph", "cuStreamBeginCapture",
                                 "cuStreamBeginCapture_v2", "hipStreamBeginCapture",
                                 "hipStreamBeginCaptureToGraph"})
CAPTURE_END_CALLS = frozenset({"cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture"})
"""Between them a stream records launches into a graph instead of running them."""
EXTENSIBLE_LAUNCH_CALLS = frozenset({"cudaLaunchKernelExC", "cudaLaunchKernelEx", "cuLaunchKernelEx"})
"""The launches that can carry the programmatic-dependent-launch attribute (Hopper and later):
a kernel so launched may start before its predecessor on the stream ends."""

CUDA = "CUDA"
HIP = "HIP"
UNKNOWN = "unknown"
KNOWN_RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
OTHER_RUNTIME_CATEGORIES = frozenset({"xpu_runtime", "xpu_driver", "mtia_runtime", "mtia_ccp_events",
                                      "privateuse1_runtime", "privateuse1_driver", "hpu_runtime"})
"""Runtime categories Kineto writes for devices whose calls this importer does not read."""


def runtime_family(name: str) -> str:
    """CUDA for ``cuda*`` and driver ``cu*`` calls, HIP for ``hip*``, else UNKNOWN."""
    if name.startswith("hip"):
        return HIP
    if name.startswith("cuda") or (name.startswith("cu") and name[2:3].isupper()):
        return CUDA
    return UNKNOWN


def runtime_of(call_names: Iterable[str], other_categories: dict[str, int], device_ops: int) -> dict:
    """Which runtime a trace's calls are (``{"name": CUDA | HIP | UNKNOWN | None, "why": ...}``).

    ``call_names``: the names of its ``cuda_runtime``/``cuda_driver`` events; ``other_categories``:
    counts of runtime categories it holds that this importer does not read (an XPU's...).
    None: no runtime at all (a CPU trace). UNKNOWN when another runtime's calls are there, or
    device ops with no call this importer knows to launch them.
    """
    families = Counter(runtime_family(n) for n in call_names)
    other = {c: n for c, n in other_categories.items() if c in OTHER_RUNTIME_CATEGORIES and n}
    if other:
        cats = ", ".join(f"{c} ({n:,} calls)" for c, n in sorted(other.items()))
        return {"name": UNKNOWN, "why": f"the trace's runtime calls are {cats}, which this importer does not "
                                        f"read (it knows CUDA's and HIP's)"}
    known = [f for f in (CUDA, HIP) if families[f]]
    if known:
        return {"name": known[0] if len(known) == 1 else f"{known[0]} and {known[1]}", "why": ""}
    if families[UNKNOWN]:
        sample = ", ".join(sorted({n for n in call_names if runtime_family(n) == UNKNOWN})[:3])
        return {"name": UNKNOWN, "why": f"its runtime calls ({sample}, …) are neither CUDA's nor HIP's"}
    if device_ops:
        return {"name": UNKNOWN, "why": "device ops but no runtime call in the trace (recorded without the "
                                        "runtime's API trace)"}
    return {"name": None, "why": ""}
