"""Normalizations: layer_norm (kept whole for inference), native_layer_norm, softmax family."""
from __future__ import annotations

import math

import torch

from ..core import layout as policy
from ..core.layout import TILE, TILE_FLOAT
from ..core.registry import lowering
from ..device import api
from ._common import dim
from .views import reshape

aten = torch.ops.aten


def _flatten_norm_dims(x, weight, bias, normalized_shape):
    """ttnn.layer_norm normalizes over the last dimension: fold several normalized dims into one."""
    k = len(normalized_shape)
    if k == 1:
        return x, weight, bias
    flat = math.prod(normalized_shape)
    x = reshape(x, list(x.shape[:-k]) + [flat])
    weight = reshape(weight, [flat]) if weight is not None else None
    bias = reshape(bias, [flat]) if bias is not None else None
    return x, weight, bias


def _check_shape(x, normalized_shape):
    if not len(normalized_shape):
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           f"element, but got normalized_shape = {list(normalized_shape)}")
    if tuple(x.shape[len(x.shape) - len(normalized_shape):]) != tuple(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(x.shape)}")


@lowering(aten.layer_norm.default, ttnn=["layer_norm"], needs=TILE_FLOAT)
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    _check_shape(x, normalized_shape)
    fx, w, b = _flatten_norm_dims(x, weight, bias, normalized_shape)
    out = api.run("layer_norm", fx, epsilon=eps, weight=w, bias=b,
                  compute_kernel_config=policy.compute_config("layer_norm", x.index))
    return reshape(out, x.shape)


@lowering(aten.native_layer_norm.default, ttnn=["layer_norm", "mean", "subtract", "multiply", "rsqrt"],
          needs=TILE_FLOAT, notes="mean and rstd (for autograd) computed by extra ops, in float32")
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    out = layer_norm(x, normalized_shape, weight, bias, eps)
    fx, _, _ = _flatten_norm_dims(x, None, None, normalized_shape)
    fx = policy.to_float32(fx)  # the statistics in float32: a bfloat16 variance loses its small values
    ckc = policy.compute_config("reduce", x.index)
    mean = api.run("mean", fx, dim=-1, keepdim=True, compute_kernel_config=ckc)
    centered = api.run("subtract", fx, mean)
    var = api.run("mean", api.run("multiply", centered, centered), dim=-1, keepdim=True, compute_kernel_config=ckc)
    rstd = api.run("rsqrt", api.run("add", var, float(eps)))
    stat_shape = list(x.shape[:len(x.shape) - len(normalized_shape)]) + [1] * len(normalized_shape)
    return out, reshape(mean, stat_shape), reshape(rstd, stat_shape)


@lowering(aten._softmax.default, ttnn=["softmax"], needs=TILE_FLOAT)
def softmax(x, d, half_to_float=False):
    return api.run("softmax", x, dim=dim(d, len(x.shape)),
                   compute_kernel_config=policy.compute_config("softmax", x.index))


@lowering(aten._safe_softmax.default, ttnn=["softmax", "max", "gt", "where"], needs=TILE_FLOAT,
          notes="rows that are entirely -inf give 0 (not NaN), as PyTorch's _safe_softmax")
def safe_softmax(x, d, dtype=None):
    d = dim(d, len(x.shape))
    out = api.run("softmax", x, dim=d, compute_kernel_config=policy.compute_config("softmax", x.index))
    row_max = api.run("max", x, dim=d, keepdim=True, compute_kernel_config=policy.compute_config("reduce", x.index))
    has_finite = api.run("gt", row_max, -math.inf)
    return api.run("where", has_finite, out, 0.0)
