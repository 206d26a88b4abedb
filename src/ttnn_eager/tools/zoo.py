"""The zoo: every model type of the installed transformers (and every torchvision model) on `ttnn:0` against
float32 PyTorch on the CPU -- `ttnn-eager zoo`, docs/zoo.json and docs/zoo.md (issue 23).

Each model type is built from its default config shrunk generically (`shrink`: hidden 64, 4 heads, 2
key-value heads, head size 16, 2 layers, feed-forward 128, vocabulary 1024, 4 experts with 2 per token),
with seeded weights, and run forward under `no_grad` on input_ids (2, 24) whose second row has its last 6
positions masked, first on the CPU in float32, then on `ttnn:0`. A result (`compare`): shapes and dtypes of
every output tensor equal to the CPU's, Pearson and max error of the float outputs (valid positions),
the CPU fallbacks (which aten ops), aten and TT-NN op counts, the error text.

A model can kill its process (a TT_FATAL, a SIGSEGV) or hang, so the models run one after another in a
worker subprocess (`python -m ttnn_eager.tools.zoo --worker`: one entry name a line in, one JSON line
out) that the parent restarts after a crash or a timeout, recording the crash (signal or exit code, the
last line of its stderr) as that model's result. Results are written to the JSON after every model, so an
interrupted sweep resumes where it stopped.

    entries(source)          the names a sweep runs ("transformers", "torchvision")
    build(name)              (CPU model, inputs, class name)
    compare(model, inputs)   one forward on the CPU and on ttnn:0, compared (compiled=True: compiled too,
                             compare_compiled: `ttnn-eager zoo --compile`, docs/zoo_compile.json)
    run_one(name)            the worker's unit: build + compare, errors as results
    sweep(names, path, ...)  the crash- and timeout-proof driver, resumable JSON
    classify(result)         its failure class (CLASSES)
    zoo_md(data...)          docs/zoo.md
"""
from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import json
import math
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

import torch

from .models import pcc

# issue 23's shrunk defaults
SHRINK = dict(hidden=64, heads=4, kv_heads=2, head_dim=16, layers=2, ffn=128, vocab=1024, experts=4, per_token=2)
BATCH, SEQ, MASKED = 2, 24, 6      # input_ids (2, 24), the second row's last 6 positions masked
FLOAT64 = "float32"                # configure(float64=...) of the device forward: models that build float64
                                   # tables on the input's device (RT-DETR's position embedding) run (NOTES)
VISION_SIZE = 96                   # torchvision: 2x3x96x96 (or the model's native size when 96 fails on the CPU)
PAIR_SIZE = 32                     # keypoint matchers: pairs of 32x32 images (see _transformers_inputs)

_H = ("hidden_size", "d_model", "n_embd", "embed_dim", "word_embed_proj_dim", "embedding_size", "n_embed",
      "out_hidden_size", "text_hidden_size", "audio_hidden_size", "vision_hidden_size")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads")
_KV = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
_LAYERS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
           "num_decoder_layers", "num_encoder_layers")
_FFN = ("intermediate_size", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "ffn_hidden_size",
        "moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size")
_HEAD_DIM = ("head_dim", "d_kv", "attention_head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
             "kv_channels")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_experts_total")
_PER_TOKEN = ("num_experts_per_tok", "moe_topk", "num_selected_experts", "moe_k", "top_k_experts",
              "num_experts_per_token")
