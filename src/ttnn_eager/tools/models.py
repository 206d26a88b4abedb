"""Hugging Face families on `ttnn:0` against float32 PyTorch on the CPU: tiny seeded configs of every family,
`generate()` compared token by token, forwards compared by Pearson correlation. `ttnn-eager generate`,
docs/models.md (`ttnn-eager docs --models`), the generation benchmark and tests/test_generation.py share it.

    FAMILIES                name -> Family (kind "causal" | "seq2seq" | "vision", config builder)
    build(name)             (the CPU model, the family), weights seeded
    compare_generate(...)   greedy (or sampled / beam) generate() on ttnn:0 and the CPU: tokens, agreement,
                            per-step logits Pearson, per-token host time, TT-NN ops and transfers
    compare_forward(...)    one forward: Pearson, fallbacks (strict mode), aten and TT-NN ops

Per-token figures are measured inside the generation loop: a logits processor that changes nothing takes
a snapshot of the counters and the clock at every step (it runs no op), so each generated token's own
TT-NN ops, transfers and host time are the differences between consecutive snapshots; the first step
(the prompt's forward, "prefill") is reported apart from the steady-state decode steps.
"""
from __future__ import annotations

import copy
import dataclasses
import statistics
import time

import torch

from .. import config, counters
from .compare import pcc

# Tiny configs: head size 32 (TT-NN's fused attention wants a multiple of 32), grouped-query attention
# where the family has it, a vocabulary that is not a multiple of 32.
_VOCAB = 500
_DEC = dict(vocab_size=_VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)

# mixture-of-experts configs (issue 23's shrunk defaults): hidden 64, 2 layers, 4 heads, 2 key-value heads,
# 4 experts with 2 per token, vocabulary 1024
_MOE = dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, num_experts_per_tok=2, max_position_embeddings=256)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str          # the architecture (the model class PyTorch users meet)
    kind: str          # "causal" | "seq2seq" | "vision"
    model_class: str   # transformers class name
    config: callable   # () -> transformers config
    note: str = ""     # what is special about it (rotary, GQA, ...)


def _cfg(cls_name: str, attn: str = "sdpa", **kw):
    def make():
        import transformers
        cfg = getattr(transformers, cls_name)(**kw)
        cfg._attn_implementation = attn
        return cfg
    return make


