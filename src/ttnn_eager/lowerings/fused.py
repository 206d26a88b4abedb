"""Fused ops: one TT-NN op doing the work of several aten ops, as hand-written TT-NN models call them
(tt-metal models/demos/bert/tt/ttnn_optimized_bert.py). Eager mode never sees them: torch.compile's fusion
passes (features/compile/passes.py) put them into aten graphs in place of the patterns they match. Each is
an op of the `ttnn_eager` namespace (torch.ops.ttnn_eager.*) with PyTorch's composition as its CPU (and
Meta) kernel -- its meaning, and what the tests compare against -- and a lowering here.

    linear_activation(x, w, b, activation)      linear then gelu/relu/silu    -> ttnn.linear(activation=)
    add_layer_norm(x, residual, shape, w, b, eps)  layer_norm(x + residual)   -> ttnn.layer_norm(residual_input_tensor=)
    qkv_heads(x, [wq, wk, wv], [bq, bk, bv], heads, kv_heads)
                                                three linears of one input, each split into heads
                                                ([b, s, h*d] -> [b, h, s, d])   -> one ttnn.linear on the
                                                concatenated weight (made once, layout.prepared) +
                                                ttnn.transformer.split_query_key_value_and_split_heads
    qkv_heads(..., head_width)                  the same with each head zero-padded to head_width (a multiple of
                                                32) columns: the weights' rows and biases padded head by head once
                                                (a missing bias: zeros), so heads of 16, 48, 80 ... split as tiles
    heads_linear(x, w, b, heads)                linear(x, w) of x [..., heads * P] holding heads zero-padded to P
                                                columns, w [out, heads * d]: w's input columns padded head by head
                                                to P once -> one ttnn.linear
    qkv_heads_decode(x, [wq, wk, wv], [bq, bk, bv], heads, kv_heads)
                                                the same for a decode step of continuous batching: x [1, users,
                                                hidden] (one token a user), heads in the decode layout [1, users,
                                                h, d] -> the one ttnn.linear, a reshape to [1, 1, users, width] and
                                                ttnn.experimental.nlp_create_qkv_heads_decode (results height-
                                                sharded in L1, one user a core: layout.py's decode-layout
                                                residency; users <= 32, heads <= 32, d a multiple of 32)
    concat_heads(x)                             [b, h, s, d] -> [b, s, h*d]     -> ttnn.transformer.concatenate_heads
    linear_add(x, w, r)                         linear(x, w) + r, r of the product's shape (a pre-norm decoder's
                                                residual after a projection) -> ttnn.linear(bias=r) when r is one
                                                row (a decode step of one sequence: TT-NN's linear adds a one-row
                                                bias in the matmul), else ttnn.linear and ttnn.add
    rms_norm(x, w, eps)                         w * x / sqrt(mean(x^2) + eps)   -> ttnn.rms_norm
                                                (Llama's, T5's RMSNorm; last dimension)
    matmul_bias(x, w, b, activation)            x @ w + b, w [in, out] (GPT-2's Conv1D: addmm between
                                                views), then an optional activation -> ttnn.linear(bias=,
                                                activation=)
    split_qkv_heads(x, heads)                   [b, s, 3*h*d] split in three, each into heads [b, h, s, d]
                                                -> ttnn.transformer.split_query_key_value_and_split_heads
    rotary_embedding(x, cos, sin)               x * cos + rotate_half(x) * sin (Llama's rotary embedding of
                                                the heads [b, h, s, d]; cos, sin [1, 1, s, d], d 32 or a
                                                multiple of 64) -> ttnn.experimental.rotary_embedding_hf
                                                (HF's layout; experimental.rotary_embedding pads its result's
                                                rows to whole tiles: a slice after it at s = 1); decode-layout
                                                heads [1, users, h, d] with cos, sin [1, users, 1, d] (a position
                                                a user) -> the same op in decode mode, on heads and cos, sin
                                                height-sharded one user a core; bfloat16 heads of another size
                                                (16, 48, 80, 96 ...) -> rotate_half(x) as one exact matmul by
                                                the half turn, then x * cos + that * sin (4 ops, not 7); cos, sin
                                                of r < d columns: x's first r columns rotated, the rest passed
                                                through (heads zero-padded by padded_heads)
    paged_update_cache(cache, x, positions, page_table)   (in place, returns cache) user b's new key or value
                                                row x[0, b] ([kv heads, d]) written at position positions[b]
                                                of its sequence: block page_table[b, pos // block] of the paged
                                                cache [blocks, kv heads, block, d], row pos % block
                                                -> ttnn.experimental.paged_update_cache (x height-sharded, one
                                                user a core: layout.decode_heads, as it is when it came so)
    paged_update_cache_functional(cache, x, positions, page_table)   the same, into a new cache (what a traced
                                                decode step holds: functionalization takes no custom op that
                                                returns its argument; the compile pass paged_caches_in_place
                                                makes it the in-place op again) -> a clone, then the same update
    paged_attention_decode(q, key_cache, value_cache, positions, page_table, scale)
                                                one query token a user (q [1, users, heads, d]) attending to
                                                positions 0..positions[b] of its sequence in the paged caches
                                                (grouped key/value heads as PyTorch's enable_gqa)
                                                -> ttnn.transformer.paged_scaled_dot_product_attention_decode
    cache_update(cache, x, position)            a static cache's update at a 0-d integer position (transformers'
                                                StaticCache: index_copy_(2, arange(1) + cumulative_length, x)):
                                                cache [b, h, L, d] with row `position` of dim 2 replaced by x
                                                [b, h, 1, d] -> ttnn.scatter along dim 2 at the position
                                                expanded to x's shape (one ttnn.expand, made once per position
                                                and shared by the key and value caches); no host read
The two paged ops are what transformers' continuous batching does per decode token and layer on the device
(features/serving/paged.py); the page table and positions are int32 ([users, blocks a user], [users]).

Activations: "gelu" (erf), "gelu_tanh" (GPT-2's gelu_new, the tanh formula), "relu", "silu". TT-NN's fused
linear activation has one gelu; erf and tanh gelu differ by at most 4.8e-4 (at x = 2.7, where a bfloat16 ulp
of the output is 0.0156), so both are lowered to it.
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import ANY, TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import device_table
from .elementwise import add, mul, neg
from .matmul import matmul_handles
from .views import cat, reshape, same_values, slice_handle

LIB = torch.library.Library("ttnn_eager", "DEF")
LIB.define("linear_activation(Tensor input, Tensor weight, Tensor? bias, str activation) -> Tensor")
LIB.define("add_layer_norm(Tensor input, Tensor residual, int[] normalized_shape, Tensor? weight, Tensor? bias, "
           "float eps) -> Tensor")
LIB.define("qkv_heads(Tensor input, Tensor[] weights, Tensor?[] biases, int num_heads, int num_kv_heads, "
           "int? head_width=None) -> (Tensor, Tensor, Tensor)")
LIB.define("qkv_heads_decode(Tensor input, Tensor[] weights, Tensor?[] biases, int num_heads, int num_kv_heads) "
           "-> (Tensor, Tensor, Tensor)")
LIB.define("concat_heads(Tensor input) -> Tensor")
LIB.define("heads_linear(Tensor input, Tensor weight, Tensor? bias, int num_heads) -> Tensor")
LIB.define("linear_add(Tensor input, Tensor weight, Tensor residual) -> Tensor")
LIB.define("rms_norm(Tensor input, Tensor weight, float eps) -> Tensor")
LIB.define("matmul_bias(Tensor input, Tensor weight, Tensor? bias, str? activation) -> Tensor")
LIB.define("split_qkv_heads(Tensor input, int num_heads) -> (Tensor, Tensor, Tensor)")
LIB.define("rotary_embedding(Tensor input, Tensor cos, Tensor sin) -> Tensor")
LIB.define("cache_update(Tensor cache, Tensor input, Tensor position) -> Tensor")
LIB.define("paged_update_cache(Tensor(a!) cache, Tensor input, Tensor positions, Tensor page_table) -> Tensor(a!)")
LIB.define("paged_update_cache_functional(Tensor cache, Tensor input, Tensor positions, Tensor page_table) -> Tensor")
LIB.define("paged_attention_decode(Tensor query, Tensor key_cache, Tensor value_cache, Tensor positions, "
           "Tensor page_table, float scale) -> Tensor")
ops = torch.ops.ttnn_eager

ACTIVATIONS = {"gelu": torch.nn.functional.gelu, "relu": torch.relu, "silu": torch.nn.functional.silu,
               "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}
_TTNN_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu", "relu": "relu", "silu": "silu"}


# ----------------------------------------------------------------------------- meanings (CPU and Meta)
def _linear_activation(x, w, b, activation):
    return ACTIVATIONS[activation](torch.nn.functional.linear(x, w, b))


def _add_layer_norm(x, residual, normalized_shape, w, b, eps):
    return torch.nn.functional.layer_norm(x + residual, normalized_shape, w, b, eps)


def _heads(t, heads):
    b, s, _ = t.shape
    return t.view(b, s, heads, -1).transpose(1, 2).contiguous()


def pad_heads(t: torch.Tensor, heads: int, width: int, dim: int = 0) -> torch.Tensor:
    """t with its dimension `dim` (heads of d) zero-padded head by head to `width` >= d: [..., heads * d, ...] ->
    [..., heads * width, ...] (head i's d values first, then width - d zeros)."""
    parts = t.unflatten(dim, (heads, t.shape[dim] // heads))
    pad = [0, 0] * (t.dim() - dim - 1) + [0, width - parts.shape[dim + 1]]
    return torch.nn.functional.pad(parts, pad).flatten(dim, dim + 1)


def _qkv_heads(x, weights, biases, num_heads, num_kv_heads, head_width=None):
    if head_width is not None:  # (each head zero-padded to head_width: its weight rows and bias values)
        counts = (num_heads, num_kv_heads, num_kv_heads)
        weights = [pad_heads(w, n, head_width) for w, n in zip(weights, counts)]
        biases = [None if b is None else pad_heads(b, n, head_width) for b, n in zip(biases, counts)]
    q, k, v = (torch.nn.functional.linear(x, w, b) for w, b in zip(weights, biases))
    return _heads(q, num_heads), _heads(k, num_kv_heads), _heads(v, num_kv_heads)


def _qkv_heads_decode(x, weights, biases, num_heads, num_kv_heads):
    b, s, _ = x.shape
    return tuple(torch.nn.functional.linear(x, w, bias).view(b, s, n, -1).contiguous()
                 for w, bias, n in zip(weights, biases, (num_heads, num_kv_heads, num_kv_heads)))


def _concat_heads(x):
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def _heads_linear(x, w, b, num_heads):
    return torch.nn.functional.linear(x, pad_heads(w, num_heads, x.shape[-1] // num_heads, dim=1), b)


def _linear_add(x, w, r):
    return torch.nn.functional.linear(x, w) + r


def _rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _matmul_bias(x, w, b, activation):
    out = x @ w if b is None else torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[-1])
    return out if activation is None else ACTIVATIONS[activation](out)


def _split_qkv_heads(x, num_heads):
    return tuple(_heads(t, num_heads) for t in x.split(x.shape[-1] // 3, -1))


def _rotary_embedding(x, cos, sin):
    r = _rotated_width(x.shape, cos.shape)
    if r < x.shape[-1]:  # (the first r columns rotated, the rest passed through)
        return torch.cat((_rotary_embedding(x[..., :r], cos, sin), x[..., r:]), -1)
    half = r // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def _rotated_width(x_shape, cos_shape) -> int:
    """How many leading columns of x a rotary embedding by cos rotates: cos's width, or all of x's (a cos of width 1
    broadcasts)."""
    return cos_shape[-1] if len(cos_shape) and 1 < cos_shape[-1] < x_shape[-1] else x_shape[-1]


def _rotary_fits(x_shape, cos_shape, sin_shape) -> bool:
    """Whether ttnn.experimental.rotary_embedding_hf (prefill mode) computes rotary_embedding(x, cos, sin) for
    these shapes: heads [b, h, s, d] with d one tile or a multiple of 64 (rotate_half's midpoint on a tile
    boundary), cos and sin [1, 1, s, d] (one position per row, the same for every sequence of the batch: its
    reader walks cos tile by tile per [s, d] plane of x)."""
    if len(x_shape) != 4:
        return False
    s, d = x_shape[2], x_shape[3]
    return (d == api.TILE_SIZE or d % (2 * api.TILE_SIZE) == 0) and tuple(cos_shape) == tuple(sin_shape) == (1, 1, s, d)


def _cache_update(cache, x, position):
    rows = torch.arange(x.shape[2], device=cache.device) + position.reshape(1).to(cache.device)
    return cache.index_copy(2, rows, x.to(cache.dtype))


def _paged_update_cache(cache, x, positions, page_table):
    block = cache.shape[2]
    for b, pos in enumerate(positions.tolist()):
        if pos >= 0:  # (a negative position: a padding user, skipped)
            cache[int(page_table[b, pos // block]), :, pos % block, :] = x[0, b].to(cache.dtype)
    return cache


def _paged_attention_decode(q, key_cache, value_cache, positions, page_table, scale):
    _, users, heads, d = q.shape
    kv, block = key_cache.shape[1], key_cache.shape[2]
    out = torch.zeros_like(q)
    for b, pos in enumerate(positions.tolist()):
        if pos < 0:
            continue
        pages = page_table[b, :pos // block + 1].long()
        k, v = (c[pages].transpose(0, 1).reshape(kv, -1, d)[:, :pos + 1] for c in (key_cache, value_cache))
        out[0, b] = torch.nn.functional.scaled_dot_product_attention(
            q[0, b].unsqueeze(1), k.to(q.dtype), v.to(q.dtype), scale=scale, enable_gqa=True).squeeze(1)
    return out


def _paged_fits(cache_shape, users: int, cores: int) -> str | None:
    """Why TT-NN's paged ops cannot take a paged cache [blocks, kv heads, block, d] for `users` users, or None:
    block and d whole tiles, one user a core (the update's sharded input)."""
    if cache_shape[2] % api.TILE_SIZE or cache_shape[3] % api.TILE_SIZE:
        return "block size or head size not a multiple of 32"
    if users > cores:
        return f"{users} users, more than the {cores} cores the cache update shards them over"
    return None


for _name, _fn in (("linear_activation", _linear_activation), ("add_layer_norm", _add_layer_norm),
                   ("qkv_heads", _qkv_heads), ("qkv_heads_decode", _qkv_heads_decode),
                   ("concat_heads", _concat_heads), ("heads_linear", _heads_linear), ("rms_norm", _rms_norm),
                   ("linear_add", _linear_add),
                   ("matmul_bias", _matmul_bias), ("split_qkv_heads", _split_qkv_heads),
                   ("rotary_embedding", _rotary_embedding), ("cache_update", _cache_update)):
    LIB.impl(_name, _fn, "CPU")
    LIB.impl(_name, _fn, "Meta")
LIB.impl("paged_update_cache", _paged_update_cache, "CPU")
LIB.impl("paged_update_cache", lambda cache, *_: cache, "Meta")
LIB.impl("paged_update_cache_functional", lambda cache, *a: _paged_update_cache(cache.clone(), *a), "CPU")
LIB.impl("paged_update_cache_functional", lambda cache, *_: torch.empty_like(cache), "Meta")
LIB.impl("paged_attention_decode", _paged_attention_decode, "CPU")
LIB.impl("paged_attention_decode", lambda q, *_: torch.empty_like(q), "Meta")


# ----------------------------------------------------------------------------- lowerings
@lowering(ops.linear_activation.default, ttnn=["linear"], needs=TILE,
          notes="bias and activation fused into the matmul (activation gelu, gelu_tanh, relu or silu)")
def linear_activation(x, weight, bias, activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"ttnn_eager.linear_activation: activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
    return matmul_handles(x, weight, transpose_b=True, bias=bias, activation=_TTNN_ACTIVATION[activation])


@lowering(ops.linear_add.default, ttnn=["linear", "add"], needs=TILE,
          notes="the residual as the linear's bias when it is one row of the output's features (a decode step of one "
                "sequence): one ttnn.linear; more rows: ttnn.linear, then ttnn.add")
def linear_add(x, weight, residual):
    if residual.dtype != x.dtype or not x.dtype.is_floating_point:  # (PyTorch's promotion: the add's lowering)
        return add(matmul_handles(x, weight, transpose_b=True), residual)
    return matmul_handles(x, weight, transpose_b=True, bias=residual)


@lowering(ops.matmul_bias.default, ttnn=["linear"], needs=TILE,
          notes="x @ w + b with w [in, out] (Conv1D), bias and activation fused into the matmul")
def matmul_bias(x, weight, bias, activation):
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"ttnn_eager.matmul_bias: activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
    if len(weight.shape) != 2 or (bias is not None and tuple(bias.shape) != (weight.shape[1],)):
        raise RuntimeError(f"ttnn_eager.matmul_bias: a [in, out] weight and an [out] bias, got "
                           f"{list(weight.shape)} and {None if bias is None else list(bias.shape)}")
    return matmul_handles(x, weight, bias=bias,
                          activation=None if activation is None else _TTNN_ACTIVATION[activation])


@lowering(ops.split_qkv_heads.default, ttnn=["transformer.split_query_key_value_and_split_heads"], needs=TILE,
          notes="head size a multiple of 32 (else the CPU fallback)")
def split_qkv_heads(x, num_heads):
    if len(x.shape) != 3 or num_heads <= 0 or x.shape[-1] % (3 * num_heads):
        raise RuntimeError(f"ttnn_eager.split_qkv_heads: a [batch, seq, 3 * heads * head_size] input, got "
                           f"{list(x.shape)} for {num_heads} heads")
    if x.shape[-1] // (3 * num_heads) % api.TILE_SIZE:
        raise Unfit("head size not a multiple of 32")  # (TT-NN's head split needs tile-sized heads)
    q, k, v = api.run("transformer.split_query_key_value_and_split_heads", x, num_heads=num_heads,
                      transpose_key=False)
    return q, k, v


@lowering(ops.add_layer_norm.default, ttnn=["layer_norm"], needs=TILE_FLOAT,
          notes="the residual add done by the normalization kernel (last dimension only)")
def add_layer_norm(x, residual, normalized_shape, weight, bias, eps):
    if tuple(x.shape) != tuple(residual.shape) or len(normalized_shape) != 1 \
            or x.shape[-1] != normalized_shape[0]:
        raise RuntimeError(f"ttnn_eager.add_layer_norm: input {list(x.shape)} and residual {list(residual.shape)} "
                           f"must have one shape, normalized over the last dimension (got {list(normalized_shape)})")
    return api.run("layer_norm", x, residual_input_tensor=residual, epsilon=eps, weight=weight, bias=bias,
                   compute_kernel_config=policy.compute_config("layer_norm", x.index))


def _concatenated(parts: list, name: str):
    """The parts (weights or biases of q, k, v) concatenated along their first dimension, made once and kept
    with the first part while no part is written (layout.prepared)."""
    first, rest = parts[0], parts[1:]
    key = (name,) + tuple((id(p), p.version) for p in rest)

    def make(h):  # (one device dtype for the concat: parts may be stored differently, e.g. float32 and bfloat16)
        return api.run("concat", policy.ensure_promoted([h] + [policy.materialize(p) for p in rest]), dim=0)
    return policy.prepared(first, key, make)


def _qkv_head_size(name: str, x, weights, biases, num_heads: int, num_kv_heads: int, width=None) -> int:
    """The head size of a qkv_heads-family call (its head_width when given): malformed arguments refused, heads
    TT-NN cannot split Unfit."""
    if len(weights) != 3 or len(biases) != 3 or len(x.shape) != 3:
        raise RuntimeError(f"ttnn_eager.{name}: a [batch, seq, hidden] input and three weights and biases")
    if ((biases[0] is None) != (biases[1] is None) or (biases[0] is None) != (biases[2] is None)) and width is None:
        raise RuntimeError(f"ttnn_eager.{name}: q, k and v all have a bias or none has (or a head_width is given)")
    head = weights[0].shape[0] // num_heads if num_heads > 0 else 0
    if num_heads <= 0 or num_kv_heads <= 0 or weights[0].shape[0] % num_heads \
            or any(w.shape[0] != n * head for w, n in zip(weights[1:], (num_kv_heads, num_kv_heads))):
        raise RuntimeError(f"ttnn_eager.{name}: key and value weights of {num_kv_heads} heads of the query's size "
                           f"{head}, got {weights[1].shape[0]} and {weights[2].shape[0]} rows")
    if width is not None and width < head:
        raise RuntimeError(f"ttnn_eager.{name}: head_width {width} is less than the head size {head}")
    if (width or head) % api.TILE_SIZE:
        raise Unfit("head size not a multiple of 32")  # (TT-NN's head split needs tile-sized heads)
    return width or head


def _heads_padded(parts: list, heads: list, width: int, name: str, dim: int = 0):
    """The parts (q, k, v weights or biases, or one weight) each zero-padded head by head to `width` along `dim`
    (pad_heads: reshape, pad, reshape on the device -- a mesh's chips each pad their own shard -- a missing bias
    zeros) and concatenated along their first dimension: made once and kept with the first part present while no
    part is written (layout.prepared)."""
    at = next(i for i, p in enumerate(parts) if p is not None)
    key = (name, width, dim, at) + tuple(None if p is None else (id(p), p.version) for p in parts[at + 1:])

    def padded(h, n):
        shape = list(h.shape)
        d = shape[dim] // n
        if d == width:  # (nothing to pad: a missing bias beside whole-tile heads)
            return h
        split = reshape(h, shape[:dim] + [n, d] + shape[dim + 1:])
        wide = api.run("pad", split, [(0, 0)] * (dim + 1) + [(0, width - d)] + [(0, 0)] * (len(shape) - dim - 1),
                       0.0)
        wide.shape = torch.Size(shape[:dim] + [n, width] + shape[dim + 1:])
        return reshape(wide, shape[:dim] + [n * width] + shape[dim + 1:])

    def make(h):
        hs = [policy.materialize(h) if i == at else None if p is None else policy.materialize(p)
              for i, p in enumerate(parts)]
        done = [None if p is None else padded(policy.ensure(p, TILE), n) for p, n in zip(hs, heads)]
        done = [api.create("zeros", ((n * width,),), h.tt_dtype, api.TILE, h.index, h.dtype) if p is None else p
                for p, n in zip(done, heads)]
        return done[0] if len(done) == 1 else api.run("concat", policy.ensure_promoted(done), dim=0)
    return policy.prepared(parts[at], key, make)


def _qkv_matmul(x, weights, biases, heads=None, width=None):
    """x times the q, k and v weights concatenated (once), their biases added: [..., q | k | v]; with `width`,
    each head zero-padded to width columns first (heads: the parts' head counts)."""
    if width is not None and (width * sum(heads) != sum(w.shape[0] for w in weights)
                              or any(b is None for b in biases)):
        w = _heads_padded(list(weights), heads, width, "qkv_weight")
        b = _heads_padded(list(biases), heads, width, "qkv_bias") if any(b is not None for b in biases) else None
    else:
        w = _concatenated(list(weights), "qkv_weight")
        b = _concatenated(list(biases), "qkv_bias") if biases[0] is not None else None
    return matmul_handles(x, w, transpose_b=True, bias=b)


@lowering(ops.qkv_heads.default, ttnn=["concat", "linear", "transformer.split_query_key_value_and_split_heads"],
          needs=TILE, notes="one matmul on the q, k, v weights concatenated once (with head_width: each head's rows "
                            "zero-padded to it, made once on the device); heads split by one TT-NN op (head size or "
                            "head_width a multiple of 32, else the CPU fallback)")
def qkv_heads(x, weights, biases, num_heads, num_kv_heads, head_width=None):
    width = _qkv_head_size("qkv_heads", x, weights, biases, num_heads, num_kv_heads, head_width)
    fused = _qkv_matmul(x, weights, biases, [num_heads, num_kv_heads, num_kv_heads], width)
    q, k, v = api.run("transformer.split_query_key_value_and_split_heads", fused,
                      num_heads=num_heads, num_kv_heads=num_kv_heads, transpose_key=False)
    return q, k, v


DECODE_USERS = 32  # nlp_create_qkv_heads_decode's most users (one a core) and query heads (ttnn 0.81.1)


@lowering(ops.qkv_heads_decode.default, ttnn=["concat", "linear", "reshape",
                                              "experimental.nlp_create_qkv_heads_decode"], needs=TILE,
          notes="one matmul on the q, k, v weights concatenated once, reshaped to [1, 1, users, width]; heads split "
                "into the decode layout by one TT-NN op, height-sharded one user a core (batch 1, at most 32 users "
                "and 32 query heads, head size a multiple of 32, bfloat16/float32, else the CPU fallback)")
def qkv_heads_decode(x, weights, biases, num_heads, num_kv_heads):
    _qkv_head_size("qkv_heads_decode", x, weights, biases, num_heads, num_kv_heads)
    batch, users, _ = x.shape
    if batch != 1:
        raise Unfit(f"batch {batch} (the decode layout: one sequence of users, batch 1)")
    if users > min(DECODE_USERS, api.core_count(x.index)):
        raise Unfit(f"{users} users (at most {DECODE_USERS}, one a core)")
    if num_heads > DECODE_USERS or num_kv_heads > num_heads:
        raise Unfit(f"{num_heads} query heads and {num_kv_heads} key/value heads (at most 32, key/value no more)")
    if x.tt_dtype not in (api.BFLOAT16, api.FLOAT32):
        raise Unfit("an input not bfloat16 or float32")
    fused = _qkv_matmul(x, weights, biases)
    if fused.tt_dtype not in (api.BFLOAT16, api.FLOAT32):
        raise Unfit("a product not bfloat16 or float32")
    flat = api.run("reshape", fused, (1, 1, users, fused.shape[-1]))
    q, k, v = api.run("experimental.nlp_create_qkv_heads_decode", flat, num_heads=num_heads,
                      num_kv_heads=num_kv_heads)
    return tuple(policy.decode_resident([q, k, v]))


@lowering(ops.concat_heads.default, ttnn=["transformer.concatenate_heads"], needs=TILE,
          notes="head size a multiple of 32 (else the CPU fallback)")
def concat_heads(x):
    if len(x.shape) != 4:
        raise RuntimeError(f"ttnn_eager.concat_heads: a [batch, heads, seq, head_size] input, got {list(x.shape)}")
    if x.shape[-1] % api.TILE_SIZE:
        raise Unfit("head size not a multiple of 32")  # (TT-NN's concatenate_heads needs tile-sized heads)
    return api.run("transformer.concatenate_heads", x)


@lowering(ops.heads_linear.default, ttnn=["linear"], needs=TILE,
          notes="the weight's input columns zero-padded head by head to the input's head width (made once on the "
                "device): one ttnn.linear")
def heads_linear(x, weight, bias, num_heads):
    if len(weight.shape) != 2 or num_heads <= 0 or weight.shape[1] % num_heads or x.shape[-1] % num_heads \
            or x.shape[-1] // num_heads < weight.shape[1] // num_heads:
        raise RuntimeError(f"ttnn_eager.heads_linear: an input of {num_heads} heads at least as wide as the weight's "
                           f"[out, heads * head_size], got {list(x.shape)} and {list(weight.shape)}")
    width = x.shape[-1] // num_heads
    if width != weight.shape[1] // num_heads:
        weight = _heads_padded([weight], [num_heads], width, "heads_linear", dim=1)
    return matmul_handles(x, weight, transpose_b=True, bias=bias)


@lowering(ops.rms_norm.default, ttnn=["rms_norm"], needs=TILE_FLOAT, notes="over the last dimension")
def rms_norm(x, weight, eps):
    if tuple(weight.shape) != (x.shape[-1],):
        raise RuntimeError(f"ttnn_eager.rms_norm: a weight of the last dimension's size ({x.shape[-1]}), got "
                           f"{list(weight.shape)}")
    return api.run("rms_norm", x, epsilon=eps, weight=weight,
                   compute_kernel_config=policy.compute_config("layer_norm", x.index))


def _rotary_decode_fits(x_shape, cos_shape, sin_shape, cores: int) -> bool:
    """Whether ttnn.experimental.rotary_embedding_hf in decode mode computes rotary_embedding(x, cos, sin): heads in
    the decode layout [1, users, h, d] (users one a core, h at most a tile of rows), cos and sin [1, users, 1, d]
    (a position a user), d one tile or a multiple of 64."""
    if len(x_shape) != 4 or x_shape[0] != 1:
        return False
    _, users, heads, d = x_shape
    return ((d == api.TILE_SIZE or d % (2 * api.TILE_SIZE) == 0) and users <= cores and heads <= api.TILE_SIZE
            and tuple(cos_shape) == tuple(sin_shape) == (1, users, 1, d))


@lowering(ops.rotary_embedding.default, ttnn=["experimental.rotary_embedding_hf", "to_memory_config", "matmul",
                                              "multiply", "add", "neg", "concat"],
          needs={"input": policy.TILE_FLOAT_SHARDED, "*": TILE_FLOAT},
          notes="heads [b, h, s, d], d 32 or a multiple of 64, cos and sin [1, 1, s, d] of the heads' storage: one "
                "TT-NN op (HF's rotate_half layout, its result of x's shape: no row padding, so a decode step's "
                "s = 1 needs no slice); decode-layout heads [1, users, h, d] (h <= 32) with cos and sin "
                "[1, users, 1, d]: the same op in decode mode on heads height-sharded one user a core (as "
                "qkv_heads_decode gives them; others sharded first) and cos, sin sharded once each "
                "(layout.decode_rows); bfloat16 heads of other sizes: rotate_half as one exact matmul by a "
                "signed permutation, then multiply, multiply, add; others op by op; cos and sin narrower than the "
                "heads (heads zero-padded to whole tiles, a partial rotary): the first columns rotated by the half "
                "turn of those columns, cos and sin padded by ones and zeros once, the rest passed through")
def rotary_embedding(x, cos, sin):
    d, r = x.shape[-1], _rotated_width(x.shape, cos.shape)
    if r < d:
        return _partial_rotary(x, cos, sin, r)
    if x.tt_dtype == cos.tt_dtype == sin.tt_dtype and _rotary_decode_fits(x.shape, cos.shape, sin.shape,
                                                                          api.core_count(x.index)):
        out = api.run("experimental.rotary_embedding_hf", policy.decode_heads(x), policy.decode_rows(cos),
                      policy.decode_rows(sin), is_decode_mode=True)
        return policy.decode_resident(out)
    x = policy.interleaved(x)
    if _rotary_fits(x.shape, cos.shape, sin.shape) and x.tt_dtype == cos.tt_dtype == sin.tt_dtype:
        return api.run("experimental.rotary_embedding_hf", x, cos, sin, is_decode_mode=False)
    if x.tt_dtype == api.BFLOAT16 and d % 2 == 0:
        turned = api.run("matmul", x, device_table(("half_turn", d), lambda: _half_turn(d), api.BFLOAT16, x.index),
                         compute_kernel_config=policy.compute_config("exact", x.index))
    else:
        turned = cat([neg(slice_handle(x, 3, d // 2, d)), slice_handle(x, 3, 0, d // 2)], 3)
    return add(mul(x, cos), mul(turned, sin))


def _partial_rotary(x, cos, sin, r: int):
    """The rotary embedding of x's first r columns (cos, sin of width r), the rest passed through: heads zero-padded
    to whole tiles (the compile pass padded_heads) or a partial rotary. bfloat16: x times the half turn of its first
    r columns (the other rows and columns of the table zero), then x * cos' + that * sin' with cos and sin padded
    to x's width by ones and zeros (once per cos and sin: every layer's heads share them): 4 TT-NN ops a call;
    else op by op on the slices."""
    d, n = x.shape[-1], len(cos.shape)
    if r % 2:
        raise RuntimeError(f"ttnn_eager.rotary_embedding: a rotated width of {r} columns, not even")
    x = policy.interleaved(x)
    if x.tt_dtype == api.BFLOAT16 and n and cos.tt_dtype == sin.tt_dtype:
        widths = [(0, 0)] * (n - 1) + [(0, d - r)]
        cos_w, sin_w = (policy.prepared(t, ("rotary_width", d), lambda h, v=v: api.run("pad", h, widths, v),
                                        conversion=False) for t, v in ((cos, 1.0), (sin, 0.0)))
        turned = api.run("matmul", x, device_table(("half_turn", d, r), lambda: _half_turn(d, r), api.BFLOAT16,
                                                   x.index),
                         compute_kernel_config=policy.compute_config("exact", x.index))
        return add(mul(x, cos_w), mul(turned, sin_w))
    last = len(x.shape) - 1
    head = slice_handle(x, last, 0, r)
    turned = cat([neg(slice_handle(head, last, r // 2, r)), slice_handle(head, last, 0, r // 2)], last)
    return cat([add(mul(head, cos), mul(turned, sin)), slice_handle(x, last, r, d)], last)


def _half_turn(d: int, r: int | None = None) -> torch.Tensor:
    """R [d, d] with x @ R = rotate_half(x) = cat(-x[d/2:], x[:d/2]): a signed permutation, so the product of a
    bfloat16 x is exact at HiFi4 (every product is x_i * +-1, every sum has one term). With r < d: the half turn
    of x's first r columns, zero in the others."""
    r = d if r is None else r
    h = r // 2
    t = torch.zeros(d, d)
    t[torch.arange(h, r), torch.arange(h)] = -1.0
    t[torch.arange(h), torch.arange(h, r)] = 1.0
    return t


@lowering(ops.cache_update.default, ttnn=["expand", "scatter"], needs=ANY,
          notes="one new row (x [b, h, 1, d]) of a cache [b, h, L, d] at a 0-d integer position on the device: "
                "one ttnn.scatter along dim 2, its index the position expanded to x's shape (made once per "
                "position: the key and value caches share it); more rows: the CPU meaning, counted")
def cache_update(cache, x, position):
    cs, xs = tuple(cache.shape), tuple(x.shape)
    if len(cs) != 4 or len(xs) != 4 or xs[:2] != cs[:2] or xs[3] != cs[3] or xs[2] > cs[2]:
        raise RuntimeError(f"ttnn_eager.cache_update: a cache [b, h, L, d] and new rows [b, h, n, d] of its b, h, d, "
                           f"got {list(cs)} and {list(xs)}")
    if position.shape or position.dtype.is_floating_point or position.dtype == torch.bool:
        raise RuntimeError(f"ttnn_eager.cache_update: a 0-d integer position, got {position.dtype} "
                           f"{list(position.shape)}")
    if xs[2] != 1:
        raise Unfit(f"{xs[2]} new rows (one row a call: a decode step)")
    from .scatter import _scatter  # (scatter imports this module's neighbours; imported when first used)
    index = policy.prepared(position, ("cache_update", xs),
                            lambda p: same_values(api.run("expand", p, xs), p), conversion=False)
    return _scatter("scatter", cache, 2, index, x)


def _check_paged(name: str, cache, users: int, page_table, positions) -> None:
    if len(cache.shape) != 4 or tuple(positions.shape) != (users,) or len(page_table.shape) != 2 \
            or page_table.shape[0] != users:
        raise RuntimeError(f"ttnn_eager.{name}: a cache [blocks, kv heads, block, d], positions [users] and a page "
                           f"table [users, blocks a user], got {list(cache.shape)}, {list(positions.shape)} and "
                           f"{list(page_table.shape)} for {users} users")


_PAGED_UPDATE_CACHE = (api.BFLOAT16, api.FLOAT32, api.BFLOAT8_B)  # what ttnn's paged cache update writes into


@lowering(ops.paged_update_cache.default, ttnn=["to_memory_config", "experimental.paged_update_cache", "clone"],
          needs={"input": policy.TILE_SHARDED, "*": ANY},
          notes="block and head size multiples of 32, at most one user a core (else the CPU meaning, counted); "
                "the input height-sharded one user a core (as it is when it comes so); in place (the cache first "
                "copied to a buffer of its own where it shares one)")
def paged_update_cache(cache, x, positions, page_table):
    return _paged_update(cache, x, positions, page_table, in_place=True)


@lowering(ops.paged_update_cache_functional.default,
          ttnn=["clone", "to_memory_config", "experimental.paged_update_cache"],
          needs={"input": policy.TILE_SHARDED, "*": ANY},
          notes="paged_update_cache into a copy of the cache")
def paged_update_cache_functional(cache, x, positions, page_table):
    return _paged_update(cache, x, positions, page_table, in_place=False)


def _paged_update(cache, x, positions, page_table, in_place: bool):
    """TT-NN's paged cache update of cache (in_place) or of a copy of it, made once the update is known to fit."""
    users = x.shape[1] if len(x.shape) == 4 else -1
    _check_paged("paged_update_cache", cache, users, page_table, positions)
    if tuple(x.shape) != (1, users, cache.shape[1], cache.shape[3]):
        raise RuntimeError(f"ttnn_eager.paged_update_cache: an input [1, users, kv heads, d] of the cache's heads "
                           f"and d, got {list(x.shape)} for a cache {list(cache.shape)}")
    why = _paged_fits(cache.shape, users, api.core_count(x.index))
    if why is None and (policy.materialize(cache).layout != api.TILE or cache.tt_dtype not in _PAGED_UPDATE_CACHE
                        or x.tt_dtype not in (api.BFLOAT16, api.FLOAT32)):
        why = "the cache not TILE bfloat16/float32/bfloat8_b, or the input not bfloat16/float32"
    if why is None and page_table.shape[1] > cache.shape[0]:
        why = "more blocks a user than the cache has"
    if why is not None:
        raise Unfit(why)
    sharded = policy.decode_heads(x)  # (as it is when it came from qkv_heads_decode or a decode-mode rotary)
    target = api.own_buffer(cache) if in_place else api.run("clone", cache)
    return api.update_in_place("experimental.paged_update_cache", target, sharded,
                               update_idxs_tensor=policy.int32_rows(positions),
                               page_table=policy.int32_rows(page_table))


@lowering(ops.paged_attention_decode.default, ttnn=["transformer.paged_scaled_dot_product_attention_decode"],
          needs={"query": policy.TILE_SHARDED, "*": ANY},
          notes="bfloat16/bfloat8_b query and TILE caches, block and head size multiples of 32, kv heads dividing "
                "the query's (else the CPU meaning, counted)")
def paged_attention_decode(q, key_cache, value_cache, positions, page_table, scale):
    users = q.shape[1] if len(q.shape) == 4 else -1
    _check_paged("paged_attention_decode", key_cache, users, page_table, positions)
    if tuple(value_cache.shape) != tuple(key_cache.shape) or q.shape[0] != 1 or q.shape[3] != key_cache.shape[3]:
        raise RuntimeError(f"ttnn_eager.paged_attention_decode: a query [1, users, heads, d] and key and value "
                           f"caches of one shape and d, got {list(q.shape)}, {list(key_cache.shape)} and "
                           f"{list(value_cache.shape)}")
    why = _paged_fits(key_cache.shape, users, api.core_count(q.index))
    if why is None and (q.shape[2] % key_cache.shape[1]
                        or any(policy.materialize(t).layout != api.TILE or t.tt_dtype not in (api.BFLOAT16, api.BFLOAT8_B)
                               for t in (q, key_cache, value_cache))):
        why = "kv heads not dividing the query's, or a query or cache not TILE bfloat16/bfloat8_b"
    if why is not None:
        raise Unfit(why)
    return api.run("transformer.paged_scaled_dot_product_attention_decode", q, key_cache, value_cache,
                   page_table_tensor=policy.int32_rows(page_table), cur_pos_tensor=policy.int32_rows(positions),
                   scale=scale, compute_kernel_config=policy.compute_config("sdpa", q.index))
