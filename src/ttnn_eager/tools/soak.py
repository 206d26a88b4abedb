"""Soak: one process runs many different models in a row on ttnn:0 (issue 23, item 8) -- torchvision
classifiers and small transformers models, each built with seeded weights, moved, run once, compared with
float32 PyTorch on the CPU and deleted -- and checks after each that the device gave back what the model
took: DRAM, L1 and L1_SMALL as ttnn's allocator reports them (torch.ttnn.memory_stats), and no device tensor
of the model still alive. At the end the first model runs again: its output must equal the first run's and
its time be the first run's (a process that runs its hundredth model like its first).

By default ttnn's program cache is emptied after each model (torch.ttnn.empty_cache()), so every model
starts from the same device state and each run builds its programs (the first and the last run of the same
model then do the same work); `keep_programs=True` keeps the cache, and then only the programs stay.

`benchmarks/soak.py` runs the long loop; tests/test_soak.py a short one.
"""
from __future__ import annotations

import copy
import gc
import time

import torch

from .compare import pcc

KINDS = ("DRAM", "L1", "L1_SMALL")
MIB = 2.0 ** 20

# torchvision classifiers that run at small input sizes (name, input size)
TORCHVISION = [
    ("resnet18", 64), ("resnet34", 64), ("resnet50", 64), ("resnet101", 64), ("wide_resnet50_2", 64),
    ("resnext50_32x4d", 64), ("mobilenet_v2", 64), ("mobilenet_v3_small", 64), ("mobilenet_v3_large", 64),
    ("mnasnet0_5", 64), ("mnasnet0_75", 64), ("mnasnet1_0", 64), ("mnasnet1_3", 64), ("squeezenet1_0", 64),
    ("squeezenet1_1", 64), ("shufflenet_v2_x0_5", 64), ("shufflenet_v2_x1_0", 64), ("shufflenet_v2_x1_5", 64),
    ("shufflenet_v2_x2_0", 64), ("regnet_x_400mf", 64), ("regnet_y_400mf", 64), ("regnet_x_800mf", 64),
    ("regnet_y_800mf", 64), ("regnet_x_1_6gf", 64), ("regnet_y_1_6gf", 64), ("densenet121", 64),
    ("convnext_tiny", 64), ("efficientnet_b0", 64), ("efficientnet_b1", 64), ("efficientnet_b2", 64),
    ("efficientnet_b3", 64), ("efficientnet_v2_s", 64), ("googlenet", 64), ("alexnet", 64),
    ("resnet18", 96), ("resnet50", 96), ("mobilenet_v2", 96), ("mobilenet_v3_large", 96), ("mnasnet1_0", 96),
    ("squeezenet1_1", 96), ("shufflenet_v2_x1_0", 96), ("regnet_y_400mf", 96), ("densenet121", 96),
    ("convnext_tiny", 96), ("efficientnet_b0", 96), ("resnext50_32x4d", 96), ("swin_t", 64),
    ("vit_tiny", 32),
]

# transformers model types built from their default config shrunk as issue 23's sweep does (hidden 64,
# 4 heads, 2 key-value heads, 2 layers, feed-forward 128, vocabulary 1024), input_ids (2, 24) with the
# second row's last 6 positions masked
TRANSFORMERS = [
    "bert", "roberta", "distilbert", "electra", "albert", "deberta", "deberta-v2", "mpnet", "xlm-roberta",
    "camembert", "squeezebert", "convbert", "funnel", "layoutlm", "megatron-bert", "nezha", "roformer",
    "ernie", "data2vec-text", "xmod", "mobilebert", "canine", "ibert", "lilt", "markuplm", "nystromformer",
    "yoso", "rembert", "bros", "esm", "gpt2", "gpt_neo", "gptj", "gpt_neox", "codegen", "bloom", "opt",
    "llama", "mistral", "qwen2", "qwen3", "phi", "phi3", "gemma", "gemma2", "olmo", "olmo2", "stablelm",
    "starcoder2", "granite", "cohere", "persimmon", "falcon", "biogpt", "xglm", "ctrl", "t5", "bart",
]
_SHRUNK = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
               intermediate_size=128, vocab_size=1024, head_dim=16, d_model=64, d_ff=128, num_layers=2,
               num_heads=4, d_kv=16, n_embd=64, n_head=4, n_layer=2, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
               ffn_dim=128, embedding_size=64, word_embed_proj_dim=64, max_position_embeddings=128)


