"""The sizes of the zoo (issue 23's shrunk defaults, the inputs' batch and length) and `shrink`: a
config's to_dict() shrunk generically (hidden, heads, key-value heads, head size, layers, feed-forward,
vocabulary, experts), its values kept consistent with one another (`_consistent`, `_consistent_moe`) and with the
sizes tied across sub-configs (`_tied`)."""
from __future__ import annotations

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
