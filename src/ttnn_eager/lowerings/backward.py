"""Backward ops that PyTorch's decompositions do not turn into lowered ops (the others -- tanh_backward,
gelu_backward, native_layer_norm_backward, _softmax_backward_data, ... -- are on decompositions.ALLOWLIST).

select_backward / slice_backward put the gradient back into a zero tensor of the input's shape: a concat of
zero blocks and the gradient along the sliced dimension (no scatter needed). embedding_dense_backward sums
the gradient rows of each token id: one_hot(ids)^T @ grad, a matmul (the device's strength) over a one-hot
matrix made on the device by comparing the ids with an arange.
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import INDEX, TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import dim
from .views import reshape

aten = torch.ops.aten


def _zeros_block(g: api.Handle, d: int, size: int) -> api.Handle:
    shape = list(g.shape)
    shape[d] = size
    return api.create("full", (tuple(shape),), g.tt_dtype, api.TILE, g.index, g.dtype, fill_value=0.0)


def _pad_along(g: api.Handle, d: int, before: int, after: int) -> api.Handle:
    """g with `before` zeros in front of it and `after` zeros behind it along dimension d."""
    parts = ([_zeros_block(g, d, before)] if before else []) + [g] + \
            ([_zeros_block(g, d, after)] if after else [])
    return g if len(parts) == 1 else api.run("concat", parts, dim=d)


@lowering(aten.select_backward.default, ttnn=["reshape", "full", "concat"], needs=TILE_FLOAT)
def select_backward(grad, input_sizes, d, index):
    n = len(input_sizes)
    d = dim(d, n)
    index %= input_sizes[d]
    g = reshape(grad, list(input_sizes[:d]) + [1] + list(input_sizes[d + 1:]))
    return _pad_along(g, d, index, input_sizes[d] - index - 1)


@lowering(aten.slice_backward.default, ttnn=["full", "concat"], needs=TILE_FLOAT,
          notes="step 1; other steps run on the CPU fallback")
def slice_backward(grad, input_sizes, d, start, end, step):
    n = len(input_sizes)
    d = dim(d, n)
    size = input_sizes[d]
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    if step != 1:
        raise Unfit("slice_backward with a step")
    return _pad_along(grad, d, start, size - end)


def one_hot(ids: api.Handle, classes: int) -> api.Handle:
    """[N] ids (uint32) -> [N, classes] bfloat16 0/1, made on the device (ids == arange(classes))."""
    ids = reshape(policy.ensure(ids, INDEX), (ids.shape.numel(), 1))
    ids = policy.ensure(ids, TILE)
    span = api.create("arange", (0, classes, 1), ids.tt_dtype, api.TILE, ids.index, torch.int64)
    span = reshape(span, (1, classes))
    return api.run("eq", ids, span, dtype=api.BFLOAT16, out_dtype=torch.bool)


@lowering(aten.embedding_dense_backward.default, ttnn=["arange", "eq", "linear"],
          needs={"grad_output": TILE_FLOAT, "indices": INDEX},
          notes="one_hot(ids)^T @ grad on the device; padding_idx rows get no gradient; "
                "scale_grad_by_freq runs on the CPU fallback")
def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise Unfit("scale_grad_by_freq")
    n = indices.shape.numel()
    width = grad.shape[-1]
    hot = one_hot(indices, num_weights)                      # [n, num_weights]
    if padding_idx is not None and 0 <= padding_idx < num_weights:
        keep = api.run("ne", policy.ensure(reshape(indices, (n, 1)), TILE), padding_idx, dtype=api.BFLOAT16,
                       out_dtype=torch.bool)
        hot = api.run("multiply", hot, keep)
    g = reshape(grad, (n, width))
    out = api.run("linear", hot, g, transpose_a=True, out_dtype=grad.dtype)  # [num_weights, width]
    return out