FAMILIES = {f.name: f for f in [
    Family("gpt2", "causal", "GPT2LMHeadModel", _cfg(
        "GPT2Config", vocab_size=_VOCAB, n_embd=128, n_layer=2, n_head=4, n_positions=256,
        bos_token_id=1, eos_token_id=2),
        "learned positions, fused qkv (Conv1D), gelu_new"),
    Family("llama", "causal", "LlamaForCausalLM", _cfg("LlamaConfig", **_DEC),
           "rotary, RMSNorm, SwiGLU, grouped-query attention"),
    Family("mistral", "causal", "MistralForCausalLM", _cfg("MistralConfig", **_DEC, sliding_window=None),
           "Llama-style, grouped-query attention"),
    Family("qwen2", "causal", "Qwen2ForCausalLM", _cfg("Qwen2Config", **_DEC),
           "Llama-style with q/k/v biases"),
    Family("qwen3", "causal", "Qwen3ForCausalLM", _cfg("Qwen3Config", **_DEC, head_dim=32),
           "Llama-style with q/k RMSNorm"),
    Family("phi", "causal", "PhiForCausalLM", _cfg(
        "PhiConfig", vocab_size=_VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=256),
        "partial rotary, parallel attention/MLP, LayerNorm, gelu_new"),
    Family("phi3", "causal", "Phi3ForCausalLM", _cfg(
        "Phi3Config", **_DEC, pad_token_id=0, bos_token_id=1, eos_token_id=2), "fused qkv and gate/up projections"),
    Family("opt", "causal", "OPTForCausalLM", _cfg(
        "OPTConfig", vocab_size=_VOCAB, hidden_size=128, ffn_dim=256, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=256, word_embed_proj_dim=128),
        "learned positions (offset 2), relu"),
    Family("gemma", "causal", "GemmaForCausalLM", _cfg("GemmaConfig", **_DEC, head_dim=32),
           "scaled embeddings, RMSNorm (1 + w), gelu-tanh GLU"),
    Family("gemma2", "causal", "Gemma2ForCausalLM", _cfg(
        "Gemma2Config", attn="eager", **_DEC, head_dim=32, sliding_window=64),
        "logit soft-capping (so eager attention), sliding-window layers, pre/post norms"),
    Family("t5", "seq2seq", "T5ForConditionalGeneration", _cfg(
        "T5Config", vocab_size=_VOCAB, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
        "relative position buckets, RMSNorm, no attention scaling"),
    Family("bart", "seq2seq", "BartForConditionalGeneration", _cfg(
        "BartConfig", vocab_size=_VOCAB, d_model=128, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
        max_position_embeddings=256),
        "learned positions (offset 2), post-LayerNorm"),
    # mixture-of-experts: transformers' grouped-matmul experts (integrations/moe.py: sort, histc, _grouped_mm)
    Family("mixtral", "causal", "MixtralForCausalLM", _cfg("MixtralConfig", **_MOE, num_local_experts=4),
           "mixture of experts (4, top-2): sort, histc, grouped matmul; head size 16"),
    Family("qwen3_moe", "causal", "Qwen3MoeForCausalLM", _cfg(
        "Qwen3MoeConfig", **_MOE, moe_intermediate_size=64, num_experts=4, head_dim=32),
        "mixture of experts (4, top-2) with q/k RMSNorm"),
    Family("deepseek_v3", "causal", "DeepseekV3ForCausalLM", _cfg(
        "DeepseekV3Config", **{**_MOE, "num_key_value_heads": 4}, moe_intermediate_size=64, n_routed_experts=4, n_shared_experts=1,
        first_k_dense_replace=1, n_group=2, topk_group=1, q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=16,
        qk_nope_head_dim=16, v_head_dim=32),
        "multi-head latent attention, shared expert, group-limited sigmoid routing (4 experts, top-2)"),
    Family("vit", "vision", "ViTForImageClassification", _cfg(
        "ViTConfig", image_size=64, patch_size=16, hidden_size=128, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=256, num_labels=10),
        "patch embedding: a 16x16 stride-16 convolution"),
    Family("clip_vision", "vision", "CLIPVisionModel", _cfg(
        "CLIPVisionConfig", image_size=64, patch_size=16, hidden_size=128, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=256),
        "patch embedding convolution, quick_gelu"),
]}


def build(name: str, seed: int = 0, heads: int | None = None):
    """(CPU model in eval mode with seeded random weights, its Family). `heads`: at least that many attention
    and key-value heads (a tensor-parallel split needs a head per chip)."""
    import transformers
    if name not in FAMILIES:
        raise ValueError(f"unknown model {name!r}: a local path, or one of the tiny seeded configs "
                         f"{', '.join(FAMILIES)}")
    fam = FAMILIES[name]
    torch.manual_seed(seed)
    cfg = fam.config()
    if heads is not None and hasattr(cfg, "num_key_value_heads"):
        n = max(heads, cfg.num_attention_heads)
        cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
        cfg.num_attention_heads = cfg.num_key_value_heads = n
        cfg.hidden_size = cfg.head_dim * n
    model = getattr(transformers, fam.model_class)(cfg).eval()
    return model, fam


# Tensor parallelism over a mesh (ttnn_eager.mesh): PyTorch's plan for a Llama-style decoder layer, as under torchrun
TP_PLAN = {"self_attn.q_proj": "colwise", "self_attn.k_proj": "colwise", "self_attn.v_proj": "colwise",
           "self_attn.o_proj": "rowwise", "mlp.gate_proj": "colwise", "mlp.up_proj": "colwise",
           "mlp.down_proj": "rowwise"}
CCL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "mesh_partition")


