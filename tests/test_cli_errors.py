"""User errors reach the CLI user as one line and exit 2, runtime failures as one line and
exit 1, tracebacks only with --debug; a checkpoint that fails to load in the device worker is
reported as the checkpoint error it is; an engine whose device died closes cleanly."""
from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from safetensors.torch import load_file, save_file

from photon_trace.cli.dispatch import main
from photon_trace.engine.device.base import DeviceError
from photon_trace.engine.engine_config import EngineConfig
from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import tiny_engine
from test_checkpoint_errors import HF_CONFIG, write_folder

GEN = ["generate", "--backend", "cpu", "--max-tokens", "3"]


def one_line_error(capsys, argv, code: int) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_user_errors_are_one_line_and_exit_2(capsys, tmp_path):
    err = one_line_error(capsys, [*GEN, "--model", str(tmp_path / "nope"), "hi"], 2)
    assert err.startswith("photon-trace generate: error:") and "neither a preset" in err
    write_folder(tmp_path / "gpt2", HF_CONFIG)
    cfg = json.loads((tmp_path / "gpt2" / "config.json").read_text())
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({**cfg, "architectures": ["GPT2LMHeadModel"]}))
    assert "unsupported architecture 'GPT2LMHeadModel'" in one_line_error(
        capsys, [*GEN, "--model", str(tmp_path / "gpt2"), "hi"], 2)
    assert "exceeds the context of 8 tokens" in one_line_error(
        capsys, [*GEN, "--model", "tiny", "--max-context", "8", "a prompt longer than eight bytes"], 2)
    assert "temperature" in one_line_error(capsys, [*GEN, "--model", "tiny", "--temperature", "-1", "hi"], 2)
    err = one_line_error(capsys, ["serve", "--model", str(tmp_path / "nope")], 2)   # before any server starts
    assert err.startswith("photon-trace serve: error:")
    with pytest.raises(SystemExit) as info:   # a bad flag: argparse's usage and exit 2
        main([*GEN, "--depth", "3", "hi"])
    assert info.value.code == 2


def test_a_bad_tensor_found_by_the_worker_is_the_checkpoint_error(capsys, tmp_path):
    """config.json reads fine on the host; the worker finds the bad tensor while loading weights."""
    folder = tmp_path / "bad"
    write_folder(folder, HF_CONFIG)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["model.layers.1.mlp.down_proj.weight"] = torch.zeros(3, 3)
    save_file(tensors, str(folder / "model.safetensors"))
    before = ours_in_shm()
    err = one_line_error(capsys, [*GEN, "--model", str(folder), "hi"], 2)
    assert "tensor model.layers.1.mlp.down_proj.weight in model.safetensors has shape [3, 3]" in err
    assert "worker" not in err
    assert ours_in_shm() <= before, "shared memory left behind"


def ours_in_shm() -> set[str]:
    """This process's shared-memory files (other processes on the machine have their own)."""
    prefix = f"photon-trace-{os.getpid()}-"
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)} if os.path.isdir("/dev/shm") else set()


def test_runtime_failures_exit_1_and_debug_shows_the_traceback(capsys, monkeypatch):
    import photon_trace.engine.engine as engine_module

    def broken(**_):
        raise DeviceError("the device worker died (exit code -9)")

    monkeypatch.setattr(engine_module, "Engine", broken)
    err = one_line_error(capsys, [*GEN, "--model", "tiny", "hi"], 1)
    assert err == "photon-trace generate: failed (DeviceError): the device worker died (exit code -9)"
    with pytest.raises(DeviceError):
        main(["--debug", *GEN, "--model", "tiny", "hi"])
    with pytest.raises(DeviceError):
        main([*GEN, "--model", "tiny", "hi", "--debug"])


def test_dtype_aliases_are_accepted(capsys):
    assert EngineConfig(dtype="bf16").dtype == "bfloat16" and EngineConfig(dtype="fp16").dtype == "float16"
    assert EngineConfig(dtype="fp32").dtype == "float32"
    with pytest.raises(ValueError, match="bf16"):
        EngineConfig(dtype="int8")
    assert main([*GEN, "--model", "tiny", "--dtype", "bf16", "--request-seed", "1", "hi"]) == 0
    assert "tokens/s" in capsys.readouterr().err


def test_close_after_a_dead_device_raises_nothing_and_removes_shared_memory():
    eng = tiny_engine(2)
    paths = list(eng.device._paths)
    eng.add_request([1, 2, 3], SamplingParams(max_tokens=200, ignore_eos=True))
    eng.step()
    os.kill(eng.device._proc.pid, signal.SIGKILL)
    with pytest.raises(DeviceError):
        for _ in range(1000):
            eng.step()
    eng.close()          # the original DeviceError is what the caller saw; closing adds nothing
    eng.close()
    assert not any(os.path.exists(p) for p in paths)
