"""Elementwise math that text generation needs beyond the arithmetic in elementwise.py: the rotary
embeddings' cos/sin, minimum/maximum (clamps between tensors, length bookkeeping) and the triangular masks
(tril/triu: causal masks built by attention that is decomposed).

All are single TT-NN ops on TILE tensors; minimum/maximum follow PyTorch's type promotion like the other
binary ops (operands brought to one device dtype by PROMOTE).
"""
from __future__ import annotations

import torch

from .. import device_api as api
from ..layout import PROMOTE, TILE, TILE_FLOAT
from ..registry import lowering
from ._common import check_broadcast, result_dtype

aten = torch.ops.aten


@lowering(aten.cos.default, ttnn=["cos"], needs=TILE_FLOAT)
def cos(x):
    return api.run("cos", x, out_dtype=x.dtype if x.dtype.is_floating_point else torch.get_default_dtype())


@lowering(aten.sin.default, ttnn=["sin"], needs=TILE_FLOAT)
def sin(x):
    return api.run("sin", x, out_dtype=x.dtype if x.dtype.is_floating_point else torch.get_default_dtype())


def _binary_extreme(op: str, a, b):
    check_broadcast(a.shape, b.shape)
    return api.run(op, a, b, out_dtype=result_dtype(a, b))


@lowering(aten.minimum.default, ttnn=["minimum"], needs=PROMOTE)
def minimum(a, b):
    return _binary_extreme("minimum", a, b)


@lowering(aten.maximum.default, ttnn=["maximum"], needs=PROMOTE)
def maximum(a, b):
    return _binary_extreme("maximum", a, b)


def _check_matrix(name: str, x):
    if len(x.shape) < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


@lowering(aten.tril.default, ttnn=["tril"], needs=TILE, notes="bool masks as bfloat16 0/1")
def tril(x, diagonal=0):
    _check_matrix("tril", x)
    return api.run("tril", x, diagonal=diagonal)


@lowering(aten.triu.default, ttnn=["triu"], needs=TILE, notes="bool masks as bfloat16 0/1")
def triu(x, diagonal=0):
    _check_matrix("triu", x)
    return api.run("triu", x, diagonal=diagonal)
