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
    concat_heads(x)                             [b, h, s, d] -> [b, s, h*d]     -> ttnn.transformer.concatenate_heads
    rms_norm(x, w, eps)                         w * x / sqrt(mean(x^2) + eps)   -> ttnn.rms_norm
                                                (Llama's, T5's RMSNorm; last dimension)
    matmul_bias(x, w, b, activation)            x @ w + b, w [in, out] (GPT-2's Conv1D: addmm between
                                                views), then an optional activation -> ttnn.linear(bias=,
                                                activation=)
    split_qkv_heads(x, heads)                   [b, s, 3*h*d] split in three, each into heads [b, h, s, d]
                                                -> ttnn.transformer.split_query_key_value_and_split_heads
    rotary_embedding(x, cos, sin)               x * cos + rotate_half(x) * sin (Llama's rotary embedding of
                                                the heads [b, h, s, d]; cos, sin [1, 1, s, d], d a multiple
                                                of 64) -> ttnn.experimental.rotary_embedding (+ a slice of its
                                                seq-padded result when s is not a multiple of 32)

Activations: "gelu" (erf), "gelu_tanh" (GPT-2's gelu_new, the tanh formula), "relu", "silu". TT-NN's fused
linear activation has one gelu; erf and tanh gelu differ by at most 4.8e-4 (at x = 2.7, where a bfloat16 ulp
of the output is 0.0156), so both are lowered to it.
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from .elementwise import add, mul, neg
from .matmul import matmul_handles
from .views import cat, slice_handle

LIB = torch.library.Library("ttnn_eager", "DEF")
LIB.define("linear_activation(Tensor input, Tensor weight, Tensor? bias, str activation) -> Tensor")
LIB.define("add_layer_norm(Tensor input, Tensor residual, int[] normalized_shape, Tensor? weight, Tensor? bias, "
           "float eps) -> Tensor")
LIB.define("qkv_heads(Tensor input, Tensor[] weights, Tensor?[] biases, int num_heads, int num_kv_heads) "
           "-> (Tensor, Tensor, Tensor)")
LIB.define("concat_heads(Tensor input) -> Tensor")
LIB.define("rms_norm(Tensor input, Tensor weight, float eps) -> Tensor")
LIB.define("matmul_bias(Tensor input, Tensor weight, Tensor? bias, str? activation) -> Tensor")
LIB.define("split_qkv_heads(Tensor input, int num_heads) -> (Tensor, Tensor, Tensor)")
LIB.define("rotary_embedding(Tensor input, Tensor cos, Tensor sin) -> Tensor")
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


def _qkv_heads(x, weights, biases, num_heads, num_kv_heads):
    q, k, v = (torch.nn.functional.linear(x, w, b) for w, b in zip(weights, biases))
    return _heads(q, num_heads), _heads(k, num_kv_heads), _heads(v, num_kv_heads)


def _concat_heads(x):
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def _rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _matmul_bias(x, w, b, activation):
    out = x @ w if b is None else torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[-1])
    return out if activation is None else ACTIVATIONS[activation](out)


