"""Real checkpoint folders through the whole engine behave as transformers: text in, tokens out.

Each folder (helpers/hf_folders.py: Llama 3, Qwen2 and Mistral tokenizers with random
weights; Mistral's sliding window is 8) is run from text prompts at both pipelining
depths and compared with transformers' tokenizer-then-generate; logprobs with
transformers' log_softmax; Hub ids resolve offline from a cache in the Hub's layout.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

from photon_trace.engine.engine import Engine  # noqa: E402
from photon_trace.engine.params import SamplingParams  # noqa: E402
from helpers.engine_helpers import unpinned  # noqa: E402
from helpers.hf_folders import model_folder  # noqa: E402

PROMPTS = ["Hello, world! How are", "Émile a mangé 3 crêpes 🥞", "def add(x, y):\n"]
NEW_TOKENS = 64
SMALL = dict(backend="cpu", max_rows=8, max_step_tokens=64, max_seqs=16, kv_tokens=4096, page_size=16)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """kind -> (kind, folder, transformers model, AutoTokenizer), each built on first use."""
    built = {}

    def get(kind: str):
        if kind not in built:
            folder = model_folder(kind, tmp_path_factory.mktemp(kind))
            hf = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
            built[kind] = kind, folder, hf, transformers.AutoTokenizer.from_pretrained(str(folder))
        return built[kind]
    return get


@pytest.fixture(scope="module")
def engines(checkpoints):
    """(kind, depth) -> an engine on that checkpoint folder, built on first use and kept for
    the module (the logprobs test reads the Llama 3 pipelined one the greedy test built);
    unpinned, so that while they live the module's other processes keep every core."""
    built = {}

    def get(kind: str, depth: int) -> Engine:
        if (kind, depth) not in built:
            _, folder, _, _ = checkpoints(kind)
            with unpinned():
                built[kind, depth] = Engine(model=str(folder), depth=depth, **SMALL)
        return built[kind, depth]
    yield get
    for engine in built.values():
        engine.close()


def hf_greedy(hf, ids: list[int]) -> list[int]:
    hf.generation_config.eos_token_id = None   # run the full length, as ignore_eos does
    x = torch.tensor([ids])
    with torch.no_grad():   # an explicit mask: any id may stand for padding, and "!" is id 0 here
        out = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=NEW_TOKENS, do_sample=False,
                          pad_token_id=0)
    return out[0, len(ids):].tolist()


@pytest.mark.parametrize("kind", ["llama3", "qwen2", "mistral"])
def test_greedy_continuations_from_text_equal_transformers_at_both_depths(checkpoints, engines, kind):
    _, folder, hf, tok = checkpoints(kind)
    expect = [hf_greedy(hf, tok(p).input_ids) for p in PROMPTS]
    assert all(len(set(e)) >= 10 for e in expect), f"{kind}: reference continuations are not diverse"
    for depth in (1, 2):
        outs = engines(kind, depth).generate(PROMPTS, SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True))
        for prompt, out, e in zip(PROMPTS, outs, expect):
            assert out.prompt_token_ids == tok(prompt).input_ids
            assert out.token_ids == e, f"{kind}, depth {depth}: {prompt!r} diverged"


def test_logprobs_equal_transformers_log_softmax(checkpoints, engines):
    _, folder, hf, tok = checkpoints("llama3")
    ids = tok(PROMPTS[0]).input_ids
    out = engines("llama3", 2).generate([PROMPTS[0]], SamplingParams(max_tokens=12, ignore_eos=True, logprobs=20))[0]
    with torch.no_grad():
        logits = hf(torch.tensor([ids + out.token_ids])).logits[0]
    expect = torch.log_softmax(logits[len(ids) - 1:-1].float(), dim=-1)
    worst = max(abs(lp.logprob - expect[i, lp.token_id].item()) for i, lp in enumerate(out.logprobs))
    assert worst < 1e-4, f"chosen-token logprob off by {worst:.2e}"
    for i, lp in enumerate(out.logprobs):
        assert len(lp.top) == 20 and lp.top[0][0] == out.token_ids[i]   # greedy: the best is the chosen one
        assert max(abs(v - expect[i, t].item()) for t, v in lp.top) < 1e-4


def _hub_cache(root, repo_id: str, folder) -> None:
    """``folder``'s files in huggingface_hub's cache layout: blobs, a snapshot of links, refs/main."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / "hub" / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for i, path in enumerate(sorted(p for p in folder.iterdir() if p.is_file())):
        blob = repo / "blobs" / f"{i:040x}"
        shutil.copyfile(path, blob)
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))


def test_hub_ids_resolve_offline_through_the_cache(checkpoints, tmp_path):
    _, folder, _, _ = checkpoints("qwen2")
    _hub_cache(tmp_path, "acme/tiny-qwen", folder)
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    cmd = [sys.executable, "-m", "photon_trace.cli", "generate", "--backend", "cpu", "--max-tokens", "4",
           "--model", "acme/tiny-qwen", "Hello"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "[acme/tiny-qwen on " in done.stderr
    missing = subprocess.run([*cmd[:-2], "acme/not-cached", "Hello"], env=env, capture_output=True, text=True,
                             timeout=300)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().count("\n") == 0 and "acme/not-cached" in missing.stderr
    assert "not in the Hugging Face cache" in missing.stderr and "HF_HUB_OFFLINE" in missing.stderr


def test_generation_config_defaults_apply_to_unset_fields(checkpoints):
    _, folder, _, _ = checkpoints("mistral")
    gen = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**gen, "temperature": 0.6, "top_p": 0.8,
                                                               "top_k": 20, "do_sample": True}))
    try:
        from photon_trace.engine.model.host_side import load_host_side

        host = load_host_side(str(folder))
        assert host.sampling_defaults == {"temperature": 0.6, "top_p": 0.8, "top_k": 20}
        p = SamplingParams.with_defaults(host.sampling_defaults, temperature=None, top_k=5, max_tokens=3)
        assert (p.temperature, p.top_p, p.top_k, p.max_tokens) == (0.6, 0.8, 5, 3)
        assert SamplingParams.with_defaults(host.sampling_defaults, temperature=0.0).greedy
    finally:
        (folder / "generation_config.json").write_text(json.dumps(gen))
