"""Embedding lookup: ttnn.embedding gathers rows of a ROW_MAJOR bfloat16 table (prepared once, in place)
with uint32 indices and writes a TILE result (what every consumer of an embedding wants)."""
from __future__ import annotations

import torch

from .. import device_api as api
from ..layout import INDEX, TABLE
from ..registry import lowering
from .views import reshape

aten = torch.ops.aten


@lowering(aten.embedding.default, ttnn=["embedding"], needs={"weight": TABLE, "indices": INDEX},
          notes="padding_idx only matters for gradients")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    shape = list(indices.shape) + [weight.shape[-1]]
    ids = reshape(indices, (1, indices.shape.numel())) if len(indices.shape) != 2 else indices
    out = api.run("embedding", ids, weight, layout=api.TILE, out_dtype=weight.dtype)
    return reshape(out, shape)
