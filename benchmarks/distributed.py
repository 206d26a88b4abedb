"""torch.distributed on ttnn: all_reduce latency and bus bandwidth, and a DDP step split compute vs communication.

    python benchmarks/distributed.py [--ranks 2|8] [--max-mib N] [--iters N] [--flat] [--json PATH]

Launches itself under torchrun (`--nproc-per-node RANKS`) on a mock system -- 2 ranks: the mock n300
(TTNN_EAGER_DEVICE=mock-n300), 8 ranks: the mock T3000 (mock-t3000, four n300 cards) -- each rank on its
chip as ttnn:LOCAL_RANK, and prints a table. Definitions are nccl-tests' (doc/PERFORMANCE.md): for a message of S
bytes taking t, algbw = S / t and busbw = algbw x 2(n-1)/n for all_reduce; t is the slowest rank's mean over
`--iters` calls after one warm-up. Messages are float32 tensors stored as float32 on the device, shaped
(32, S/128) so that the TILE buffer is S bytes with no padding (`--flat`: 1-D tensors of S/4 elements, as
DDP's gradient buckets are; their TILE buffer is 32 S, and since layout.transfer_layout they cross PCIe
ROW_MAJOR, S bytes). The bytes each rank moved per call (the ttnn group's collective_d2h/h2d counters) are
printed beside the time. Each all_reduce goes through the ttnn group's host path (features/distributed):
device -> host, PyTorch's gloo over loopback TCP, host -> device. On the mock device the transfers are host
memcpys, so the figures measure the host path's own cost (staging, the agreement check, gloo, ttnn's host
conversions), not PCIe: on a card add PCIe time for 2 S per rank.

Sizes: 4 KiB up to --max-mib (default 256 MiB for 2 ranks, 64 MiB for 8: each rank holds the message's
device value, its host copy and ttnn's host conversion at once, ~1 GB of its own besides, and the shared
box has ~21 GB; the largest rank's peak RSS is printed). On 2 cores 8 ranks are slow: --iters defaults to 3
(2 for 8 ranks), halved from 16 MiB up.

DDP step: BertForSequenceClassification (2 layers, hidden 32) on each rank's 4 samples; the step's time with
gradient sync against the same step under `no_sync()` (no communication); their difference is the
communication time; bytes moved per rank per step are the ttnn group's collective_d2h/h2d counters.
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


BOARDS = {2: "mock-n300", 8: "mock-t3000"}


def _launch(args) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = os.path.join(tempfile.mkdtemp(), "bench.json")
    env = dict(os.environ, TTNN_EAGER_DEVICE=BOARDS[args.ranks], OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")]))
    env.pop("TTNN_EAGER_VISIBLE_DEVICES", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.ranks), "--master-addr",
           "127.0.0.1", "--master-port", str(port), os.path.abspath(__file__), "--rank-program", out,
           "--max-mib", str(args.max_mib), "--iters", str(args.iters)] + (["--flat"] if args.flat else []) \
        + (["--no-ddp"] if args.no_ddp else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        sys.exit(f"benchmark ranks failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    with open(out) as f:
        return json.load(f)


def _max(value: float) -> float:
    """The largest of the ranks' values (a CPU tensor: gloo's, unstaged)."""
    import torch
    import torch.distributed as dist
    t = torch.tensor([float(value)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _rank_program(args) -> None:
    import resource

    import torch
    import torch.distributed as dist

    import ttnn_eager
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("ttnn", int(os.environ["LOCAL_RANK"]))  # the rank's chip (CUDA's idiom)
    torch.ttnn.set_device(dev)
    dist.init_process_group(device_id=dev)
    ttnn_eager.configure(float32_storage="float32")
    res = {"ranks": world, "device": os.environ["TTNN_EAGER_DEVICE"], "flat": args.flat, "all_reduce": [],
           "ddp": {}}
    size = 4 * 1024
    while size <= args.max_mib * 1024 * 1024:
        n = size // 4
        x = torch.ones(n if args.flat else (32, n // 32)).to(dev)
        dist.all_reduce(x)  # warm-up
        iters = args.iters if size < 16 * 1024 * 1024 else max(1, args.iters // 2)
        dist.barrier()
        ttnn_eager.reset_stats()
        t = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.ttnn.synchronize()
        sec = _max((time.perf_counter() - t) / iters)
        s = ttnn_eager.stats()
        algbw = size / sec / 1e9
        res["all_reduce"].append({"bytes": size, "us": round(sec * 1e6, 1), "algbw_GBps": round(algbw, 4),
                                  "busbw_GBps": round(algbw * 2 * (world - 1) / world, 4), "iters": iters,
                                  "d2h_bytes": s["collective_d2h_bytes"] // iters,
                                  "h2d_bytes": s["collective_h2d_bytes"] // iters})
        del x
        size *= 4
    res["peak_rss_mb"] = round(_max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    ttnn_eager.configure(float32_storage="bfloat16")
    if not args.no_ddp:
        res["ddp"] = _ddp(rank, world, dev)
    if rank == 0:
        with open(args.rank_program, "w") as f:
            json.dump(res, f, indent=1)
    dist.destroy_process_group()
    os._exit(0)


def _ddp(rank: int, world: int, dev) -> dict:
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
    model = DDP(transformers.BertForSequenceClassification(cfg).eval().to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 64, (4, 12)).to(dev)
    labels = torch.randint(0, 3, (4,)).to(dev)
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


def _size(b: int) -> str:
    return f"{b // 1024} KiB" if b < 1024 * 1024 else f"{b // (1024 * 1024)} MiB"


def _table(res: dict) -> str:
    shape = "1-D" if res.get("flat") else "(32, S/128)"
    lines = [f"all_reduce, {res['ranks']} ranks ({res['device']}, host path through gloo), float32 {shape} "
             f"messages; nccl-tests definitions",
             f"{'size':>10} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13} {'PCIe B down/up per rank':>24}"]
    for r in res["all_reduce"]:
        lines.append(f"{_size(r['bytes']):>10} {r['us']:>12.1f} {r['algbw_GBps']:>13.4f} {r['busbw_GBps']:>13.4f} "
                     f"{r['d2h_bytes']:>12} {r['h2d_bytes']:>11}")
    lines.append(f"  largest rank's peak RSS: {res['peak_rss_mb']} MB")
    d = res["ddp"]
    if d:
        lines += ["", "DDP step (BertForSequenceClassification, 2 layers, hidden 32; 4 samples per rank)",
                  f"  step {d['step_ms']} ms = compute {d['compute_ms']} ms (no_sync) + communication "
                  f"{d['communication_ms']} ms",
                  f"  gradients {d['gradient_bytes']} B; per rank per step: {d['d2h_bytes_per_step']} B "
                  f"device->host, {d['h2d_bytes_per_step']} B host->device"]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2, choices=sorted(BOARDS))
    p.add_argument("--max-mib", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--flat", action="store_true", help="1-D messages (as DDP's buckets) instead of (32, S/128)")
    p.add_argument("--no-ddp", action="store_true", help="skip the DDP step")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--rank-program", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.max_mib is None:
        args.max_mib = 256 if args.ranks == 2 else 64
    if args.iters is None:
        args.iters = 3 if args.ranks == 2 else 2
    if args.rank_program:
        return _rank_program(args)
    res = _launch(args)
    print(_table(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