def tensor_parallel(model, shape: tuple):
    """A copy of `model` on ttnn:0 opened as a mesh of `shape`, its decoder layers split by TP_PLAN over the
    chips of a mesh row (DTensor's ColwiseParallel / RowwiseParallel; the rows replicate), and (the bytes its
    weights take per chip -- the mesh's allocator is lockstep: every chip's reading is this one --, the
    replicated model's bytes for comparison)."""
    import ttnn_eager
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from ..device import api
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or not all(hasattr(layers[0], k.split(".")[0]) for k in TP_PLAN) or \
            not hasattr(layers[0].self_attn, "q_proj") or not hasattr(layers[0].mlp, "gate_proj"):
        raise ValueError(f"{type(model).__name__} is not a Llama-style decoder (self_attn.q/k/v/o_proj, "
                         f"mlp.gate/up/down_proj): tensor parallelism over a mesh covers llama, mistral, qwen2, qwen3")
    import gc
    mesh = ttnn_eager.mesh.init(shape)
    tp = mesh["tp"] if mesh.ndim == 2 else mesh
    base = api.memory_allocated(0)
    whole = copy.deepcopy(model).to("ttnn:0")
    replicated = api.memory_allocated(0) - base
    del whole
    gc.collect()
    base = api.memory_allocated(0)
    dev = copy.deepcopy(model)
    plan = {k: ColwiseParallel() if v == "colwise" else RowwiseParallel() for k, v in TP_PLAN.items()}
    for layer in dev.model.layers:
        parallelize_module(layer, tp, plan)
    dev.to("ttnn:0")
    chips = shape[0] * shape[1]
    return dev, {"weight_bytes_per_chip": [api.memory_allocated(0) - base] * chips,
                 "tp_degree": tp.size(), "replicated_weight_bytes": replicated}


def load(name_or_path: str, seed: int = 0, heads: int | None = None):
    """(CPU model, Family or None, tokenizer or None, source text): a tiny seeded config by name, else a
    local path or a model in the local Hugging Face cache (causal or seq2seq LM)."""
    if name_or_path in FAMILIES:
        model, fam = build(name_or_path, seed, heads)
        return model, fam, None, f"{name_or_path}: tiny config ({fam.model_class}) with seeded random weights"
    import transformers
    try:
        cfg = transformers.AutoConfig.from_pretrained(name_or_path, local_files_only=True)
    except OSError as e:
        raise ValueError(f"unknown model {name_or_path!r}: neither a local path nor a model in the local Hugging "
                         f"Face cache ({str(e).splitlines()[0]}), nor one of the tiny seeded configs "
                         f"{', '.join(FAMILIES)}") from e
    auto = transformers.AutoModelForSeq2SeqLM if cfg.is_encoder_decoder else transformers.AutoModelForCausalLM
    model = auto.from_pretrained(name_or_path, local_files_only=True, dtype=torch.float32).eval()
    try:
        tok = transformers.AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
    except (OSError, ValueError):
        tok = None
    kind = "seq2seq" if cfg.is_encoder_decoder else "causal"
    return model, Family(name_or_path, kind, type(model).__name__, lambda: cfg), tok, name_or_path


def prompt_ids(vocab: int, length: int = 8, batch: int = 1, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, min(vocab, _VOCAB), (batch, length), generator=g)  # clear of special ids 0-2


class _Snapshots:
    """A logits processor that changes nothing: it records the counters and the clock at every step."""

    def __init__(self, index: int = 0):
        self.marks, self.index = [], index

    def __call__(self, input_ids, scores):
        from ..device import api as device_api
        self.marks.append((time.perf_counter(), counters.stats(), counters.ttnn_by_op.copy(),
                           device_api.memory_allocated(self.index), device_api.program_cache_entries(self.index)))
        return scores


