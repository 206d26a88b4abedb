"""Soak benchmark (issue 23, item 8): one process runs many different models in a row on ttnn:0 and checks
that the device memory (DRAM, L1, L1_SMALL from ttnn's allocator) returns to its baseline after each, and
that the first model, run again at the end, gives the same output in the same time.

    PYTHONPATH=src .venv/bin/python benchmarks/soak.py                  # the default list (~100 models)
    PYTHONPATH=src .venv/bin/python benchmarks/soak.py --limit 20       # the first 20 of it
    PYTHONPATH=src .venv/bin/python benchmarks/soak.py tv:resnet18@64 hf:bert
    PYTHONPATH=src .venv/bin/python benchmarks/soak.py --keep-programs  # keep ttnn's program cache
    PYTHONPATH=src .venv/bin/python benchmarks/soak.py --weights tv:resnet18@64 tv:mobilenet_v2@64
                                                   # device DRAM of the weights vs their bfloat16 bytes
"""
import argparse
import json
import os
import sys
import warnings

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", help="tv:<torchvision name>@<size> or hf:<transformers model type>")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--keep-programs", action="store_true")
    p.add_argument("--weights", action="store_true")
    p.add_argument("--json", default=None, help="write the rows to this file")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    import torch  # noqa: F401
    import ttnn_eager  # noqa: F401
    from ttnn_eager.tools import soak
    entries = args.models or soak.default_models()
    entries = entries[:args.limit] if args.limit else entries
    mib = soak.MIB
    if args.weights:
        rows = []
        print("| model | bf16 parameters | device after .to | after a forward | ratio | PCC |")
        print("|---|---|---|---|---|---|")
        for e in entries:
            r = soak.weight_memory(e)
            rows.append(r)
            print(f"| {e} | {r['params_bf16_bytes'] / mib:.2f} MiB | {r['after_to'] / mib:.2f} MiB "
                  f"({r['after_to'] / r['params_bf16_bytes']:.2f}x) | {r['after_forward'] / mib:.2f} MiB | "
                  f"{r['after_forward'] / r['params_bf16_bytes']:.2f}x | {r['pcc']:.6f} |", flush=True)
    else:
        result = soak.soak(entries, keep_programs=args.keep_programs,
                           report=lambda r: print(soak.fmt(r), flush=True))
        rows = result["rows"]
        ran = [r for r in rows if "pcc" in r]
        leaks = [r["model"] for r in rows if r.get("leaked") or r.get("leaked_tensors")]
        print(f"\n{len(rows)} runs ({len(set(r['model'] for r in rows))} models), {len(ran)} ran on ttnn:0, "
              f"{len(rows) - len(ran)} errors; memory back at the baseline after "
              f"{len(rows) - len(leaks)} of {len(rows)} (not after: {leaks or 'none'})")
        print(f"the first model again at the end: same output {result['last_equals_first']}, time "
              f"{rows[-1].get('seconds', float('nan')):.2f} s vs {rows[0].get('seconds', float('nan')):.2f} s "
              f"(ratio {result['time_ratio']})")
        for r in rows:
            r.pop("output", None)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
