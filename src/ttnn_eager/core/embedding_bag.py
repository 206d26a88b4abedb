"""nn.EmbeddingBag / F.embedding_bag (`aten._embedding_bag` and its `_forward_only`) as a lookup and a sum per bag on the device.

The bags come from `offsets`, a short tensor read to the host once per call (PyTorch's own checks and its
auxiliary outputs -- offset2bag, bag_size, max_indices, which only the backward reads -- are computed there by
the CPU kernel on a 1-column stand-in weight: they depend on the offsets and the mode, not on the weight). On
the device: the rows weight[indices] (an embedding lookup), times per_sample_weights, summed into their bag
(index_add), divided by the bag's size for mode="mean" (an empty bag stays 0, as on the CPU). Kimi-K2.5's
vision tower interpolates its position table this way (an embedding_bag of 16 weighted taps per position).

mode="max", padding_idx and 2-D offsets are not decomposed (the counted CPU fallback).
"""
from __future__ import annotations

import functools

import torch

aten = torch.ops.aten


def embedding_bag(op, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    if (mode not in (0, 1) or padding_idx not in (-1, None) or indices.dim() != 1 or offsets.dim() != 1
            or weight.dim() != 2 or not weight.is_floating_point() or not indices.numel()):
        return NotImplemented
    n = indices.shape[0]
    host_offsets = offsets.cpu()
    stand_in = torch.zeros(1, 1)
    aux = op(  # PyTorch's checks and auxiliary outputs (from the offsets alone), by the CPU kernel
        stand_in, torch.zeros(n, dtype=indices.dtype), host_offsets, scale_grad_by_freq, mode, sparse,
        None if per_sample_weights is None else torch.ones(n), include_last_offset, -1)[1:]
    bags = host_offsets.shape[0] - (1 if include_last_offset else 0)
    bag = torch.bucketize(torch.arange(n), host_offsets[:bags], right=True) - 1  # each index's bag
    rows = torch.nn.functional.embedding(indices, weight)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    out = weight.new_zeros(bags, weight.shape[1]).index_add(0, bag.to(weight.device), rows)
    if mode == 1:  # (the CPU kernel's bag_size: the count of each bag's indices)
        out = out / aux[1].clamp(min=1).to(weight.dtype).unsqueeze(1).to(weight.device)
    return (out, *(t.to(weight.device) for t in aux))


TABLE = {op: functools.partial(embedding_bag, op)  # (_forward_only: what F.embedding_bag calls without grad)
         for op in (aten._embedding_bag.default, aten._embedding_bag_forward_only.default)}
