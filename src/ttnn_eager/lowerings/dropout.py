"""Dropout on the device: the keep mask is drawn by ttnn.rand from the device-side generator
(core/generator.py's next_seed: torch.manual_seed's seed and a count of draws), so a seeded run is reproducible;
it is not bit-identical to the CPU's mask (a different generator). native_dropout_backward is PyTorch's
decomposition (grad * mask * scale).
"""
from __future__ import annotations

import torch

from ..core import generator
from ..core.layout import TILE_FLOAT
from ..core.registry import lowering
from ..device import api
from .factory import full_handle

aten = torch.ops.aten


@lowering(aten.native_dropout.default, ttnn=["rand", "ge", "multiply"], needs=TILE_FLOAT,
          notes="mask from ttnn.rand, seeded by torch.manual_seed (reproducible, not the CPU's bits)")
def native_dropout(x, p, train):
    if not train or p == 0:
        return x, full_handle(x.shape, True, torch.bool, x.index)
    if p >= 1:
        zero = full_handle(x.shape, 0.0, x.dtype, x.index)
        return zero, full_handle(x.shape, False, torch.bool, x.index)
    u = api.create("rand", (tuple(x.shape),), api.BFLOAT16 if x.tt_dtype != api.FLOAT32 else api.FLOAT32,
                   api.TILE, x.index, torch.float32, seed=generator.next_seed())
    keep = api.run("ge", u, float(p), dtype=api.BFLOAT16, out_dtype=torch.bool)
    out = api.run("multiply", api.run("multiply", x, keep), 1.0 / (1.0 - p))
    return out, keep
