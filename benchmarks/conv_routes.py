"""Grouped convolutions, route against route (issue 23, item 8): narrow groups as taps of a packed kernel
(lowerings/conv.py, the default) against TT-NN conv2d's groups= in chunks (conv._chunks, the previous route),
side by side in one process for each model: device DRAM after a forward against the parameters' bfloat16
bytes, TT-NN ops of a steady-state forward, the median host time of 3 forwards (mock device: that time is
mostly the shadow's arithmetic, not a card's), Pearson against float32 on the CPU.

    PYTHONPATH=src .venv/bin/python benchmarks/conv_routes.py                       # the default models at 64
    PYTHONPATH=src .venv/bin/python benchmarks/conv_routes.py tv:resnext50_32x4d@224 --json /tmp/routes.json
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

MODELS = ["tv:regnet_y_400mf@64", "tv:regnet_x_400mf@64", "tv:resnext50_32x4d@64"]


def measure(entry: str, route: str) -> dict:
    import torch
    import ttnn_eager
    from ttnn_eager.lowerings import conv
    from ttnn_eager.tools import soak
    taps = conv._grouped_taps
    if route == "chunks":
        conv._grouped_taps = lambda c_g, kk: False
    try:
        gc.collect()
        torch.ttnn.empty_cache()
        base = soak.memory()["DRAM"]
        model, inputs = soak.build(entry, 0)
        with torch.no_grad():
            ref = soak._main_output(model(**inputs)).float()
            bf16 = sum(p.numel() for p in model.parameters()) * 2
            model.to("ttnn:0")
            x = {k: v.to("ttnn:0") for k, v in inputs.items()}
            model(**x)
            times = []
            for _ in range(3):
                start = time.perf_counter()
                with ttnn_eager.record_ops() as rec:
                    out = soak._main_output(model(**x)).cpu().float()
                times.append(time.perf_counter() - start)
            del x
        gc.collect()
        torch.ttnn.empty_cache()
        used = soak.memory()["DRAM"] - base
        del model
        return {"model": entry, "route": route, "weights_ratio": used / bf16, "ttnn_ops": sum(rec.ttnn.values()),
                "conv2d": rec.ttnn.get("conv2d", 0), "median_s": statistics.median(times),
                "pcc": soak.pcc(out, ref)}
    finally:
        conv._grouped_taps = taps


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", default=MODELS, help="tv:<torchvision name>@<size>")
    p.add_argument("--json", default=None, help="write the rows to this file")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    rows = [measure(m, route) for m in args.models for route in ("taps", "chunks")]
    print("| model | route | weights / bf16 bytes | TT-NN ops | conv2d | median forward (mock) | PCC |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['route']} | {r['weights_ratio']:.3f}x | {r['ttnn_ops']} | {r['conv2d']} | "
              f"{r['median_s']:.2f} s | {r['pcc']:.6f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