class _CacheBuffers:
    """A forward pre-hook that records, at every forward of generate(), the device buffer address of each
    tensor the KV cache holds (a StaticCache's keys, values and positions): with the same addresses at every
    decode step, the cache was written in place (no reallocation)."""

    def __init__(self, model):
        self.marks = []
        self._hook = model.register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        from ..device import api as device_api
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        from ..core.tensor import handle_of, is_ttnn
        tensors = [t for layer in getattr(cache, "layers", ()) for t in vars(layer).values() if is_ttnn(t)]
        self.marks.append([device_api.buffer_address(handle_of(t)) for t in tensors])

    def summary(self) -> dict:
        """tensors: device tensors the cache holds; reallocated: how many changed buffer between decode steps
        (from the first forward that found the cache on the device)."""
        self._hook.remove()
        marks = [m for m in self.marks if m]
        changed = {i for a, b in zip(marks, marks[1:]) for i, (x, y) in enumerate(zip(a, b)) if x != y}
        return {"tensors": len(marks[-1]) if marks else 0, "reallocated": len(changed),
                "steps": len(marks)}


def _steps(marks, start) -> list:
    """Per generated token: (seconds, counter differences) between consecutive snapshots (the first from
    the start of generate(): the prompt's forward)."""
    out = []
    prev_t, prev_stats = start
    for t, st, *_ in marks:
        out.append((t - prev_t, {k: st[k] - prev_stats[k] for k in st}))
        prev_t, prev_stats = t, st
    return out


def _generate(model, ids, kwargs, snap=None):
    import transformers
    extra = {}
    if snap is not None:
        extra["logits_processor"] = transformers.LogitsProcessorList([snap])
    with torch.no_grad():
        return model.generate(ids, return_dict_in_generate=True, output_logits=True, **kwargs, **extra)


def generation_kwargs(model, max_new_tokens: int, cache: str = "dynamic", mode: str = "greedy") -> dict:
    """generate() options of each decoding mode. min_new_tokens = max_new_tokens, so that an end-of-sequence
    token cannot stop one of the two compared runs early (its logits processor adds a few ops per token)."""
    kw = dict(max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, pad_token_id=0)
    if cache == "static":
        kw["cache_implementation"] = "static"
    elif cache != "dynamic":
        raise ValueError(f"cache must be 'dynamic' or 'static', not {cache!r}")
    if mode == "greedy":
        kw.update(do_sample=False, num_beams=1)
    elif mode == "sample":
        kw.update(do_sample=True, top_k=20, top_p=0.9, temperature=0.8)
    elif mode == "beam":
        kw.update(do_sample=False, num_beams=3, early_stopping=False)
    else:
        raise ValueError(f"mode must be greedy, sample or beam, not {mode!r}")
    return kw


def max_positions(model) -> int | None:
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    for key in ("n_positions", "max_position_embeddings"):
        if getattr(cfg, key, None):
            return int(getattr(cfg, key))
    return None


def check_length(model, prompt_len: int, max_new_tokens: int) -> None:
    """A prompt that, with the tokens to generate, does not fit the model's positions is refused up front
    (a learned position table would be indexed out of range: an IndexError on the CPU, unchecked reads on
    a card, where position ids are computed on the device)."""
    limit = max_positions(model)
    if limit is not None and not model.config.is_encoder_decoder and prompt_len + max_new_tokens > limit:
        raise ValueError(f"the prompt ({prompt_len} tokens) plus max_new_tokens ({max_new_tokens}) is longer "
                         f"than the model's {limit} positions: shorten the prompt or lower max_new_tokens "
                         f"(to at most {max(limit - prompt_len, 0)})")


