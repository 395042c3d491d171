"""The ``photon-trace`` command: a thin dispatcher; each subcommand's work is a function."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def cmd_generate(args: argparse.Namespace) -> int:
    """Generate from one or more prompts with the simple (blocking) generate; print text and tokens/s."""
    import torch

    from photon_trace.engine.loader import load_model
    from photon_trace.engine.simple_generate import SamplingParams, generate

    torch.set_num_threads(args.threads)
    loaded = load_model(args.model, dtype=args.dtype, device=args.device, seed=args.seed)
    sampling = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    result = generate(loaded.model, loaded.tokenizer, args.prompts, max_new_tokens=args.max_tokens,
                      sampling=sampling)
    for prompt, text, reason in zip(args.prompts, result.texts, result.finish_reasons):
        if len(args.prompts) > 1:
            print(f"--- {prompt!r} ({reason})")
        print(prompt + text)
    print(f"[{loaded.name}] {result.num_generated} tokens in {result.seconds:.3f} s: "
          f"{result.tokens_per_s:.1f} tokens/s (prefill {result.prefill_seconds * 1e3:.1f} ms)",
          file=sys.stderr)
    return 0


def add_generate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate text with the simple batch generate")
    p.add_argument("prompts", nargs="+", help="one or more prompts")
    p.add_argument("--model", default="tiny", help="preset (tiny, small, 1.5b) or a Hugging Face model folder")
    p.add_argument("--max-tokens", type=int, default=64, help="new tokens per prompt at most")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="sampling seed (and preset weight seed)")
    p.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16")
    p.add_argument("--device", default="cpu")
    # One intra-op thread, as the engine's device worker uses: on a small shared
    # machine more threads spin against each other and run many times slower.
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.set_defaults(func=cmd_generate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="photon-trace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_generate(sub)
    from photon_trace.bench import add_bench_parser
    from photon_trace.check_cli import add_check_parser
    add_bench_parser(sub)
    add_check_parser(sub)
    from photon_trace.server import add_serve_parser
    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