def default_models() -> list:
    """The soak list: torchvision entries as "tv:<name>@<size>", transformers ones as "hf:<model type>",
    interleaved (a partial run covers both)."""
    tv, hf = [f"tv:{n}@{s}" for n, s in TORCHVISION], [f"hf:{t}" for t in TRANSFORMERS]
    out = []
    for i in range(max(len(tv), len(hf))):
        out += tv[i:i + 1] + hf[i:i + 1]
    return out


def _torchvision(name: str, seed: int):
    import torchvision
    torch.manual_seed(seed)
    if name == "vit_tiny":  # a VisionTransformer holding its cls_token and positions as parameters
        from torchvision.models.vision_transformer import VisionTransformer
        model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                                  mlp_dim=128, num_classes=10)
        torch.nn.init.normal_(model.heads.head.weight, std=0.1)  # (torchvision zero-initialises the head)
    else:
        model = getattr(torchvision.models, name)(weights=None)
    model.eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.modules():  # batch-norm statistics that are not the identity
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
    return model


def _transformers(model_type: str, seed: int):
    import transformers
    cfg = transformers.AutoConfig.for_model(model_type)
    for key, value in _SHRUNK.items():
        if hasattr(cfg, key):
            try:
                setattr(cfg, key, value)
            except AttributeError:  # (a derived property: Falcon's head_dim)
                pass
    if getattr(cfg, "num_key_value_heads", None) is not None and hasattr(cfg, "num_attention_heads"):
        cfg.num_key_value_heads = min(cfg.num_key_value_heads, cfg.num_attention_heads)
    if getattr(cfg, "rotary_dim", None):  # (GPT-J, CodeGen: at most the shrunk head size)
        cfg.rotary_dim = min(cfg.rotary_dim, _SHRUNK["head_dim"])
    vocab = getattr(cfg, "vocab_size", None)
    if vocab and isinstance(getattr(cfg, "pad_token_id", None), int) and cfg.pad_token_id >= vocab:
        cfg.pad_token_id = 0  # (Phi-3's 32000 beyond the shrunk vocabulary)
    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(cfg).eval()
    if hasattr(model, "set_default_language"):  # X-MOD's language adapters
        model.set_default_language(next(iter(cfg.languages)))
    return model


def build(entry: str, seed: int = 0):
    """(CPU model, its inputs as a dict of CPU tensors) for a soak entry."""
    source, _, name = entry.partition(":")
    if source == "tv":
        name, _, size = name.partition("@")
        size = int(size or 64)
        x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed))
        return _torchvision(name, seed), {"x": x}
    if source == "hf":
        model = _transformers(name, seed)
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(3, min(getattr(model.config, "vocab_size", 1000), 1000), (2, 24), generator=g)
        mask = torch.ones_like(ids)
        mask[1, -6:] = 0
        inputs = {"input_ids": ids, "attention_mask": mask}
        if model.config.is_encoder_decoder:
            inputs["decoder_input_ids"] = ids[:, :8]
        return model, inputs
    raise ValueError(f"unknown soak entry {entry!r} (tv:<torchvision name>@<size> or hf:<model type>)")


def _main_output(out) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    for key in ("last_hidden_state", "logits", "pooler_output"):
        value = getattr(out, key, None) if not isinstance(out, dict) else out.get(key)
        if value is not None:
            return value
    return out[0]


def memory() -> dict:
    """Bytes allocated per memory (DRAM, L1, L1_SMALL) on ttnn:0, from ttnn's allocator."""
    stats = torch.ttnn.memory_stats(0)
    return {k: stats[f"{k.lower()}.allocated_bytes"] for k in KINDS}


def live_device_tensors() -> int:
    """Device tensors (or prepared forms) still held by a live Handle."""
    from ..device import api
    return sum(1 for o in gc.get_objects() if type(o) is api.Handle and (o.tt is not None or o.forms))