def _split_qkv_heads(x, num_heads):
    return tuple(_heads(t, num_heads) for t in x.split(x.shape[-1] // 3, -1))


def _rotary_embedding(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def _rotary_fits(x_shape, cos_shape, sin_shape) -> bool:
    """Whether ttnn.experimental.rotary_embedding computes rotary_embedding(x, cos, sin) for these shapes: heads
    [b, h, s, d] with d a multiple of 64 (each half whole tiles), cos and sin [1, 1, s, d] (one position per
    row, the same for every sequence of the batch: the cache it takes has no batch)."""
    if len(x_shape) != 4:
        return False
    s, d = x_shape[2], x_shape[3]
    return d % (2 * api.TILE_SIZE) == 0 and tuple(cos_shape) == tuple(sin_shape) == (1, 1, s, d)


for _name, _fn in (("linear_activation", _linear_activation), ("add_layer_norm", _add_layer_norm),
                   ("qkv_heads", _qkv_heads), ("concat_heads", _concat_heads), ("rms_norm", _rms_norm),
                   ("matmul_bias", _matmul_bias), ("split_qkv_heads", _split_qkv_heads),
                   ("rotary_embedding", _rotary_embedding)):
    LIB.impl(_name, _fn, "CPU")
    LIB.impl(_name, _fn, "Meta")


# ----------------------------------------------------------------------------- lowerings
@lowering(ops.linear_activation.default, ttnn=["linear"], needs=TILE,
          notes="bias and activation fused into the matmul (activation gelu, gelu_tanh, relu or silu)")
def linear_activation(x, weight, bias, activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"ttnn_eager.linear_activation: activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
    return matmul_handles(x, weight, transpose_b=True, bias=bias, activation=_TTNN_ACTIVATION[activation])


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


@lowering(ops.qkv_heads.default, ttnn=["concat", "linear", "transformer.split_query_key_value_and_split_heads"],
          needs=TILE, notes="one matmul on the q, k, v weights concatenated once; heads split by one TT-NN op "
                            "(head size a multiple of 32, else the CPU fallback)")
def qkv_heads(x, weights, biases, num_heads, num_kv_heads):
    if len(weights) != 3 or len(biases) != 3 or len(x.shape) != 3:
        raise RuntimeError("ttnn_eager.qkv_heads: a [batch, seq, hidden] input and three weights and biases")
    if (biases[0] is None) != (biases[1] is None) or (biases[0] is None) != (biases[2] is None):
        raise RuntimeError("ttnn_eager.qkv_heads: q, k and v all have a bias or none has")
    head = weights[0].shape[0] // num_heads if num_heads > 0 else 0
    if num_heads <= 0 or num_kv_heads <= 0 or head % api.TILE_SIZE or weights[0].shape[0] % num_heads:
        raise Unfit("head size not a multiple of 32")  # (TT-NN's head split needs tile-sized heads)
    w = _concatenated(list(weights), "qkv_weight")
    b = _concatenated(list(biases), "qkv_bias") if biases[0] is not None else None
    fused = matmul_handles(x, w, transpose_b=True, bias=b)
    q, k, v = api.run("transformer.split_query_key_value_and_split_heads", fused, num_heads=num_heads,
                      num_kv_heads=num_kv_heads, transpose_key=False)
    return q, k, v


@lowering(ops.concat_heads.default, ttnn=["transformer.concatenate_heads"], needs=TILE,
          notes="head size a multiple of 32 (else the CPU fallback)")
def concat_heads(x):
    if len(x.shape) != 4:
        raise RuntimeError(f"ttnn_eager.concat_heads: a [batch, heads, seq, head_size] input, got {list(x.shape)}")
    if x.shape[-1] % api.TILE_SIZE:
        raise Unfit("head size not a multiple of 32")  # (TT-NN's concatenate_heads needs tile-sized heads)
    return api.run("transformer.concatenate_heads", x)


@lowering(ops.rms_norm.default, ttnn=["rms_norm"], needs=TILE_FLOAT, notes="over the last dimension")
def rms_norm(x, weight, eps):
    if tuple(weight.shape) != (x.shape[-1],):
        raise RuntimeError(f"ttnn_eager.rms_norm: a weight of the last dimension's size ({x.shape[-1]}), got "
                           f"{list(weight.shape)}")
    return api.run("rms_norm", x, epsilon=eps, weight=weight,
                   compute_kernel_config=policy.compute_config("layer_norm", x.index))


@lowering(ops.rotary_embedding.default, ttnn=["experimental.rotary_embedding", "slice", "multiply", "add", "neg",
                                              "concat"], needs=TILE_FLOAT,
          notes="heads [b, h, s, d], d a multiple of 64, cos and sin [1, 1, s, d] of the heads' storage: one TT-NN "
                "op (its result padded to whole tiles of rows, sliced back when s is not a multiple of 32); "
                "other shapes op by op")
def rotary_embedding(x, cos, sin):
    b, h, s, d = x.shape
    if not _rotary_fits(x.shape, cos.shape, sin.shape) or not x.tt_dtype == cos.tt_dtype == sin.tt_dtype:
        turned = cat([neg(slice_handle(x, 3, d // 2, d)), slice_handle(x, 3, 0, d // 2)], 3)
        return add(mul(x, cos), mul(turned, sin))
    out = api.run("experimental.rotary_embedding", x, cos, sin)
    if out.shape[2] != s:
        out = api.run("slice", out, [0, 0, 0, 0], [b, h, s, d])
    return out
