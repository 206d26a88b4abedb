"""Where a model's accuracy goes: Pearson of every submodule's output against float32 on the CPU, on `ttnn:0`
and in bfloat16 on the CPU, in execution order (issue 23 item 9: CPM-Ant and xLSTM).

    PYTHONPATH=src .venv/bin/python benchmarks/module_accuracy.py cpmant [float32_storage=float32] [math_fidelity=HiFi4]

The model type is a key of transformers' MODEL_MAPPING_NAMES; its default config is shrunk as the zoo sweep of
issue 23 does (hidden 64, 4 heads, 2 key-value heads, 2 layers, feed-forward 128, vocabulary 1024; for xLSTM
embedding_dim 64, 2 blocks and qk_dim_factor 1.0, so that its state shapes agree), weights seeded, input_ids
(2, 24) with the second row's last 6 positions masked. Further arguments are `ttnn_eager.configure` settings.

    PYTHONPATH=src .venv/bin/python benchmarks/module_accuracy.py --zoo bit [settings]

--zoo builds the model and its inputs as the zoo sweep does (`zoo.build`: its shrinking, and images, audio or a
masking noise for models that take them), the floating inputs cast to bfloat16 for the CPU bfloat16 run
(docs/numerics.md: BiT, DAC).
"""
from __future__ import annotations

import copy
import sys
import warnings

import torch
import transformers

import ttnn_eager

SHRUNK = {"hidden_size": 64, "d_model": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
          "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 1024, "num_experts": 4,
          "num_local_experts": 4, "num_experts_per_tok": 2, "n_layer": 2, "n_head": 4, "n_embd": 64, "num_layers": 2,
          "num_heads": 4, "ffn_dim": 128, "d_ff": 128, "embedding_dim": 64, "num_blocks": 2}


def shrink(cfg):
    for key, value in SHRUNK.items():
        if isinstance(getattr(cfg, key, None), int):
            try:
                setattr(cfg, key, value)
            except (AttributeError, TypeError):  # a read-only property
                pass
    if hasattr(cfg, "qk_dim_factor"):
        cfg.qk_dim_factor = 1.0
    return cfg


def pcc(a, b) -> float:
    a, b = a.detach().double().flatten(), b.detach().double().flatten()
    if a.numel() < 2 or not a.std() or not b.std():
        return float("nan")  # (a constant output: zero-initialized layers)
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


def outputs(model, inputs) -> tuple:
    """({module name: its first floating output on the CPU}, names in execution order, the model's output)."""
    seen, order = {}, []

    def hook(name):
        def record(module, args, out):
            t = out[0] if isinstance(out, (tuple, list)) else getattr(out, "last_hidden_state", out)
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                if name not in seen:
                    order.append(name)
                seen[name] = t.detach().cpu().float()
        return record
    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]
    with torch.no_grad():
        out = model(**inputs)
    for h in handles:
        h.remove()
    out = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    return seen, order, out.detach().cpu().float()


def _zoo_model(name: str):
    """The zoo's model of `name` and the first of its input sets the CPU forward accepts (zoo.run_one's way)."""
    from ttnn_eager.tools import zoo
    model, candidates, _ = zoo.build(name)
    for inputs in (candidates if isinstance(candidates, list) else [candidates]):
        try:
            with torch.no_grad():
                model(**inputs)
            return model, inputs
        except Exception:  # noqa: BLE001 -- the next input set
            continue
    raise RuntimeError(f"{name}: the CPU forward takes none of the zoo's input sets")


def main(argv) -> None:
    warnings.simplefilter("ignore")
    from_zoo = argv[0] == "--zoo"
    argv = argv[1:] if from_zoo else argv
    mtype, settings = argv[0], dict(kv.split("=", 1) for kv in argv[1:])
    ttnn_eager.configure(**settings)
    if from_zoo:
        model, inputs = _zoo_model(mtype)
    else:
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
        torch.manual_seed(0)
        model = getattr(transformers, MODEL_MAPPING_NAMES[mtype])(shrink(transformers.AutoConfig.for_model(mtype))).eval()
        ids = torch.randint(0, 1000, (2, 24))
        mask = torch.ones(2, 24, dtype=torch.long)
        mask[1, -6:] = 0
        inputs = {"input_ids": ids, "attention_mask": mask}
    bf16_model = copy.deepcopy(model).to(torch.bfloat16)
    ref, order, ref_out = outputs(model, inputs)
    bf16, _, bf16_out = outputs(bf16_model, {k: v.to(torch.bfloat16) if v.is_floating_point() and k != "noise" else v
                                             for k, v in inputs.items()})
    model.to("ttnn:0")
    dev, _, dev_out = outputs(model, {k: v.to("ttnn:0") for k, v in inputs.items()})
    print(f"{mtype} {settings or 'default settings'}: Pearson of the output: ttnn:0 {pcc(dev_out, ref_out):.5f}, "
          f"CPU bfloat16 {pcc(bf16_out, ref_out):.5f}")
    for name in order:
        if name in dev and dev[name].shape == ref[name].shape:
            print(f"  {name:60s} ttnn:0 {pcc(dev[name], ref[name]):.5f}  CPU bfloat16 "
                  f"{pcc(bf16[name], ref[name]) if name in bf16 else float('nan'):.5f}  {tuple(ref[name].shape)}")


if __name__ == "__main__":
    main(sys.argv[1:])
