"""``photon-trace serve``: the argument parser and the function that runs the server."""
from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from photon_trace.hosts import allowed_hosts as hosts_for, is_loopback
from photon_trace.server.middleware import DEFAULT_MAX_BODY_BYTES

KEY_ENV = "PHOTON_TRACE_API_KEY"
# The connection limits' defaults (server/connections.py), without importing uvicorn to parse
HEADER_TIMEOUT_S, BODY_TIMEOUT_S, MAX_CONNECTIONS = 10.0, 30.0, 256


def add_serve_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve the engine over an OpenAI-compatible HTTP API",
                       description="Serve a model over HTTP: /v1/completions, /v1/chat/completions, /v1/point, "
                                   "/v1/detect, /v1/models, /health, /metrics, /v1/trace/recent.")
    p.add_argument("--model", default="tiny",
                   help="preset (tiny, small, 1.5b), a Hugging Face model folder or a Hub id (owner/name)")
    p.add_argument("--served-model-name", default=None, help="the name clients send as `model` (default: --model)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback by default)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key-file", metavar="PATH", default=None,
                   help=f"require 'Authorization: Bearer KEY' on /v1/* and /metrics, the key read from this "
                        f"file (or from ${KEY_ENV}); an empty key is an error")
    p.add_argument("--api-key", default=None, help=argparse.SUPPRESS)   # refused: see api_key()
    p.add_argument("--allowed-hosts", default=None,
                   help="comma-separated Host names answered without an API key (default: localhost, "
                        "127.0.0.1, ::1 and --host): a DNS-rebinding guard; ignored with a key")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help="larger request bodies get a 413 before they are read (default: 4 MiB)")
    p.add_argument("--header-timeout", type=float, default=HEADER_TIMEOUT_S, metavar="S",
                   help=f"close a connection whose request headers are not complete S seconds after the "
                        f"server began waiting for them (default: {HEADER_TIMEOUT_S:g})")
    p.add_argument("--body-timeout", type=float, default=BODY_TIMEOUT_S, metavar="S",
                   help=f"close a connection whose request body is not complete S seconds after its headers "
                        f"(default: {BODY_TIMEOUT_S:g})")
    p.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, metavar="N",
                   help=f"open connections at most (default: {MAX_CONNECTIONS}); one more closes the one "
                        f"waiting longest for a request, or gets a 503")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--dtype", default="auto", help="float32, bfloat16, float16 (fp32, bf16, fp16) or auto")
    p.add_argument("--depth", type=int, default=2, choices=(1, 2), help="2 = pipelined, 1 = blocking")
    p.add_argument("--mask-upload", default="async", choices=("async", "sync"),
                   help="sync: the source's mask-upload bug, to watch /metrics flag its accidental syncs")
    p.add_argument("--max-rows", type=int, default=64, help="rows (sequences) in one step")
    p.add_argument("--max-seqs", type=int, default=128, help="resident sequences")
    p.add_argument("--max-step-tokens", type=int, default=256)
    p.add_argument("--kv-tokens", type=int, default=32768, help="KV pool size in tokens")
    p.add_argument("--max-context", type=int, default=None, help="prompt + output tokens (default: the engine's)")
    p.add_argument("--seed", type=int, default=None,
                   help="engine seed: unseeded requests' seeds are drawn from it (default: from the OS)")
    p.add_argument("--device-threads", type=int, default=1, help="host-process device: intra-op threads (1 = a core of its own beside the scheduler)")
    p.add_argument("--otlp", action="store_true", default=bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")),
                   help="export request and step spans over OTLP (on when OTEL_EXPORTER_OTLP_ENDPOINT is set)")
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=run_serve)
    return p


