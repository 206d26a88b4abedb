"""Embedding lookup: ttnn.embedding gathers rows of a ROW_MAJOR bfloat16 table (prepared once, in place)
with uint32 indices and writes a TILE result (what every consumer of an embedding wants)."""
from __future__ import annotations

import torch

from ..core import capture
from ..core import layout as policy
from ..core.layout import ANY, INDEX
from ..core.registry import lowering
from ..device import api
from ._common import known_outside
from .views import reshape

aten = torch.ops.aten


def lookup(table: api.Handle, ids: api.Handle, out_dtype: torch.dtype, tile_table: bool = False) -> api.Handle:
    """Rows `ids` ([1, n] or [b, n] uint32) of `table`: one ttnn.embedding, or with a float32 table (float32
    storage) one per exact bfloat16 part of it (layout.table_parts), summed in float32. tile_table: a
    bfloat16 TILE table is used as it is (ttnn.embedding accepts it; for a temporary table)."""
    tile = tile_table and table.tt_dtype == api.BFLOAT16
    parts = [table] if tile else policy.table_parts(table)
    if len(parts) == 1:
        return api.run("embedding", ids, parts[0], layout=api.TILE, out_dtype=out_dtype)
    out = None
    for part in reversed(parts):  # smallest first
        rows = policy.to_float32(api.run("embedding", ids, part, layout=api.TILE, out_dtype=out_dtype))
        out = rows if out is None else api.run("add", out, rows)
    return out


@lowering(aten.embedding.default, ttnn=["embedding"], needs={"weight": ANY, "indices": INDEX},
          notes="a float32 table (float32 storage) is looked up as three exact bfloat16 parts; indices uploaded from the host are range-checked (IndexError) with no device read; "
                "padding_idx only matters for gradients")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    rows = weight.shape[0]
    if indices.bounds is not None:
        capture.host_decision(indices, ("index", rows), "aten.embedding's token-id range check")
    if known_outside(indices.bounds, 0, rows) is not None:
        raise IndexError(f"index out of range in self: an embedding of {rows} rows got indices in "
                         f"[{indices.bounds[0]}, {indices.bounds[1]}]: token ids must be in [0, {rows - 1}] (check the "
                         f"tokenizer matches the model's vocabulary); for a table of learned positions, the "
                         f"sequence is longer than the model's {rows} positions (shorten the prompt, or "
                         f"lower max_new_tokens)")
    shape = list(indices.shape) + [weight.shape[-1]]
    ids = reshape(indices, (1, indices.shape.numel())) if len(indices.shape) != 2 else indices
    out = lookup(weight, ids, weight.dtype)
    return reshape(out, shape)
