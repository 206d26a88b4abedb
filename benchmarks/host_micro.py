"""Warm host time per aten op for the ops bert-large runs most, at bert-large's shapes (b1 s128), side by side
across checkouts: each ttnn call answered at once by a stand-in (bench._instant_ttnn: only the backend's code,
PyTorch's dispatch and the Python of the op's call run), shadow execution off, no_grad, timed with this
thread's CPU time (the machine is shared), min over rounds of N calls and over the
processes (alternating between checkouts), divided by the aten ops counted.

    .venv/bin/python benchmarks/host_micro.py [--rounds 15] [--calls 100] [--processes 2] [--profile OP] [NAME=DIR ...]

NAME=DIR: another checkout (a git worktree: round 2 is `git worktree add --detach /tmp/r2 4e9da22`); this
checkout is "today". Each checkout runs in its own process. --profile OP: cProfile of OP's warm calls in each
checkout (the top functions by own time).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, sys, time
sys.path[:0] = [os.path.join(ROOT, "src"), os.path.join(ROOT, "benchmarks")]
os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")
import torch, ttnn_eager, bench
from ttnn_eager.device import api as device_api
F = torch.nn.functional
D = "ttnn:0"
torch.manual_seed(0)
h = torch.randn(1, 128, 1024).to(D)
w, b = torch.randn(1024, 1024).to(D), torch.randn(1024).to(D)
w4, b4 = torch.randn(4096, 1024).to(D), torch.randn(4096).to(D)
g, beta = torch.randn(1024).to(D), torch.randn(1024).to(D)
q = torch.randn(1, 16, 128, 64).to(D)
mask = torch.zeros(1, 1, 128, 128).to(D)
x4 = h.view(1, 128, 16, 64)
big = torch.randn(1, 128, 4096).to(D)
OPS = {
    "view [1,128,1024] -> [1,128,16,64]": lambda: h.view(1, 128, 16, 64),
    "transpose(1, 2)": lambda: x4.transpose(1, 2),
    "view + permute (a fresh view each time), per op": lambda: h.view(1, 128, 16, 64).permute(0, 2, 1, 3),
    "transpose + contiguous, per op": lambda: q.transpose(1, 2).contiguous(),
    "linear": lambda: F.linear(h, w, b),
    "linear 1024 -> 4096": lambda: F.linear(h, w4, b4),
    "add": lambda: h + h,
    "layer_norm": lambda: F.layer_norm(h, (1024,), g, beta, 1e-12),
    "gelu": lambda: F.gelu(big),
    "scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=mask),
}
rows = {}
with torch.no_grad(), device_api.shadows_off():
    for fn in OPS.values():
        fn()  # programs built
    with bench._instant_ttnn():
        if PROFILE:
            import cProfile, pstats
            fn = OPS[next(k for k in OPS if k.startswith(PROFILE))]
            for _ in range(50):
                fn()
            pr = cProfile.Profile(time.thread_time)
            pr.enable()
            for _ in range(CALLS * 20):
                fn()
            pr.disable()
            pstats.Stats(pr, stream=sys.stderr).sort_stats("tottime").print_stats(25)
        for name, fn in OPS.items():
            best = None
            for _ in range(ROUNDS):
                ttnn_eager.reset_stats()
                start = time.thread_time()
                for _ in range(CALLS):
                    fn()
                t = time.thread_time() - start
                n = ttnn_eager.stats()["aten_ops"]
                per = t / n
                best = per if best is None or per < best else best
            rows[name] = {"us": 1e6 * best, "aten_ops_per_call": n / CALLS}
print("RESULT", json.dumps(rows))
"""


def _run(root: str, rounds: int, calls: int, profile: str | None) -> dict:
    code = _CHILD.replace("ROOT", repr(root)).replace("ROUNDS", str(rounds)).replace("CALLS", str(calls)).replace(
        "PROFILE", repr(profile))
    env = dict(os.environ, PYTHONPATH="", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
    if profile:
        sys.stderr.write(r.stderr)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{root}: {r.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkouts", nargs="*", metavar="NAME=DIR")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--processes", type=int, default=2, help="processes per checkout, alternating")
    p.add_argument("--profile", metavar="OP", help="cProfile this op's warm calls (a prefix of its row name)")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    roots = {"today": HERE, **dict(c.split("=", 1) for c in args.checkouts)}
    runs = {}
    for i in range(args.processes):  # alternating, the minimum of each op over the processes
        for name, root in roots.items():
            if args.profile and not i:
                sys.stderr.write(f"=== {name} ({root})\n")
            r = _run(root, args.rounds, args.calls, args.profile if not i else None)
            runs[name] = r if name not in runs else {
                op: min(v, runs[name][op], key=lambda x: x["us"]) for op, v in r.items()}
    names = list(roots)
    print("| aten op (bert shapes) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for op in runs["today"]:
        cells = []
        for n in names:
            r = runs[n].get(op)
            cells.append("-" if r is None else f"{r['us']:.1f} us" + (
                f" ({r['aten_ops_per_call']:.0f} ops)" if r["aten_ops_per_call"] != 1 else ""))
        print(f"| {op} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
