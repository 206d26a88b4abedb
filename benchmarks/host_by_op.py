"""Eager "ours" per aten op kind, side by side across checkouts: bert-large b1 s128, shadow execution off, each
checkout's own bench.HostTimer (dispatch time minus ttnn's calls, this thread's CPU time), attributed to the
top-level aten op; each checkout in its own process, alternating, the minimum per op over the processes.

    .venv/bin/python benchmarks/host_by_op.py [--processes 2] [--forwards 3] NAME=DIR ...

NAME=DIR: another checkout (round 2: `git worktree add --detach /tmp/r2 4e9da22`); this checkout is "today".
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child():
    import json, os, sys, time, statistics, collections
    ROOT, FORWARDS = sys.argv[2], int(sys.argv[3])
    sys.path[:0] = [os.path.join(ROOT, "src"), os.path.join(ROOT, "benchmarks")]
    os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")
    import torch, transformers, ttnn_eager, bench
    from ttnn_eager.tools import bert
    from ttnn_eager.device import api as device_api
    from ttnn_eager.core import dispatch
    bench.perf_counter = time.thread_time
    torch.manual_seed(0)
    model = transformers.BertModel(bert.bert_large_config()).eval().to("ttnn:0")
    ids, mask = bert.make_inputs(1, 128, model.config.vocab_size)
    d_ids, d_mask = ids.to("ttnn:0"), mask.to("ttnn:0")
    bench.bert_forward(model, d_ids, d_mask)
    timer = bench.HostTimer().install()
    inner = dispatch.dispatch
    acc = collections.defaultdict(lambda: [0, 0.0, 0.0])
    def rec(func, args, kwargs):
        if timer.depth:
            return inner(func, args, kwargs)
        o, t = timer.overhead, timer.ttnn
        try:
            return inner(func, args, kwargs)
        finally:
            a = acc[str(func)]
            a[0] += 1; a[1] += timer.overhead - o; a[2] += timer.ttnn - t
    dispatch.dispatch = rec
    tot = []
    for _ in range(FORWARDS):
        timer.reset(); ttnn_eager.reset_stats()
        with device_api.shadows_off():
            s = time.thread_time(); bench.bert_forward(model, d_ids, d_mask); tot.append(time.thread_time() - s)
    n = ttnn_eager.stats()["aten_ops"]
    out = {k: [v[0] / FORWARDS, 1e6 * v[1] / FORWARDS, 1e6 * v[2] / FORWARDS] for k, v in acc.items()}
    print("RESULT", json.dumps({"ops": out, "aten_ops": n, "forward_ms": 1e3 * statistics.median(tot)}))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkouts", nargs="*", metavar="NAME=DIR")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--forwards", type=int, default=3)
    p.add_argument("--rows", type=int, default=9)
    args = p.parse_args(argv)
    roots = {"today": HERE, **dict(c.split("=", 1) for c in args.checkouts)}
    runs = {n: [] for n in roots}
    for _ in range(args.processes):
        for name, root in roots.items():
            env = dict(os.environ, PYTHONPATH="", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", root, str(args.forwards)],
                               capture_output=True, text=True, env=env, cwd=root)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
            if not line:
                raise RuntimeError(f"{root}: {r.stderr[-3000:]}")
            runs[name].append(json.loads(line[0][len("RESULT "):]))
    first = runs["today"][0]["ops"]
    ops = sorted(first, key=lambda k: -first[k][1])[:args.rows]
    print("| aten op (count a forward) | " + " | ".join(roots) + " |")
    print("|---|" + "---|" * len(roots))
    for k in ops:
        cells = ["-" if k not in rs[0]["ops"] else "%.1f us" % min(r["ops"][k][1] / r["ops"][k][0] for r in rs)
                 for rs in runs.values()]
        print(f"| {k} ({first[k][0]:.0f}) | " + " | ".join(cells) + " |")
    cells = [", ".join("%.1f us" % (sum(v[1] for v in r["ops"].values()) / r["aten_ops"]) for r in rs)
             for rs in runs.values()]
    print("| the forward, ours per aten op (each process) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child()
    else:
        sys.exit(main())
