"""photon_trace against what a user would run instead: transformers' generate.

Same weights (one randomly initialised Llama folder saved with save_pretrained,
loaded by both), same ragged workload (64 requests, mixed prompt and output
lengths, greedy). transformers gets its usual path: left-padded batches through
``generate`` with max_new_tokens = the longest request in the batch; only the
requested tokens count. Prints tokens/s of each and the ratio; never fails on speed.
photon_trace runs twice by default: its device on one core (the split the
pipeline is built for, the scheduler on the other) and on both (as transformers).

    python benchmarks/bench_vs_transformers.py [--requests 64] [--hf-batch 16]
"""
from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import torch


def make_folder(path: Path, seed: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=2560, hidden_size=512, intermediate_size=1536, num_hidden_layers=8,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048,
                      tie_word_embeddings=False, bos_token_id=256, eos_token_id=257, pad_token_id=258)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():  # a wider spread than 0.02: greedy text that does not repeat
            p.normal_(0, 1.0 / p.shape[-1] ** 0.5) if p.dim() > 1 else None
    model.save_pretrained(path)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet, key=lambda c: ord(c)))}
    for name in ("<bos>", "<eos>", "<pad>"):
        vocab[name] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(path / "tokenizer.json"))


def workload(n: int, seed: int) -> list[tuple[list[int], int]]:
    rng = random.Random(seed)
    return [([rng.randrange(1, 250) for _ in range(rng.randint(8, 160))], rng.randint(16, 160))
            for _ in range(n)]


def run_photon(folder: Path, work, device_threads: int) -> tuple[float, int]:
    from photon_trace.engine.engine import Engine
    from photon_trace.engine.params import SamplingParams

    with Engine(model=str(folder), backend="cpu", dtype="float32", max_rows=64, max_seqs=128,
                kv_tokens=64 * 352, max_context=512, device_threads=device_threads) as eng:
        eng.generate([[1, 2, 3]], SamplingParams(max_tokens=4, ignore_eos=True))  # warm-up
        t0 = time.perf_counter()
        outs = eng.generate([p for p, _ in work], [SamplingParams(max_tokens=n, ignore_eos=True) for _, n in work])
        dt = time.perf_counter() - t0
    return dt, sum(len(o.token_ids) for o in outs)


def run_transformers(folder: Path, work, batch: int, threads: int) -> tuple[float, int]:
    from transformers import LlamaForCausalLM

    torch.set_num_threads(threads)
    model = LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    pad = model.config.pad_token_id
    useful = 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(work), batch):
            chunk = work[i:i + batch]
            width = max(len(p) for p, _ in chunk)
            ids = torch.tensor([[pad] * (width - len(p)) + p for p, _ in chunk])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in chunk])
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max(n for _, n in chunk),
                           min_new_tokens=max(n for _, n in chunk), do_sample=False, pad_token_id=pad)
            useful += sum(n for _, n in chunk)
    return time.perf_counter() - t0, useful


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--hf-batch", type=int, default=16, help="transformers batch size (left padding)")
    ap.add_argument("--hf-threads", type=int, default=2, help="torch threads for transformers (it gets the whole machine)")
    ap.add_argument("--device-threads", type=int, nargs="+", default=[1, 2],
                    help="photon_trace runs, one per count: 1 = the device on one core, the scheduler on the "
                         "other (the pipeline's split); 2 = the device on the whole machine, as transformers")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    work = workload(args.requests, args.seed)
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        make_folder(folder, args.seed)
        ours = {k: run_photon(folder, work, k) for k in args.device_threads}
        t_hf, n_hf = run_transformers(folder, work, args.hf_batch, args.hf_threads)
    assert all(n == n_hf == sum(n for _, n in work) for _, n in ours.values())
    hf = n_hf / t_hf
    print(f"{args.requests} requests, {n_hf} generated tokens, prompts 8-160, outputs 16-160, greedy")
    for k, (t, n) in ours.items():
        print(f"photon_trace (pipelined, cpu device, {k} thr):  {n / t:8.1f} tok/s  ({t:.1f} s)  "
              f"{n / t / hf:.2f}x transformers")
    print(f"transformers generate (batch {args.hf_batch}, {args.hf_threads} thr):  {hf:8.1f} tok/s  ({t_hf:.1f} s)")


if __name__ == "__main__":
    main()
