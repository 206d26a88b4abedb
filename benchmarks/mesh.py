"""Mesh mode (one process, a board's chips, TT-NN's collectives on the fabric) against the host path, and a decode
step on 1 chip vs tensor parallel over 2 and 8.

    python benchmarks/mesh.py [--iters N] [--max-mib N] [--host-path] [--json PATH]

Collectives: float32 tensors stored as bfloat16, shaped (32, S/64) so the TILE buffer holds S bytes, on the mock
n300 as a 1x2 mesh (a subprocess with TTNN_EAGER_DEVICE=mock-n300): per collective and size, the host time of one
call (median of --iters after a warm-up, shadow execution off: what the host does on a card too), the TT-NN ops
and the device<->host bytes it moved (0: no host in between). `--host-path` also runs benchmarks/distributed.py
(2 torchrun ranks, one chip each, gloo through the host) for the same sizes and prints its all_reduce beside.

Decode: a Llama-style model (2 layers, hidden 256, 8 heads and 8 KV heads, MLP 512, vocabulary 64), the plan of
docs/distributed.md (Colwise q/k/v/gate/up, Rowwise o/down) over 1, 2 (mock n300) and 8 (mock T3000 1x8) chips;
a prompt of 8 tokens prefilled, then one-token forwards with the dynamic cache timed with shadows off (median of
--iters): host time a token, TT-NN ops a token (each runs on every chip), collectives a token, weight bytes per
chip (the allocator's). On the mock the host time is ttnn's own C++ and ours; a card adds the device's time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CCL = ("all_reduce", "all_gather", "reduce_scatter", "mesh_partition")


def _child_collectives(iters: int, max_mib: int) -> dict:
    import torch
    import ttnn_eager
    from ttnn_eager import counters
    from ttnn_eager.device import api
    mesh = ttnn_eager.mesh.init((1, 2))
    group = mesh.get_group(0)
    rows = []
    size = 4096
    while size <= max_mib << 20:
        x = torch.randn(32, size // 64).to("ttnn:0")
        calls = {"all_reduce": lambda: group._ccl("all_reduce", x),
                 "all_gather": lambda: group._ccl("all_gather", x, dim=0),
                 "reduce_scatter": lambda: group._ccl("reduce_scatter", x, dim=0)}
        for name, call in calls.items():
            call()  # warm-up: the program is built
            times = []
            with api.shadows_off():
                for _ in range(iters):
                    before = ttnn_eager.stats()
                    t = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - t)
            after = ttnn_eager.stats()
            rows.append({"collective": name, "bytes": size, "host_ms": 1e3 * statistics.median(times),
                         "ttnn_ops": after["ttnn_ops"] - before["ttnn_ops"],
                         "pcie_bytes": (after["device_to_host"] - before["device_to_host"]) +
                         (after["host_to_device"] - before["host_to_device"])})
        size *= 4
    return {"collectives": rows}


def _child_decode(shape: tuple, iters: int) -> dict:
    import torch
    import transformers
    import ttnn_eager
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from ttnn_eager import counters
    from ttnn_eager.device import api
    transformers.logging.set_verbosity_error()
    chips = shape[0] * shape[1]
    mesh = ttnn_eager.mesh.init(shape) if chips > 1 else None
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                   num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=128,
                                   tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    base = api.memory_allocated(0)
    if mesh is not None:
        plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
                "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
                "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}
        for layer in model.model.layers:
            parallelize_module(layer, mesh, plan)
    model.to("ttnn:0")
    weights = api.memory_allocated(0) - base
    ids = torch.randint(0, 64, (1, 8)).to("ttnn:0")
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        cache, token = out.past_key_values, ids[:, -1:]
        model(input_ids=token, past_key_values=cache, use_cache=True)  # warm-up: the decode programs built
        times, ops, ccl = [], [], []
        with api.shadows_off():
            for _ in range(iters):
                before, by_op = ttnn_eager.stats(), counters.ttnn_by_op.copy()
                t = time.perf_counter()
                model(input_ids=token, past_key_values=cache, use_cache=True)
                times.append(time.perf_counter() - t)
                ops.append(ttnn_eager.stats()["ttnn_ops"] - before["ttnn_ops"])
                ccl.append(sum(counters.ttnn_by_op[k] - by_op[k] for k in CCL))
    return {"chips": chips, "host_ms_per_token": 1e3 * statistics.median(times),
            "ttnn_ops_per_token": statistics.median(ops), "collectives_per_token": statistics.median(ccl),
            "weight_bytes_per_chip": weights}


def _run_child(device: str, args: list) -> dict:
    env = dict(os.environ, TTNN_EAGER_DEVICE=device, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")]))
    env.pop("TTNN_EAGER_MESH", None)
    r = subprocess.run([sys.executable, __file__, "--child", *args], env=env, capture_output=True, text=True,
                       timeout=1800)
    if r.returncode:
        raise SystemExit(f"benchmark child {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _host_path(max_mib: int, iters: int) -> dict:
    """benchmarks/distributed.py's all_reduce on 2 torchrun ranks: size -> ms."""
    import tempfile
    out = os.path.join(tempfile.mkdtemp(), "host.json")
    r = subprocess.run([sys.executable, os.path.join(HERE, "distributed.py"), "--ranks", "2", "--max-mib",
                        str(max_mib), "--iters", str(iters), "--json", out], capture_output=True, text=True,
                       timeout=3600)
    if r.returncode or not os.path.exists(out):
        return {}
    with open(out) as f:
        data = json.load(f)
    return {int(row["bytes"]): row["us"] / 1e3 for row in data["all_reduce"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--max-mib", type=int, default=16)
    p.add_argument("--host-path", action="store_true")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)  # (its own --iters/--max-mib follow it)
    args = p.parse_args()
    if args.child:
        kind = args.child[0]
        if kind == "collectives":
            result = _child_collectives(args.iters, args.max_mib)
        else:
            result = _child_decode(tuple(int(x) for x in args.child[1].split("x")), args.iters)
        print(json.dumps(result))
        return
    coll = _run_child("mock-n300", ["collectives", "--iters", str(args.iters), "--max-mib",
                                    str(args.max_mib)])["collectives"]
    host = _host_path(args.max_mib, args.iters) if args.host_path else {}
    decode = [_run_child(dev, ["decode", shape, "--iters", str(args.iters)]) for dev, shape in
              (("mock-wormhole", "1x1"), ("mock-n300", "1x2"), ("mock-t3000", "1x8"))]
    print("Collectives, mesh 1x2 (mock n300), one process, on the fabric:")
    print(f"{'collective':<15} {'bytes':>10} {'host ms':>9} {'TT-NN ops':>10} {'PCIe transfers':>15}"
          + (f" {'host path ms':>13}" if host else ""))
    for r in coll:
        extra = f" {host.get(r['bytes'], float('nan')):>13.2f}" if host and r["collective"] == "all_reduce" else \
            (" " * 14 if host else "")
        print(f"{r['collective']:<15} {r['bytes']:>10,} {r['host_ms']:>9.3f} {r['ttnn_ops']:>10} "
              f"{r['pcie_bytes']:>15}{extra}")
    print("\nDecode step (Llama-style, 2 layers, hidden 256, 8/8 heads), dynamic cache, shadows off:")
    print(f"{'chips':>5} {'host ms/token':>14} {'TT-NN ops/token':>16} {'collectives/token':>18} "
          f"{'weight bytes/chip':>18}")
    for r in decode:
        print(f"{r['chips']:>5} {r['host_ms_per_token']:>14.2f} {r['ttnn_ops_per_token']:>16} "
              f"{r['collectives_per_token']:>18} {r['weight_bytes_per_chip']:>18,}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"collectives": coll, "host_path_all_reduce_ms": host, "decode": decode}, f, indent=1)


if __name__ == "__main__":
    main()
