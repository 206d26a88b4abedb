"""The device's own C++ hooks (core/native.py, csrc/hooks.cpp; docs/design/platform.md): the build, pinned
memory as CUDA has it, and every chip a device with a working guard (mock-n300 cases in a subprocess)."""
import ctypes
import os
import sys
import textwrap

import pytest
import torch

import ttnn_eager  # noqa: F401
from conftest import pcc, run_python
from ttnn_eager.core import native

DEV = "ttnn:0"


# ------------------------------------------------------------------------------------------------- the build
def test_the_hooks_are_the_built_library_keyed_by_torch_version():
    path = native.library_path()
    assert os.path.exists(path) and f"torch{torch.__version__}-" in os.path.basename(path)
    assert any(path == getattr(m, "_name", None) for m in [native.load()])
    assert torch.accelerator.current_accelerator() == torch.device("ttnn")
    assert torch.accelerator.device_count() == torch.ttnn.device_count() == 1  # the guard's count (mock n150)


def _import_torch_with(tmp_path, env: dict) -> tuple:
    """`import torch` (autoload) in a fresh process whose cache holds no built hooks yet."""
    cache = tmp_path / "cache"
    r = run_python("import torch; print(torch.randn(2).pin_memory().is_pinned())",
                   env={"TTNN_EAGER_CACHE": str(cache), **env})
    left = sorted(p.name for p in (cache / "native").glob("*")) if (cache / "native").exists() else []
    return r, left


def test_a_missing_compiler_stops_the_import_with_one_sentence(tmp_path):
    r, left = _import_torch_with(tmp_path, {"PATH": str(tmp_path), "CXX": ""})
    assert r.returncode != 0
    assert "ttnn_eager needs a C++ compiler once per torch version" in r.stderr and "apt-get install g++" in r.stderr
    assert left == []  # nothing half-built left to load


def test_a_failed_build_shows_the_compilers_message_and_installs_nothing(tmp_path):
    cxx = tmp_path / "bad-g++"
    cxx.write_text("#!/bin/sh\necho 'hooks.cpp:1: error: the compiler said no' >&2\nexit 1\n")
    cxx.chmod(0o755)
    r, left = _import_torch_with(tmp_path, {"CXX": str(cxx)})
    assert r.returncode != 0
    assert "the compiler said no" in r.stderr and "nothing was installed" in r.stderr and "Fix:" in r.stderr
    assert left == []


def test_a_fresh_cache_builds_the_hooks_at_first_import(tmp_path):
    r, left = _import_torch_with(tmp_path, {})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True"]
    assert len(left) == 1 and left[0].endswith(".so")


# ------------------------------------------------------------------------------------------------ pinned memory
def _pinned_blocks() -> int:
    return native.load().ttnn_eager_pinned_blocks()


def test_pin_memory_and_is_pinned_as_on_cuda():
    x = torch.randn(4, 37)
    assert not x.is_pinned()
    before = _pinned_blocks()
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu" and torch.equal(p, x) and p.data_ptr() != x.data_ptr()
    assert p.pin_memory() is p  # already pinned: itself
    assert p[1:, 3:].is_pinned()  # a view of pinned memory is pinned
    assert _pinned_blocks() == before + 1
    e = torch.empty(5, 3, pin_memory=True)
    assert e.is_pinned() and _pinned_blocks() == before + 2
    del p, e
    assert _pinned_blocks() == before  # freed through the allocator's deleter


def test_pinning_a_device_tensor_is_pytorchs_error():
    d = torch.randn(3).to(DEV)
    assert not d.is_pinned()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        d.pin_memory()


def test_non_blocking_copies_from_and_to_pinned_memory():
    x = torch.randn(6, 40)
    d = x.pin_memory().to(DEV, non_blocking=True)
    torch.ttnn.synchronize()
    assert d.device == torch.device(DEV) and torch.equal(d.cpu(), x.to(torch.bfloat16).float())
    back = torch.empty(6, 40, pin_memory=True)
    back.copy_(d * 2, non_blocking=True)
    torch.ttnn.synchronize()
    assert back.is_pinned() and torch.equal(back, (x.to(torch.bfloat16).float() * 2))


def test_dataloader_pin_memory_with_the_accelerators_default_device():
    data = torch.utils.data.TensorDataset(torch.randn(6, 3), torch.arange(6))
    batches = list(torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True))
    assert all(t.is_pinned() for b in batches for t in b)
    assert torch.equal(torch.cat([b[0] for b in batches]), data.tensors[0])


