"""Nearest-neighbour upsampling (nn.Upsample, F.interpolate(mode="nearest")) by integer factors, as views:
each spatial dimension gains a unit dimension after it, expanded to the factor and merged back
([N, C, H, W] -> [N, C, H, 1, W, 1] -> [N, C, H, s, W, t] -> [N, C, H*s, W*t]). TT-NN's own upsample wants
a ROW_MAJOR channels-last input; these reshapes and one expand keep the NCHW TILE tensor as it is.

Refused before ttnn (Unfit: the counted CPU fallback): output sizes that are not integer multiples of the
input's, and explicit scales that disagree with them (PyTorch then samples other source positions).
"""
from __future__ import annotations

import torch

from ..core.layout import TILE
from ..core.registry import Unfit, lowering
from .views import expand, reshape

aten = torch.ops.aten


def _nearest(x, output_size, scales, op: str):
    k = len(output_size)
    lead = list(x.shape[:len(x.shape) - k])
    sizes = list(x.shape[len(x.shape) - k:])
    if len(x.shape) != k + 2 or x.shape.numel() == 0:
        raise Unfit(f"{op}: input of shape {list(x.shape)}")
    factors = []
    for size, out, scale in zip(sizes, output_size, scales):
        if out % size:
            raise Unfit(f"{op}: output size {out} is not a multiple of the input size {size}")
        if scale is not None and abs(1.0 / scale - size / out) > 1e-9:
            raise Unfit(f"{op}: scale {scale} does not match the sizes {size} -> {out}")
        factors.append(out // size)
    if all(f == 1 for f in factors):
        return x
    spread = lead + [v for s in sizes for v in (s, 1)]
    grown = lead + [v for s, f in zip(sizes, factors) for v in (s, f)]
    return reshape(expand(reshape(x, spread), grown), lead + list(output_size))


@lowering(aten.upsample_nearest1d.default, aten.upsample_nearest2d.default, aten.upsample_nearest3d.default,
          ttnn=["reshape", "expand"], needs=TILE, notes="integer factors (other sizes: the CPU fallback)")
def upsample_nearest(x, output_size, *scales):
    scales = list(scales) + [None] * (len(output_size) - len(scales))
    return _nearest(x, list(output_size), scales, f"upsample_nearest{len(output_size)}d")