def compare_generate(model, ids: torch.Tensor, max_new_tokens: int = 32, cache: str = "dynamic",
                     mode: str = "greedy", strict: bool = False, seed: int = 0, device: str = "ttnn:0",
                     on_device=None) -> dict:
    """generate() on `device` and on the CPU (float32) from the same prompt and seed; `on_device` is the
    model already moved there (else a copy of `model` is moved)."""
    from ..device import runtime  # noqa: F401  (the device must exist before timing)
    check_length(model, ids.shape[-1], max_new_tokens)
    kwargs = generation_kwargs(model, max_new_tokens, cache, mode)
    torch.manual_seed(seed)
    ref = _generate(model, ids, kwargs)
    dev_model = on_device if on_device is not None else copy.deepcopy(model).to(device)
    dev_ids = ids.to(device)
    snap = _Snapshots()
    buffers = _CacheBuffers(dev_model)
    previous = config.configure(strict=strict)
    try:
        counters.reset_stats()
        torch.manual_seed(seed)
        start = (time.perf_counter(), counters.stats())
        out = _generate(dev_model, dev_ids, kwargs, snap)
        end = time.perf_counter()
        totals = counters.stats()
        ttnn_by_op = counters.ttnn_by_op.copy()
        fallback_ops = {str(k): v for k, v in counters.fallback_by_op.items()}
    finally:
        config.settings.update(previous)
        cache_buffers = buffers.summary()
    seq = out.sequences.cpu()
    ref_seq = ref.sequences
    n_prompt = ids.shape[1] if not model.config.is_encoder_decoder else 1  # (the decoder's start token)
    new, ref_new = seq[:, n_prompt:], ref_seq[:, n_prompt:]
    same = (new == ref_new) if new.shape == ref_new.shape else torch.zeros(1, dtype=torch.bool)
    diverged = [int(i) for i in (~same).any(0).nonzero().flatten()[:1]]
    first_diff = diverged[0] if diverged else None
    logits = [x.cpu() for x in out.logits]
    ref_logits = list(ref.logits)
    upto = len(logits) if first_diff is None else first_diff + 1  # same prefix: logits comparable
    step_pcc = [pcc(a, b) for a, b in zip(logits[:upto], ref_logits[:upto])]
    steps = _steps(snap.marks, start)
    decode = steps[1:] if len(steps) > 1 else steps
    per = {k: (sum(s[1][k] for s in decode) / len(decode)) for k in decode[0][1]} if decode else {}
    return {
        "mode": mode, "cache": cache, "new_tokens": int(new.shape[1]),
        "tokens": new.tolist(), "cpu_tokens": ref_new.tolist(),
        "token_agreement": float(same.float().mean()) if new.shape == ref_new.shape else 0.0,
        "exact": bool(torch.equal(seq, ref_seq)), "first_divergence": first_diff,
        "min_step_logits_pearson": min(step_pcc) if step_pcc else None,
        "steps_compared": len(step_pcc),
        "seconds": end - start[0], "tokens_per_s": new.shape[1] / (end - start[0]),
        "prefill_seconds": steps[0][0] if steps else None,
        "host_ms_per_token": 1e3 * statistics.median(s[0] for s in decode) if decode else None,
        "per_token": per, "totals": totals, "fallback_ops": fallback_ops,
        "ttnn_ops_per_token_by_op": {k: v / max(len(decode), 1) for k, v in (
            snap.marks[-1][2] - snap.marks[0][2]).items()} if len(snap.marks) > 1 else {},
        "total_ttnn_by_op": dict(ttnn_by_op),
        "device_bytes_per_step": [m[3] for m in snap.marks],
        "cache_buffers": cache_buffers,
        "programs_built_per_step": [b[4] - a[4] for a, b in zip(snap.marks, snap.marks[1:])],
    }


def vision_inputs(model, batch: int = 1, seed: int = 0) -> dict:
    cfg = model.config
    g = torch.Generator().manual_seed(seed)
    return {"pixel_values": torch.randn(batch, cfg.num_channels, cfg.image_size, cfg.image_size, generator=g)}


def forward_inputs(model, fam: Family, seed: int = 0) -> dict:
    if fam.kind == "vision":
        return vision_inputs(model, seed=seed)
    ids = prompt_ids(model.config.vocab_size, 16, 2, seed)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding, as batched generation pads
    inputs = {"input_ids": ids, "attention_mask": mask}
    if fam.kind == "seq2seq":
        inputs["decoder_input_ids"] = prompt_ids(model.config.vocab_size, 5, 2, seed + 1)
    return inputs