_LORA = ("kv_lora_rank", "q_lora_rank")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def shrink(d: dict, mha: bool = False, repair: bool = False) -> dict:
    """A config dict (`PretrainedConfig.to_dict()`) shrunk to issue 23's sizes, sub-configs (nested dicts
    with a model_type) too. Per-layer lists (layer_types, ...) as long as the layer count keep their first
    2 entries. Only keys the config has are set, and only integers (None stays None: "not used").
    mha: key-value heads = heads (for configs that refuse grouped-query attention). repair: also the rules
    of _consistent (the second try of a model whose plain shrunk config fails on the CPU: run_one)."""
    s = dict(SHRINK, kv_heads=SHRINK["heads"]) if mha else SHRINK
    out = dict(d)
    n_layers = {out[k] for k in _LAYERS if _is_int(out.get(k))}
    for keys, value in ((_H, s["hidden"]), (_HEADS, s["heads"]), (_KV, s["kv_heads"]), (_LAYERS, s["layers"]),
                        (_FFN, s["ffn"]), (_HEAD_DIM, s["head_dim"]), (_EXPERTS, s["experts"]),
                        (_PER_TOKEN, s["per_token"]), (_LORA, 32), (("vocab_size",), s["vocab"])):
        for k in keys:
            if _is_int(out.get(k)) and out[k] > 0:
                out[k] = min(out[k], value) if keys in (_EXPERTS, _PER_TOKEN, _KV) else value
    heads = [d[k] for k in _HEADS if _is_int(d.get(k))]
    for k in _KV:  # multi-head latent attention stays multi-head (its key-value heads = heads)
        if _is_int(d.get(k)) and heads and d[k] == heads[0] and "kv_lora_rank" in d:
            out[k] = s["heads"]
    if _is_int(out.get("qk_head_dim")) and _is_int(out.get("qk_nope_head_dim")) and _is_int(out.get("qk_rope_head_dim")):
        out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    for k in ("n_group", "topk_group", "num_expert_groups", "num_expert_group"):  # DeepSeek-style group
        if _is_int(out.get(k)):                                                   # routing over 4 experts
            out[k] = 1
    _towers(out)
    for k, v in list(out.items()):
        if isinstance(v, dict) and v and n_layers and all(str(x).isdigit() for x in v):  # per-layer settings
            out[k] = {x: y for x, y in v.items() if int(x) < s["layers"]}
        elif isinstance(v, dict) and ("model_type" in v or k.endswith("_config") or k in ("encoder", "decoder")):
            out[k] = shrink(v, mha, repair)
        elif isinstance(v, dict) and isinstance(v.get("mrope_section"), list):  # rotary sections: rotary size / 2
            rotary = s["head_dim"] * v.get("partial_rotary_factor", out.get("partial_rotary_factor", 1.0) or 1.0)
            out[k] = dict(v, mrope_section=_split(int(rotary) // 2, v["mrope_section"]))
        elif isinstance(v, list) and n_layers and len(v) in n_layers and len(v) > s["layers"]:
            out[k] = _first_layers(v, s["layers"])
        elif k in ("out_features", "out_indices") and v is not None and n_layers:
            out[k] = None  # stages named after the original depth: the default (the last stage)
    if repair:
        _consistent(d, out, s)
    vocab = out.get("vocab_size")
    used = set()
    if repair and vocab is None and isinstance(out.get("text_config"), dict) and isinstance(out.get(
            "vision_config"), dict) and "pixel_shuffle_ratio" in out["vision_config"]:  # (Llama-4's tokens: its
        text = out["text_config"]                                                    # text model's vocabulary)
        vocab = text.get("vocab_size")
        used = {x for k, v in text.items() if k.endswith(("token_id", "token_index", "token_ids"))
                for x in (v if isinstance(v, list) else [v]) if _is_int(x)}
    if _is_int(vocab):  # special tokens inside the shrunk vocabulary
        spare = iter(x for x in range(vocab - 1, 0, -1) if x not in used)
        for k, v in list(out.items()):
            if k.endswith(("token_id", "token_index", "token_ids")):
                if _is_int(v) and v >= vocab:
                    out[k] = next(spare)
                elif isinstance(v, list) and any(_is_int(x) and x >= vocab for x in v):
                    out[k] = [next(spare) if _is_int(x) and x >= vocab else x for x in v]
    return out


def _consistent(d: dict, out: dict, s: dict) -> None:
    """Sizes that must agree with the shrunk ones (issue 23's rules beyond the plain keys; `d` the original,
    `out` the shrunk dict, changed in place):
    - per-stage head lists (Swin's num_heads [3, 6, 12, 24]) scale with the hidden size (stage widths / heads
      stay integral);
    - `rotary_dim` at most the head size; `d_head` (XLNet) the head size;
    - Mamba-2 heads: heads x head size = expand x hidden (mamba2's num_heads; Bamba's mamba_n_heads,
      mamba_d_head; Zamba's n_mamba_heads);
    - a None expert count per token (DeepSeek-V2's default) where experts are routed: the shrunk one;
    - whisper-style audio encoders (num_mel_bins beside max_source_positions): 64 positions (the input is
      then 128 mel frames: _audio_inputs);
    - video clips: num_frames / frames_per_clip at most 4 (the input's frames: _more_inputs);
    - cross-attention sizes named as the shrunk ones with a cross_ prefix (Dia's decoder: cross_hidden_size
      1024, the encoder's width, cross_num_attention_heads, cross_num_key_value_heads 16, cross_head_dim 128):
      the shrunk hidden size, heads, key-value heads, head size;
    - layer hook lists beyond the 2 layers (DepthPro's intermediate_hook_ids [11, 5], one per
      intermediate_feature_dims entry): as many hooks, on the last layers in the list's order ([1, 0]);
    - a forecast horizon left None (prediction_length, which Autoformer, Informer and the Time Series
      Transformer require; their context_length follows it): 8 steps;
    - a pixel-shuffle vision adapter (pixel_shuffle_ratio r beside projector_input_dim: Llama-4, whose adapter
      MLP takes the patches shuffled to hidden / r^2 channels as its intermediate_size, maps them to
      projector_input_dim, then projector_output_dim x projector_output_dim, and whose multimodal projector
      takes vision_output_dim: the released checkpoints have them equal, 4096, the default config 4096 and
      7680): intermediate_size hidden / r^2, the three projector widths the shrunk hidden size;
    - (shrink itself, in repair mode) the special tokens of a composite config without a vocabulary of its
      own whose image tokens are counted from the patch grid (a vision_config with pixel_shuffle_ratio:
      _patch_tokens; Llama-4's image_token_index 200092 at the top, its vocabulary in text_config) inside
      the text config's shrunk vocabulary, on ids the text config's own special tokens do not use;
    - text positions at least the input's 24 (OWL-ViT: 16); X-MOD's default_language its first language;
    - a backbone's stage_names as many as its stages kept (Swin in MaskFormer); Mimi's upsample_groups the
      hidden size (a depthwise convolution);
    - a head_dim / key-value head count left None that the model reads as is (Hunyuan, Ministral; Nemotron):
      the shrunk head size / key-value heads; an attention head_dim
      beside multi-head-latent sizes (dots3's sliding-window layers): qk_nope + qk_rope;
    - Reformer's axial position embedding halves: half the hidden size each;
    - a timm ViT (a timm_wrapper config whose architecture is vit_*, PE Video's vit_pe_core_large_patch14_336)
      without model_args: the shrunk width, depth and heads as timm's embed_dim, depth, num_heads, images of 224;
    - hybrids that place their attention layers by period / offset (Jamba, Zamba: 8 / 4) or by index
      (Bamba) or by a repeating pattern (RecurrentGemma's recurrent, recurrent, attention): the 2 layers
      one of each kind (a cache of linear-attention layers alone has no sequence length);
    - layers that reuse earlier layers' key-value caches (Gemma3n's num_kv_shared_layers, 15 of 35): none,
      since 2 layers cannot hold a producer of every layer type before the sharing ones;
    - expert counts left None in a mixture-of-experts config (dots1's n_routed_experts, n_shared_experts,
      num_experts_per_tok; DiffusionGemma's num_experts, top_k_experts, moe_intermediate_size): the shrunk
      ones (1 shared expert);
    - dense leading layers (first_k_dense_replace, num_dense_layers) at most layers - 1, so a MoE layer stays;
    - a head_dim that was qk_nope + qk_rope (multi-head latent attention: Mistral4, whose rotary part is
      head_dim x partial_rotary_factor) stays their sum;
    - an attention sub-config without rope_theta (DBRX's attn_config, read by its attention): the parent's
      rope_parameters' rope_theta; its clip_qkv left None (DBRX clamps always): 8, DBRX's released value;
    - a token indexer's sizes left None (Qwen4-Exp's indexer_n_heads, indexer_kv_heads, indexer_head_dim,
      indexer_budget, indexer_compress_ratio): heads, 1 key head, the head size, 16 tokens in blocks of 4;
    - a sliding_window left None beside per-layer kinds (Step3p7 builds its sliding mask always): 16;
    - per-layer-type rope_parameters left empty (Cohere Compass indexes them by layer kind): default rotary
      (theta 10000) for each kind;
    - layer index lists beyond the 2 layers (Zamba2's hybrid_layer_ids [6, 12, ...]): the indices of the
      kept layers of the list's kind (the layers_block_type entries other than the first's kind);
    - hybrid layers placed by period that share one attention block, tied from the first hybrid layer to the
      others (Zamba): every layer hybrid (each keeps its Mamba layer), so the tie has a target;
    - aliases of the hidden size and the layer count that shrink does not know: an adapter / hidden_size_* /
      *embed*_dim / *model*_dim integer equal to a hidden size of the original config or of any of its
      sub-configs (xLSTM's embedding_dim, dots3's adapter_in_dim and adapter_out_dim, BLT's
      hidden_size_global: another part's width), a *blocks integer equal to the layer count (xLSTM's
      num_blocks): the shrunk ones;
    - codebook token ranges in the vocabulary (Apertus 1.5's image_token_offset + vision codebook_size =
      audio_token_offset, its end within the vocabulary): codebooks of at most 128, the ranges laid end to end
      in their order at the end of the shrunk vocabulary;
      and width factors (*_dim_factor) that made multiples of 64 of the original hidden size but not of the
      shrunk one: 1.0 (xLSTM's config rounds qk_dim = hidden x qk_dim_factor up to 64, its layers do not);
    - a pooler_output_size equal to a width of the config (ViT's 768 in a VisionTextDualEncoder): the shrunk
      hidden size; a *_dim equal to a config's width plus one of its direct sub-configs' (X-Codec2's and
      NeuCodec's quantization_dim 2048 = 1024 acoustic + 1024 semantic features, concatenated): twice the
      shrunk hidden size."""
    if _is_int(out.get("num_kv_shared_layers")):
        out["num_kv_shared_layers"] = 0
    if out.get("model_type") == "timm_wrapper" and out.get("model_args") is None and str(
            out.get("architecture")).startswith("vit_"):  # (PE Video's ViT-L: timm's own sizes, not the config's)
        out["model_args"] = dict(embed_dim=s["hidden"], depth=s["layers"], num_heads=s["heads"], img_size=224)
    for k, v in list(out.items()):  # (Sapiens2: num_key_value_heads_per_layer [16, 8], num_key_value_attention_heads)
        if k.startswith("num_key_value") and k not in _KV and (_is_int(v) or isinstance(v, list) and v and all(
                _is_int(x) for x in v)):
            out[k] = [min(x, s["kv_heads"]) for x in v] if isinstance(v, list) else min(v, s["kv_heads"])
    _consistent_moe(d, out, s)
    widths = [k for k in _H if _is_int(d.get(k)) and d[k] > 0]
    base = min(widths, key=lambda k: d[k], default=None)  # the first stage's width (Swin: embed_dim)
    new_hidden = next((out[k] for k in _H if _is_int(out.get(k)) and out[k] > 0), None)
    for k in _HEADS:
        v = out.get(k)
        if isinstance(v, list) and v and all(_is_int(x) and x > 0 for x in v) and base and out[base] % v[0]:
            out[k] = [max(1, x * out[base] // d[base]) for x in v]
    hd = out.get("head_dim") if _is_int(out.get("head_dim")) else s["head_dim"]
    if _is_int(out.get("rotary_dim")):
        out["rotary_dim"] = min(out["rotary_dim"], hd)
    if _is_int(out.get("d_head")):
        out["d_head"] = s["head_dim"]
    if _is_int(out.get("expand")) and "state_size" in out and _is_int(out.get("num_heads")) and new_hidden:
        out["num_heads"] = new_hidden * out["expand"] // hd
        if _is_int(out.get("n_groups")):
            out["n_groups"] = min(out["n_groups"], out["num_heads"])
    if _is_int(out.get("mamba_n_heads")) and _is_int(out.get("mamba_expand")) and new_hidden:
        out["mamba_n_heads"] = new_hidden * out["mamba_expand"] // s["head_dim"]
        if _is_int(out.get("mamba_d_head")):
            out["mamba_d_head"] = s["head_dim"]
        if _is_int(out.get("mamba_n_groups")):
            out["mamba_n_groups"] = min(out["mamba_n_groups"], out["mamba_n_heads"])
    if "num_experts_per_tok" in out and out["num_experts_per_tok"] is None and any(
            _is_int(out.get(k)) for k in _EXPERTS):
        out["num_experts_per_tok"] = s["per_token"]
    if _is_int(out.get("max_source_positions")) and _is_int(out.get("num_mel_bins")):
        out["max_source_positions"] = min(out["max_source_positions"], 64)
    if "head_dim" in out and out["head_dim"] is None and any(_is_int(out.get(k)) for k in _HEADS):
        out["head_dim"] = s["head_dim"]
    for k in _KV:  # (Nemotron reads a None key-value head count as is)
        if k in out and out[k] is None and any(_is_int(out.get(h)) for h in _HEADS):
            out[k] = s["kv_heads"]
    if _is_int(out.get("head_dim")) and _is_int(out.get("qk_nope_head_dim")) and _is_int(
            out.get("qk_rope_head_dim")) and "sliding_window" in out:
        out["head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    if isinstance(out.get("axial_pos_embds_dim"), (list, tuple)) and new_hidden:
        out["axial_pos_embds_dim"] = [new_hidden // 2, new_hidden - new_hidden // 2]
    if _is_int(out.get("attn_layer_period")) and _is_int(out.get("attn_layer_offset")):
        out["attn_layer_period"], out["attn_layer_offset"] = 2, 1
    if "attn_layer_indices" in out and "mamba_n_heads" in out:
        out["attn_layer_indices"] = [1]
    if isinstance(out.get("block_types"), (list, tuple)):
        out["block_types"] = _first_layers(list(out["block_types"]), s["layers"])
    if _is_int(out.get("max_position_embeddings")) and out["max_position_embeddings"] < SEQ:
        out["max_position_embeddings"] = SEQ  # (OWL-ViT's text: 16 positions)
    if isinstance(out.get("languages"), (list, tuple)) and out["languages"] and out.get("default_language") is None:
        out["default_language"] = out["languages"][0]  # (X-MOD: adapters chosen by language)
    if isinstance(out.get("stage_names"), list) and isinstance(out.get("depths"), list) and len(
            out["stage_names"]) > len(out["depths"]) + 1:  # (Swin backbones: a stem and the stages kept)
        out["stage_names"] = out["stage_names"][:len(out["depths"]) + 1]
    if _is_int(out.get("upsample_groups")) and new_hidden:  # (Mimi: a depthwise upsampling over the hidden size)
        out["upsample_groups"] = new_hidden
    for k in ("num_frames", "frames_per_clip"):
        if _is_int(out.get(k)) and out[k] > 4:
            out[k] = 4
    for k, v in list(out.items()):  # (Dia's decoder: cross_hidden_size 1024, the encoder's width; 16 x 128 heads)
        base = k[len("cross_"):] if k.startswith("cross_") else None
        if base and _is_int(v) and v > 0 and _is_int(d.get(k)) and v == d[k]:
            for keys, value in ((_H, s["hidden"]), (_HEADS, s["heads"]), (_KV, s["kv_heads"]),
                                (_HEAD_DIM, s["head_dim"])):
                if base in keys:
                    out[k] = min(v, value) if keys is _KV else value
    for k, v in list(out.items()):  # (DepthPro: intermediate_hook_ids [11, 5] into its encoder's hidden states)
        if k.endswith("hook_ids") and isinstance(v, list) and v and all(_is_int(x) for x in v) and max(v) >= s["layers"]:
            order = sorted(set(v))
            top = {x: max(0, s["layers"] - len(order) + i) for i, x in enumerate(order)}
            out[k] = [top[x] for x in v]
    if "prediction_length" in out and out["prediction_length"] is None:  # (a forecaster's horizon, required)
        out["prediction_length"] = 8
    ratio = out.get("pixel_shuffle_ratio")
    if isinstance(ratio, float) and 0 < ratio < 1 and _is_int(out.get("projector_input_dim")) and new_hidden:
        out["intermediate_size"] = int(new_hidden / ratio ** 2)  # (Llama-4's vision adapter: shuffled patches in)
        for k in ("projector_input_dim", "projector_output_dim", "vision_output_dim"):
            if _is_int(out.get(k)):
                out[k] = new_hidden



def _consistent_moe(d: dict, out: dict, s: dict) -> None:
    """_consistent's rules for experts, latent attention, rotary and layer-kind settings (its docstring)."""
    if any(k in out for k in _EXPERTS) and any(k in out for k in _PER_TOKEN + ("moe_intermediate_size",)) and any(
            out.get(k) is None for k in _EXPERTS + _PER_TOKEN + ("moe_intermediate_size",) if k in out):
        for keys, value in ((_EXPERTS, s["experts"]), (_PER_TOKEN, s["per_token"]),
                            (("moe_intermediate_size",), s["ffn"]), (("n_shared_experts",), 1)):
            for k in keys:
                if k in out and out[k] is None:
                    out[k] = value
    layers = next((out[k] for k in _LAYERS if _is_int(out.get(k))), None)
    for k in ("first_k_dense_replace", "num_dense_layers"):
        if layers and _is_int(out.get(k)) and out[k] >= layers:
            out[k] = layers - 1
    if _is_int(d.get("head_dim")) and _is_int(d.get("qk_nope_head_dim")) and _is_int(d.get("qk_rope_head_dim")) \
            and d["head_dim"] == d["qk_nope_head_dim"] + d["qk_rope_head_dim"]:
        out["head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    rp = out.get("rope_parameters")
    for k in ("attn_config", "attention_config"):
        if isinstance(out.get(k), dict) and "rope_theta" not in out[k] and isinstance(rp, dict) and "rope_theta" in rp:
            out[k] = dict(out[k], rope_theta=rp["rope_theta"])
            if "clip_qkv" in out[k] and out[k]["clip_qkv"] is None:
                out[k]["clip_qkv"] = 8.0
    heads = next((out[k] for k in _HEADS if _is_int(out.get(k))), s["heads"])
    for k, value in (("indexer_n_heads", heads), ("indexer_kv_heads", 1), ("indexer_head_dim", s["head_dim"]),
                     ("indexer_budget", 16), ("indexer_compress_ratio", 4)):
        if k in out and out[k] is None:
            out[k] = value
    kinds = out.get("layer_types")
    if "sliding_window" in out and out["sliding_window"] is None and isinstance(kinds, list):
        out["sliding_window"] = 16
    if "rope_parameters" in out and not out["rope_parameters"] and isinstance(kinds, list) and kinds:
        out["rope_parameters"] = {t: {"rope_type": "default", "rope_theta": 10000.0} for t in dict.fromkeys(kinds)}
    blocks = next((out[k] for k in ("layers_block_type", "layer_types") if isinstance(out.get(k), list)), None)
    for k, v in list(out.items()):
        if k.endswith(("layer_ids", "layer_indices")) and isinstance(v, list) and layers and any(
                _is_int(x) and x >= layers for x in v):
            kept = [i for i, b in enumerate(blocks or []) if b != blocks[0]] if blocks else []
            out[k] = kept or [layers - 1]
    hidden = next(((d[k], out[k]) for k in _H if _is_int(d.get(k)) and _is_int(out.get(k))), None)
    depth = next(((d[k], out[k]) for k in _LAYERS if _is_int(d.get(k)) and _is_int(out.get(k))), None)
    widths = {v[k] for v in _dicts(d) for k in _H if _is_int(v.get(k)) and v[k] > s["hidden"]}
    def width(o):
        return next((o[k] for k in _H if _is_int(o.get(k)) and o[k] > s["hidden"]), None)

    def alias(o, n):
        pairs = {width(o) + width(x) for x in o.values() if isinstance(x, dict) and width(x) and width(o)}
        for k, v in o.items():
            if isinstance(v, dict) and isinstance(n.get(k), dict):
                alias(v, n[k])
            elif _is_int(v) and ("adapter" in k or k.startswith("hidden_size_") or k.endswith("_dim") and (
                    "embed" in k or "model" in k) or k == "pooler_output_size") and v in widths and n.get(k) == v:
                n[k] = s["hidden"]
            elif _is_int(v) and k.endswith("_dim") and v in pairs and v not in widths and n.get(k) == v:
                n[k] = 2 * s["hidden"]  # (its and a sub-config's features concatenated: X-Codec2's quantization_dim)
    alias(d, out)
    offsets = sorted((k for k in out if k.endswith("_token_offset") and _is_int(out[k])), key=lambda k: out[k])
    books = [v for v in out.values() if isinstance(v, dict) and _is_int(v.get("codebook_size"))]
    vocab = next((v["vocab_size"] for v in _dicts(out) if _is_int(v.get("vocab_size"))), None)
    if offsets and books and vocab and max(out[k] for k in offsets) >= vocab:
        size = min(128, vocab // (2 * len(offsets)))
        for b in books:
            b["codebook_size"] = min(b["codebook_size"], size)
        for i, k in enumerate(offsets):
            out[k] = vocab - size * (len(offsets) - i)
    for k, v in d.items():
        if _is_int(v) and depth and k.endswith("blocks") and v == depth[0] and out.get(k) == v:
            out[k] = depth[1]
        elif isinstance(v, float) and hidden and k.endswith("_dim_factor") and (hidden[0] * v) % 64 == 0 and (
                hidden[1] * v) % 64:
            out[k] = 1.0
    if isinstance(blocks, list) and "hybrid" in blocks and "attn_layer_period" in out:
        out["layers_block_type"] = ["hybrid"] * len(blocks)


NECKS = ("output_channels", "fpn_hidden_size")  # a vision encoder's output width that its decoders' hidden size is


def _tied(d: dict, out: dict) -> dict:
    """Repair rules for sizes tied ACROSS sub-configs, or left None where the model reads them (`d` the
    original to_dict(), `out` shrink's; returns a new dict):
    - a vision encoder's neck width (NECKS: SAM's output_channels, SAM2's fpn_hidden_size) that equals the
      original hidden size of another sub-config (SAM's prompt encoder and mask decoder: 256) is that
      sub-config's shrunk hidden size, and num_pos_feats that is half such a size (SAM's shared image
      positional embedding, 128 = 256 / 2) half the shrunk one;
    - per-stage width lists (SAM2 Hiera's embed_dim_per_stage [96, 192, 384, 768], whose first is the
      config's hidden size) scale with the hidden size, and so does a list elsewhere that holds only those
      widths (SAM2's backbone_channel_list [768, 384, 192, 96]);
    - a Swin-style tower's hidden_size (its last stage's width) its first width x 2^(stages - 1) again after
      shrink kept 2 stages (CLAP's audio Swin: patch_embeds_hidden_size 96, 768 = 96 x 2^3 -> 192);
    - a None vocab_size of a config with attention heads and a hidden size (ESM: set by the tokenizer) is the
      shrunk vocabulary (its pad_token_id, None too, 1);
    - a None image (or video) token of a config with query tokens (BLIP-2, InstructBLIP, InstructBLIP-Video:
      the processor's) the
      vocabulary's last id (_image_text's inputs place the query tokens' positions with it);
    - layer out_indices (a config without stage_names: Data2Vec-Vision's [3, 5, 7, 11]) that shrink left None
      and the config's validation refuses: the last layer;
    - a layout model's hidden size made of 6 box embeddings of hidden // 6 (max_2d_position_embeddings beside
      a hidden size not a multiple of 6: LiLT) 96;
    - a None vocabulary_map (Chameleon, Emu3: the tokenizer's names of the image tokens) an empty map: the
      text runs alone;
    - a patch_size equal to its sub-configs' image_size (DepthPro: 384 patches, each its DINOv2 encoders'
      384 image of 14-pixel patches) 4 of the sub-configs' patches (56), their image_size too: the default
      224 image then holds one patch at the smallest scale (0.25), and no 1536 image is needed;
    - a backbone_config whose features feed a multi-scale head (several out_features: Swin in Mask2Former
      and MaskFormer, whose pixel decoders take 4 levels) keeps all its stages, 1 block each, its stage_names
      and out_features / out_indices, its per-stage heads scaled with its width."""
    olds = list(_dicts(d))
    hidden = {}  # original hidden size -> shrunk, over every (sub)config
    for node in olds:
        for k in _H:
            if _is_int(node.get(k)) and node[k] > 0:
                hidden.setdefault(node[k], SHRINK["hidden"])
    widths = {}  # a per-stage width list's original widths -> scaled ones

    def stages(o, n):
        for k, v in list(n.items()):
            if str(k).endswith("_per_stage") and isinstance(v, list) and v and all(_is_int(x) for x in v) and any(
                    _is_int(o.get(h)) and o[h] == v[0] and _is_int(n.get(h)) and n[h] != o[h] for h in _H):
                h = next(h for h in _H if _is_int(o.get(h)) and o[h] == v[0])
                n[k] = [x * n[h] // o[h] for x in v]
                widths.update(zip(v, n[k]))
            elif isinstance(v, dict) and isinstance(o.get(k), dict):
                n[k] = stages(o[k], dict(v))
        return n

    def fix(o, n):
        for w in ("patch_embeds_hidden_size", "embed_dim"):  # (a Swin's last width: its first x 2^(stages - 1))
            if all(isinstance(x.get("depths"), list) and x["depths"] for x in (o, n)) and all(
                    _is_int(x.get(w)) and _is_int(x.get("hidden_size")) for x in (o, n)) and (
                    o["hidden_size"] == o[w] * 2 ** (len(o["depths"]) - 1)):
                n["hidden_size"] = n[w] * 2 ** (len(n["depths"]) - 1)
                break
        for k, v in list(n.items()):
            if k in NECKS and _is_int(v) and v == o.get(k) and v in hidden and not any(
                    _is_int(o.get(h)) and o[h] == v for h in _H):
                n[k] = hidden[v]
            elif k == "num_pos_feats" and _is_int(v) and v == o.get(k) and 2 * v in hidden:
                n[k] = hidden[2 * v] // 2
            elif isinstance(v, list) and v and widths and not str(k).endswith("_per_stage") and all(
                    _is_int(x) and x in widths for x in v) and v == o.get(k):
                n[k] = [widths[x] for x in v]
            elif k == "vocab_size" and v is None and any(_is_int(n.get(h)) for h in _HEADS) and any(
                    _is_int(n.get(h)) for h in _H):
                n[k] = SHRINK["vocab"]
                if "pad_token_id" in n and n["pad_token_id"] is None:
                    n["pad_token_id"] = 1  # (below the inputs' ids, 3 and up)
            elif k == "out_indices" and v is None and isinstance(o.get(k), list) and "stage_names" not in n and any(
                    _is_int(n.get(x)) for x in _LAYERS):
                n[k] = [next(n[x] for x in _LAYERS if _is_int(n.get(x)))]  # (layer indices: the last layer)
            elif k == "max_2d_position_embeddings" and any(_is_int(n.get(h)) and n[h] % 6 for h in _H):
                for h in _H:  # (LiLT: 6 box embeddings of hidden // 6 each add up to the hidden size)
                    if _is_int(n.get(h)) and n[h] == SHRINK["hidden"]:
                        n[h] = 96
            elif k == "patch_size" and _is_int(v) and v == o.get(k) and any(
                    isinstance(x, dict) and x.get("image_size") == v and _is_int(x.get("patch_size")) and
                    4 * x["patch_size"] < v for x in n.values()):
                subs = [h for h, x in n.items() if isinstance(x, dict) and x.get("image_size") == v]
                n[k] = 4 * n[subs[0]]["patch_size"]  # (DepthPro: 384 patches, each its DINOv2's 384 image)
                for h in subs:
                    n[h] = dict(n[h], image_size=n[k])
            elif k == "vocabulary_map" and v is None:
                n[k] = {}
            elif k in ("image_token_index", "image_token_id", "video_token_index") and v is None and _is_int(
                    n.get("num_query_tokens")):
                n[k] = SHRINK["vocab"] - 1
            elif isinstance(v, dict) and isinstance(o.get(k), dict):
                n[k] = fix(o[k], dict(v))
        return n
    def backbones(o, n):
        for k, v in list(n.items()):
            if not (isinstance(v, dict) and isinstance(o.get(k), dict)):
                continue
            ob, nb = o[k], backbones(o[k], dict(v))
            feats = ob.get("out_features")
            if k == "backbone_config" and isinstance(feats, list) and len(feats) > 1 and isinstance(
                    ob.get("depths"), list) and isinstance(ob.get("stage_names"), list):
                stages_ = len(ob["depths"])
                nb.update(depths=[1] * stages_, stage_names=ob["stage_names"], out_features=feats,
                          out_indices=ob.get("out_indices"))
                base = min((h for h in _H if _is_int(ob.get(h)) and _is_int(nb.get(h))), key=lambda h: ob[h],
                           default=None)
                for h in _HEADS:
                    if base and isinstance(ob.get(h), list) and len(ob[h]) == stages_:
                        nb[h] = [max(1, x * nb[base] // ob[base]) for x in ob[h]]
            n[k] = nb
        return n
    return backbones(d, fix(d, stages(d, dict(out))))


def _towers(out: dict) -> None:
    """Conv towers deepened by a depth multiplier (EfficientNet-B7: 3.1 on 600x600 images, 64M parameters):
    the multiplier 1.0 (B0's 16 blocks) and the image at most 224. The width multiplier stays: ALIGN ties its
    text projection to the tower's last channels (640 = 2.0 x 320)."""
    multipliers = [k for k in ("depth_coefficient", "depth_multiplier")
                   if isinstance(out.get(k), float) and out[k] > 1.0]
    if multipliers:
        for k in multipliers:
            out[k] = 1.0
        if _is_int(out.get("image_size")) and out["image_size"] > 224:
            out["image_size"] = 224


def _split(total: int, parts: list) -> list:
    """`total` split in proportion to `parts` (integers, summing to `total`, none below 1)."""
    scaled = [max(1, round(total * p / sum(parts))) for p in parts]
    scaled[-1] += total - sum(scaled)
    return scaled


def _first_layers(kinds: list, n: int) -> list:
    """The first n entries of a per-layer list, but one of each kind among them when the list has several
    (hybrid models: a full-attention layer beside the linear-attention ones)."""
    first = kinds[:n]
    distinct = list(dict.fromkeys(x for x in kinds if isinstance(x, (str, int, bool))))
    if len(distinct) > 1 and len(set(map(str, first))) < min(n, len(distinct)):
        return distinct[:n] if len(distinct) >= n else distinct + first[:n - len(distinct)]
    return first


# ---------------------------------------------------------------------------------------------------- entries
def entries(source: str = "transformers") -> list:
    if source == "transformers":
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
        return sorted(MODEL_MAPPING_NAMES)
    if source == "torchvision":
        import torchvision
        return sorted(f"torchvision:{n}" for n in torchvision.models.list_models()
                      if _vision_kind(n) in VISION_KINDS)
    raise ValueError(f"source must be transformers or torchvision, not {source!r}")


# torchvision's model modules whose inputs are simple (a batch of images; a clip for video)
VISION_KINDS = ("classification", "segmentation", "video", "detection")


def _vision_kind(name: str) -> str:
    import torchvision.models as tvm
    for kind, mod in (("segmentation", tvm.segmentation), ("video", tvm.video), ("detection", tvm.detection),
                      ("optical_flow", tvm.optical_flow), ("quantization", tvm.quantization)):
        if name in tvm.list_models(module=mod):
            return kind
    return "classification"


def _ids(seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, SHRINK["vocab"], (BATCH, SEQ), generator=g)
    mask = torch.ones_like(ids)
    mask[1, -MASKED:] = 0
    return ids, mask


def _build_transformers(model_type: str, seed: int = 0, repair: bool = False):
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    class_name = MODEL_MAPPING_NAMES[model_type]
    if isinstance(class_name, (tuple, list)):
        class_name = class_name[0]
    cfg_class = CONFIG_MAPPING[model_type]
    cfg = _config(cfg_class, repair)
    torch.manual_seed(seed)
    model_class = getattr(transformers, class_name)
    if repair:
        cfg = _sub_config(cfg, model_class)
    model = (_construct(model_class, cfg) if repair else model_class(cfg)).eval()
    inputs = _Candidates(_transformers_inputs(model, cfg, seed))
    if repair and _tuple_outputs(model):
        model.config.return_dict = False
        inputs = _Candidates(dict(c, return_dict=True) for c in sorted(inputs, key=lambda c: "pixel_values" not in c))
    return model, inputs, class_name


MISSING = {"num_key_value_heads": lambda c: c.num_attention_heads, "dropout_rate": lambda c: 0.0}


def _construct(model_class, cfg):
    """model_class(cfg), and when that fails on a setting in MISSING that a (sub)config lacks (MoonshineStreaming's
    decoder config has no num_key_value_heads, T5Gemma2's text config no dropout_rate, both read by their modeling
    modules: transformers bugs the released configs do not hit), that setting on the configs of that class --
    the key-value heads as many as the heads (multi-head attention), dropout 0.0 -- and again (a repair rule)."""
    def configs(c):
        yield c
        for k in getattr(type(c), "sub_configs", {}) or {}:
            sub = getattr(c, k, None)
            if sub is not None and hasattr(sub, "to_dict"):
                yield from configs(sub)
    for _ in range(len(MISSING) + 1):
        try:
            return model_class(cfg)
        except AttributeError as e:
            m = re.search(r"'(\w+)' object has no attribute '(\w+)'", str(e))
            if not m or m.group(2) not in MISSING:
                raise
            for c in configs(cfg):
                if type(c).__name__ == m.group(1):
                    setattr(c, m.group(2), MISSING[m.group(2)](c))
    return model_class(cfg)


def _tuple_outputs(model) -> bool:
    """Whether the model's forward builds its output object from a field its language model's output class
    does not declare (Llama-4: `image_outputs=outputs.image_outputs` of a MoeCausalLMOutputWithPast, so the
    dict path always raises: a transformers bug). Such a model (a repair rule) returns tuples: config.return_dict
    False, and every input candidate return_dict=True (capture_outputs pops the keyword, and its own to_tuple
    of a False one would fail on the forward's tuple), the candidates with an image first (the field is the
    image's: the vision tower runs too)."""
    import dataclasses
    lm = getattr(model, "language_model", None)
    if lm is None:
        return False
    try:
        src = inspect.getsource(type(model).forward)
        ann = str(inspect.signature(type(lm).forward).return_annotation)
    except (OSError, TypeError, ValueError):
        return False
    mod = sys.modules.get(type(lm).__module__)
    cls = next((c for c in (getattr(mod, n, None) for n in re.findall(r"\w+", ann))
                if isinstance(c, type) and dataclasses.is_dataclass(c)), None)
    if cls is None:
        return False
    declared = {f.name for f in dataclasses.fields(cls)}
    return any(f not in declared for f in re.findall(r"\b\w+=outputs\.(\w+)\b", src))


def _sub_config(cfg, model_class):
    """The config a model class is built from: a composite config's sub-config when the class's
    config_class is that sub-config's class (MusicGen: the auto mapping's MusicgenModel is the decoder alone,
    built from MusicgenConfig.decoder), else `cfg` (a repair rule)."""
    want = getattr(model_class, "config_class", None)
    if want is None or isinstance(cfg, want):
        return cfg
    for k in getattr(type(cfg), "sub_configs", {}) or {}:
        sub = getattr(cfg, k, None)
        if isinstance(sub, want):
            return sub
    return cfg


class _Candidates(list):
    """Input sets to try in order: the first the CPU forward accepts is the model's (run_one)."""


def _transformers_inputs(model, cfg, seed: int) -> list:
    """input_ids (+ attention_mask, + decoder_input_ids for encoder-decoders); then the same with an image
    (dual encoders such as CLIP need both); an image alone (first with the masking noise of a model that
    takes one: _masking_noise); audio samples alone. Then _more_inputs'; a pair of images (batch, 2, c, h, w),
    the image's PAIR_SIZE x PAIR_SIZE corner and its mirror, for a forward that asks for one (the keypoint matchers
    LightGlue, EfficientLoFTR: their all-pairs tensors grow with the square of the keypoints, and in bfloat16 the
    shrunk SuperPoint's scores, all within 2e-4 of 1/65, round to one value, so its NMS keeps every pixel: 784
    keypoints an image at 32 x 32, 8464 at 96 x 96);
    the waveform with a clip of 4 frames of 224 x 224 for a forward that takes both (PE audio-video's encoder);
    then _required's."""
    ids, mask = _ids(seed)
    params = inspect.signature(model.forward).parameters
    g = torch.Generator().manual_seed(seed)
    pixels = None
    if "pixel_values" in params:  # an image of the config's size
        vc = getattr(cfg, "vision_config", None) or cfg
        size = getattr(vc, "image_size", 224)
        size = size[0] if isinstance(size, (list, tuple)) else size
        if isinstance(size, dict):
            size = size.get("height", 224)
        pixels = torch.randn(BATCH, getattr(vc, "num_channels", 3), size, size, generator=g)
    out = []
    if "input_ids" in params:
        text = {"input_ids": ids}
        if "attention_mask" in params:
            text["attention_mask"] = mask
        if getattr(cfg, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            text["decoder_input_ids"] = ids
        out.append(text)
        if pixels is not None:
            out.append(dict(text, pixel_values=pixels))
    if pixels is not None:
        noise = _masking_noise(params, cfg, g)
        if noise is not None:
            out.append({"pixel_values": pixels, "noise": noise})
        out.append({"pixel_values": pixels})
    if "input_values" in params:  # audio: 0.24 s at 16 kHz (a multiple of 320 and of 96 samples)
        wave = torch.randn(BATCH, 3840, generator=g)
        out += [{"input_values": wave}, {"input_values": wave[:, None]}]  # (batch, samples), (batch, 1, samples)
    text = out[0] if out and "input_ids" in out[0] else None
    out = (out or [{}]) + _more_inputs(cfg, params, g, text, pixels)
    if pixels is not None and "(batch_size, 2, num_channels, height, width)" in _source(type(model).forward):
        corner = pixels[..., :PAIR_SIZE, :PAIR_SIZE]  # (keypoint matchers: image pairs)
        out.append({"pixel_values": torch.stack([corner, corner.flip(-1)], 1)})
    if "input_values" in params and "pixel_values_videos" in params:  # (PE audio-video: the sound with a clip)
        g2 = torch.Generator().manual_seed(seed + 1)
        out.append({"input_values": torch.randn(BATCH, 1, 3840, generator=g2),
                    "pixel_values_videos": torch.randn(BATCH, 4, 3, 224, 224, generator=g2)})
    return out + _required(cfg, params, g, text, out)


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _find(cfg, keys, subs=("audio_config", "encoder_config", "speech_config", "vision_config")):
    """The first integer among `keys` on the config, else on its sub-configs `subs`."""
    for c in (cfg, *(getattr(cfg, k, None) for k in subs)):
        for k in keys:
            v = getattr(c, k, None) if c is not None else None
            v = v[0] if isinstance(v, (list, tuple)) and v else v
            if _is_int(v) and v > 0:
                return v
    return None


AUDIO_FRAMES = 128  # mel frames of the audio-feature input (whisper-style encoders: 2 x 64 positions)


def _more_inputs(cfg, params, g, text, pixels) -> list:
    """The inputs that the first candidates do not cover, tried after them (so a model running with those
    keeps its inputs): mel features (input_features, both (batch, mels, frames) and (batch, frames, mels),
    with all-ones feature masks; an audio spectrogram as input_values), flattened patches with their grid
    (grid_thw: 2 images of 2 x 2 merged patches each), a video clip (batch, frames, channels, h, w), a time
    series (past_values), and the extra inputs of some text models (bbox, qformer_input_ids, visual_feats).
    Then, last (`late`), the ones added for models that ran with none of those: mel features as a one-channel
    image (batch, 1, frames, mels: CLAP); an image of the vision backbone's size (backbone_config.image_size:
    SAM2's Hiera, when the vision config has none); hidden states as input_values and decoder_input_values (an
    encoder-decoder without its pre-nets: SpeechT5Model); text with an image's placeholder tokens
    (_image_text); the text with mel features (batch, mels, 128) whose mel count only the decoder sub-config
    names (CLVP's conditioning encoder: decoder_config.feature_size); audio codes of several codebooks (num_codebooks: input_ids (batch x codebooks, seq):
    MusicGen's decoder; and decoder_input_ids (batch, seq, channels), then (batch x channels, seq), for a
    decoder sub-config of several channels or codebooks: Dia's 9, whose 2-d path makes a view of a transposed
    tensor); a time series with a zero padding mask and frequency class (TimesFM); the text
    without a cache (use_cache=False: a model whose cache cannot be made from its config, BLT's); text with
    an image's placeholder tokens counted from the patch grid (_patch_tokens: Llama-4, no count named); the
    text with one image per sample (batch, 1, c, h, w) that every text token attends to (image_attention_mask
    (batch, seq, 1) of ones: IDEFICS's cross-attention); hidden states of d_model as `inputs` with the attention
    mask (PerceiverModel without a preprocessor); a forecaster's past (past_values of context_length plus the
    largest lag, past_time_features of num_time_features, an all-ones past_observed_mask; with future_values
    and future_time_features of prediction_length first: Autoformer, Informer, Time Series Transformer); an
    video clip of the frames the model pads to (max_img_size: TVP's 448), with the text, then of one sample
    (TVP's 2-d position embedding works for a batch of 1 only); an
    image, a prompt image and its mask of half the image size's height (SegGPT stacks the prompt over the
    image); an image whose smallest scale (scaled_images_ratios) still holds one patch_size patch (DepthPro:
    224 with its repaired patch_size 56); an image with a task prompt's token ids (task_inputs
    (batch, task_seq_len): OneFormer); the Q-Former's query tokens with the image features it cross-attends to
    (encoder_hidden_states (batch, 16, encoder_hidden_size): BLIP-2's Q-Former alone); mel features stacked
    num_stacked_frames at a time, with their mask (Fun-ASR: 7 x 80); the text with mel features of
    audio_length_per_tok frames per text token (Voxtral realtime: 8, its audio and text positions added); an
    image of about the backbone's size whose patch grid splits into its num_windows windows a side (RF-DETR's
    windowed DINOv2: 504 = 14 x 4 x 9, not 518). (_required's come after these.)"""
    out, late = [], []  # (late: the candidates added for models that ran with none of `out`'s, tried last)
    g_late = torch.Generator().manual_seed(1)  # (draws of late candidates added later: g's draws stay as they were)
    ids = text["input_ids"] if text else _ids()[0]
    mels = _find(cfg, ("num_mel_bins", "input_feat_size", "n_mels", "input_feat_per_channel", "feature_size",
                       "feature_projection_input_dim"))
    feat_key = next((k for k in ("input_features", "audio_mel") if k in params), None)
    if feat_key and mels:
        msp = _find(cfg, ("max_source_positions",))
        window = _find(cfg, ("n_window",))  # (Qwen3-ASR: frames in chunks of 2 x n_window)
        frames = 2 * msp if msp and msp <= 64 else 2 * window if window else AUDIO_FRAMES
        feats = torch.randn(BATCH, mels, frames, generator=g)
        masks = {k: torch.ones(BATCH, frames, dtype=torch.long) for k in
                 ("input_features_mask", "feature_attention_mask", "audio_mel_mask") if k in params}
        if "attention_mask" in params and "input_ids" not in params:
            masks["attention_mask"] = torch.ones(BATCH, frames, dtype=torch.long)
        if "audio_mel_mask" in masks:  # (Gemma3n: True marks padding)
            masks["audio_mel_mask"] = torch.zeros(BATCH, frames, dtype=torch.bool)
        extra = {"decoder_input_ids": ids} if "decoder_input_ids" in params else {}
        for f in (feats, feats.transpose(1, 2).contiguous()):
            out += [dict(extra, **{feat_key: f}), dict(extra, **{feat_key: f}, **masks)]
        stacked = _find(cfg, ("input_dim",))  # (Granite Speech 5: frames stacked, 4 x 80 features)
        if stacked and stacked != mels:
            f = torch.randn(BATCH, frames, stacked, generator=g)
            out += [dict(extra, **{feat_key: f}), dict(extra, **{feat_key: f}, **masks)]
        per_tok = _find(cfg, ("audio_length_per_tok",), ())  # (Voxtral realtime: 8 frames per text token)
        if text and per_tok:
            f = torch.randn(BATCH, mels, text["input_ids"].shape[1] * per_tok, generator=g_late)
            late += [dict(text, **{feat_key: f}), dict(text, **{feat_key: f.transpose(1, 2).contiguous()})]
        times = _find(cfg, ("num_stacked_frames",), ())  # (Fun-ASR: 7 frames stacked, 7 x 80 features)
        if times and times > 1:
            late.append(dict(extra, **{feat_key: feats.transpose(1, 2).repeat(1, 1, times)}, **masks))
        if text:  # (models that take the text beside the audio: Voxtral realtime)
            out += [dict(text, **{feat_key: f}) for f in (feats, feats.transpose(1, 2).contiguous())]
        image = feats.transpose(1, 2)[:, None].contiguous()  # (CLAP: a one-channel image (batch, 1, frames, mels))
        late += ([dict(text, **{feat_key: image})] if text else []) + [{feat_key: image}]
    dec_mels = _find(cfg, ("feature_size", "num_mel_bins"), ("decoder_config",)) if feat_key and not mels else None
    if text and dec_mels:  # (CLVP: its conditioning encoder takes the text and mel features of decoder_config's)
        late.append(dict(text, **{feat_key: torch.randn(BATCH, dec_mels, AUDIO_FRAMES, generator=g)}))
    if "input_values" in params and ("decoder_input_ids" in params or text):  # (Moonshine; PE audio)
        wave = torch.randn(BATCH, 3840, generator=g)
        other = dict(text) if text else {}
        if "decoder_input_ids" in params:
            other["decoder_input_ids"] = ids
        out += [dict(other, input_values=wave), dict(other, input_values=wave[:, None])]
    size = getattr(getattr(cfg, "vision_config", None) or cfg, "image_size", None)
    if isinstance(size, (list, tuple)) and len(size) == 2 and size[0] != size[1] and "pixel_values" in params:
        image = torch.randn(BATCH, 3, *size, generator=g)  # (a non-square image size: MGP-STR 32 x 128)
        vis = {"pixel_values": image}
        if "prompt_pixel_values" in params:  # (SegGPT: a prompt image and its mask)
            vis.update(prompt_pixel_values=image, prompt_masks=torch.randn(BATCH, 3, *size, generator=g))
        out.append(vis)
        if "prompt_pixel_values" in params:  # (SegGPT stacks the prompt over the image: each half the height)
            half = (size[0] // 2, size[1])
            late.append({"pixel_values": torch.randn(BATCH, 3, *half, generator=g),
                         "prompt_pixel_values": torch.randn(BATCH, 3, *half, generator=g),
                         "prompt_masks": torch.randn(BATCH, 3, *half, generator=g)})
    backbone = getattr(getattr(cfg, "vision_config", None) or cfg, "backbone_config", None)
    bsize = getattr(backbone, "image_size", None)
    bsize = bsize[0] if isinstance(bsize, (list, tuple)) and bsize else bsize
    if _is_int(bsize) and "pixel_values" in params and (pixels is None or pixels.shape[-1] != bsize):
        late.append({"pixel_values": torch.randn(BATCH, 3, bsize, bsize, generator=g)})  # (SAM2: its backbone's)
    windows, bpatch = getattr(backbone, "num_windows", None), getattr(backbone, "patch_size", None)
    if _is_int(bsize) and _is_int(windows) and _is_int(bpatch) and "pixel_values" in params:  # (RF-DETR: 518 -> 504)
        side = bpatch * windows * max(1, bsize // (bpatch * windows))
        late.append({"pixel_values": torch.randn(BATCH, 3, side, side, generator=g_late)})
    if "query_embeds" in params:  # (BLIP-2's Q-Former alone: the query tokens)
        hidden = _find(cfg, ("hidden_size",), ())
        if hidden:
            out.append({"query_embeds": torch.randn(BATCH, 8, hidden, generator=g)})
            enc = _find(cfg, ("encoder_hidden_size",), ())  # (with the image features it cross-attends to)
            if enc:
                late.append(dict(out[-1], encoder_hidden_states=torch.randn(BATCH, 16, enc, generator=g_late)))
    if "states" in params and "returns_to_go" in params:  # (Decision Transformer: a trajectory)
        sd, ad = getattr(cfg, "state_dim", None), getattr(cfg, "act_dim", None)
        if _is_int(sd) and _is_int(ad):
            out.append({"states": torch.randn(BATCH, SEQ, sd, generator=g),
                        "actions": torch.randn(BATCH, SEQ, ad, generator=g),
                        "returns_to_go": torch.randn(BATCH, SEQ, 1, generator=g),
                        "timesteps": torch.arange(SEQ).repeat(BATCH, 1),
                        "attention_mask": _ids()[1]})
    if "input_values" in params and mels and "input_features" not in params:  # a spectrogram (AST)
        length = getattr(cfg, "max_length", None)
        out.append({"input_values": torch.randn(BATCH, length if _is_int(length) else AUDIO_FRAMES, mels, generator=g)})
    grid_key = next((k for k in ("grid_thw", "image_grid_thw") if k in params), None)
    if grid_key and "input_ids" not in params:
        patch = _find(cfg, ("patch_size",), ())
        tp = _find(cfg, ("temporal_patch_size", "patch_temporal"), ()) or 1
        ch = _find(cfg, ("in_channels", "num_channels", "in_chans"), ()) or 3
        merge = _find(cfg, ("spatial_merge_size", "merge_size"), ()) or 2
        if patch:
            grid = torch.tensor([[1, 2 * merge, 2 * merge]] * BATCH)
            n = int(grid.prod(-1).sum())
            flat = torch.randn(n, ch * tp * patch * patch, generator=g)
            key = "hidden_states" if "hidden_states" in params else "pixel_values"
            extra = {"merge_sizes": torch.tensor([merge] * BATCH)} if "merge_sizes" in params else {}
            out += [dict(extra, **{key: flat, grid_key: grid}),
                    dict(extra, **{key: flat.view(n, ch, tp, patch, patch).squeeze(2), grid_key: grid})]
    if "spatial_shapes" in params and pixels is not None:  # (SigLIP2: patches (batch, 4 x 4, c p p) + their grid)
        patch = _find(cfg, ("patch_size",), ("vision_config",))
        ch = _find(cfg, ("num_channels",), ("vision_config",)) or 3
        if patch:
            vis = {"pixel_values": torch.randn(BATCH, 16, ch * patch * patch, generator=g),
                   "pixel_attention_mask": torch.ones(BATCH, 16, dtype=torch.long),
                   "spatial_shapes": torch.tensor([[4, 4]] * BATCH)}
            out += [dict(text, **vis)] if text else []
            out.append(vis)
    frames = _find(cfg, ("num_frames", "frames_per_clip"), ("vision_config",))
    video_key = next((k for k in ("pixel_values_videos", "pixel_values") if k in params), None)
    if frames and video_key:
        vc = getattr(cfg, "vision_config", None) or cfg
        size = getattr(vc, "image_size", None) or getattr(vc, "crop_size", None) or 224
        size = size[0] if isinstance(size, (list, tuple)) else size
        ch = _find(vc, ("num_channels", "in_channels", "in_chans"), ()) or 3
        video = torch.randn(BATCH, min(frames, 4), ch, size, size, generator=g)
        if text:
            out.append(dict(text, **{video_key: video}))
        out.append({video_key: video})
        top = getattr(cfg, "max_img_size", None)  # (TVP pads its frames to max_img_size, 448)
        if _is_int(top) and top != size:
            video = torch.randn(BATCH, min(frames, 4), ch, top, top, generator=g)
            late += ([dict(text, **{video_key: video})] if text else []) + [{video_key: video}]
            if text:  # (and one sample: TVP views its column embeddings as (batch, 1, width, hidden))
                late.append({k: v[:1] for k, v in dict(text, **{video_key: video}).items()})
    hidden = _find(cfg, _H, ())
    if "decoder_input_values" in params and "input_values" in params and hidden:  # (SpeechT5Model: no prenets,
        h = torch.randn(BATCH, SEQ, hidden, generator=g)                          # hidden states both sides)
        late += [{"input_values": h, "decoder_input_values": h.flip(1)},
                {"input_values": h, "attention_mask": _ids()[1], "decoder_input_values": h.flip(1)}]
    if text and pixels is not None:
        late += _image_text(cfg, params, text, pixels)
    video_tok = ("video_token_index", "video_token_id")
    if text and pixels is not None and _find(cfg, video_tok, ()) is not None and not _find(
            cfg, ("image_token_id", "image_token_index"), ()) and _find(cfg, IMAGE_TOKENS, ()):
        clip = pixels[:, None].repeat(1, 4, 1, 1, 1)  # (InstructBLIP-Video: 4 frames, each its query tokens)
        late += _image_text(cfg, params, text, clip, 4 * _find(cfg, IMAGE_TOKENS, ()), video_tok)
    codebooks = getattr(cfg, "num_codebooks", None)
    if text and _is_int(codebooks) and codebooks > 1:  # (MusicGen's decoder: audio codes (batch x codebooks, seq))
        late.append({"input_ids": ids.repeat_interleave(codebooks, 0) % getattr(cfg, "vocab_size", SHRINK["vocab"])})
    dec = getattr(cfg, "decoder_config", None)
    dec_books = _find(dec, ("num_channels", "num_codebooks"), ()) if dec is not None else None
    if text and "decoder_input_ids" in text and dec_books and dec_books > 1:  # (Dia: the decoder's audio codes,
        codes = ids[..., None].repeat(1, 1, dec_books) % getattr(dec, "vocab_size", SHRINK["vocab"])  # 9 channels)
        late += [dict(text, decoder_input_ids=codes), dict(text, decoder_input_ids=codes.transpose(1, 2).flatten(0, 1))]
    if "past_values" in params:
        length = _find(cfg, ("context_length",), ()) or 32
        ch = _find(cfg, ("num_input_channels", "input_size"), ()) or 1
        series = torch.randn(BATCH, length, ch, generator=g)
        out += [{"past_values": series}, {"past_values": series[..., 0]}]
        if "past_values_padding" in params:  # (TimesFM: no padding, frequency class 0)
            pad = torch.zeros(BATCH, length, dtype=torch.long)
            late += [{"past_values": series[..., 0], "past_values_padding": pad, "freq": f}
                    for f in (torch.zeros(BATCH, dtype=torch.long), torch.zeros(BATCH, 1, dtype=torch.long))]
    if "past_time_features" in params and _is_int(getattr(cfg, "context_length", None)) and _is_int(
            getattr(cfg, "prediction_length", None)):  # (GluonTS-style forecasters: the context plus the lags)
        length = cfg.context_length + max(getattr(cfg, "lags_sequence", None) or [0])
        ch, tf = getattr(cfg, "input_size", 1) or 1, getattr(cfg, "num_time_features", 0) or 0
        shape = (BATCH, length) if ch == 1 else (BATCH, length, ch)
        fshape = (BATCH, cfg.prediction_length) + shape[2:]
        past = {"past_values": torch.randn(*shape, generator=g),
                "past_time_features": torch.randn(BATCH, length, tf, generator=g),
                "past_observed_mask": torch.ones(shape)}
        future = {"future_values": torch.randn(*fshape, generator=g),
                  "future_time_features": torch.randn(BATCH, cfg.prediction_length, tf, generator=g)}
        late += [dict(past, **future), past]
    if text and "bbox" in params:
        corner = torch.randint(0, 500, (BATCH, SEQ, 2), generator=g)
        box = torch.cat([corner, corner + torch.randint(1, 500, (BATCH, SEQ, 2), generator=g)], -1)
        out += [dict(text, bbox=box), dict(text, bbox=box.float() / 1000)]
    if text and "qformer_input_ids" in params and pixels is not None:
        out.append(dict(text, pixel_values=pixels, qformer_input_ids=ids,
                        **({"qformer_attention_mask": text["attention_mask"]} if "attention_mask" in text else {})))
    if text and "visual_feats" in params:
        feat, pos = getattr(cfg, "visual_feat_dim", None), getattr(cfg, "visual_pos_dim", None)
        if _is_int(feat) and _is_int(pos):
            out.append(dict(text, visual_feats=torch.randn(BATCH, 8, feat, generator=g),
                            visual_pos=torch.rand(BATCH, 8, pos, generator=g)))
    if text and "use_cache" in params:  # (a model whose cache cannot be made from its config: BLT's)
        late.append(dict(text, use_cache=False))
    task_len = _find(cfg, ("task_seq_len",), ())
    if "task_inputs" in params and pixels is not None and task_len:  # (OneFormer: the task prompt's token ids,
        late.append({"pixel_values": pixels,                         # task_seq_len of them)
                     "task_inputs": torch.randint(3, SHRINK["vocab"], (BATCH, task_len), generator=g)})
    ratios, patch = getattr(cfg, "scaled_images_ratios", None), getattr(cfg, "patch_size", None)
    if "pixel_values" in params and isinstance(ratios, list) and ratios and _is_int(patch) and min(ratios) > 0:
        size = int(math.ceil(patch / min(ratios)))  # (DepthPro: its smallest scale still one patch)
        late.append({"pixel_values": torch.randn(BATCH, 3, size, size, generator=g)})
    d_model = _find(cfg, ("d_model",), ())
    if "inputs" in params and "input_ids" not in params and d_model:  # (Perceiver without a preprocessor)
        late.append({"inputs": torch.randn(BATCH, SEQ, d_model, generator=g), "attention_mask": _ids()[1]})
    if text and pixels is not None and "image_attention_mask" in params:  # (IDEFICS: images per sample, each
        late.append(dict(text, pixel_values=pixels[:, None],                # text token sees the sample's one)
                         image_attention_mask=torch.ones(*text["input_ids"].shape, 1, dtype=torch.long)))
    if text and pixels is not None and not _find(cfg, IMAGE_TOKENS, ()) and _patch_tokens(cfg):
        late += _image_text(cfg, params, text, pixels, _patch_tokens(cfg))  # (Llama-4: a token per 2 x 2 patches)
    return out + late


MELS = 128  # the mel bins of an audio input whose config names none (Gemma-4's audio tower: 128)


def _find_any(cfg, keys):
    """The first positive integer among `keys` on the config or on any sub-config under it, depth first."""
    d = cfg.to_dict() if hasattr(cfg, "to_dict") else cfg
    return next((v[k] for v in _dicts(d) for k in keys if _is_int(v.get(k)) and v[k] > 0), None)


def _required(cfg, params, g, text, given: list) -> list:
    """Candidates, tried last, for a forward with required arguments (no default) that no other candidate
    gives, each built from its name and the config (all the required ones, so that one candidate has them
    together): input_features mel features (the mel count of the config
    or of any sub-config, else MELS; (batch, mels, frames) then (batch, frames, mels); beside a waveform
    (input_values, 0.24 s at 16 kHz, (batch, samples) then (batch, 1, samples)) as many frames as the
    config's downsampling_ratios make of it: X-Codec2's semantic and acoustic frames are concatenated);
    pixel_values_videos a clip of 4 frames of the vision config's image size (PE Video); patch positions
    (pixel_position_ids: the (x, y) of a grid of 2 x pooling_kernel_size patches a side) with the patches
    flattened as pixel_values (batch, patches, 3 x patch_size^2) (Gemma-4's vision tower); any other tensor
    (Mimi's and Pocket-TTS's decoder latents, VibeVoice's hidden_states, Nemotron's inputs_embeds, MuSE's
    noise_embeds and context_hidden_states) hidden-size features, (batch, hidden, 24) then (batch, 24, hidden)
    (and for a width-1 channels config: a waveform (batch, channels, samples), VibeVoice's encoder). With the
    text when the forward takes input_ids. [] when every required argument is given by some candidate."""
    import itertools
    need = [k for k, p in params.items() if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if all(any(k in c for c in given) for k in need):
        return []
    samples = 3840
    hidden = _find(cfg, _H, ()) or _find_any(cfg, _H) or SHRINK["hidden"]
    hop = getattr(cfg, "downsampling_ratios", None)
    forms = {}
    for k in need:
        if k == "input_features":
            mels = _find_any(cfg, ("num_mel_bins", "input_feat_size", "n_mels", "feature_size",
                                   "feature_projection_input_dim")) or MELS
            frames = samples // math.prod(hop) if "input_values" in params and isinstance(hop, list) and hop \
                else AUDIO_FRAMES
            f = torch.randn(BATCH, mels, frames, generator=g)
            forms[k] = [f, f.transpose(1, 2).contiguous()]
        elif k == "input_values":
            wave = torch.randn(BATCH, samples, generator=g)
            forms[k] = [wave, wave[:, None]]
        elif k == "pixel_values_videos":
            vc = getattr(cfg, "vision_config", None) or cfg
            size = getattr(vc, "image_size", None)
            size = size[0] if isinstance(size, (list, tuple)) else size if _is_int(size) else 224
            forms[k] = [torch.randn(BATCH, 4, 3, size, size, generator=g)]
        elif k.endswith("position_ids") and "pixel_values" in params and _find(cfg, ("patch_size",), ()):
            side = 2 * (_find(cfg, ("pooling_kernel_size", "spatial_merge_size", "merge_size"), ()) or 2)
            ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
            forms[k] = [torch.stack([xs.flatten(), ys.flatten()], -1).repeat(BATCH, 1, 1)]
            patch = _find(cfg, ("patch_size",), ())
            forms["pixel_values"] = [torch.randn(BATCH, side * side, 3 * patch * patch, generator=g)]
        elif k not in ("input_ids",) and not (k == "pixel_values" and any(
                x.endswith("position_ids") for x in need)):
            h = torch.randn(BATCH, hidden, SEQ, generator=g)
            forms[k] = [h, h.transpose(1, 2).contiguous()]
            ch = getattr(cfg, "channels", None)
            if _is_int(ch) and ch < 4:
                forms[k].append(torch.randn(BATCH, ch, samples, generator=g))
    base = dict(text) if text and "input_ids" in params else {}
    return [dict(base, **dict(zip(forms, combo))) for combo in itertools.product(*forms.values())]


IMAGE_TOKENS = ("num_query_tokens", "latent_query_num", "image_seq_length", "mm_tokens_per_image")


def _patch_tokens(cfg) -> int | None:
    """The image tokens of one image for a config that names no count (IMAGE_TOKENS) but whose every patch
    becomes a token, r x r patches merged into one by a pixel shuffle (Llama-4: (448 / 14)^2 x 0.5^2 = 256):
    (image_size // patch_size)^2 x pixel_shuffle_ratio^2 of the vision config; None without a patch grid."""
    vc = getattr(cfg, "vision_config", None)
    size, patch = getattr(vc, "image_size", None), getattr(vc, "patch_size", None)
    ratio = getattr(vc, "pixel_shuffle_ratio", None) or 1.0
    if not (_is_int(size) and _is_int(patch) and patch > 0):
        return None
    n = (size // patch) ** 2 * ratio ** 2
    return int(n) if n == int(n) and n >= 1 else None


def _image_text(cfg, params, text: dict, pixels, n: int | None = None,
                keys=("image_token_id", "image_token_index")) -> list:
    """Text with an image's placeholders, for the multimodal models that take both and place the image's
    embeddings at marked positions: the config's image-token count (IMAGE_TOKENS: BLIP-2's 32 query tokens,
    Kosmos-2's 64 latent queries) placed before the text's 24 tokens, as the config's image token (text ids
    equal to it become 3) and, for a model that takes image_embeds_position_mask (Kosmos-2), marked there;
    the attention mask grows by as many ones. [] when the config names no count (`n`: the count to use
    instead of the config's: _patch_tokens; `keys`: the names of the placeholder token)."""
    n = n or _find(cfg, IMAGE_TOKENS, ())
    if not n:
        return []
    tok = next((getattr(cfg, k) for k in keys if _is_int(getattr(cfg, k, None))), None)
    if tok is None and "image_embeds_position_mask" not in params:
        return []
    ids = text["input_ids"]
    body = torch.where(ids == tok, 3, ids) if tok is not None else ids
    lead = torch.full((ids.shape[0], n), tok if tok is not None else 3, dtype=ids.dtype)
    cand = {"input_ids": torch.cat([lead, body], 1), "pixel_values": pixels}
    if "attention_mask" in text:
        cand["attention_mask"] = torch.cat([torch.ones_like(lead), text["attention_mask"]], 1)
    if "image_embeds_position_mask" in params:
        marks = torch.zeros_like(cand["input_ids"], dtype=torch.bool)
        marks[:, :n] = True
        cand["image_embeds_position_mask"] = marks
    if "qformer_input_ids" in params:
        cand.update(qformer_input_ids=ids, **({"qformer_attention_mask": text["attention_mask"]}
                                               if "attention_mask" in text else {}))
    return [cand]


def _masking_noise(params, cfg, g):
    """The `noise` input of a masked-image model (ViT-MAE's random_masking argsorts it to pick the patches
    kept), given to both runs so the comparison is of the network, not of two random generators: one random
    permutation of 0..n-1 a row over the n patches (distinct integers: exact in bfloat16 up to 256, so the
    device's argsort sees the CPU's order). None when the model takes no noise or has no patch grid."""
    if "noise" not in params:
        return None
    vc = getattr(cfg, "vision_config", None) or cfg
    size, patch = getattr(vc, "image_size", None), getattr(vc, "patch_size", None)
    size = size[0] if isinstance(size, (list, tuple)) else size
    patch = patch[0] if isinstance(patch, (list, tuple)) else patch
    if not (_is_int(size) and _is_int(patch) and patch > 0):
        return None
    n = (size // patch) ** 2
    return torch.stack([torch.randperm(n, generator=g) for _ in range(BATCH)]).float()


def _derived(d: dict, cfg_class) -> dict:
    """`d` (a shrunk to_dict()) without the values its config class derives in __post_init__ from others
    (Zamba2's attention_hidden_size = 2 x hidden, mamba_headdim; RWKV's attention_hidden_size; Bamba's
    mamba_d_head "auto"; RecurrentGemma's lru_width): a key the class does not declare, or declares with the
    default None / "auto", whose value shrink left as it was, goes back to undeclared / its default, so the
    class derives it again from the shrunk sizes. Sub-configs (sub_configs) likewise."""
    import dataclasses
    if not dataclasses.is_dataclass(cfg_class):
        return d
    base = cfg_class().to_dict()
    fields = {f.name: f.default for f in dataclasses.fields(cfg_class)}
    standard = {f.name for f in dataclasses.fields(_pretrained_config())}
    shrunk_keys = set(_H + _HEADS + _KV + _LAYERS + _FFN + _HEAD_DIM + _EXPERTS + _PER_TOKEN + _LORA)
    out = dict(d)
    subs = getattr(cfg_class, "sub_configs", {}) or {}
    for k, v in d.items():
        if k in subs and isinstance(v, dict):
            sub = subs[k]
            if not isinstance(sub, type) or not hasattr(sub, "model_type") or sub.__name__ == "AutoConfig":
                from transformers.models.auto.configuration_auto import CONFIG_MAPPING
                sub = CONFIG_MAPPING.get(v.get("model_type")) if v.get("model_type") else None
            if sub is not None:
                try:
                    out[k] = _derived(v, sub)
                except Exception:  # noqa: BLE001 -- a sub-config that cannot be built alone keeps its dict
                    pass
            continue
        if k in standard or k in shrunk_keys or k.endswith(("token_id", "token_index", "token_ids")):
            continue
        if not _is_int(v) or base.get(k) != v:
            continue
        if k not in fields and k not in ("model_type",):
            out.pop(k)
        elif fields.get(k) is None or fields.get(k) == "auto":
            out[k] = fields[k]
    return out


def _dicts(d: dict):
    """d and every dict nested in it."""
    yield d
    for v in d.values():
        if isinstance(v, dict):
            yield from _dicts(v)


def _each_config(d: dict, change) -> dict:
    """A copy of config dict d in which change(node) (in place) has run on d and on every sub-config (a dict
    with a model_type or under a *_config key), the sub-configs after their parent."""
    node = dict(d)
    change(node)
    for k, v in node.items():
        if isinstance(v, dict) and ("model_type" in v or k.endswith("_config")):
            node[k] = _each_config(v, change)
    return node


@functools.lru_cache(maxsize=None)
def _modeling_source(cfg_class) -> str | None:
    """The source of a config class's modeling module (what the repair rules read defaults from), or None."""
    import importlib
    try:
        return inspect.getsource(importlib.import_module(cfg_class.__module__.replace(".configuration_", ".modeling_")))
    except Exception:  # noqa: BLE001
        return None


def _pretrained_config():
    from transformers import PretrainedConfig
    return PretrainedConfig


def _mrope(d: dict, cfg_class) -> dict:
    """Multimodal rotary sections (Qwen2-VL's [16, 24, 24] temporal/height/width split of the rotary half)
    that the model takes from `rope_parameters.get("mrope_section", default)` when the config has none: the
    default (read from the modeling module) scaled to the shrunk rotary half, written into every (sub)config
    with rope_parameters and a vocabulary (the text model). When the model's own module reads none, a
    sub-config whose own modeling module reads one gets its default (GLM-4.6V's glm4v_text: [8, 12, 12])."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    def section(c):
        src = _modeling_source(c)
        m = src and re.search(r"""get\(["']mrope_section["'],\s*\[([\d,\s]+)\]\)""", src)
        if m and re.search(r"\.split\(\[?\*?(?:self\.)?mrope_section", src):
            return [int(x) for x in m.group(1).split(",") if x.strip()]
        return None
    default = section(cfg_class)

    def fix(node):
        rp = node.get("rope_parameters")
        own = default or (node is not d and node.get("model_type") in CONFIG_MAPPING and section(
            CONFIG_MAPPING[node["model_type"]]))  # (else the sub-config's own module: GLM-4.6V's text model)
        if own and isinstance(rp, dict) and "mrope_section" not in rp and "vocab_size" in node and all(
                not isinstance(x, dict) for x in rp.values()):
            rotary = (node.get("head_dim") if _is_int(node.get("head_dim")) else SHRINK["head_dim"]) * (
                rp.get("partial_rotary_factor", node.get("partial_rotary_factor", 1.0)) or 1.0)
            node["rope_parameters"] = dict(rp, mrope_section=_split(int(rotary) // 2, own))
    return _each_config(d, fix)


def _layer_kinds(d: dict, cfg_class) -> dict:
    """Per-layer kinds the model needs but the config leaves out: the kinds its modeling module masks
    (`causal_mask_mapping = {"full_attention": ..., "conv": ...}`), one of each over the 2 layers, for a
    (sub)config whose layer_types is None (LFM2-MoE indexes it) or names no softmax attention kind while the
    model has one (GraniteMoeHybrid's default: linear attention in all layers, a cache with no sequence
    length)."""
    src = _modeling_source(cfg_class)
    if src is None:
        return d
    m = re.search(r"causal_mask_mapping = \{([^}]*)\}", src)
    kinds = re.findall(r"[\"'](\w+)[\"']\s*:", m.group(1)) if m else []
    if len(kinds) < 2 or "full_attention" not in kinds:
        return d

    def fix(node):
        n = next((node[k] for k in _LAYERS if _is_int(node.get(k))), None)
        lt = node.get("layer_types", 0)
        if n and (lt is None or isinstance(lt, list) and lt and not any(
                "attention" in str(t) and t != "linear_attention" for t in lt)):
            node["layer_types"] = [k for k in kinds if k != "full_attention"][:n - 1] + ["full_attention"]
    return _each_config(d, fix)


def _read_tokens(d: dict, cfg_class) -> dict:
    """Special tokens the modeling module reads from its config (`self.config.vision_start_token_id`) that the
    config class neither has nor maps (the Qwen2.5-Omni and Qwen3-Omni thinker configs lack the
    vision_start_token_id their get_rope_index reads beside 4 tokens they have; the released configs set it),
    in a function that reads at least 2 tokens the config has, more than it lacks (a text config whose
    composite model reads the image tokens gets none): an id of the shrunk vocabulary (the config's, else
    its text_config's) that no special token of the config uses, from the top down. Only the top-level
    config gets them."""
    src = _modeling_source(cfg_class)
    if src is None:
        return d
    def has(k):
        return k in d or k in (getattr(cfg_class, "attribute_map", None) or {}) or hasattr(cfg_class, k)
    missing = []
    for body in re.split(r"\n\s*def ", src):  # (per function: the tokens it reads, most of them the config's)
        read = list(dict.fromkeys(re.findall(r"self\.config\.(\w+_token_id)\b", body)))
        lacking = [k for k in read if not has(k)]
        if lacking and len(read) - len(lacking) >= max(2, len(lacking) + 1):
            missing += [k for k in lacking if k not in missing]
    vocab = d.get("vocab_size") if _is_int(d.get("vocab_size")) else (d.get("text_config") or {}).get("vocab_size")
    if not missing or not _is_int(vocab):
        return d
    used = {x for node in _dicts(d) for k, v in node.items() if str(k).endswith(("token_id", "token_index", "token_ids"))
            for x in (v if isinstance(v, list) else [v]) if _is_int(x)}
    spare = iter(x for x in range(vocab - 1, 0, -1) if x not in used)
    return dict(d, **{k: next(spare) for k in missing})


def _rotary_floor(d: dict, cfg_class) -> dict:
    """A rotary size with a floor in the modeling module (CLVP: `dim = max(projection_dim // (heads x 2), 32)`,
    applied to the first `dim` channels of each head): the size it divides (projection_dim 768) at most the
    hidden size and the heads of every (sub)config with attention heads and a hidden size at most
    hidden / floor, so a head holds the rotary part (hidden 64: 2 heads of 32, rotary 32)."""
    src = _modeling_source(cfg_class)
    if src is None:
        return d
    m = re.search(r"\bdim = max\(config\.(\w+) // [^\n]*num_attention_heads[^\n]*,\s*(\d+)\)", src)
    if not m:
        return d
    key, floor = m.group(1), int(m.group(2))

    def fix(node):
        h, n = node.get("hidden_size"), node.get("num_attention_heads")
        if _is_int(node.get(key)) and _is_int(h) and node[key] > h:
            node[key] = h
        if _is_int(h) and _is_int(n) and h // n < floor:
            node["num_attention_heads"] = max(1, h // floor)
    return _each_config(d, fix)


def _indexed_kinds(d: dict, cfg_class) -> dict:
    """Per-layer kind lists left None that the modeling module indexes by layer (DeepSeek-OCR-2's text model:
    `config.mlp_layer_types[layer_idx] == "sparse"`, the released configs list them): every layer of a
    (sub)config with a layer count the kind compared against (its mixture of experts runs)."""
    src = _modeling_source(cfg_class)
    kinds = dict(re.findall(r"config\.(\w+_types)\[layer_idx\] == [\"'](\w+)[\"']", src or ""))
    if not kinds:
        return d

    def fix(node):
        n = next((node[k] for k in _LAYERS if _is_int(node.get(k))), None)
        for k, kind in kinds.items():
            if n and k in node and node[k] is None:
                node[k] = [kind] * n
    return _each_config(d, fix)


def _rope_heads(d: dict, cfg_class) -> dict:
    """Rotary tables over the heads axis (X-Codec2, NeuCodec: `apply_rotary_pos_emb(..., unsqueeze_dim=2)` on
    (batch, heads, seq, head size) queries and keys, cos / sin one row per query head): the key-value heads of
    every (sub)config with attention heads as many as its heads, so the keys match the table."""
    src = _modeling_source(cfg_class)
    if not src or not re.search(r"key_states = [^\n]*\.transpose\(1, 2\)\n(?:[^\n]*\n){0,8}?[^\n]*"
                               r"apply_rotary_pos_emb\(query_states, key_states, cos, sin, unsqueeze_dim=2\)", src):
        return d

    def fix(node):
        heads = next((node[k] for k in _HEADS if _is_int(node.get(k))), None)
        for k in _KV:
            if heads and _is_int(node.get(k)):
                node[k] = heads
    return _each_config(d, fix)


def _config(cfg_class, repair: bool = False):
    """The shrunk config (repair: shrink's repair rules, then _tied, _derived, _mrope, _layer_kinds,
    _read_tokens, _rotary_floor, _rope_heads and _indexed_kinds); a config that
    refuses grouped-query attention gets key-value heads = heads, and one whose validation says "`a.b` (N) must
    match/equal `c.d` (M)" gets a.b = M (sizes tied together); "`a.b` [i, j] must index the N layers" the last
    layers, in the list's order."""
    def shrunk(mha=False):
        d = shrink(cfg_class().to_dict(), mha=mha, repair=repair)
        if not repair:
            return d
        for rule in (_derived, _mrope, _layer_kinds, _read_tokens, _rotary_floor, _rope_heads, _indexed_kinds):
            d = rule(_tied(cfg_class().to_dict(), d) if rule is _derived else d, cfg_class)
        return d
    d = shrunk()
    for _ in range(6):
        try:
            return cfg_class.from_dict(d)
        except Exception as e:  # noqa: BLE001
            text = str(e)
            tied = (re.search(r"`([\w.]+)` \(\d+\)[^`]*must (?:match|equal) `([\w.]+)(?: // (\d+))?` \((\d+)\)", text)
                    or re.search(r"`([\w.]+)` \(\d+\) must (?:match|equal) (?:the )?[\w ]*`([\w.]+)`() \((\d+)\)", text))
            index = re.search(r"`([\w.]+)` \[([-\d, ]+)\] must index the (\d+) layers", text)
            if "key_value" in text or "kv_heads" in text:
                d = shrunk(mha=True)
            elif index:  # (Molmo2's adapter_config.vision_feature_layer [24, 18]: the last layers, in the list's order)
                node = d
                *path, key = index.group(1).split(".")
                for p in path:
                    node = node[p]
                v = [int(x) for x in index.group(2).split(",")]
                n = int(index.group(3))
                top = {x: max(0, n - len(set(v)) + i) for i, x in enumerate(sorted(set(v)))}
                node[key] = [top[x] for x in v]
            elif tied:
                node = d
                *path, key = tied.group(1).split(".")
                for p in path:
                    node = node[p]
                if key not in node:  # (a sub-config's sizes: the sub-dict that has both keys)
                    other = tied.group(2).split(".")[-1]
                    node = next((v for v in _dicts(d) if key in v and other in v), node)
                node[key] = int(tied.group(4))
            else:
                raise
    return cfg_class.from_dict(d)


def _build_torchvision(name: str, seed: int = 0):
    import torchvision
    from . import vision
    kind = _vision_kind(name)
    torch.manual_seed(seed)
    kw = {"weights": None}
    if kind in ("detection", "segmentation"):
        kw.update(weights_backbone=None, num_classes=10)
    if kind == "detection" and not name.startswith("ssd"):  # (R-CNN, RetinaNet, FCOS resize to 800-1333
        kw.update(min_size=VISION_SIZE, max_size=VISION_SIZE)  # by default; SSDs have their fixed size)
    model = torchvision.models.get_model(name, **kw).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # random batch-norm statistics (vision.load's reason)
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
    size = VISION_SIZE
    if kind == "classification" and name.startswith(("vit_", "swin", "maxvit")):
        size = 224  # fixed positions / windows: the native size
    x = vision.make_input(BATCH, size, seed)
    if kind == "video":  # 8 frames of 112x112; MViT and S3D: their native 16 x 224x224 (fixed position tables
        frames, side = (16, 224) if name.startswith(("mvit", "s3d")) else (8, 112)  # and a final 2x7x7 pool)
        x = torch.randn(BATCH, 3, frames, side, side, generator=torch.Generator().manual_seed(seed))
    if kind == "detection":
        return model, {"images": list(x)}, type(model).__name__
    import inspect  # (the input's name: x, or input for LRASPP)
    return model, {next(iter(inspect.signature(model.forward).parameters)): x}, type(model).__name__


def _build_file(spec: str, seed: int = 0):
    """file:/path/to/module.py:function -- the function returns (model, inputs) (tests' fake entries)."""
    import importlib.util
    path, fn = spec[len("file:"):].rsplit(":", 1)
    sp = importlib.util.spec_from_file_location("zoo_entry_" + fn, path)
    mod = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(mod)
    model, inputs = getattr(mod, fn)()
    return model, inputs, type(model).__name__


def build(name: str, seed: int = 0, repair: bool = False):
    """(CPU model in eval mode with seeded weights, its inputs (a dict of keyword arguments), class name).
    repair: a transformers model type's config with shrink's repair rules (_config)."""
    if name.startswith("file:"):
        return _build_file(name, seed)
    if name.startswith("torchvision:"):
        return _build_torchvision(name.split(":", 1)[1], seed)
    return _build_transformers(name, seed, repair)


# ------------------------------------------------------------------------------------------------- comparing
def leaves(x, prefix: str = "out") -> list:
    """(path, tensor) of every tensor in a model's output (ModelOutput, dicts, lists, tuples; caches and
    other objects are skipped)."""
    if isinstance(x, torch.Tensor):
        return [(prefix, x)]
    if isinstance(x, dict):  # ModelOutput is an OrderedDict
        return [leaf for k, v in x.items() for leaf in leaves(v, f"{prefix}.{k}")]
    if isinstance(x, (list, tuple)):
        return [leaf for i, v in enumerate(x) for leaf in leaves(v, f"{prefix}[{i}]")]
    return []


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


def _valid(t: torch.Tensor, mask) -> torch.Tensor:
    """The positions of a (batch, seq, ...) output that the attention mask keeps."""
    if mask is not None and t.dim() >= 2 and tuple(t.shape[:2]) == tuple(mask.shape):
        return t[mask.bool()]
    return t


def _pearson(o: torch.Tensor, r: torch.Tensor) -> float:
    o, r = o.double().flatten(), r.double().flatten()
    finite = torch.isfinite(r)
    if not torch.equal(finite, torch.isfinite(o)):
        return float("nan")
    o, r = o[finite], r[finite]
    if o.numel() == 0 or torch.equal(o, r):
        return 1.0
    if o.numel() == 1 or float(r.std()) == 0.0 or float(o.std()) == 0.0:
        return 1.0 if torch.allclose(o, r, rtol=1e-2, atol=1e-2) else 0.0
    return pcc(o, r)


def compare_outputs(out, ref, mask=None) -> dict:
    """Every output tensor of `out` (on any device) against `ref` (CPU): shapes, dtypes, Pearson (the
    lowest over float outputs; an empty output of the CPU's shape is equal to it: 1.0), max absolute error,
    on the valid positions."""
    o_leaves, r_leaves = leaves(out), leaves(ref)
    mismatches, pearsons, max_err = [], [], 0.0
    if [p for p, _ in o_leaves] != [p for p, _ in r_leaves]:
        mismatches.append(f"outputs {[p for p, _ in o_leaves]} vs CPU {[p for p, _ in r_leaves]}")
    for (path, o), (_, r) in zip(o_leaves, r_leaves):
        if tuple(o.shape) != tuple(r.shape):
            mismatches.append(f"{path}: shape {tuple(o.shape)} vs CPU {tuple(r.shape)}")
            continue
        if o.dtype != r.dtype:
            mismatches.append(f"{path}: dtype {o.dtype} vs CPU {r.dtype}")
        o = _valid(o.detach().cpu(), mask)
        r = _valid(r.detach(), mask)
        if r.is_complex() or o.is_complex():
            continue
        if r.numel() == 0:  # the same empty shape (a detector keeping no box on either side): equal outputs
            pearsons.append(1.0)
            continue
        pearsons.append(_pearson(o, r))
        if r.dtype.is_floating_point or o.dtype.is_floating_point:
            fin = torch.isfinite(r) & torch.isfinite(o.to(r.dtype))
            if fin.any():
                max_err = max(max_err, float((o.double()[fin] - r.double()[fin]).abs().max()))
    return {"pearson": min(pearsons) if pearsons else None, "max_abs_err": max_err,
            "outputs": len(r_leaves), "same_shapes_dtypes": not mismatches, "mismatches": mismatches[:5]}


def _unset(model) -> dict:
    """The module attributes that are None now (id(module) -> names): _uncache's reference."""
    return {id(m): [k for k, v in vars(m).items() if v is None] for m in model.modules()}


def _uncache(model, unset: dict) -> None:
    """Caches a CPU forward filled (attributes None in `unset` that now hold a tensor: Mimi's codebook `_embed`)
    are None again, so the device forward fills its own (`model.to` moves only parameters and buffers)."""
    for m in model.modules():
        for k in unset.get(id(m), ()):
            if isinstance(getattr(m, k, None), torch.Tensor):
                setattr(m, k, None)


def compare(model, inputs: dict, device: str = "ttnn:0", compiled: bool = False) -> dict:
    """One forward on the CPU (float32), then one on `device` (the model moved there, float64 tensors stored
    as float32: FLOAT64): compare_outputs plus the CPU fallbacks and the aten and TT-NN op counts of the
    device forward. A device error raises. Both forwards start from one state of the CPU generator, so the
    draws a forward makes on the host (ViLT's torch.multinomial choice of patches; VITS' noise: a ttnn
    device's random factories draw from the CPU generator) are the same draws. Tensors the CPU forward cached
    in module attributes that were None are None again before the device forward. compiled: then the model
    compiled on `device` too (compare_compiled): the result is the compiled one's, eager mode's under "eager"."""
    from .. import config
    from ..features.inventory import record_ops
    rng = torch.random.get_rng_state()
    unset = _unset(model)
    with torch.no_grad():
        ref = model(**inputs)
    _uncache(model, unset)
    model.to(device)
    dinputs = _to(inputs, device)
    torch.random.set_rng_state(rng)
    previous = config.configure(float64=FLOAT64)
    try:
        with torch.no_grad(), record_ops() as rec:
            out = model(**dinputs)
        out = _to(out, "cpu") if not isinstance(out, torch.Tensor) else out.cpu()
        r = compare_outputs(out, ref, inputs.get("attention_mask"))
        r.update(fallbacks=dict(rec.fallbacks.most_common()), aten_ops=sum(rec.aten.values()),
                 ttnn_ops=sum(rec.ttnn.values()))
        if compiled:
            r = compare_compiled(model, dinputs, ref, inputs.get("attention_mask"), rng, eager=r)
    finally:
        config.configure(**previous)
    return r


COMPILED_CALLS = 3  # the first call runs each graph eagerly through the lowerings, the second captures it,
                    # the third replays it (or runs it eagerly again: a graph that could not be captured)


def compare_compiled(model, dinputs: dict, ref, mask, rng, eager: dict) -> dict:
    """`model` (on the device) through torch.compile(backend="ttnn") called COMPILED_CALLS times on `dinputs`
    (each from the CPU generator state `rng`), each output against the CPU's `ref`: the compiled result --
    the worst Pearson of the calls, every call's fallbacks, the last call's op counts (the steady state: the
    first call also computes what compiling folds into constants, the second captures) and whether it was a
    replay (`replayed`: every graph captured; else one ran eagerly) -- with Dynamo's graphs, graph breaks and
    recompiles (graphs the later calls added), the first call's seconds (compiling included), TT-NN ops
    compiled against `eager` (compare's result, kept under "eager")."""
    from torch._dynamo.utils import counters as dynamo
    from ..features.inventory import record_ops
    torch._dynamo.reset()
    dynamo.clear()
    fast = torch.compile(model, backend="ttnn")
    calls = []
    for _ in range(COMPILED_CALLS):
        torch.random.set_rng_state(rng)
        graphs = dynamo["stats"]["unique_graphs"]
        t0 = time.perf_counter()
        with torch.no_grad(), record_ops() as rec:
            out = fast(**dinputs)
        seconds = time.perf_counter() - t0
        out = _to(out, "cpu") if not isinstance(out, torch.Tensor) else out.cpu()
        calls.append((compare_outputs(out, ref, mask), rec, seconds, dynamo["stats"]["unique_graphs"] - graphs))
    (r, _, seconds, graphs), later, rec = calls[0], calls[1:], calls[-1][1]
    pearsons = [c[0]["pearson"] for c in calls]
    fallbacks = collections.Counter()
    for c in calls:
        fallbacks.update(c[1].fallbacks)
    r.update(pearson=None if None in pearsons else min(pearsons, key=lambda p: p if p == p else -2.0),
             same_shapes_dtypes=all(c[0]["same_shapes_dtypes"] for c in calls),
             fallbacks=dict(fallbacks.most_common()), aten_ops=sum(rec.aten.values()),
             ttnn_ops=sum(rec.ttnn.values()), graphs=graphs, recompiles=sum(c[3] for c in later),
             replayed=rec.stats.get("graph_replays", 0) > 0 and not rec.stats.get("compiled_eager_calls", 0),
             graph_breaks=sum(dynamo["graph_break"].values()), compile_s=round(seconds, 2),
             eager={k: eager[k] for k in ("pearson", "fallbacks", "aten_ops", "ttnn_ops")})
    r["ops_ratio"] = round(r["ttnn_ops"] / eager["ttnn_ops"], 3) if eager["ttnn_ops"] else None
    torch._dynamo.reset()
    return r


def _error_text(e: BaseException) -> str:
    """The error's type and first line; for ttnn's TT_FATAL / TT_THROW, its location and its "info:" line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    fatal = [i for i, ln in enumerate(lines) if "TT_FATAL" in ln or "TT_THROW" in ln]
    if fatal:
        i = fatal[0]
        info = lines[i + 2] if i + 2 < len(lines) and lines[i + 1] == "info:" else ""
        return f"{type(e).__name__}: {lines[i][:200]}{' -- ' + info[:200] if info else ''}"
    return f"{type(e).__name__}: {(lines or [''])[0][:300]}"


def run_one(name: str, device: str = "ttnn:0", seed: int = 0, bfloat16_cpu: bool = False,
            compiled: bool = False) -> dict:
    """One entry, measured: build (a failure: "cpu fails"), the CPU forward (a failure: "cpu fails"), the
    device forward (a failure: "error"); a low Pearson or a shape that differs: explain_accuracy's figures
    (with CPU fallbacks too). A transformers model whose plain shrunk config fails to build or
    to run on the CPU is tried again with shrink's repair rules (then "repaired": true; a failure of both is
    the repaired one's error). bfloat16_cpu: the CPU in bfloat16 (cpu_bfloat16) stands where the device
    would, so the same classes say what bfloat16 arithmetic alone allows (`ttnn-eager zoo --bfloat16-cpu`).
    compiled: the model compiled as well (compare_compiled; `ttnn-eager zoo --compile`), classified by its
    compiled result. Never raises."""
    import gc
    import warnings
    t0 = time.perf_counter()
    rec = {"name": name}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            repairable = not name.startswith(("file:", "torchvision:"))
            for repair in (False, True) if repairable else (False,):
                try:
                    model, inputs, cls = build(name, seed, repair)
                    rec["class"] = cls
                    rec["params"] = sum(p.numel() for p in model.parameters())
                    unset = _unset(model)
                    for k, candidate in enumerate(inputs if isinstance(inputs, _Candidates) else [inputs]):
                        try:
                            with torch.no_grad():
                                model(**candidate)
                            inputs = candidate
                            break
                        except Exception:
                            if k == len(inputs) - 1 or not isinstance(inputs, _Candidates):
                                raise
                    rec["inputs"] = sorted(inputs)
                    _uncache(model, unset)  # (the probe's caches)
                    if repair:
                        rec["repaired"] = True
                    break
                except Exception as e:
                    model = inputs = None
                    if repair or not repairable:
                        rec.update(status="cpu fails", error=_error_text(e))
                        return rec
            if bfloat16_cpu:
                r = cpu_bfloat16(name, inputs, seed, rec.get("repaired", False))
                if "cpu_bfloat16_error" in r:
                    rec.update(status="error", error=r["cpu_bfloat16_error"])
                else:
                    rec.update(status="ran", pearson=r["cpu_bfloat16_pearson"], fallbacks={},
                               same_shapes_dtypes=r["shapes_cpu_bfloat16"],
                               mismatches=r.get("cpu_bfloat16_mismatches", []))
                return rec
            try:
                rec.update(compare(model, inputs, device, compiled))
                rec["status"] = "ran"
                low = rec.get("pearson") is None or not rec["pearson"] >= PEARSON_MIN  # (a fallback's too)
                if not compiled and (classify(rec) in ("low accuracy", "shape/dtype differs") or low):
                    model = None
                    rec.update(explain_accuracy(name, inputs, device, seed, rec.get("repaired", False)))
            except Exception as e:
                from .. import counters
                rec.update(status="error", error=_error_text(e),
                           fallbacks={str(k): v for k, v in counters.fallback_by_op.items()})
    finally:
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        model = inputs = None
        gc.collect()
    return rec


def explain_accuracy(name: str, inputs: dict, device: str, seed: int, repair: bool = False) -> dict:
    """Where a low Pearson comes from: the same forward on `device` with float32 stored as float32 and the
    shadow's arithmetic exact (a lowering that is wrong stays wrong there; bfloat16 storage's loss goes away),
    and the CPU itself in bfloat16 against its float32 (how much bfloat16 alone costs this model; with
    `shapes_cpu_bfloat16` false its outputs have other shapes, which its Pearson leaves out)."""
    from .. import config
    out = {}
    previous = config.configure(float32_storage="float32", shadow_numerics="exact")
    try:
        r = compare(build(name, seed, repair)[0], inputs, device)
        out["pearson_float32_storage"], out["shapes_float32_storage"] = r["pearson"], r["same_shapes_dtypes"]
    except Exception as e:  # noqa: BLE001 -- a diagnosis only
        out["pearson_float32_storage_error"] = _error_text(e)
    finally:
        config.configure(**previous)
    return {**out, **cpu_bfloat16(name, inputs, seed, repair)}


def cpu_bfloat16(name: str, inputs: dict, seed: int = 0, repair: bool = False) -> dict:
    """The CPU itself in bfloat16 (`model.to(torch.bfloat16)`, floating inputs too) against its float32: how
    much bfloat16 arithmetic alone costs this model (`shapes_cpu_bfloat16` false: its outputs have other
    shapes, which its Pearson leaves out; `cpu_bfloat16_error`: the model's code does not run in bfloat16)."""
    out = {}
    try:
        model = build(name, seed, repair)[0]
        rng = torch.random.get_rng_state()  # (one generator state for both forwards, as compare's)
        with torch.no_grad():
            ref = model(**inputs)
            torch.random.set_rng_state(rng)
            with _nms_in_float32():
                low = model.to(torch.bfloat16)(**_bfloat16(inputs))
        r = compare_outputs(low, ref, inputs.get("attention_mask"))
        out["cpu_bfloat16_pearson"] = r["pearson"]
        # (compare_outputs leaves outputs of other shapes out of its Pearson: VITS' bfloat16 durations make a
        # shorter waveform, and the Pearson left is the 2-value sequence_lengths' 1.0)
        shapes = [m for m in r["mismatches"] if ": dtype " not in m]  # (its outputs are bfloat16: not news)
        out["shapes_cpu_bfloat16"] = not shapes
        if shapes:
            out["cpu_bfloat16_mismatches"] = shapes
    except Exception as e:  # noqa: BLE001
        out["cpu_bfloat16_error"] = _error_text(e)
    return out


def _bfloat16(x):
    """x's floating-point tensors in bfloat16, through dicts, lists and tuples (a detector's list of images)."""
    if isinstance(x, torch.Tensor):
        return x.to(torch.bfloat16) if x.is_floating_point() else x
    if isinstance(x, dict):
        return {k: _bfloat16(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_bfloat16(v) for v in x)
    return x


@contextlib.contextmanager
def _nms_in_float32():
    """torchvision's CPU nms and roi_align refuse bfloat16: within this, `torchvision.ops.boxes.nms` (what
    batched_nms and the detectors call) gets its boxes and scores in float32, and the R-CNN poolers' roi_align
    its features and boxes (its result back in the features' dtype), so a detector runs in bfloat16 on the
    CPU. The rest stays bfloat16, batched_nms's class offsets added to the boxes too (as on the device).
    Without torchvision: nothing."""
    try:
        import torchvision.ops.boxes as box_ops
        import torchvision.ops.poolers as poolers
    except ImportError:
        yield
        return
    nms, roi_align = box_ops.nms, poolers.roi_align

    def roi_align32(x, boxes, *args, **kwargs):
        boxes = boxes.float() if isinstance(boxes, torch.Tensor) else [b.float() for b in boxes]
        return roi_align(x.float(), boxes, *args, **kwargs).to(x.dtype)
    box_ops.nms = lambda boxes, scores, iou_threshold: nms(boxes.float(), scores.float(), iou_threshold)
    poolers.roi_align = roi_align32
    try:
        yield
    finally:
        box_ops.nms, poolers.roi_align = nms, roi_align


# --------------------------------------------------------------------------------------------- failure classes
CLASSES = ("clean", "fallback ops", "low accuracy", "shape/dtype differs", "error", "crash", "timeout",
           "cpu fails")
PEARSON_MIN = 0.999


def classify(r: dict) -> str:
    """clean: 0 fallbacks, Pearson >= 0.999, every output's shape and dtype the CPU's."""
    status = r.get("status")
    if status != "ran":
        return status
    if not r.get("same_shapes_dtypes", False):
        return "shape/dtype differs"
    if r.get("fallbacks"):
        return "fallback ops"
    p = r.get("pearson")
    if p is None or not p >= PEARSON_MIN:  # (NaN too)
        return "low accuracy"
    return "clean"


# ------------------------------------------------------------------------------------------------- the driver
STARTUP_TIMEOUT = 600.0  # seconds for a worker to import torch and the backend (a loaded machine)


class Worker:
    """A `python -m ttnn_eager.tools.zoo --worker` subprocess: entry names on its stdin, one JSON line each on
    its stdout, its stderr in a temporary file (the crash's last words)."""

    def __init__(self, nice: int = 0, bfloat16_cpu: bool = False, compiled: bool = False):
        self.log = tempfile.NamedTemporaryFile("w+b", prefix="zoo-worker-", suffix=".log", delete=False)
        env = dict(os.environ)
        src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, "-m", "ttnn_eager.tools.zoo", "--worker"] + (["--bfloat16-cpu"] if bfloat16_cpu else []) \
            + (["--compile"] if compiled else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, start_new_session=True,
                                     preexec_fn=(lambda: os.nice(nice)) if nice else None)
        self.buf = b""
        self.served = 0
        self.ready = False

    def _line(self, timeout: float):
        """The worker's next line (bytes), or None at its death, or "timeout"."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], min(left, 5.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def ask(self, name: str, timeout: float):
        """The worker's JSON result, or ("crash" | "timeout", detail). The timeout starts once the worker
        has imported the backend (its "ready" line)."""
        self.log.seek(0, os.SEEK_END)
        start = self.log.tell()
        if not self.ready:
            line = self._line(STARTUP_TIMEOUT)
            if not isinstance(line, bytes):
                self.stop()
                return "crash", f"the worker did not start ({line or 'it died'})"
            self.ready = True
        try:
            self.proc.stdin.write((name + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return "crash", self._death(start)
        line = self._line(timeout)
        if line == "timeout":
            return "timeout", f"no result in {timeout:.0f} s"
        if line is None:
            return "crash", self._death(start)
        self.served += 1
        return json.loads(line)

    def _death(self, start: int) -> str:
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.stop()
            code = None
        self.log.flush()
        self.log.seek(start)
        tail = [ln.strip() for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        said = [ln for ln in tail if "TT_FATAL" in ln or "TT_THROW" in ln or "Error" in ln or "error" in ln]
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exit code {code}")
        return f"{how}: {(said or tail or [''])[-1][:300]}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        if not self.log.closed:
            self.log.close()
            try:
                os.unlink(self.log.name)
            except FileNotFoundError:
                pass


def _commit() -> str:
    """The commit measured (ZOO_COMMIT when the sweep runs from an exported copy of the sources)."""
    if os.environ.get("ZOO_COMMIT"):
        return os.environ["ZOO_COMMIT"]
    try:
        root = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def load(path: str) -> dict:
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"meta": {}, "results": {}}


def save(data: dict, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def sweep(names, path: str | None = None, timeout: float = 180.0, redo: bool = False, recycle: int = 20,
          nice: int = 0, source: str = "transformers", log=None, redo_classes=(), bfloat16_cpu: bool = False,
          compiled: bool = False) -> dict:
    """Run `names` through a worker subprocess, one after another; a crash or a timeout is that entry's
    result and the worker restarts. With `path`, results already there are kept (resume) and the JSON is
    rewritten after every entry (`redo_classes`: those of these classes measured at another commit are
    measured again). The worker is also restarted every `recycle` entries (0: never). bfloat16_cpu: the
    CPU in bfloat16 instead of the device (run_one); compiled: each model compiled too (run_one)."""
    import torch as _torch
    data = load(path)
    results = data.setdefault("results", {})
    meta = data.setdefault("meta", {})
    commit = _commit()
    meta.update(source=source, timeout_s=timeout, recycle=recycle, shrink=SHRINK,
                reference="the CPU in bfloat16" if bfloat16_cpu else "ttnn:0",
                compiled='torch.compile(backend="ttnn")' if compiled else None,
                inputs=f"({BATCH}, {SEQ}) ids, row 2's last {MASKED} masked", torch=_torch.__version__)
    try:
        import transformers
        meta["transformers"] = transformers.__version__
        import torchvision
        meta["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    todo = [n for n in names if redo or n not in results
            or results[n].get("class_") in redo_classes and results[n].get("commit") != commit]
    meta["entries"] = max(meta.get("entries", 0), len(names))  # (an --only subset keeps the whole list's size)
    worker = None
    try:
        for i, name in enumerate(todo):
            if worker is None or (recycle and worker.served >= recycle):
                if worker is not None:
                    worker.stop()
                worker = Worker(nice, bfloat16_cpu, compiled)
            answer = worker.ask(name, timeout)
            if isinstance(answer, tuple):
                kind, detail = answer
                r = {"name": name, "status": kind, "error": detail}
                worker.stop()
                worker = None
            else:
                r = answer
            r["commit"] = commit
            r["class_"] = classify(r)
            results[name] = r
            if log:
                log(f"[{i + 1}/{len(todo)}] {name}: {r['class_']}"
                    f"{' pearson %.5f' % r['pearson'] if r.get('pearson') is not None else ''}"
                    f"{' fallbacks ' + ','.join(r['fallbacks']) if r.get('fallbacks') else ''}"
                    f"{' -- ' + r['error'][:160] if r.get('error') else ''}")
            if path:
                save(data, path)
    finally:
        if worker is not None:
            worker.stop()
    return data


def worker_main(bfloat16_cpu: bool = False, compiled: bool = False) -> int:
    """The worker loop: entry names on stdin, JSON results on the original stdout (fd 1 then points to
    stderr, so that what models print cannot break the protocol)."""
    import warnings
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    warnings.simplefilter("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import ttnn_eager  # noqa: F401  (the backend)
    torch.ones(1, device="ttnn:0").cpu()  # the device opened before the first entry's clock starts
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        r = run_one(name, bfloat16_cpu=bfloat16_cpu, compiled=compiled)
        out.write(json.dumps(r, default=str) + "\n")
        out.flush()
    return 0


# ---------------------------------------------------------------------------------------------------- the doc
def _fmt_p(p) -> str:
    return "-" if p is None else f"{p:.5f}"


def totals(results: dict) -> collections.Counter:
    return collections.Counter(r.get("class_") or classify(r) for r in results.values())


def fallback_table(results: dict) -> list:
    """(aten op, architectures where it fell back, total calls), most architectures first."""
    archs, calls = collections.Counter(), collections.Counter()
    for r in results.values():
        for op, n in (r.get("fallbacks") or {}).items():
            archs[op] += 1
            calls[op] += n
    return [(op, archs[op], calls[op]) for op, _ in archs.most_common()]


# What a result means where the table alone would mislead (each measured: the command is in the note)
NOTES = {
    "blt": "its hash embeddings take a rolling polynomial hash of byte n-grams in int64: powers of primes up to "
    "9.6e9 whose products wrap around int64 on purpose. The device's integers are int32, so those values are kept "
    "exactly on the host and the four ops on them (pow, mul, sum, remainder) run on the counted CPU fallback; the "
    "hash modulo the table size fits int32 and goes back to the device for the embedding lookup: the hashes equal the "
    "CPU's.",
    "depth_pro": "repaired: patch_size 56 (4 of its DINOv2 encoders' 14-pixel patches, their image_size 56), so "
    "the default 224 x 224 image holds one patch at its smallest scale (0.25). With the default 384 patches the "
    "image had to be 1536 x 1536 and the device forward took over 25 minutes; now 84 s in all.",
    "glm46v": "its text path only (input_ids): the image path needs image_grid_thw and the matching placeholder "
    "tokens, which the zoo does not build for it. Repaired: its text model's mrope_section, read from glm4v's "
    "module ([8, 12, 12], scaled to the shrunk rotary half: [2, 3, 3]).",
    "glmga": "as glm46v: the text path only, mrope_section from glm4v's module.",
    "deepseek_ocr2": "its text path only (input_ids). Repaired: mlp_layer_types, None by default and indexed by "
    "layer, every layer \"sparse\" (the mixture of experts runs).",
    "lightglue": "image pairs of 32 x 32. Shapes differ as on the CPU in bfloat16: the shrunk SuperPoint's "
    "keypoint scores all lie within 2e-4 of 1/65 (0.015383 to 0.015386 in float32), finer than bfloat16's step "
    "there (6e-5), so in bfloat16 every score is 0.015381, every pixel ties with its neighbourhood's maximum and "
    "NMS keeps them all: 784 keypoints an image against the CPU's 17 (at 96 x 96, 8464 against 184: the "
    "[4, 1, 8464, 8464] attention mask and the mock's float32 shadows of the all-pairs tensors took the host "
    "past 16 GB; at 224 x 224 a 17.9 GiB ttnn.expand). With float32 storage the shapes agree and Pearson is "
    "1.0000. Fixed on the way: flip/index of rows wider than EMBEDDING_WIDTH (LightGlue's flip of "
    "[2, 2, 784, 256] descriptors) overflowed ttnn.embedding's L1.",
    "voxtral_realtime": "the text (24 tokens) with 192 mel frames: audio_length_per_tok 8 frames per text token "
    "(its audio and text embeddings are added position by position).",
    "instructblipvideo": "a clip of 4 frames (the 224 image repeated) and the text after 4 x 32 video-token "
    "placeholders (its query tokens per frame); repaired: video_token_index, None by default, the vocabulary's "
    "last id.",
    "nemotron3_5_transcribe_audio": "mel features alone (128 bins x 128 frames). Low accuracy is bfloat16's: the "
    "CPU in bfloat16 gives the same 0.826, float32 storage 1.000000.",
    "rf_detr": "an image of 504 x 504 (its windowed DINOv2 splits the 36 x 36 patch grid into 4 x 4 windows; 518 "
    "does not split). Low accuracy is bfloat16's: the CPU in bfloat16 0.257, float32 storage 1.000000 (the "
    "encoder's top-300 proposals are chosen by scores bfloat16 reorders).",
    "sam3_tracker": "low accuracy is bfloat16's: the CPU in bfloat16 gives the same 0.911, float32 storage "
    "1.000000.",
    "sam3": "the lowest Pearson, -1.0, is presence_logits (2, 1): two values 0.0014484 and 0.0014489 on the CPU, "
    "0.0014420 and 0.0014343 on the device, whose order bfloat16 flips (max error over all outputs 0.0066). The "
    "other outputs: pred_masks 0.99988, pred_boxes 0.99997, pred_logits 0.99995, semantic_seg 0.99991, "
    "decoder_reference_boxes 0.98057 (boxes near 0.5 rounded to bfloat16). Float32 storage 1.000000.",
    "sam3_lite_text": "low accuracy is bfloat16's: the CPU in bfloat16 gives the same 0.979, float32 storage "
    "1.000000.",
    "moonshine_streaming": "repaired at construction: its decoder config has no num_key_value_heads, which the "
    "modeling module reads (heads = key-value heads).",
    "pe_video": "repaired: its video tower, a timm vit_pe_core_large_patch14_336 with no model_args (300M "
    "parameters, 336 x 336 frames), is built with the shrunk sizes (embed_dim 64, depth 2, 4 heads) for 224 x 224 "
    "frames; a clip of 4 frames.",
    "pe_video_encoder": "as pe_video.",
    "t5gemma2_encoder": "repaired at construction: its text config has no dropout_rate, which the modeling module "
    "reads (0.0).",
    "fastspeech2_conformer": "the output length comes from `round()` of predicted durations: computed from "
    "bfloat16-stored activations, some round the other way (9 frames instead of 11 since 696782b or earlier; 10 "
    "at bb40c65, whose figures the rest of this note gives). With "
    "`configure(float32_storage=\"float32\", shadow_numerics=\"exact\")` the shapes are the CPU's and Pearson "
    "1.000000 (the fallback of `round`/`repeat_interleave` itself is faithful). The 2 durations that flip are "
    "0.044 and 0.035 from the rounding boundary on the CPU; the CPU's own float32 duration predictor applied to the "
    "device's encoder output (Pearson 0.99988) flips the same 2, so no float32 island after the encoder could "
    "help (docs/numerics.md).",
    "muse_spark_text": "the router computes `sigmoid(logits * 0.18)` in float32 on purpose: its values lie within "
    "0.5 +- 0.002, below bfloat16's resolution there (2^-9), so with float32 stored as bfloat16 (the default) the "
    "top-2 expert choice is noise (router scores Pearson 0.993, layer 0's experts 0.958). CPU bfloat16 weights "
    "alone give 0.99975; `float32_storage=\"float32\"` gives 1.000000.",
    "muse_spark": "its text model is muse_spark_text (the same router; not measured apart with float32 storage).",
    "bit": "bfloat16 storage across 48 weight-standardized convolutions of a random-weight ResNet-50 whose "
    "activations grow to ~180: each bottleneck loses a little (encoder 0.964); CPU bfloat16 is below the device "
    "at every module (encoder 0.955, output 0.938). docs/numerics.md.",
    "dac": "the residual vector quantizer picks each position's nearest codebook entry: near-ties go the other "
    "way in bfloat16 (the quantizers' input is at Pearson 0.99995, their picked vectors 0.88 to 1.0; CPU bfloat16 "
    "flips as many: 0.964), while the decoded audio stays at 0.999. docs/numerics.md.",
    "vit_mae": "the masking noise is an input (`noise`, the same seeded permutation on both runs): the random "
    "masking would otherwise keep different patches on the CPU and on the device (Pearson 0.02).",
    "rt_detr": "builds its sine position embedding in float64 on the input's device (MPS alone excepted): the zoo "
    "runs the device forward with `configure(float64=\"float32\")` (float64 stored and computed as float32; "
    "the default refuses float64 with a TypeError). Its low Pearson is a tie: with the seeded weights the "
    "encoder's class scores of all 1029 anchors are -0.693147 +- 6e-7 (11 distinct float32 values), so which "
    "300 anchors top-k keeps is float32 rounding noise on the CPU and a tie on the device; the encoder outputs "
    "agree (>= 0.99994), the query boxes picked from them do not (0.707).",
    "grounding-dino": "two-stage: the decoder's 900 queries are the top-900 of its 1045 encoder anchors by their "
    "best text-token class score, in score order. The scores spread over [-13.4, 30.3] with a median gap of 0.018 "
    "between neighbours in sorted order, while bfloat16's spacing there is up to 0.125 (the device's scores: median "
    "error 0.11, CPU bfloat16's 0.09; the CPU's own float32 scores rounded to bfloat16 leave 511 distinct values of "
    "1045): the kept set is the CPU's (99.7-99.8% of the anchors) but its order is noise (6-7% of the ranks agree; "
    "CPU bfloat16: 8-10%). The outputs in rank order -- init_/intermediate_reference_points and encoder_pred_boxes "
    "(0.549), the decoder's hidden states (0.82, 0.86: query i is learned embedding i with the rank-i anchor) -- "
    "are other rows; the device's reference points matched to the CPU's by anchor are at 0.999997, and every "
    "encoder output is at >= 0.99983. CPU bfloat16 gives 0.574; `configure(float32_storage=\"float32\", "
    "shadow_numerics=\"exact\")` 1.000000. (No CPU fallback: the phrase masks' cummax/cummin are lowered.)",
    "mm-grounding-dino": "as grounding-dino (top-900 of 1045 anchors in score order): its scores lie in [-6.26, "
    "-0.81], median neighbour gap 0.0023 against a device error of 0.014 (median); the same set (99.7%), 8-9% of "
    "the ranks agree (CPU bfloat16: 9%), reference points matched by anchor 0.999997; CPU bfloat16 0.540, "
    "float32 storage 1.000000.",
    "flex_olmo": "a mixture-of-experts router on near-uniform probabilities (random weights: 0.25 +- 0.01 over 4 "
    "experts, top-2 gaps down to 3e-5), so near-ties pick other experts: layer 0 routes 6 of 48 tokens "
    "differently from the CPU (CPU bfloat16: 0), and each changed token's expert output is another function. "
    "Module by module the device's error before the router is ~1.5x CPU bfloat16's at the default matmul "
    "fidelity (HiFi2: q_proj 1 - Pearson 9e-6 against 4e-6) and equal with `configure(math_fidelity=\"HiFi4\")`, "
    "but that gives 0.99306, and the router computed in float32 storage as well 0.99306: the flips come from "
    "bfloat16 activations, as CPU bfloat16's would for other seeds. `float32_storage=\"float32\"` gives 1.000000. "
    "The other MoE entries below 0.999 (axk1, beam, glm_moe_dsa, kolibri1, openai_privacy_filter, gpt_oss, "
    "minimax_m3_vl_text) measured with HiFi4: 0.967, 0.992, 0.997, 0.996, 0.997, 0.998, 0.998 (minimax_m3_vl: "
    "0.99926).",
    "fastspeech2_conformer_with_hifigan": "as fastspeech2_conformer. With `configure(math_fidelity=\"HiFi4\")` "
    "fastspeech2_conformer's shapes are the CPU's (Pearson 0.99922).",
    "efficientnet": "shrunk to depth multiplier 1.0 (B0's 16 blocks) at 224x224. Its pooler is "
    "`nn.AvgPool2d(hidden_dim=2560, ceil_mode=True)` over a 7x7 map: TT-NN's avg_pool2d with a window wider than "
    "its input never returned (a kernel of 32 on 7x7 killed the process: SIGSEGV in "
    "`sliding_window::generate_op_trace_metadata`); such windows are now a sum over H and W (lowerings/pooling.py).",
    "align": "its image tower is efficientnet's. Its image embeddings are NaN on the device: the random-weight "
    "tower's pooled features are ~5e-23, their squares float32 subnormals (~6e-44) that the device flushes to 0 (as "
    "Tensix does), so the L2 norm is 0 and 0/0 NaN; `image_embeds / image_embeds.norm()` has no epsilon.",
    "videoprism": "its lowest outputs are `logits_per_text`/`logits_per_video`: `exp(similarity)` divided by its "
    "column sums, 2x2 values within 0.4972 to 0.5028, i.e. one or two bfloat16 steps (2^-8 below 0.5) apart. CPU "
    "bfloat16 does better on them (1 - Pearson 6.2e-4 against 8.6e-2) by one rounding: the device's row sum "
    "exp(0.0594) + exp(0.0689) = 1.0625 + 1.0703 = 2.1328 is a bfloat16 tie that rounds to 2.125, so one value "
    "is 1.0625 / 2.125 = 0.5 where the CPU's are 0.49609 (float32: 0.49735). The similarities differ because the "
    "default HiFi2 matmuls (6 bits of the activation operand, numerics.py) double the embeddings' error (1 - "
    "Pearson: text_embeds 4.9e-5 against CPU bfloat16's 2.2e-5, video_embeds 1.4e-4 against 1.1e-4; layer 0's "
    "q_proj 1.4e-5 against 9.7e-6 from the same input). With `configure(math_fidelity=\"HiFi4\")` every module's "
    "error is CPU bfloat16's within 3% and the 2x2 outputs are its values (0.99939); float32 storage gives "
    "1.000000.",
    "vits": "the output length is `ceil(exp(log_duration))` frames per token. Measured again at 696782b and "
    "325027c the device makes 39 frames where the CPU makes 40 (a shape difference; CPU bfloat16's length "
    "differs too, float32 storage gives the CPU's shapes and 1.000000); the figures below are those of ef64eb0. The float32 CPU's 8.0186 frames "
    "(row 0, token 13: 9 frames) is not a bfloat16 value (8.0 and 8.0625 are), so every bfloat16 forward gives 8 "
    "(so does the device given the CPU's float32 log-durations). CPU bfloat16 therefore makes 39 frames, "
    "waveform (2, 9984) against (2, 10240): its \"1.0\" is the Pearson of the 2-value `sequence_lengths` alone, "
    "the only output of the CPU's shape (`shapes_cpu_bfloat16`). The device also gets token 7's 3.9016 frames as "
    "4.2 (log-duration 1.4375 against 1.3614; CPU bfloat16's 1.2969 is as far off the other way) and so 5 frames: "
    "40 in all, the CPU's shape, but every frame from token 7 on is shifted by one against the CPU's alignment "
    "(spectrogram 0.933, waveform 0.899). The duration predictor's output itself is closer to float32 on the "
    "device (1 - Pearson 3.8e-4, largest log-duration error 0.078) than in CPU bfloat16 (4.8e-4, 0.099), and "
    "the noise (`torch.randn_like` on ttnn:0) is the CPU generator's draws. Given the float32 durations (each "
    "half a frame from its boundary) on every run, the waveform is 0.99667 on the device, 0.99628 in CPU "
    "bfloat16 (spectrogram 0.99993 and 0.99990); float32 storage gives 1.000000.",
    "openai_privacy_filter": "its router is float32 on purpose (`F.linear(hidden_states.float(), ...)`, then a "
    "softmax over the top-2 of 4 logits, divided by 2: scores 0.25 +- 0.03). CPU bfloat16 computes it in float32; "
    "the device stores float32 as bfloat16: layer 0's router logits 1 - Pearson 1.7e-5 against 6.0e-6, its scores "
    "2.2e-4 against 6.2e-6 (the device's scores are exactly the bfloat16 rounding of the float32 softmax of its "
    "logits). In layer 1, 2 of 48 tokens pick another expert (top-2 logit gaps 2.6e-4 and 1.9e-3; CPU bfloat16: "
    "none), so that layer's experts are at 1.7e-2 against 1.6e-5. With `math_fidelity=\"HiFi4\"` the same 2 "
    "flip (output 0.99746); `float32_storage=\"float32\"` gives 1.000000.",
    "kimi_linear": "its KDA forget gate computes `log(1.0 + exp(g))` on `forget_gate.float() + dt_bias` in "
    "float32 on purpose: dt_bias is the inverse softplus of dt in [1e-3, 1e-1], so g lies in [-7.0, -2.2] and "
    "exp(g) is ~0.01 (median), below the spacing of bfloat16 above 1 (2^-7): with float32 stored as bfloat16 "
    "`1.0 + exp(g)` loses most of exp(g), the softplus up to 100% (1 - Pearson of layer 0's forget gate 3.5e-3 "
    "against CPU bfloat16's 3.0e-5, whose float32 is real). The gate alone on the device equals a CPU emulation "
    "that rounds every op's output to bfloat16 (3.548e-3 both; `log1p` would give 5.3e-5); float32 storage: "
    "1.7e-7. Layer 0's attention output is at 8.8e-3 (CPU bfloat16 4.1e-5); HiFi4 changes nothing there.",
    "siglip2": "the default HiFi2 matmuls (6 bits of the activation operand, numerics.py): layer 0's text "
    "attention output (out_proj) is at 1 - Pearson 6.6e-5 against CPU bfloat16's 2.3e-5 and text_embeds at 1.7e-4 "
    "against 4.7e-5; the 2x2 `logits_per_text` (logit_scale x cosine + bias: -0.17 to 0.07, small differences "
    "of the embeddings) at 1.2e-3 against 1.5e-4. With `configure(math_fidelity=\"HiFi4\")`: 0.99980 (CPU "
    "bfloat16 0.99985; text_embeds 4.4e-5); float32 storage gives 1.000000.",
    "sam2": "its lowest output is `object_score_logits`: 2 values (the CPU's 9.995e-6 and 8.131e-6) whose "
    "Pearson is +-1 by construction; the device's are within 1.7e-5 of them and CPU bfloat16 gets -1.0 too. The "
    "other outputs: iou_scores 0.999988, pred_masks 0.99973, image_embeddings 0.99999 / 0.99995 / 0.99978. Run "
    "at the config's 1024x1024 image (Hiera's query pooling: 2048 windows, pooled in batch chunks).",
    "pp_doclayout_v3": "float64 position embedding as rt_detr: run with `configure(float64=\"float32\")`.",
    "pp_doclayout_v4": "float64 position embedding as rt_detr: run with `configure(float64=\"float32\")`.",
    # torchvision detectors (seeded random weights, 10 classes): per stage on the device, on the CPU in bfloat16
    # (explain_accuracy: nms and roi_align given float32) and with float32 storage; "finds a/b of the CPU's
    # boxes": same label, every coordinate within 1 px, per image. No lowering is wrong in any of them.
    "torchvision:ssdlite320_mobilenet_v3_large": "ties, not a lowering: the class scores are softmax(~0) = 0.1 "
    "+- 0.003 with exact float32 ties (class 1 of image 0: 644 distinct values over 3234 anchors, its 300th best "
    "shared by 228 anchors), so which 300 anchors a class's top-k keeps, and the order nms visits equal scores "
    "in, is each sort's tie order. Backbone and head >= 0.99999 on the device (CPU bfloat16 the same); with float32 "
    "storage their largest error is 9e-8, yet 159 of the 2700 boxes nms gets are other (tied) anchors: 0.273, and "
    "the CPU in float64 gives 0.301 against its own float32. The device finds 65/74 of the CPU's 300/300 boxes, "
    "CPU bfloat16 73/85 (-0.222), float32 storage 196/200, CPU float64 166/156.",
    "torchvision:ssd300_vgg16": "ties, and batched_nms in bfloat16. The random VGG (no batch norm) has class "
    "logits up to +-85: 390 anchors of image 0 score exactly 1.0 and so do all 200 boxes kept, so which and in "
    "what order is tie order (the CPU in float64: -0.077 against its float32). And batched_nms's coordinate trick "
    "(each box moved by class x (max coordinate + 1), up to ~2700) runs on the device: torchvision takes it for a "
    "non-CPU tensor of up to 25,000 boxes (on the CPU up to 1,000; here 3,600: a loop over classes), and in "
    "bfloat16 (spacing 16 above 2048) it moves boxes by pixels: the device finds 52/26 of the CPU's 200/200 boxes, "
    "the same forward with batched_nms computed on the host in float32 117/123, CPU bfloat16 123/121 (0.312). "
    "Float32 storage (-0.781, 172/181) equals the CPU's float32 forward made to take the coordinate trick, to the "
    "last digit. Backbone 0.99992, head 0.99996 (CPU bfloat16 0.99991, 0.99997).",
    "torchvision:retinanet_resnet50_fpn": "bfloat16 alone: float32 storage gives 0.99999999998 (the CPU in float64 "
    "1 - 2e-12), CPU bfloat16 0.071. Backbone 0.9999, head 0.99981 on the device (CPU bfloat16 0.99991, 0.99983); "
    "the detections are sigmoid scores above 0.05, nms and the best 300 sorted by score, so a box more or less "
    "near a threshold shifts every later row: the device finds 199/228 of the CPU's 300/300 boxes, CPU bfloat16 "
    "235/223. Its 877 boxes take the coordinate trick on the CPU as well; batched_nms on the host in float32 "
    "changes nothing (199/229).",
    "torchvision:fasterrcnn_mobilenet_v3_large_320_fpn": "bfloat16 alone, at the RPN: its objectness logits are "
    "+-0.008 (scores 0.5 +- 0.002, one bfloat16 step there: 2^-9 below 0.5, 2^-8 above), so the order nms visits "
    "the 330 anchors in is noise: proposals at 0.48 (CPU bfloat16 0.48) after a backbone at 0.99998 and an RPN head at 0.99996; the "
    "class scores are 0.1 +- 0.002 too. The device finds 61/61 of the CPU's 100/100 boxes, CPU bfloat16 63/63 "
    "(0.506), float32 storage 100/100 (0.9985; the CPU in float64 0.9992); batched_nms on the host in float32: "
    "0.479.",
    "torchvision:fasterrcnn_mobilenet_v3_large_fpn": "at 96x96 the network of fasterrcnn_mobilenet_v3_large_320_fpn "
    "(they differ in the RPN's top-n, 150 or 1000 per level, and its levels have at most 135 anchors): the same "
    "outputs, the same figures.",
    "torchvision:fasterrcnn_resnet50_fpn": "the CPU in bfloat16 keeps fewer boxes too: 26 and 29 detections "
    "(device 22 and 26, CPU 50 and 48; float32 storage: the CPU's shapes, 0.99999997). Backbone 0.99989, RPN head "
    "0.99945 (CPU bfloat16 0.9999, 0.99947); the random box deltas clip many proposals to the image border, and "
    "49 of the RPN's 550 candidates of image 0 are thinner than 0.5 px on the CPU, 7 on the device (bfloat16 "
    "spacing: 0.5 between 64 and 128), which has 516 candidates after remove_small_boxes (CPU bfloat16 514); nms "
    "keeps 86 proposals (CPU 117, CPU bfloat16 83). batched_nms on the host in float32: 23 "
    "and 26. The CPU in float64 against its float32: 0.694 (49 of 50 boxes found).",
    "torchvision:fasterrcnn_resnet50_fpn_v2": "as fasterrcnn_resnet50_fpn: CPU bfloat16 11 and 15 detections, "
    "device 11 and 12, CPU 39 and 44; backbone 0.99988, RPN head 0.99948 (CPU bfloat16 0.9999, 0.99949); "
    "batched_nms on the host in float32: 11 and 12. Float32 storage is not measured (a convolution's DRAM "
    "slicing finds no configuration at float32 sizes).",
    "torchvision:maskrcnn_resnet50_fpn": "as fasterrcnn_resnet50_fpn: the RPN's nms keeps 30 and 26 proposals "
    "(CPU 37 and 31, CPU bfloat16 31 and 23), then 11 and 6 detections (CPU 13 and 9, CPU bfloat16 13 and 7). "
    "Float32 storage: the CPU's shapes, boxes and scores at 1.000000, image 1's masks at 0.984: pasting a mask "
    "into the image rounds its box to whole pixels, and the boxes differ by up to 0.07 px (the CPU in float64 "
    "against its float32: masks 0.45).",
    "torchvision:maskrcnn_resnet50_fpn_v2": "as fasterrcnn_resnet50_fpn_v2: 3 and 6 detections, CPU 5 and 15, "
    "CPU bfloat16 3 and 7; float32 storage fails as there.",
    "torchvision:keypointrcnn_resnet50_fpn": "as fasterrcnn_resnet50_fpn: the RPN's nms keeps 44 and 58 "
    "proposals (CPU 72 and 72, CPU bfloat16 47 and 53), then 0 and 0 detections (CPU 5 and 1, CPU bfloat16 0 "
    "and 1). Float32 storage: the CPU's shapes, 0.9999998.",
}


def _section(title: str, data: dict, source: str) -> list:
    results, meta = data.get("results", {}), data.get("meta", {})
    tot = totals(results)
    ran_cpu = sum(v for k, v in tot.items() if k != "cpu fails")
    commits = collections.Counter(r.get("commit", "?") for r in results.values())
    out = [f"## {title}\n\n",
           f"{len(results)} of {meta.get('entries', len(results))} entries measured, at commit(s) "
           f"{', '.join(f'`{c}` ({n})' for c, n in commits.most_common())}; torch {meta.get('torch')}, "
           f"{source} {meta.get(source)}; a worker subprocess restarted after every crash or timeout "
           f"({meta.get('timeout_s')} s) and every {meta.get('recycle')} entries.\n\n",
           "| class | entries | share of those whose CPU forward runs |\n|---|---|---|\n"]
    for c in CLASSES:
        share = f"{100 * tot[c] / ran_cpu:.1f}%" if c != "cpu fails" and ran_cpu else "-"
        out.append(f"| {c} | {tot[c]} | {share} |\n")
    out.append(f"| **total** | {len(results)} | {ran_cpu} run on the CPU |\n\n")
    fb = fallback_table(results)
    if fb:
        out.append("CPU fallbacks by the number of architectures where they happen (the ops to lower):\n\n"
                   "| aten op | architectures | calls in one forward, summed |\n|---|---|---|\n")
        out += [f"| `{op}` | {n} | {c} |\n" for op, n, c in fb]
        out.append("\n")
    errors = collections.Counter(r.get("error", "")[:90] for r in results.values()
                                 if (r.get("class_") or classify(r)) in ("error", "crash", "timeout"))
    if errors:
        out.append("Errors, crashes and timeouts by their text (first 90 characters):\n\n"
                   "| entries | error |\n|---|---|\n")
        out += [f"| {n} | {e.replace('|', '/')} |\n" for e, n in errors.most_common()]
        out.append("\n")
    notes = [n for n in sorted(results) if n in NOTES]
    if notes:
        out.append("Notes:\n\n" + "".join(f"- **{n}**: {NOTES[n]}\n" for n in notes) + "\n")
    out.append("| entry | class | result | Pearson | max abs err | fallbacks (aten op x calls) | aten / TT-NN ops "
               "| error or difference |\n|---|---|---|---|---|---|---|---|\n")
    for name in sorted(results):
        r = results[name]
        fbs = ", ".join(f"`{k}` x{v}" for k, v in (r.get("fallbacks") or {}).items()) or "0"
        ops = f"{r['aten_ops']} / {r['ttnn_ops']}" if "ttnn_ops" in r else "-"
        err = (r.get("error") or "; ".join(r.get("mismatches") or [])).replace("|", "/").replace("\n", " ")
        if "pearson_float32_storage" in r or "cpu_bfloat16_pearson" in r:
            same = "" if r.get("shapes_float32_storage", True) else " (shapes differ there too)"
            low = "" if r.get("shapes_cpu_bfloat16", True) else " (other output shapes)"
            err = (f"with float32 storage and exact arithmetic: {_fmt_p(r.get('pearson_float32_storage'))}{same}; "
                   f"the CPU in bfloat16: {_fmt_p(r.get('cpu_bfloat16_pearson'))}{low}. " + err).strip()
        err_s = err[:200] + ("..." if len(err) > 200 else "")
        maxe = f"{r['max_abs_err']:.3g}" if r.get("max_abs_err") is not None else "-"
        out.append(f"| {name.split(':', 1)[-1]} (`{r.get('class', '?')}`) | {r.get('class_') or classify(r)} | "
                   f"{r.get('status')} | {_fmt_p(r.get('pearson'))} | {maxe} | {fbs} | {ops} | {err_s} |\n")
    return out


def bfloat16_cpu_md(data: dict, cpu: dict) -> list:
    """The paragraph that compares ttnn:0 with the CPU in bfloat16 on the same entries (`--bfloat16-cpu`)."""
    dev, ref = data.get("results", {}), cpu.get("results", {})
    both = [n for n in dev if dev[n].get("status") == "ran" and n in ref]
    if not both:
        return []
    cls = {n: ref[n].get("class_") or classify(ref[n]) for n in both}
    clean_dev = {n for n in both if (dev[n].get("class_") or classify(dev[n])) == "clean"}
    clean_cpu = {n for n in both if cls[n] == "clean"}
    counts = collections.Counter(cls.values())
    either = len(clean_dev | clean_cpu)

    def names(s):
        return ", ".join(sorted(s)) or "none"
    return [f"\n**The CPU in bfloat16 on the same entries** (`ttnn-eager zoo --bfloat16-cpu`, "
            f"docs/zoo_bfloat16_cpu.json: `model.to(torch.bfloat16)` and its floating inputs on the CPU where "
            f"`ttnn:0` stands above, against the same float32 forward): of the {len(both)} types that run, "
            f"{counts['clean']} are clean ({100 * counts['clean'] / len(both):.1f}%; `ttnn:0`: {len(clean_dev)}), "
            f"{counts['low accuracy']} low accuracy, {counts['shape/dtype differs']} shape/dtype differs, "
            f"{counts['error']} do not run in bfloat16 (their code mixes dtypes). Clean on either: {either} "
            f"({100 * either / len(both):.1f}%): bfloat16 arithmetic done as well as by either leaves the rest "
            f"below Pearson 0.999. Clean on the CPU in bfloat16 but not on `ttnn:0` "
            f"({len(clean_cpu - clean_dev)}): {names(clean_cpu - clean_dev)}. Clean on `ttnn:0` but not on the "
            f"CPU in bfloat16 ({len(clean_dev - clean_cpu)}): {names(clean_dev - clean_cpu)}.\n"]


def zoo_md(data: dict, vision: dict | None = None, bfloat16_cpu: dict | None = None) -> str:
    s = SHRINK
    out = ["<!-- generated by `ttnn-eager zoo --docs` / `ttnn-eager docs --zoo` (src/ttnn_eager/tools/zoo.py) "
           "from docs/zoo.json (and docs/zoo_vision.json); do not edit by hand -->\n\n",
           "# The zoo: every transformers model type (and torchvision model) on `ttnn:0`\n\n",
           "Each model type of `transformers.models.auto.modeling_auto.MODEL_MAPPING_NAMES`, its default config "
           f"shrunk generically (hidden {s['hidden']}, {s['heads']} heads, {s['kv_heads']} key-value heads, head "
           f"size {s['head_dim']}, {s['layers']} layers, feed-forward {s['ffn']}, vocabulary {s['vocab']}, "
           f"{s['experts']} experts with {s['per_token']} per token; sub-configs too), seeded weights, forward "
           f"under `no_grad` on input_ids ({BATCH}, {SEQ}) with the second row's last {MASKED} positions masked "
           "(pixel_values / input_values for models that take no input_ids), first in float32 on the CPU, then on "
           "`ttnn:0` (default storage: float32 as bfloat16). Every output tensor is compared on the valid "
           "positions: shape and dtype, Pearson (the lowest over the outputs), max absolute error.\n\n",
           "Classes: **clean** = 0 CPU fallbacks, Pearson >= 0.999 and every output's shape and dtype the "
           "CPU's; **fallback ops** = ran, with CPU fallbacks; **low accuracy** = no fallback, Pearson < 0.999; "
           "**shape/dtype differs** = an output's shape or dtype is not the CPU's (a wrong answer); **error** = the "
           "device forward raised; **crash** = the process died (TT_FATAL, signal); **timeout**; **cpu fails** "
           "= the model cannot be built or run this way on the CPU (not counted in the shares).\n\n",
           "Reproduce: `ttnn-eager zoo [--vision] [--only a,b] [--timeout S] [--docs]` (resumes from the JSON; "
           "`--redo` measures again).\n\n"]
    out += _section("transformers", data, "transformers")
    out += bfloat16_cpu_md(data, bfloat16_cpu or {})
    if vision and vision.get("results"):
        out.append("\n")
        out += _section("torchvision (classification 2x3x96x96, ViT/Swin/MaxViT 224; video 2x3x8x112x112; "
                        "segmentation and detection 2 images 3x96x96, 10 classes)", vision, "torchvision")
        out.append("\nDetection outputs are boxes chosen by thresholds and non-maximum suppression on random "
                   "weights: a low Pearson there says that some other boxes were kept, not that an op is wrong.\n")
    return "".join(out)


DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                    "docs")
JSON = os.path.join(DOCS, "zoo.json")
VISION_JSON = os.path.join(DOCS, "zoo_vision.json")
BFLOAT16_CPU_JSON = os.path.join(DOCS, "zoo_bfloat16_cpu.json")  # `ttnn-eager zoo --bfloat16-cpu`
COMPILE_JSON = os.path.join(DOCS, "zoo_compile.json")  # `ttnn-eager zoo --compile`
COMPILE_VISION_JSON = os.path.join(DOCS, "zoo_compile_vision.json")  # `ttnn-eager zoo --compile --vision`


def write_doc(path: str | None = None, json_path: str = JSON, vision_path: str = VISION_JSON,
              bfloat16_cpu_path: str = BFLOAT16_CPU_JSON) -> str:
    text = zoo_md(load(json_path), load(vision_path), load(bfloat16_cpu_path))
    with open(path or os.path.join(DOCS, "zoo.md"), "w") as f:
        f.write(text)
    return text


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"] and sys.argv[2:] in ([], ["--bfloat16-cpu"], ["--compile"]):
        sys.exit(worker_main(bfloat16_cpu=sys.argv[2:] == ["--bfloat16-cpu"], compiled=sys.argv[2:] == ["--compile"]))
    sys.exit("usage: ttnn-eager zoo (this module's own entry point is the worker: --worker)")