def _accelerate_run(device: str) -> list:
    """accelerate.Accelerator() with its defaults (ACCELERATE_TORCH_DEVICE names the device) and a pinned
    DataLoader: 4 steps of a small classifier."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, PartialState
    AcceleratorState._reset_state(reset_partial_state=True)
    PartialState._reset_state()
    os.environ["ACCELERATE_TORCH_DEVICE"] = device
    try:
        acc = Accelerator()
        assert acc.device == torch.device(device)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 3))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        data = torch.utils.data.TensorDataset(torch.randn(32, 12, generator=g), torch.randint(0, 3, (32,), generator=g))
        loader = torch.utils.data.DataLoader(data, batch_size=8, pin_memory=True)
        model, opt, loader = acc.prepare(model, opt, loader)
        losses = []
        for x, y in loader:
            assert x.device == torch.device(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return losses
    finally:
        del os.environ["ACCELERATE_TORCH_DEVICE"]
        AcceleratorState._reset_state(reset_partial_state=True)
        PartialState._reset_state()


def test_accelerate_with_its_defaults_and_pinned_batches_trains_like_the_cpu():
    ttnn_eager.reset_stats()
    losses = _accelerate_run(DEV)
    assert ttnn_eager.stats()["fallbacks"] == 0
    cpu = _accelerate_run("cpu")
    assert len(losses) == len(cpu) == 4 and losses[-1] < losses[0]
    for d, c in zip(losses, cpu):
        assert abs(d - c) <= 0.02 * c, (losses, cpu)


# ------------------------------------------------------------------------------------- every chip a device
def _n300(code: str, env: dict | None = None) -> str:
    r = run_python(textwrap.dedent(code), env={"TTNN_EAGER_DEVICE": "mock-n300", **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_current_device_is_per_thread_and_the_guards():
    out = _n300("""
        import threading, torch
        assert torch.ttnn.device_count() == torch.accelerator.device_count() == 2
        torch.ttnn.set_device(1)
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.ttnn.current_device())); t.start(); t.join()
        print(torch.ttnn.current_device(), torch.accelerator.current_device_index(), seen[0],
              torch.zeros(2, device="ttnn").device, torch.randn(2).to("ttnn").device)
        torch.accelerator.set_device_index(0)
        print(torch.ttnn.current_device())
        with torch.ttnn.device(1):
            print(torch.accelerator.current_device_index())
        for bad in (lambda: torch.zeros(2, device="ttnn:2"), lambda: torch.accelerator.set_device_index(2)):
            try:
                bad()
            except RuntimeError as e:
                print("error:", "2 ttnn device(s)" in str(e))
    """)
    assert out.split("\n")[:5] == ["1 1 0 ttnn:1 ttnn:1", "0", "1", "error: True", "error: True"]


def test_backward_on_ttnn_1_and_a_model_split_over_both_chips_trains():
    """Before the C++ guard: the autograd engine's `device_ready_queues_` INTERNAL ASSERT on ttnn:1."""
    out = _n300("""
        import torch, torch.nn as nn
        from ttnn_eager.tools.compare import pcc
        torch.manual_seed(0)
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        w = torch.randn(16, 4, requires_grad=True)
        w1 = w.detach().to("ttnn:1").requires_grad_()
        (x.to("ttnn:1") @ w1).square().sum().backward()
        (x @ w).square().sum().backward()
        print("grad", w1.grad.device, pcc(w1.grad.cpu(), w.grad) > 0.999)
        m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
        ref = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)); ref.load_state_dict(m.state_dict())
        m[0].to("ttnn:0"); m[2].to("ttnn:1")
        opt, ropt = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
        for step in range(4):
            out = m[2](m[1](m[0](x.to("ttnn:0"))).to("ttnn:1"))
            loss = nn.functional.cross_entropy(out, y.to("ttnn:1")); loss.backward(); opt.step(); opt.zero_grad()
            rl = nn.functional.cross_entropy(ref(x), y); rl.backward(); ropt.step(); ropt.zero_grad()
            print("loss", abs(loss.item() - rl.item()) <= 0.02 * rl.item(), loss.device)
        print("params", sorted({str(p.device) for p in m.parameters()}))
    """)
    lines = out.strip().split("\n")
    assert lines[0] == "grad ttnn:1 True"
    assert lines[1:5] == ["loss True ttnn:1"] * 4
    assert lines[5] == "params ['ttnn:0', 'ttnn:1']"