def compare_forward(model, fam: Family, device: str = "ttnn:0", seed: int = 0) -> dict:
    """One forward on `device` and on the CPU: Pearson of the main output (valid positions), the CPU
    fallbacks (the ops that strict mode would refuse), aten and TT-NN op counts."""
    from ..features.inventory import record_ops
    inputs = forward_inputs(model, fam, seed)
    with torch.no_grad():
        ref = model(**inputs)
        dev = copy.deepcopy(model).to(device)
        dinputs = {k: v.to(device) for k, v in inputs.items()}
        dev(**dinputs)  # first forward builds the device programs
        with record_ops() as rec:
            out = dev(**dinputs)
    key = "logits" if "logits" in ref else "last_hidden_state"
    r, o = ref[key], out[key].cpu()
    if fam.kind != "vision" and fam.kind != "seq2seq":
        valid = inputs["attention_mask"].bool()
        r, o = r[valid], o[valid]
    return {"output": key, "pearson": pcc(o, r), "max_abs_err": float((o - r).abs().max()),
            "fallbacks": dict(rec.fallbacks), "aten_ops": sum(rec.aten.values()),
            "ttnn_ops": sum(rec.ttnn.values())}


# ----------------------------------------------------------------------------------------------- docs/models.md
DOC_TOKENS = 32
MODES = [("dynamic", "greedy"), ("static", "greedy"), ("dynamic", "sample"), ("dynamic", "beam")]


def _attempt(fn):
    try:
        return fn(), None
    except Exception as e:  # a row that says why
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


def family_row(name: str, tokens: int = DOC_TOKENS) -> dict:
    """Every figure of one docs/models.md row, measured."""
    model, fam = build(name)
    row = {"name": name, "class": fam.model_class, "kind": fam.kind, "note": fam.note}
    row["forward"], row["forward_error"] = _attempt(lambda: compare_forward(model, fam))
    if fam.kind == "vision":
        return row
    ids = prompt_ids(model.config.vocab_size)
    for key, storage, numerics in GENERATE_RUNS:
        previous = config.configure(float32_storage=storage, shadow_numerics=numerics)
        try:
            r, err = _attempt(lambda: compare_generate(model, ids, max_new_tokens=tokens))
        finally:
            config.settings.update(previous)
        if r is not None:
            r = {k: r[k] for k in ("token_agreement", "exact", "first_divergence", "min_step_logits_pearson",
                                   "per_token", "host_ms_per_token", "fallback_ops", "new_tokens")}
        row[f"generate_{key}"], row[f"generate_{key}_error"] = r, err
    return row


# The generate() runs of a docs/models.md row: (key, float32 storage, shadow numerics model). float32 tokens
# equal the CPU's only with exact float32 arithmetic: the hardware model feeds float32 matmul operands
# through the matrix engine's 19-bit source registers (numerics.py), as a card does.
GENERATE_RUNS = [("bfloat16", "bfloat16", "hardware"), ("float32", "float32", "exact"),
                 ("float32_hardware", "float32", "hardware")]


def mode_row(name: str, cache: str, mode: str, tokens: int = DOC_TOKENS) -> dict:
    model, _ = build(name)
    ids = prompt_ids(model.config.vocab_size)
    # where the CPU's tokens are the expectation: float32 storage, exact float32 arithmetic (GENERATE_RUNS)
    previous = config.configure(float32_storage="float32", shadow_numerics="exact")
    try:
        r, err = _attempt(lambda: compare_generate(model, ids, max_new_tokens=tokens, cache=cache, mode=mode))
    finally:
        config.settings.update(previous)
    return {"name": name, "cache": cache, "mode": mode, "result": r and {
        k: r[k] for k in ("token_agreement", "exact", "per_token", "host_ms_per_token", "fallback_ops",
                          "cache_buffers")},
        "error": err}


# generate() options beyond the decoding modes: (name, generate kwargs)
OPTIONS = [("repetition_penalty=1.3", dict(repetition_penalty=1.3)),
           ("no_repeat_ngram_size=2", dict(no_repeat_ngram_size=2))]


