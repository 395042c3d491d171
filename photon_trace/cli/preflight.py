"""What a command checks and takes before it loads a model: a preset too large for the CPU
is refused, a server's port is bound, and a preset's random weights are said.

A refusal here costs nothing: no model is loaded and no worker started, so the user sees
the mistake at once instead of minutes later (or after a model has loaded, for a busy port).
"""
from __future__ import annotations

import errno
import socket


def refuse_gpu_only_on_cpu(model: str, backend: str, cpu_because: str = "--backend cpu") -> None:
    """``ValueError`` (exit 2) for a GPU-only preset on the CPU backend, ``auto`` resolved;
    ``cpu_because`` says why a backend of ``cpu`` was chosen."""
    from photon_trace.engine.model.presets import GPU_ONLY, PRESETS   # torch: only when asked

    if model not in GPU_ONLY or backend == "cuda":
        return
    if backend == "auto":
        import torch
        if torch.cuda.is_available():
            return
        cpu_because = "there is no CUDA GPU here"
    params = PRESETS[model].param_count / 1e9
    raise ValueError(f"the {model} preset (~{params:.1f}B parameters) runs on a CUDA GPU only, and this would run "
                     f"it on the CPU ({cpu_because}), where every step reads all its weights; use tiny or small "
                     f"on the CPU")


def random_weights_note(model: str) -> str | None:
    """A line saying that a preset's text is noise (None for a checkpoint)."""
    from photon_trace.engine.model.presets import PRESETS

    if model not in PRESETS:
        return None
    return (f"note: {model} is a preset with random weights: its text is noise, not language; "
            f"give --model a checkpoint folder or a Hub id for words (docs/models.md)")


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port``, for the server to listen on once the model is loaded.

    Bound first so that a busy port is refused before minutes of model loading (``ValueError``:
    exit 2). SO_REUSEADDR, as uvicorn binds: a port left in TIME_WAIT by a server that just
    stopped is reusable, one another process listens on is not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ValueError(f"cannot listen on {host}: {e.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        why = {errno.EADDRINUSE: "the port is in use (another server is listening there: stop it or "
                                 "choose another --port)",
               errno.EACCES: "permission denied (ports below 1024 need privileges: choose another --port)",
               errno.EADDRNOTAVAIL: "no interface of this machine has that address (--host)"}
        raise ValueError(f"cannot listen on {host}:{port}: {why.get(e.errno, e.strerror or str(e))}") from None
    return sock
