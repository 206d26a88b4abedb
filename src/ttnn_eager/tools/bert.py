"""The main job: BERT on `ttnn:0` against float32 PyTorch on the CPU (`ttnn-eager bert`).

Also the helpers the tests share: bert-large's config, seeded inputs with a padded sequence, Pearson
correlation on valid positions.
"""
from __future__ import annotations

import copy
import time

import torch

from .compare import pcc

BERT_LARGE = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                  vocab_size=30522, max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
                  layer_norm_eps=1e-12)


def bert_large_config(attn: str = "sdpa", **overrides):
    import transformers
    cfg = transformers.BertConfig(**{**BERT_LARGE, **overrides})
    cfg._attn_implementation = attn
    return cfg


def load_bert(name_or_path: str | None, attn: str = "sdpa", seed: int = 0, layers: int | None = None):
    """(model, where it came from). With no weights reachable: bert-large's config, seeded random weights.
    `layers`: keep only the first N encoder layers (faster runs at the same shapes)."""
    import transformers
    name = name_or_path or "bert-large-uncased"
    extra = {} if layers is None else {"num_hidden_layers": layers}
    few = "" if layers is None else f", first {layers} layers"
    try:
        model = transformers.BertModel.from_pretrained(name, attn_implementation=attn, local_files_only=True,
                                                       **extra)
        return model.eval(), f"{name} (pretrained weights{few})"
    except (OSError, ValueError) as e:
        if name_or_path not in (None, "bert-large-uncased"):
            raise RuntimeError(f"could not load {name!r}: {e}") from e
    torch.manual_seed(seed)
    model = transformers.BertModel(bert_large_config(attn, **extra)).eval()
    return model, f"bert-large-uncased config with seeded random weights (no cached weights found{few})"


def make_inputs(batch: int, seq: int, vocab_size: int, padded: int | None = None, seed: int = 0):
    """Token ids and an attention mask; the last `padded` positions of the last sequence are padding
    (default: a fifth of the sequence when batch > 1)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    if padded is None:
        padded = seq // 5 if batch > 1 else 0
    if padded:
        mask[-1, seq - padded:] = 0
    return ids, mask


def numerics_settings() -> dict:
    """The numerics behind the figures: the shadow's model (mock devices) and the compute-kernel configs
    (math_fidelity, fp32_dest_acc, math_approx: those of the matrix products; compute_configs: every kind)."""
    from .. import config
    from ..device import api as device_api
    from ..core import layout
    per_kind = {kind: layout.compute_settings(kind) for kind in layout.COMPUTE}
    return {"shadow_numerics": config.settings["shadow_numerics"] if device_api.RUNTIME.mock else "none (real device)",
            **per_kind["matmul"], "compute_configs": per_kind, "weight_dtype": config.settings["weight_dtype"]}


def grad_context(mode: str):
    return torch.inference_mode() if mode == "inference_mode" else torch.no_grad()


def compare(model, ids, mask, device: str = "ttnn:0", grad_mode: str = "no_grad", forwards: int = 2) -> dict:
    """Run `model` on the CPU in float32, then on `device`; return accuracy, counts and timings.

    The model is copied for the CPU reference, then moved to the device. Counts are those of the last of
    `forwards` device forwards (the first one also builds the device programs).
    """
    import ttnn_eager
    from ..device import api as device_api

    valid = mask.bool()
    with grad_context(grad_mode):
        ref = copy.deepcopy(model).float()(input_ids=ids, attention_mask=mask)
    model.to(device)
    d_ids, d_mask = ids.to(device), mask.to(device)
    seconds = []
    for _ in range(forwards):
        ttnn_eager.reset_stats()
        start = time.perf_counter()
        with grad_context(grad_mode):
            out = model(input_ids=d_ids, attention_mask=d_mask)
            hidden, pooled = out.last_hidden_state.cpu(), out.pooler_output.cpu()
        seconds.append(time.perf_counter() - start)
    stats = ttnn_eager.stats()
    return {
        "device": f"{device_api.device_name(0)}, arch {device_api.arch_name()}",
        **numerics_settings(),
        "pcc_last_hidden_state": pcc(hidden[valid], ref.last_hidden_state[valid]),
        "pcc_pooler_output": pcc(pooled, ref.pooler_output),
        "max_abs_err_last_hidden_state": float((hidden[valid] - ref.last_hidden_state[valid]).abs().max()),
        "max_abs_err_pooler_output": float((pooled - ref.pooler_output).abs().max()),
        **stats,
        "seconds": seconds[-1],
        "seconds_first_forward": seconds[0],
    }
