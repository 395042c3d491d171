"""``photon-trace generate``: text from prompts with the pipelined engine, and tokens/s."""
from __future__ import annotations

import argparse
import sys
import time

from photon_trace.cli.argtypes import HelpFormatter, at_least, positive_int
from photon_trace.cli.preflight import random_weights_note, refuse_gpu_only_on_cpu


def cmd_generate(args: argparse.Namespace) -> int:
    """Generate from one or more prompts with the pipelined engine; print text and tokens/s."""
    from photon_trace.engine.engine import Engine
    from photon_trace.engine.params import SamplingParams

    refuse_gpu_only_on_cpu(args.model, args.backend)
    # the sampling flags given are checked now, before the model loads (the engine fills in the rest)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.request_seed,
                    max_tokens=args.max_tokens)
    SamplingParams(**{k: v for k, v in sampling.items() if v is not None})
    note = random_weights_note(args.model)
    with Engine(model=args.model, backend=args.backend, dtype=args.dtype, depth=args.depth, seed=args.seed,
                max_context=args.max_context, device_threads=args.device_threads) as engine:
        # unset sampling flags take the model's generation_config.json defaults, as vLLM does
        params = engine.default_params(**sampling)
        t0 = time.perf_counter()
        outputs = engine.generate(args.prompts, params)
        seconds = time.perf_counter() - t0
        name, seed = engine.device.device_name, engine.config.seed
    for prompt, out in zip(args.prompts, outputs):
        if len(args.prompts) > 1:
            print(f"--- {prompt!r} ({out.finish_reason})")
        print(prompt + out.text)
    n = sum(len(o.token_ids) for o in outputs)
    print(f"[{args.model} on {name}] {n} tokens in {seconds:.3f} s: {n / seconds:.1f} tokens/s (engine seed {seed})",
          file=sys.stderr)
    if note:   # after the text, where the reader's eyes are
        print(note, file=sys.stderr)
    return 0


def add_generate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate text with the pipelined engine",
                       description="Generate text from one or more prompts with the pipelined engine, and print "
                                   "tokens/s. The presets (tiny, small, 1.5b) have random weights: their text is "
                                   "noise; give --model a checkpoint for words.",
                       formatter_class=HelpFormatter)
    p.add_argument("prompts", nargs="+", help="one or more prompts")
    p.add_argument("--model", default="tiny",
                   help="preset (tiny, small, 1.5b), a Hugging Face model folder or a Hub id (owner/name)")
    p.add_argument("--max-tokens", type=positive_int, default=64, help="new tokens per prompt at most")
    p.add_argument("--temperature", type=float, default=None,
                   help="0 = greedy (default: the model's generation_config.json, else greedy)")
    p.add_argument("--top-k", type=at_least(0), default=None,
                   help="default: the model's generation_config.json, else off")
    p.add_argument("--top-p", type=float, default=None, help="default: the model's generation_config.json, else 1")
    p.add_argument("--seed", type=at_least(0), default=None,
                   help="engine seed: each prompt's sampling seed is drawn from it (default: from the OS; printed)")
    p.add_argument("--request-seed", type=at_least(0), default=None,
                   help="the same sampling seed for every prompt")
    p.add_argument("--max-context", type=at_least(2), default=None,
                   help="prompt + output tokens (default: the model's)")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"),
                   help="cuda, cpu (the host-process device) or auto (cuda when there is a GPU)")
    p.add_argument("--dtype", default="auto", help="float32, bfloat16, float16 (fp32, bf16, fp16) or auto")
    p.add_argument("--depth", type=int, default=2, choices=(1, 2), help="2 pipelined, 1 blocking")
    p.add_argument("--device-threads", type=positive_int, default=1,
                   help="host-process device: intra-op threads (1 = a core of its own beside the scheduler)")
    p.set_defaults(func=cmd_generate)
