"""Padding: constant_pad_nd (ZeroPad, ConstantPad, F.pad's default), reflection and replication padding,
as concatenations on the device.

A padded dimension is the input concatenated with what goes before and after it: a constant block
(ttnn.full) for constant padding, single-element slices in mirrored order for reflection, the edge slice
expanded to the pad width for replication. Negative constant padding crops (a slice). Pads are applied from
the last dimension backwards, as PyTorch's pad list reads.
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import ANY, TILE
from ..core.registry import Unfit, lowering
from .factory import full_handle
from .views import cat, expand, slice_handle

aten = torch.ops.aten


def _pairs(pad, ndim: int, op: str):
    if len(pad) % 2 or len(pad) // 2 > ndim:
        raise RuntimeError(f"Padding length must be divisible by 2 and at most twice the input's dimensions "
                           f"({ndim}), but got {len(pad)}")
    return [(ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def _join(parts, d: int):
    parts = [p for p in parts if p.shape[d]]
    if len(parts) == 1:
        return parts[0]
    return cat(policy.ensure_promoted([policy.ensure(p, TILE) for p in parts]), d)


def _block(x, d: int, width: int, value):
    shape = list(x.shape)
    shape[d] = width
    return full_handle(shape, value, x.dtype, x.index)


@lowering(aten.constant_pad_nd.default, ttnn=["full", "concat", "slice"], needs=ANY,
          notes="negative pads crop")
def constant_pad_nd(x, pad, value=0):
    for d, lo, hi in _pairs(pad, len(x.shape), "constant_pad_nd"):
        size = x.shape[d]
        if size + lo + hi < 0 or (lo < 0 and -lo > size) or (hi < 0 and -hi > size):
            raise RuntimeError(f"The input size {size}, plus negative padding {lo} and {hi} resulted in a "
                               f"negative output size, which is invalid. Check dimension {d} of your input.")
        x = slice_handle(x, d, max(-lo, 0), size - max(-hi, 0))
        if lo > 0 or hi > 0:
            x = _join([_block(x, d, max(lo, 0), value), x, _block(x, d, max(hi, 0), value)], d)
    return x


def _mirror(x, pad, dims: int, op: str, reflect: bool):
    if len(x.shape) not in (dims + 1, dims + 2) or x.shape.numel() == 0:
        raise Unfit(f"{op}: input of shape {list(x.shape)}")
    for d, lo, hi in _pairs(pad, len(x.shape), op):
        n = x.shape[d]
        if lo < 0 or hi < 0 or (reflect and (lo >= n or hi >= n)):
            raise Unfit(f"{op}: padding ({lo}, {hi}) for a dimension of size {n}")  # PyTorch's error on the CPU
        if reflect:
            before = [slice_handle(x, d, i, i + 1) for i in range(lo, 0, -1)]
            after = [slice_handle(x, d, i, i + 1) for i in range(n - 2, n - 2 - hi, -1)]
        else:
            before = [_edge(x, d, 0, lo)] if lo else []
            after = [_edge(x, d, n - 1, hi)] if hi else []
        x = _join(before + [x] + after, d)
    return x


def _edge(x, d: int, i: int, width: int):
    edge = slice_handle(x, d, i, i + 1)
    size = list(edge.shape)
    size[d] = width
    return expand(edge, size)


@lowering(aten.reflection_pad1d.default, aten.reflection_pad2d.default, aten.reflection_pad3d.default,
          ttnn=["slice", "concat"], needs=TILE, notes="one slice per padded row/column")
def reflection_pad(x, padding):
    dims = len(padding) // 2
    return _mirror(x, padding, dims, f"reflection_pad{dims}d", reflect=True)


@lowering(aten.replication_pad1d.default, aten.replication_pad2d.default, aten.replication_pad3d.default,
          ttnn=["slice", "expand", "concat"], needs=TILE)
def replication_pad(x, padding):
    dims = len(padding) // 2
    return _mirror(x, padding, dims, f"replication_pad{dims}d", reflect=False)
