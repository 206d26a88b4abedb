"""A model type's config built from its shrunk defaults (`_config`): values the config class derives
again (`_derived`), and the repairs read from the model's own modeling source (mrope sections, layer kinds,
token ids read, rotary floors, indexed layer kinds, rope heads) that a plain shrink breaks."""
from __future__ import annotations

import functools
import inspect
import re

from .shrinking import (SHRINK, _EXPERTS, _FFN, _H, _HEADS, _HEAD_DIM, _KV, _LAYERS, _LORA, _PER_TOKEN, _dicts,
                        _each_config, _is_int, _split, _tied, shrink)


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
