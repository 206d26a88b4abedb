"""Vision models eager and compiled, side by side (issue 36, item 4): per model and batch, the TT-NN ops of a
forward by kind (conv2d and matmuls / permute / reshape / slice and concat / elementwise / other), the host time
of a forward with shadow execution off (the mock device's own cost: ttnn's C++ and our Python; on the mock the
shadows are the rest), peak device memory, device DRAM of the weights against their bfloat16 bytes (eager), and
Pearson against float32 on the CPU. Each model and mode in a subprocess of its own (a fresh device, Dynamo and
program cache).

    PYTHONPATH=src .venv/bin/python benchmarks/vision.py                              # resnet50 at 224, batch 1
    PYTHONPATH=src .venv/bin/python benchmarks/vision.py --models resnet50 mobilenet_v2 --size 96 --batch 1 16 \\
        --json /tmp/vision.json
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")


def one(model: str, size: int, batch: int, compiled: bool) -> dict:
    import warnings

    warnings.simplefilter("ignore")
    from ttnn_eager.tools import vision
    m = vision.load(model)
    x = vision.make_input(batch, size)
    r = vision.compare(m, x, compiled=compiled, weights=not compiled)
    return {"model": model, "size": size, "batch": batch, "mode": "compiled" if compiled else "eager",
            **{k: r[k] for k in ("ttnn_ops", "ttnn_ops_by_kind", "host_seconds_shadows_off", "peak_device_memory_mib",
                                 "pcc_logits", "fallbacks", "nchw_conversions")},
            "weights_over_bf16": r.get("weights_over_bf16")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50"])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--modes", nargs="+", default=["eager", "compiled"])
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # model size batch mode (the subprocess)
    args = ap.parse_args()
    if args.one:
        model, size, batch, mode = args.one
        print("RESULT " + json.dumps(one(model, int(size), int(batch), mode == "compiled")))
        return 0
    rows = []
    print("| model | batch | mode | TT-NN ops | conv2d/matmul | permute | reshape | slice/concat | elementwise | "
          "other | host s (shadows off) | peak MiB | weights / bf16 | PCC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        for batch in args.batch:
            for mode in args.modes:
                p = subprocess.run([sys.executable, __file__, "--one", model, str(args.size), str(batch), mode],
                                   capture_output=True, text=True)
                line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
                if not line:
                    print(f"| {model} | {batch} | {mode} | failed: {p.stderr.strip().splitlines()[-1:]} |")
                    continue
                r = json.loads(line[0][7:])
                rows.append(r)
                k = r["ttnn_ops_by_kind"]
                w = "-" if r["weights_over_bf16"] is None else f"{r['weights_over_bf16']:.3f}x"
                print(f"| {model}@{args.size} | {batch} | {mode} | {r['ttnn_ops']} | {k['conv2d']} | {k['permute']} | "
                      f"{k['reshape']} | {k['slice']} | {k['elementwise']} | {k['other']} | "
                      f"{r['host_seconds_shadows_off']:.3f} | {r['peak_device_memory_mib']:.1f} | {w} | "
                      f"{r['pcc_logits']:.6f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
