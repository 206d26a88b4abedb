"""torch.distributed on ttnn: all_reduce latency and bus bandwidth, and a DDP step split compute vs communication.

    python benchmarks/distributed.py [--ranks 2] [--max-mib 16] [--iters 5] [--json PATH]

(--max-mib 256 reaches the issue's 256 MiB; on the mock a 16 MiB all_reduce already takes ~3 s, and a
256 MiB run was killed for memory on the shared 23 GB box: the default stops at 16 MiB.)

Launches itself under torchrun (`--nproc-per-node RANKS`, TTNN_EAGER_DEVICE=mock-n300: each rank sees its
chip as ttnn:0) and prints a table. Definitions are nccl-tests' (doc/PERFORMANCE.md): for a message of S
bytes taking t, algbw = S / t and busbw = algbw x 2(n-1)/n for all_reduce; t is the slowest rank's mean
over `--iters` calls after one warm-up. Messages are float32 tensors stored as float32 on the device, so S is
also the device buffer's size (tile aligned from 4 KiB = 32 x 32 x 4 up). Each all_reduce goes through the
ttnn group's host path (features/distributed): device -> host, PyTorch's gloo over loopback TCP, host ->
device. On the mock device the transfers are host memcpys, so the figures measure the host path's own cost
(staging, the agreement check, gloo), not PCIe: on a card add PCIe time for 2 S per rank.

DDP step: BertForSequenceClassification (2 layers, hidden 32) on each rank's half of a batch of 8; the
step's time with gradient sync against the same step under `no_sync()` (no communication); their difference
is the communication time; bytes moved per rank per step are the ttnn group's collective_d2h/h2d counters.
A mock T3000 (8 ranks) is not available: the mock rig describes n150, n300 and p150 only (device/rig/).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _launch(args) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = os.path.join(tempfile.mkdtemp(), "bench.json")
    env = dict(os.environ, TTNN_EAGER_DEVICE="mock-n300", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.ranks), "--master-addr",
           "127.0.0.1", "--master-port", str(port), os.path.abspath(__file__), "--rank-program", out,
           "--max-mib", str(args.max_mib), "--iters", str(args.iters)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        sys.exit(f"benchmark ranks failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    with open(out) as f:
        return json.load(f)


def _rank_program(args) -> None:
    import torch
    import torch.distributed as dist

    import ttnn_eager
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.ttnn.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(device_id=torch.device("ttnn:0"))
    ttnn_eager.configure(float32_storage="float32")
    res = {"ranks": world, "device": "mock-n300", "all_reduce": [], "ddp": {}}
    size = 4 * 1024
    while size <= args.max_mib * 1024 * 1024:
        x = torch.ones(size // 4).to("ttnn:0")
        dist.all_reduce(x)  # warm-up
        iters = args.iters if size <= 16 * 1024 * 1024 else max(2, args.iters // 2)
        dist.barrier()
        t = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.ttnn.synchronize()
        mine = torch.tensor([(time.perf_counter() - t) / iters])
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # a CPU tensor: gloo's, unstaged
        sec = float(mine)
        algbw = size / sec / 1e9
        res["all_reduce"].append({"bytes": size, "us": round(sec * 1e6, 1), "algbw_GBps": round(algbw, 4),
                                  "busbw_GBps": round(algbw * 2 * (world - 1) / world, 4), "iters": iters})
        del x
        size *= 4
    ttnn_eager.configure(float32_storage="bfloat16")
    res["ddp"] = _ddp(rank, world)
    if rank == 0:
        with open(args.rank_program, "w") as f:
            json.dump(res, f, indent=1)
    dist.destroy_process_group()
    os._exit(0)


def _ddp(rank: int, world: int) -> dict:
    import torch
    import torch.distributed as dist
    import transformers
    from torch.nn.parallel import DistributedDataParallel as DDP

    import ttnn_eager
    transformers.logging.set_verbosity_error()
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=32, num_labels=3,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = DDP(transformers.BertForSequenceClassification(cfg).eval().to("ttnn:0"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 64, (4, 12)).to("ttnn:0")
    labels = torch.randint(0, 3, (4,)).to("ttnn:0")
    grads = sum(p.numel() * p.element_size() for p in model.parameters())

    def step():
        opt.zero_grad()
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        torch.ttnn.synchronize()

    def timed(fn, n=3):
        fn()
        dist.barrier()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        mine = torch.tensor([(time.perf_counter() - t) / n])
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        return float(mine)

    def local_step():
        with model.no_sync():
            step()
    ttnn_eager.reset_stats()
    synced = timed(step)
    s = ttnn_eager.stats()
    local = timed(local_step)
    return {"step_ms": round(synced * 1e3, 1), "compute_ms": round(local * 1e3, 1),
            "communication_ms": round((synced - local) * 1e3, 1), "gradient_bytes": grads,
            "d2h_bytes_per_step": s["collective_d2h_bytes"] // 4, "h2d_bytes_per_step": s["collective_h2d_bytes"] // 4}


def _table(res: dict) -> str:
    lines = [f"all_reduce, {res['ranks']} ranks ({res['device']}, host path through gloo); nccl-tests definitions",
             f"{'size':>10} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}"]
    for r in res["all_reduce"]:
        b = r["bytes"]
        size = f"{b // 1024} KiB" if b < 1024 * 1024 else f"{b // (1024 * 1024)} MiB"
        lines.append(f"{size:>10} {r['us']:>12.1f} {r['algbw_GBps']:>13.3f} {r['busbw_GBps']:>13.3f}")
    d = res["ddp"]
    lines += ["", "DDP step (BertForSequenceClassification, 2 layers, hidden 32; 4 samples per rank)",
              f"  step {d['step_ms']} ms = compute {d['compute_ms']} ms (no_sync) + communication "
              f"{d['communication_ms']} ms",
              f"  gradients {d['gradient_bytes']} B; per rank per step: {d['d2h_bytes_per_step']} B device->host, "
              f"{d['h2d_bytes_per_step']} B host->device"]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--max-mib", type=int, default=16)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--rank-program", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_program:
        return _rank_program(args)
    if args.ranks != 2:
        sys.exit("only 2 ranks (the mock n300): the mock rig has no 8-chip (T3000) descriptor")
    res = _launch(args)
    print(_table(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