def engine_settings(args: argparse.Namespace) -> dict:
    settings = dict(model=args.model, backend=args.backend, dtype=args.dtype, depth=args.depth,
                    mask_upload=args.mask_upload,
                    max_rows=args.max_rows, max_seqs=args.max_seqs, max_step_tokens=args.max_step_tokens,
                    kv_tokens=args.kv_tokens, seed=args.seed, device_threads=args.device_threads)
    if args.max_context is not None:  # otherwise the engine takes the model's context
        settings["max_context"] = args.max_context
    return settings


def allowed_hosts(args: argparse.Namespace) -> set[str]:
    return set(hosts_for(args.host, args.allowed_hosts))


class KeyRefused(ValueError):
    """The API key cannot be had as given: the message says why and what to do."""


def api_key(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``(key, warning)``: the key from ``--api-key-file`` or ``$PHOTON_TRACE_API_KEY`` (None:
    serve without one). ``KeyRefused`` for an empty or unreadable key, and for ``--api-key KEY``:
    a command line is readable by every local user (``ps``, ``/proc/PID/cmdline``)."""
    if args.api_key is not None:
        if not args.api_key.strip():
            raise KeyRefused("error: the API key is empty: set a key, or none to serve without one")
        raise KeyRefused(f"error: --api-key puts the key on the command line, where every user of this machine "
                         f"can read it (ps); give it in a file (--api-key-file PATH) or in ${KEY_ENV}")
    if args.api_key_file is not None:
        path = Path(args.api_key_file)
        try:
            key, mode = path.read_text(encoding="utf-8").strip(), path.stat().st_mode
        except (OSError, UnicodeDecodeError) as e:
            raise KeyRefused(f"error: cannot read the API key file {path}: "
                             f"{getattr(e, 'strerror', None) or type(e).__name__}") from None
        if not key:
            raise KeyRefused(f"error: the API key is empty ({path} holds no key)")
        loose = mode & (stat.S_IRWXG | stat.S_IRWXO)
        return key, (f"warning: other users can read the API key file {path} (mode {stat.S_IMODE(mode):o}): "
                     f"chmod 600 it") if loose else None
    key = os.environ.get(KEY_ENV)
    if key is not None and not key.strip():
        raise KeyRefused(f"error: the API key is empty (${KEY_ENV}): set a key, or unset it to serve without one")
    return key, None


def security_check(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``(error, warning)`` about how the server would be exposed, before anything starts."""
    try:
        key, warning = api_key(args)
    except KeyRefused as e:
        return str(e), None
    if key is None and not is_loopback(args.host):
        return None, (f"warning: serving on {args.host} without an API key: anyone who can reach it can "
                      f"generate. Set {KEY_ENV} or --api-key-file; without a key only these Host names are "
                      f"answered: {', '.join(sorted(allowed_hosts(args)))} (--allowed-hosts)")
    return None, warning


def run_serve(args: argparse.Namespace) -> int:
    error, warning = security_check(args)
    if error:
        print(error, file=sys.stderr)
        return 2
    if warning:
        print(warning, file=sys.stderr)

    import uvicorn

    from photon_trace.engine.engine import Engine
    from photon_trace.engine.engine_config import EngineConfig
    from photon_trace.engine.model.host_side import load_host_side

    from photon_trace.server.api import create_app
    from photon_trace.server.connections import ConnectionLimits, uvicorn_options

    settings = engine_settings(args)
    # Bad settings, a bad path, an unsupported or unreadable checkpoint, a Hub id that cannot be
    # had: one line and exit 2 now (the CLI's handler), not a traceback from the server's start-up.
    EngineConfig(**settings)
    limits = ConnectionLimits(args.header_timeout, args.body_timeout, args.max_connections)
    load_host_side(args.model)
    app = create_app(lambda tracer: Engine(tracer=tracer, **settings), api_key=api_key(args)[0],
                     model_name=args.served_model_name or args.model, otlp=args.otlp,
                     max_body_bytes=args.max_body_bytes, allowed_hosts=allowed_hosts(args))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False,
                **uvicorn_options(limits))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m photon_trace.server")
    sub = parser.add_subparsers(dest="command")
    add_serve_parser(sub)
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)
