"""Embedding lookup: ttnn.embedding gathers rows of a ROW_MAJOR bfloat16 table (prepared once, in place)
with uint32 indices and writes a TILE result (what every consumer of an embedding wants)."""
from __future__ import annotations

import torch

from .. import device_api as api
from .. import graphs
from ..layout import INDEX, TABLE
from ..registry import lowering
from .views import reshape

aten = torch.ops.aten


@lowering(aten.embedding.default, ttnn=["embedding"], needs={"weight": TABLE, "indices": INDEX},
          notes="indices uploaded from the host are range-checked (IndexError) with no device read; "
                "padding_idx only matters for gradients")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    rows = weight.shape[0]
    if indices.bounds is not None:
        graphs.host_decision(indices, ("index", rows), "aten.embedding's token-id range check")
    if indices.bounds is not None and (indices.bounds[0] < 0 or indices.bounds[1] >= rows):
        raise IndexError(f"index out of range in self: an embedding of {rows} rows got indices in "
                         f"[{indices.bounds[0]}, {indices.bounds[1]}] (token ids must be in [0, {rows - 1}]; "
                         f"check the tokenizer matches the model's vocabulary)")
    shape = list(indices.shape) + [weight.shape[-1]]
    ids = reshape(indices, (1, indices.shape.numel())) if len(indices.shape) != 2 else indices
    out = api.run("embedding", ids, weight, layout=api.TILE, out_dtype=weight.dtype)
    return reshape(out, shape)