def test_device_map_auto_places_layers_on_both_chips_and_the_split_model_trains(tmp_path):
    """transformers' from_pretrained(device_map="auto") on the mock n300: accelerate's get_max_memory counts
    the ttnn devices' free memory (features/libraries/accelerate.py), so the layers go to ttnn:0 and ttnn:1
    (before: every parameter on the CPU); the split model generates the CPU's tokens and trains like it."""
    out = _n300(f"""
        import torch, transformers
        from ttnn_eager.tools.compare import pcc
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                       num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                       max_position_embeddings=64)
        m = transformers.LlamaForCausalLM(cfg).eval()
        m.save_pretrained({str(tmp_path)!r})
        dm = transformers.LlamaForCausalLM.from_pretrained({str(tmp_path)!r}, device_map="auto").eval()
        print(sorted(set(dm.hf_device_map.values())), sorted({{str(p.device) for p in dm.parameters()}}))
        ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            print(pcc(dm(ids.to("ttnn:0")).logits.cpu().float(), m(ids).logits) > 0.999)
        print(torch.equal(dm.generate(ids.to("ttnn:0"), max_new_tokens=5, do_sample=False).cpu(),
                          m.generate(ids, max_new_tokens=5, do_sample=False)))
        dm.train(); m.train()
        opt, ropt = torch.optim.SGD(dm.parameters(), lr=0.05), torch.optim.SGD(m.parameters(), lr=0.05)
        for step in range(3):
            loss = dm(ids.to("ttnn:0"), labels=ids.to("ttnn:0")).loss; loss.backward(); opt.step(); opt.zero_grad()
            ref = m(ids, labels=ids).loss; ref.backward(); ropt.step(); ropt.zero_grad()
            print("step", abs(loss.item() - ref.item()) <= 0.02 * ref.item())
    """)
    lines = out.strip().split("\n")[-6:]
    assert lines[0] == "[0, 1] ['ttnn:0', 'ttnn:1']"
    assert lines[1:3] == ["True", "True"]
    assert lines[3:] == ["step True"] * 3


def test_the_guides_several_chips_example_runs_on_the_mock_n300():
    import re
    guide = open(os.path.join(os.path.dirname(__file__), "..", "docs", "guide.md")).read()
    section = guide[guide.index("### Several chips in one process"):]
    block = re.search(r"```py\n(.*?)```", section, flags=re.S).group(1)
    out = _n300("import torch\n" + block)
    assert out.split("\n")[:2] == ["2 ttnn:1", "ttnn:1"]


def test_the_device_count_asked_through_the_callback_when_not_known_without_ttnn():
    """A card's chips are counted by ttnn (runtime.known_device_count is None): the C++ hooks ask Python once,
    at the first use that needs the count -- here torch.accelerator.device_count(), then a backward on ttnn:1."""
    out = _n300("""
        from ttnn_eager.device import runtime
        runtime.known_device_count = lambda: None      # as for a card
        import sys, torch, ttnn_eager
        print("ttnn imported at registration:", "ttnn" in sys.modules)
        print(torch.accelerator.device_count())
        w = torch.randn(4, 3).to("ttnn:1").requires_grad_()
        (torch.randn(2, 4).to("ttnn:1") @ w).sum().backward()
        print(w.grad.device)
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.split("\n")[:3] == ["ttnn imported at registration: False", "2", "ttnn:1"]


def test_dataloader_workers_with_pinned_batches():
    data = torch.utils.data.TensorDataset(torch.arange(24.0).reshape(12, 2))
    loader = torch.utils.data.DataLoader(data, batch_size=4, num_workers=2, pin_memory=True)
    batches = [b for (b,) in loader]
    assert all(b.is_pinned() for b in batches) and torch.equal(torch.cat(batches), data.tensors[0])


def test_a_torchrun_rank_opening_another_ranks_chip_is_warned(monkeypatch):
    from ttnn_eager.device import runtime
    monkeypatch.delenv("TTNN_EAGER_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.warns(UserWarning, match=r"LOCAL_RANK=1\) opens ttnn:0, the chip of local rank 0"):
        assert runtime.physical_index(0) == 0
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runtime.physical_index(1) == 1 and runtime.initial_device() == 1  # its own chip: no warning
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
        assert runtime.physical_index(0) == 0 and runtime.initial_device() == 0  # a single rank owns every chip
