"""Device memory left behind by torchvision models run one after another on ttnn:0 (docs/design/conv-leak.md).

    PYTHONPATH=src .venv/bin/python docs/design/conv_leak_loop.py [--clear] [--pcc] MODEL[@SIZE] ...

Each model (seeded random weights, batch-norm statistics randomised, batch 1, 3xSIZExSIZE, default 64) is
built, moved to ttnn:0, run once under no_grad and deleted; then the DRAM / L1 / L1_SMALL in use (ttnn's
allocator, all banks, minus what was in use before the first model), the live device Handles, and ttnn's
program-cache entries are printed. --clear calls torch.ttnn.empty_cache() after each deletion; --pcc also
runs the model on the CPU in float32 and prints the Pearson correlation of the logits.
"""
import argparse
import gc
import os
import time

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import torch  # noqa: E402
import torchvision  # noqa: E402

import ttnn_eager  # noqa: E402,F401
from ttnn_eager.device import api  # noqa: E402

KINDS = ("DRAM", "L1", "L1_SMALL")
MIB = 2.0 ** 20


def used() -> dict:
    return {k: api.memory_used(0, k) for k in KINDS}


def model(name: str, seed: int = 0):
    torch.manual_seed(seed)
    m = getattr(torchvision.models, name)().eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    del mod  # (the loop variable would keep the last module alive)
    return m


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--clear", action="store_true", help="torch.ttnn.empty_cache() after each model")
    p.add_argument("--pcc", action="store_true", help="compare the logits with float32 on the CPU")
    args = p.parse_args()
    api.device(0)
    gc.collect()
    base = used()
    for i, spec in enumerate(args.models, 1):
        name, _, size = spec.partition("@")
        size = int(size or 64)
        m = model(name)
        x = torch.randn(1, 3, size, size)
        start = time.perf_counter()
        try:
            with torch.no_grad():
                ref = m(x) if args.pcc else None
                m.to("ttnn:0")
                out = m(x.to("ttnn:0")).cpu()
            note = "" if ref is None else \
                f" pcc {float(torch.corrcoef(torch.stack([out.flatten().double(), ref.flatten().double()]))[0, 1]):.5f}"
        except Exception as e:  # (report the failure, e.g. out of memory, and go on)
            note = f" FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        del m
        out = ref = None
        gc.collect()
        if args.clear:
            torch.ttnn.empty_cache()
        now = used()
        handles = sum(1 for o in gc.get_objects() if type(o) is api.Handle and (o.tt is not None or o.forms))
        print(f"{i:3d} {spec:24s} " + " ".join(f"{k} {(now[k] - base[k]) / MIB:8.3f}" for k in KINDS) +
              f" MiB  handles {handles:5d}  programs {api.program_cache_entries(0):5d}"
              f"  {time.perf_counter() - start:5.1f} s{note}", flush=True)


if __name__ == "__main__":
    main()