def option_row(name: str, label: str, extra: dict, tokens: int = 8) -> dict:
    """greedy generate() with one extra option, on ttnn:0 (not strict) and the CPU (float32 storage)."""
    model, _ = build(name)
    ids = prompt_ids(model.config.vocab_size)
    kw = dict(generation_kwargs(model, tokens), **extra)
    previous = config.configure(float32_storage="float32", shadow_numerics="exact")  # (GENERATE_RUNS)
    try:
        dev = copy.deepcopy(model).to("ttnn:0")  # (after configure: the weights stored as float32)

        def run():
            with torch.no_grad():
                ref = model.generate(ids, **kw)
                counters.reset_stats()
                out = dev.generate(ids.to("ttnn:0"), **kw)
            return {"exact": bool(torch.equal(out.cpu(), ref)), "stats": counters.stats(),
                    "fallback_ops": {str(k): v for k, v in counters.fallback_by_op.items()}}
        r, err = _attempt(run)
    finally:
        config.settings.update(previous)
    return {"option": label, "tokens": tokens, "result": r, "error": err}


def _fmt_fallbacks(d: dict) -> str:
    return ", ".join(f"`{k}` x{v}" for k, v in sorted(d.items())) or "0"


def _identical(x, err) -> str:
    if x is None:
        return f"fails: {err}"
    return "yes" if x["exact"] else f"no (first difference at token {x['first_divergence']})"


