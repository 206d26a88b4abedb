"""Models with complex rotary embeddings on ttnn:0 (complex64 stored as real pairs: lowerings/complex.py), against
float32 PyTorch on the CPU: transformers' Llama-4 text model and DeepSeek-V2 (torch.polar, view_as_complex,
complex multiply, view_as_real), with issue 23's shrunk config (hidden 64, 4 heads, 2 key-value heads, 2 layers,
feed-forward 128, vocabulary 1024, 4 experts with 2 per token), seeded weights, input_ids (2, 24) with the
second row's last 6 positions masked, forward under no_grad.

    .venv/bin/python benchmarks/complex_models.py                       # both models, both storage policies
    .venv/bin/python benchmarks/complex_models.py --model llama4 --storage float32 --json out.json

Per run: Pearson and max |error| of the logits, fallbacks (by op), TT-NN ops, aten ops, wall time of the
device forward (the mock's: shadow execution on the CPU, not a card's).

DeepSeek-V2 runs with key-value heads = heads (as its published configs have): its attention (MLA) expands
keys to every head, and transformers' sdpa path repeats them again by heads / key-value heads on devices other
than the CPU and CUDA (repeat_kv instead of enable_gqa), so the generic 2 key-value heads give a shape error
on any such device, not only ttnn.
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import torch  # noqa: E402
import transformers  # noqa: E402

import ttnn_eager  # noqa: E402
from ttnn_eager import config  # noqa: E402

SHRUNK = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
              intermediate_size=128, intermediate_size_mlp=128, vocab_size=1024, num_local_experts=4,
              n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, n_shared_experts=1,
              first_k_dense_replace=1)
MODELS = {
    "llama4": ("Llama4TextConfig", dict(head_dim=16)),
    "deepseek_v2": ("DeepseekV2Config", dict(head_dim=8, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                                             kv_lora_rank=16, q_lora_rank=32, num_key_value_heads=4)),
}


def build(name: str, layers: int | None = None):
    cls, extra = MODELS[name]
    cfg = getattr(transformers, cls)()
    for k, v in {**SHRUNK, **extra}.items():
        if hasattr(cfg, k):
            setattr(cfg, k, v)
    if layers is not None:
        cfg.num_hidden_layers = layers
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def inputs(vocab: int = 1024):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (2, 24), generator=g)
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, -6:] = 0
    return ids, mask


def measure(name: str, storage: str = "bfloat16", layers: int | None = None) -> dict:
    previous = ttnn_eager.configure(float32_storage=storage)
    try:
        model = build(name, layers)
        ids, mask = inputs()
        with torch.no_grad():
            ref = model(input_ids=ids, attention_mask=mask).logits
            model.to("ttnn:0")
            with ttnn_eager.record_ops() as rec:
                start = time.perf_counter()
                out = model(input_ids=ids.to("ttnn:0"), attention_mask=mask.to("ttnn:0")).logits.cpu()
                seconds = time.perf_counter() - start
    finally:
        config.settings.update(previous)
    pearson = torch.corrcoef(torch.stack([ref.flatten().double(), out.flatten().double()]))[0, 1].item()
    return {"model": name, "storage": storage, "pearson": pearson, "max_error": (ref - out).abs().max().item(),
            "shape_ok": ref.shape == out.shape and ref.dtype == out.dtype, "fallbacks": dict(rec.fallbacks),
            "ttnn_ops": rec.stats["ttnn_ops"], "aten_ops": rec.stats["aten_ops"], "seconds": round(seconds, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), action="append")
    p.add_argument("--storage", choices=["bfloat16", "float32"], action="append")
    p.add_argument("--json")
    a = p.parse_args()
    rows = [measure(m, s) for m in (a.model or sorted(MODELS)) for s in (a.storage or ["bfloat16", "float32"])]
    for r in rows:
        print(f"{r['model']:<12} storage={r['storage']:<8} pearson={r['pearson']:.6f} max_error={r['max_error']:.3e} "
              f"fallbacks={r['fallbacks'] or 0} ttnn_ops={r['ttnn_ops']} aten_ops={r['aten_ops']} "
              f"time={r['seconds']}s shape/dtype ok={r['shape_ok']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
