"""``photon-trace serve``: the argument parser and the function that runs the server."""
from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from photon_trace.server.middleware import DEFAULT_MAX_BODY_BYTES, LOOPBACK_HOSTS


def add_serve_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve the engine over an OpenAI-compatible HTTP API",
                       description="Serve a model over HTTP: /v1/completions, /v1/chat/completions, /v1/point, "
                                   "/v1/detect, /v1/models, /health, /metrics, /v1/trace/recent.")
    p.add_argument("--model", default="tiny",
                   help="preset (tiny, small, 1.5b), a Hugging Face model folder or a Hub id (owner/name)")
    p.add_argument("--served-model-name", default=None, help="the name clients send as `model` (default: --model)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback by default)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", default=os.environ.get("PHOTON_TRACE_API_KEY"),
                   help="require 'Authorization: Bearer KEY' on /v1/* (default: $PHOTON_TRACE_API_KEY; "
                        "an empty key is an error)")
    p.add_argument("--allowed-hosts", default=None,
                   help="comma-separated Host names answered without an API key (default: localhost, "
                        "127.0.0.1, ::1 and --host): a DNS-rebinding guard; ignored with a key")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help="larger request bodies get a 413 before they are read (default: 4 MiB)")
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
    if args.allowed_hosts:
        return {h.strip().lower() for h in args.allowed_hosts.split(",") if h.strip()}
    hosts = set(LOOPBACK_HOSTS)
    if args.host not in ("0.0.0.0", "::", ""):
        hosts.add(args.host.lower())
    return hosts


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def security_check(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``(error, warning)`` about how the server would be exposed, before anything starts."""
    if args.api_key is not None and not args.api_key.strip():
        return ("error: the API key is empty (--api-key or PHOTON_TRACE_API_KEY): set a key, or unset it to "
                "serve without one"), None
    if args.api_key is None and not _is_loopback(args.host):
        return None, (f"warning: serving on {args.host} without an API key: anyone who can reach it can "
                      f"generate. Set PHOTON_TRACE_API_KEY; without a key only these Host names are answered: "
                      f"{', '.join(sorted(allowed_hosts(args)))} (--allowed-hosts)")
    return None, None


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

    settings = engine_settings(args)
    # Bad settings, a bad path, an unsupported or unreadable checkpoint, a Hub id that cannot be
    # had: one line and exit 2 now (the CLI's handler), not a traceback from the server's start-up.
    EngineConfig(**settings)
    load_host_side(args.model)
    app = create_app(lambda tracer: Engine(tracer=tracer, **settings), api_key=args.api_key,
                     model_name=args.served_model_name or args.model, otlp=args.otlp,
                     max_body_bytes=args.max_body_bytes, allowed_hosts=allowed_hosts(args))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m photon_trace.server")
    sub = parser.add_subparsers(dest="command")
    add_serve_parser(sub)
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)