def models_md(rows: list, modes: list, options: list) -> str:
    import transformers
    out = ["<!-- generated by `ttnn-eager docs --models` (src/ttnn_eager/tools/models.py) from measured runs on the "
           "device; do not edit by hand -->\n\n# Hugging Face families on `ttnn:0`\n\n",
           f"transformers {transformers.__version__}, torch {torch.__version__}. One row per architecture: a tiny "
           "config of the family (2 layers, hidden 128, head size 32, vocabulary 500; grouped-query attention "
           "where the family has it) with weights seeded at random, run on `ttnn:0` and in float32 on the CPU "
           "(real weights cannot be downloaded here; a local path runs the same through `ttnn-eager generate`).\n\n",
           "- **forward**: one forward of a batch of 2 prompts of 16 tokens (the second left-padded by 3), "
           "Pearson of the logits (last hidden state for CLIP) on valid positions against the CPU; CPU "
           "fallbacks (what strict mode refuses); aten ops and TT-NN ops of that forward.\n",
           f"- **generate()**: greedy decoding of {DOC_TOKENS} new tokens from an 8-token prompt, DynamicCache. "
           "*bf16*: default storage (float32 stored as bfloat16): share of the tokens equal to the CPU's, position "
           "by position, and the lowest Pearson of a step's logits against the CPU's up to and including the "
           "first differing token (after it, the two runs continue from different prefixes). *f32*: "
           "`configure(float32_storage=\"float32\")`: are all tokens identical to the CPU's? First with exact "
           "float32 arithmetic in the shadow (`shadow_numerics=\"exact\"`), then under the hardware numerics "
           "model (the default, what a card computes: float32 matmul operands pass the matrix engine's 19-bit "
           "source registers, docs/numerics.md), where greedy decoding may take another token once two logits "
           "are closer than that rounding.\n",
           "- **per token**: steady-state decode steps (the prompt's forward excluded), counted inside the "
           "generation loop: TT-NN ops, device-to-host reads (the loop's stopping check), host-to-device "
           "writes, CPU fallbacks.\n\n",
           "| architecture | forward Pearson | fallbacks (strict mode) | aten / TT-NN ops per forward | "
           "generate bf16: tokens equal, min step Pearson | generate f32: identical (exact / hardware model) | "
           "per token: TT-NN ops, "
           "D2H, H2D, fallbacks | notes |\n|---|---|---|---|---|---|---|---|\n"]
    for r in rows:
        f = r["forward"]
        fwd = (f"{f['pearson']:.6f}", _fmt_fallbacks(f["fallbacks"]), f"{f['aten_ops']} / {f['ttnn_ops']}") \
            if f else (f"fails: {r['forward_error']}", "-", "-")
        if r["kind"] == "vision":
            gen = ("n/a (no generate)", "n/a", "n/a")
            note = r["note"]
        else:
            b, b_err = r["generate_bfloat16"], r["generate_bfloat16_error"]
            gb = (f"{b['token_agreement']:.3f}, {b['min_step_logits_pearson']:.6f}" if b else f"fails: {b_err}")
            gx = " / ".join(_identical(r[f"generate_{k}"], r[f"generate_{k}_error"])
                            for k in ("float32", "float32_hardware"))
            p = b["per_token"] if b else None
            per = (f"{p['ttnn_ops']:.0f}, {p['device_to_host']:.2f}, {p['host_to_device']:.2f}, "
                   f"{p['fallbacks']:.2f}") if p else "-"
            gen = (gb, gx, per)
            note = r["note"]
            fb = {k: v for key, *_ in GENERATE_RUNS for k, v in (r[f"generate_{key}"] or {}).get("fallback_ops",
                                                                                                   {}).items()}
            if fb:
                note += "; generate() fallbacks: " + _fmt_fallbacks(fb)
        out.append(f"| {r['name']} (`{r['class']}`) | {fwd[0]} | {fwd[1]} | {fwd[2]} | {gen[0]} | {gen[1]} | "
                   f"{gen[2]} | {note} |\n")
    out.append(f"\n## Decoding modes and caches (llama, {DOC_TOKENS} new tokens, float32 storage, exact arithmetic)\n\n"
               "Sampling: `do_sample=True, top_k=20, top_p=0.9, temperature=0.8` under `torch.manual_seed(0)`; "
               "`torch.multinomial` draws its noise on the host from PyTorch's generator, so a seeded run can "
               "sample exactly the CPU's tokens. Beam search: 3 beams.\n\n"
               "KV-cache buffers: the cache's device tensors, and how many were reallocated between decode steps "
               "(StaticCache: 0, written in place).\n\n"
               "| cache | mode | tokens equal to the CPU's | per token: TT-NN ops, D2H, H2D, fallbacks | "
               "KV-cache buffers: reallocated / held | CPU fallbacks (aten op x calls, whole run) |\n"
               "|---|---|---|---|---|---|\n")
    for m in modes:
        r = m["result"]
        if r is None:
            out.append(f"| {m['cache']} | {m['mode']} | fails: {m['error']} | - | - | - |\n")
            continue
        p = r["per_token"]
        out.append(f"| {m['cache']} | {m['mode']} | {r['token_agreement']:.3f}{' (identical)' if r['exact'] else ''}"
                   f" | {p['ttnn_ops']:.0f}, {p['device_to_host']:.2f}, {p['host_to_device']:.2f}, "
                   f"{p['fallbacks']:.2f} | {r['cache_buffers']['reallocated']} / {r['cache_buffers']['tensors']} | "
                   f"{_fmt_fallbacks(r['fallback_ops'])} |\n")
    out.append("\n## Other generate() options (llama, greedy, 8 new tokens, float32 storage, exact arithmetic, "
               "strict mode off)\n\n"
               "| option | tokens equal to the CPU's | CPU fallbacks (aten op x calls) | device-to-host reads |\n"
               "|---|---|---|---|\n")
    for o in options:
        r = o["result"]
        if r is None:
            out.append(f"| `{o['option']}` | fails: {o['error']} | - | - |\n")
            continue
        out.append(f"| `{o['option']}` | {'yes' if r['exact'] else 'no'} | {_fmt_fallbacks(r['fallback_ops'])} | "
                   f"{r['stats']['device_to_host']} |\n")
    out.append("\n`cache_implementation=\"offloaded\"` is CUDA-only in transformers (it asks `torch.cuda` for "
               "streams; it fails on the CPU as well), `\"quantized\"` needs optimum-quanto (not installed); "
               "`ttnn-eager generate --cache` accepts `dynamic` and `static` only.\n")
    out.append("\nHost times are left to docs/performance.md (the mock device's shadow execution dominates "
               "them here).\n")
    return "".join(out)


def write_doc(path: str, names=None, tokens: int = DOC_TOKENS) -> str:
    import warnings
    import sys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = []
        for n in (names or FAMILIES):
            print(f"measuring {n}", file=sys.stderr, flush=True)
            rows.append(family_row(n, tokens))
        modes = [mode_row("llama", c, m, tokens) for c, m in MODES]
        options = [option_row("llama", label, extra) for label, extra in OPTIONS]
    text = models_md(rows, modes, options)
    with open(path, "w") as f:
        f.write(text)
    return text
