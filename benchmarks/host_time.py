"""Eager host time per aten op, side by side: this checkout against other checkouts (e.g. round 2's
wrapper-subclass tensor), each in its own process, alternating, with that checkout's own bench.host_overhead
(bert-large, seeded random weights, batch 1, seq 128, shadow execution off; ttnn's calls and the shadow timed
apart from "ours").

    .venv/bin/python benchmarks/host_time.py [--forwards 5] [--rounds 2] [--json PATH] [--shadow-off-only]
        [--cpu-time] NAME=DIR ...

NAME=DIR: a checkout (a git worktree: `git worktree add --detach /tmp/r2 4e9da22`); this checkout is "today".
Prints, per checkout, the medians over its rounds: host time per aten op (whole forward / aten ops), ours,
inside ttnn's calls, and the rest (PyTorch's dispatch into the backend, the model's Python).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, sys
sys.path[:0] = [os.path.join(ROOT, "src"), os.path.join(ROOT, "benchmarks")]
os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")
import time
import torch, transformers, ttnn_eager, bench
from ttnn_eager.tools import bert
if CPU_TIME:  # every clock of the checkout's HostTimer and forwards: this thread's CPU time (shadows off, all of
    bench.perf_counter = time.thread_time  # the host work runs on it), which other processes' load leaves alone
torch.manual_seed(0)
model = transformers.BertModel(bert.bert_large_config()).eval().to("ttnn:0")
ids, mask = bert.make_inputs(1, 128, model.config.vocab_size)
if SHADOW_OFF_ONLY:  # bench.host_overhead's first half (its HostTimer, forwards and figures), without the second
    import statistics
    from ttnn_eager.device import api as device_api
    d_ids, d_mask = ids.to("ttnn:0"), mask.to("ttnn:0")
    bench.bert_forward(model, d_ids, d_mask)
    timer, per_op, totals = bench.HostTimer().install(), [], []
    for _ in range(FORWARDS):
        timer.reset()
        ttnn_eager.reset_stats()
        with device_api.shadows_off():
            start = bench.perf_counter()
            bench.bert_forward(model, d_ids, d_mask)
            totals.append(bench.perf_counter() - start)
        n = ttnn_eager.stats()["aten_ops"]
        per_op.append(timer.overhead / n)
    timer.uninstall()
    r = {"host_overhead_us_per_aten_op": 1e6 * statistics.median(per_op),
         "host_overhead_us_samples": [round(1e6 * x, 2) for x in per_op],
         "forward_seconds_median": statistics.median(totals),
         "last_forward": {"aten_ops": n, "us_per_aten_op": {"in_ttnn_calls": 1e6 * timer.ttnn / n}}}
else:
    r = bench.host_overhead(model, ids, mask, FORWARDS)["shadow_off"]
print("RESULT", json.dumps(r))
"""


def _run(root: str, forwards: int, shadow_off_only: bool = False, cpu_time: bool = False) -> dict:
    code = _CHILD.replace("ROOT", repr(root)).replace("FORWARDS", str(forwards)).replace(
        "SHADOW_OFF_ONLY", str(shadow_off_only)).replace("CPU_TIME", str(cpu_time))
    env = dict(os.environ, PYTHONPATH="", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{root}: {r.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkouts", nargs="*", metavar="NAME=DIR")
    p.add_argument("--forwards", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--shadow-off-only", action="store_true",
                   help="skip the shadow-on forwards bench.host_overhead also runs (their figures are not reported)")
    p.add_argument("--cpu-time", action="store_true",
                   help="time with the main thread's CPU time instead of the wall clock (with --shadow-off-only: "
                        "on a loaded machine the wall clock counts other processes' turns)")
    args = p.parse_args(argv)
    roots = {"today": HERE, **dict(c.split("=", 1) for c in args.checkouts)}
    runs = {name: [] for name in roots}
    for _ in range(args.rounds):
        for name, root in roots.items():
            runs[name].append(_run(root, args.forwards, args.shadow_off_only, args.cpu_time))
    rows = {}
    for name, rs in runs.items():
        last = [r["last_forward"] for r in rs]
        n = statistics.median(x["aten_ops"] for x in last)
        wall = statistics.median(r["forward_seconds_median"] for r in rs) * 1e6 / n
        ours = statistics.median(r["host_overhead_us_per_aten_op"] for r in rs)
        ttnn = statistics.median(x["us_per_aten_op"]["in_ttnn_calls"] for x in last)
        rows[name] = {"aten_ops": n, "forward_ms": wall * n / 1e3, "host_us_per_op": wall, "ours_us": ours, "ttnn_us": ttnn,
                      "rest_us": wall - ours - ttnn, "samples_ours": [r["host_overhead_us_samples"] for r in rs]}
    print(f"| checkout | aten ops | forward | host time per aten op | ours | inside ttnn's calls | rest (PyTorch "
          f"dispatch, model Python) |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['aten_ops']:.0f} | {r['forward_ms']:.1f} ms | {r['host_us_per_op']:.1f} us | "
              f"{r['ours_us']:.1f} us | "
              f"{r['ttnn_us']:.1f} us | {r['rest_us']:.1f} us |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
