"""Training on ttnn:0, measured once (docs/training.md): BertForSequenceClassification fine-tuned with AdamW,
beside the same run in float32 PyTorch on the CPU.

    .venv/bin/python benchmarks/training.py                  # bert-base: hidden 768, 12 layers, batch 8, seq 128, 20 steps
    .venv/bin/python benchmarks/training.py --config tiny    # hidden 128, 2 layers (seconds)
    .venv/bin/python benchmarks/training.py --fresh-batches --lr 2e-5   # a new batch each step
    .venv/bin/python benchmarks/training.py --json out.json

Per step on the device (strict mode: an op with no lowering raises): wall time, fallbacks, device-to-host
and host-to-device transfers (the batch is uploaded once, before the loop; loss.item() is the one read a step
asks for), device memory. Against the CPU: loss per step (relative error), every parameter's gradient after
step 1 (Pearson). Then memory over --memory-steps steps of the tiny model, and the loss with dropout on.
On the mock device wall time is the CPU stand-in's (shadow execution), not a card's.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from time import perf_counter

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import torch  # noqa: E402
import transformers  # noqa: E402

import ttnn_eager  # noqa: E402
from ttnn_eager.tools.compare import pcc  # noqa: E402

DEV = "ttnn:0"
CONFIGS = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 vocab_size=30522, max_position_embeddings=512),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                 vocab_size=512, max_position_embeddings=128),
}


def make_model(config: str, dropout: float = 0.0, seed: int = 0):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(**CONFIGS[config], hidden_dropout_prob=dropout,
                                  attention_probs_dropout_prob=dropout, num_labels=3)
    return transformers.BertForSequenceClassification(cfg)


def make_batch(config: str, batch: int, seq: int, seed: int = 1, steps: int | None = None):
    """One batch (ids [batch, seq], labels [batch]), or with `steps` one per step ([steps, batch, ...])."""
    g = torch.Generator().manual_seed(seed)
    vocab = CONFIGS[config]["vocab_size"]
    lead = (steps,) if steps else ()
    return (torch.randint(1, vocab, lead + (batch, seq), generator=g),
            torch.randint(0, 3, lead + (batch,), generator=g))


def run(model, device: str, ids, labels, steps: int, lr: float = 1e-4, foreach: bool = False):
    """Train; per step: loss, seconds, counter deltas, device memory; and the gradients after step 1."""
    model = model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, foreach=foreach)
    ids, labels = ids.to(device), labels.to(device)
    rows, grads = [], None
    fresh = ids.dim() == 3  # a batch per step (all uploaded before the loop)
    for step in range(steps):
        before, start = ttnn_eager.stats(), perf_counter()
        loss = model(input_ids=ids[step] if fresh else ids, labels=labels[step] if fresh else labels).loss
        loss.backward()
        if step == 0:
            mid = ttnn_eager.stats()
            grads = {n: p.grad.detach().cpu().float() for n, p in model.named_parameters() if p.grad is not None}
            after = ttnn_eager.stats()
            before = {k: before[k] + after[k] - mid[k] for k in before}  # the gradient downloads
        opt.step()
        opt.zero_grad()
        value = loss.item()
        rows.append({"loss": value, "seconds": perf_counter() - start,
                     **{k: ttnn_eager.stats()[k] - before[k] for k in ("fallbacks", "device_to_host",
                                                                      "host_to_device", "aten_ops", "ttnn_ops")},
                     "memory": torch.ttnn.memory_allocated() if device != "cpu" else 0})
    return rows, grads


def compare(config: str, batch: int, seq: int, steps: int, foreach: bool, lr: float, fresh: bool) -> dict:
    cpu_model = make_model(config)
    dev_model = copy.deepcopy(cpu_model)
    ids, labels = make_batch(config, batch, seq, steps=steps if fresh else None)
    start = perf_counter()
    cpu_rows, cpu_grads = run(cpu_model, "cpu", ids, labels, steps, lr=lr, foreach=foreach)
    cpu_seconds = perf_counter() - start
    del cpu_model
    with ttnn_eager.strict():
        dev_rows, dev_grads = run(dev_model, DEV, ids, labels, steps, lr=lr, foreach=foreach)
    scale = max(g.norm().item() for g in cpu_grads.values())
    pccs = {n: pcc(dev_grads[n], g) for n, g in cpu_grads.items() if g.norm() >= 1e-6 * scale}
    zero = {n: dev_grads[n].norm().item() / scale for n, g in cpu_grads.items() if g.norm() < 1e-6 * scale}
    rel = [abs(d["loss"] - c["loss"]) / abs(c["loss"]) for c, d in zip(cpu_rows, dev_rows)]
    worst = min(pccs, key=pccs.get)
    return {
        "config": config, "batch": batch, "seq": seq, "steps": steps, "foreach": foreach, "lr": lr,
        "fresh_batches": fresh,
        "cpu_losses": [r["loss"] for r in cpu_rows], "dev_losses": [r["loss"] for r in dev_rows],
        "max_rel_loss_error": max(rel), "grad_pcc_min": pccs[worst], "grad_pcc_min_param": worst,
        "params_with_grad": len(cpu_grads), "analytically_zero_grads": zero,
        "fallbacks": sum(r["fallbacks"] for r in dev_rows),
        "device_to_host_per_step": sorted({r["device_to_host"] for r in dev_rows[1:]}),
        "host_to_device_per_step": sorted({r["host_to_device"] for r in dev_rows[1:]}),
        "aten_ops_per_step": dev_rows[-1]["aten_ops"], "ttnn_ops_per_step": dev_rows[-1]["ttnn_ops"],
        "step_seconds_first": dev_rows[0]["seconds"],
        "step_seconds_median": sorted(r["seconds"] for r in dev_rows[1:])[len(dev_rows[1:]) // 2]
        if steps > 1 else dev_rows[0]["seconds"],
        "cpu_step_seconds": cpu_seconds / steps,
        "memory_after_step": [r["memory"] for r in dev_rows],
    }


def memory_over(steps: int) -> dict:
    """Device memory after step 2 and after the last step of the tiny model (dropout on, foreach AdamW)."""
    model = make_model("tiny", dropout=0.1)
    ids, labels = make_batch("tiny", 4, 32)
    rows, _ = run(model, DEV, ids, labels, steps, lr=1e-3, foreach=True)
    return {"steps": steps, "memory_step_2": rows[1]["memory"], "memory_last": rows[-1]["memory"],
            "losses_first_last": [rows[0]["loss"], rows[-1]["loss"]]}


def dropout_loss(steps: int = 20) -> dict:
    model = make_model("tiny", dropout=0.1)
    ids, labels = make_batch("tiny", 8, 32)
    rows, _ = run(model, DEV, ids, labels, steps, lr=1e-3)
    return {"steps": steps, "losses": [r["loss"] for r in rows]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="base")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--foreach", action="store_true", help="AdamW(foreach=True) (_foreach_* ops)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--fresh-batches", action="store_true",
                   help="a new batch each step (default: the same batch every step, which the model memorizes)")
    p.add_argument("--memory-steps", type=int, default=100)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    results = {"device": torch.ttnn.get_device_name()}
    results["fine_tuning"] = r = compare(args.config, args.batch, args.seq, args.steps, args.foreach, args.lr,
                                         args.fresh_batches)
    results["memory"] = m = memory_over(args.memory_steps)
    results["dropout"] = d = dropout_loss()
    print(f"BertForSequenceClassification ({args.config}), batch {args.batch}, seq {args.seq}, {args.steps} AdamW "
          f"steps (lr {args.lr}, {'a new batch each step' if args.fresh_batches else 'one batch'}), dropout off, "
          f"strict mode, {results['device']}")
    print(f"  fallbacks {r['fallbacks']}; per step: device->host {r['device_to_host_per_step']}, host->device "
          f"{r['host_to_device_per_step']}, {r['aten_ops_per_step']} aten ops, {r['ttnn_ops_per_step']} ttnn ops")
    print(f"  loss: max relative error vs CPU float32 {100 * r['max_rel_loss_error']:.2f}%; "
          f"CPU {r['cpu_losses'][0]:.4f} -> {r['cpu_losses'][-1]:.4f}, device {r['dev_losses'][0]:.4f} -> "
          f"{r['dev_losses'][-1]:.4f}")
    print(f"  gradients after step 1: min Pearson {r['grad_pcc_min']:.5f} ({r['grad_pcc_min_param']}) over "
          f"{r['params_with_grad']} parameters; analytically zero: {len(r['analytically_zero_grads'])}")
    print(f"  step time (mock, shadow on): first {r['step_seconds_first']:.2f} s, median {r['step_seconds_median']:.2f} s;"
          f" CPU float32 {r['cpu_step_seconds']:.2f} s")
    mem = r["memory_after_step"]
    print(f"  device memory after step 1 / 2 / last: {mem[0] / 2**20:.1f} / {mem[min(1, len(mem) - 1)] / 2**20:.1f} / "
          f"{mem[-1] / 2**20:.1f} MiB")
    print(f"memory over {m['steps']} steps (tiny, dropout, foreach): step 2 {m['memory_step_2']} B, last "
          f"{m['memory_last']} B")
    print(f"dropout 0.1 on (tiny, {d['steps']} steps): loss {d['losses'][0]:.4f} -> {d['losses'][-1]:.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