def run_one(entry: str, keep_programs: bool = False, seed: int = 0) -> dict:
    """One soak step: build, CPU reference, move, one forward on ttnn:0 (timed), compare, delete; then the
    device memory left and the live device tensors."""
    import ttnn_eager
    row = {"model": entry}
    model = inputs = None
    try:
        model, inputs = build(entry, seed)
        with torch.no_grad():
            ref = _main_output(copy.deepcopy(model)(**inputs)).float()
    except Exception as e:  # noqa: BLE001 - a model the CPU cannot run is no device result: recorded
        row["error"] = f"cpu: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    before = ttnn_eager.stats()
    if "error" not in row:
        row["params_bf16_bytes"] = sum(p.numel() for p in model.parameters()) * 2
        try:
            start = time.perf_counter()
            with torch.no_grad():
                model.to("ttnn:0")
                row["after_to"] = memory()
                out = _main_output(model(**{k: v.to("ttnn:0") for k, v in inputs.items()})).cpu().float()
            row["seconds"] = time.perf_counter() - start
            row["after_forward"] = memory()
            row["pcc"] = pcc(out, ref) if out.shape == ref.shape else None
            row["shape_ok"] = out.shape == ref.shape
            row["output"] = out
        except Exception as e:  # noqa: BLE001 - recorded; the loop goes on (memory is still checked)
            row["error"] = f"ttnn: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    after = ttnn_eager.stats()
    row["fallbacks"] = after["fallbacks"] - before["fallbacks"]
    row["ttnn_ops"] = after["ttnn_ops"] - before["ttnn_ops"]
    del model, inputs
    out = None
    gc.collect()
    row["after_delete"] = memory()
    if not keep_programs:
        torch.ttnn.empty_cache()
        row["after_empty_cache"] = memory()
    row["live_device_tensors"] = live_device_tensors()
    return row


def soak(entries, keep_programs: bool = False, report=None, warmup: bool = True) -> dict:
    """Run `entries` in a row, then the first one again; per run its row (see run_one) and the memory
    baseline; `report(row)` is called after each run. The first entry also runs once before, unmeasured
    (the process's own first-use costs: imports, Python-side caches), so that its first and last runs are
    comparable."""
    if warmup:
        run_one(entries[0], keep_programs)
    gc.collect()
    torch.ttnn.empty_cache()
    baseline = memory()
    live = live_device_tensors()
    rows = []
    for entry in list(entries) + [entries[0]]:
        row = run_one(entry, keep_programs)
        left = row.get("after_delete" if keep_programs else "after_empty_cache", {})
        row["leaked"] = {k: left[k] - baseline[k] for k in KINDS if left.get(k, baseline[k]) != baseline[k]}
        row["leaked_tensors"] = row["live_device_tensors"] - live
        rows.append(row)
        if report is not None:
            report(row)
    first, last = rows[0], rows[-1]
    same = "output" in first and "output" in last and torch.equal(first["output"], last["output"])
    return {"baseline": baseline, "rows": rows, "last_equals_first": same,
            "time_ratio": (last["seconds"] / first["seconds"]) if "seconds" in first and "seconds" in last
            else None}


def fmt(row: dict) -> str:
    """One line per run."""
    mem = row.get("after_forward")
    parts = [f"{row['model']:<28}"]
    if "pcc" in row:
        parts.append(f"pcc {row['pcc']:.6f}" if row["pcc"] is not None else "SHAPE DIFFERS")
    if "seconds" in row:
        parts.append(f"{row['seconds']:6.1f} s")
    parts.append(f"fallbacks {row.get('fallbacks', '-')}")
    if mem and row.get("params_bf16_bytes"):
        parts.append(f"DRAM after forward {mem['DRAM'] / MIB:7.1f} MiB "
                     f"({mem['DRAM'] / row['params_bf16_bytes']:.2f}x bf16 params)")
    parts.append("leaked " + (", ".join(f"{k} {v:+,} B" for k, v in row["leaked"].items()) or "nothing")
                 if "leaked" in row else "")
    parts.append(f"tensors left {row.get('leaked_tensors', '-')}")
    if "error" in row:
        parts.append(f"ERROR {row['error']}")
    return "  ".join(p for p in parts if p)


def weight_memory(entry: str, seed: int = 0) -> dict:
    """Device DRAM a model's weights take against their bfloat16 bytes: after .to("ttnn:0"), after one
    forward (prepared forms made; the program cache emptied, so what is left is the model's), and the
    forward's Pearson against float32 on the CPU."""
    gc.collect()
    torch.ttnn.empty_cache()
    base = memory()["DRAM"]
    model, inputs = build(entry, seed)
    with torch.no_grad():
        ref = _main_output(copy.deepcopy(model)(**inputs)).float()
        bf16 = sum(p.numel() for p in model.parameters()) * 2
        model.to("ttnn:0")
        after_to = memory()["DRAM"] - base
        out = _main_output(model(**{k: v.to("ttnn:0") for k, v in inputs.items()})).cpu().float()
    gc.collect()
    torch.ttnn.empty_cache()
    after_forward = memory()["DRAM"] - base
    del model
    gc.collect()
    torch.ttnn.empty_cache()
    return {"model": entry, "params_bf16_bytes": bf16, "after_to": after_to, "after_forward": after_forward,
            "left_after_delete": memory()["DRAM"] - base, "pcc": pcc(out, ref)}
