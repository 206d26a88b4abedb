"""scaled_dot_product_attention, kept whole for inference and lowered to
ttnn.transformer.scaled_dot_product_attention (FlashAttention-2) where it fits:

    4-D [batch, heads, seq, head_dim] bfloat16 query/key/value, no dropout, query, key and value of one head_dim
    (TT-NN's kernel takes a head_dim of whole tiles, "Padding is not supported on the head_dim dimension": any
    other is zero-padded to the next multiple of 32 with ttnn.pad and the result sliced back -- the zeros add
    nothing to q.k and give zero output columns, so the result is exact as at a whole-tile head_dim; 3 pads and
    a slice, against some 15 ops decomposed: the head sizes of 16, 48, 80 (Phi-2) or 96 ... of real models),
    the same number of query and key/value heads (or, with enable_gqa, key/value heads dividing the query's:
    TT-NN's kernel groups them as PyTorch does, query head i reading key/value head i // group), and a mask (bool or additive) that broadcasts to
    [batch, 1 or heads, seq_q, seq_k] -- it is expanded to that shape and a bool mask becomes additive
    (0 where attended, -inf where not). A bool mask known on the host to be true everywhere (an uploaded padding
    mask with no padding) is dropped, here and in the decomposition (Unfit.replaced), as transformers' eager
    mode drops it on the host.

Anything else raises Unfit, and the dispatcher decomposes the op into matmul/softmax ops (all lowered).
"""
from __future__ import annotations

import math

import torch

from ..core import capture
from ..core import layout as policy
from ..core.layout import TILE
from ..core.registry import Unfit, lowering
from ..device import api
from .views import expand, slice_handle

aten = torch.ops.aten


def _additive_mask(mask, b, h, sq, sk):
    """The mask as sdpa takes it: [b, 1 or h, sq, sk], additive. Made once per mask tensor (layout.prepared):
    a model passes one mask to every layer, so 24 layers make it once."""
    mask_h = mask.shape[-3] if len(mask.shape) >= 3 else 1
    shape = (b, mask_h if mask_h == h else 1, sq, sk)

    def make(m):
        m = expand(m, shape)
        if m.dtype == torch.bool:
            # masked: bfloat16's most negative finite value, not -inf -- a query row with every key masked (a
            # left-padded position under a causal mask) then stays finite, as PyTorch's CPU attention keeps
            # it, instead of a NaN that the next layer spreads to every row
            m = api.run("where", m, 0.0, -policy.BFLOAT16_MAX, out_dtype=torch.float32)
        return m
    return policy.prepared(mask, ("sdpa_mask", shape), make, conversion=False)


_SDPA_DTYPES = (api.BFLOAT16, api.BFLOAT8_B)


@lowering(aten.scaled_dot_product_attention.default, ttnn=["transformer.scaled_dot_product_attention", "pad", "slice"],
          needs=TILE, notes="where it fits (4-D, no dropout, q/k/v of one head_dim -- zero-padded to a multiple of 32 and "
                            "sliced back; grouped key/value heads with enable_gqa); else decomposed")
def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False):
    replaced = None
    if attn_mask is not None and not isinstance(attn_mask, (int, float)) and _masks_nothing(attn_mask):
        attn_mask, replaced = None, {"attn_mask": (3, None)}  # (the decomposition's too, if this call is Unfit)
    try:
        return _sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    except Unfit as unfit:
        raise Unfit(str(unfit), replaced) from None


def _masks_nothing(mask) -> bool:
    """A bool mask known on the host to be true everywhere (an uploaded padding mask with no padding: its
    values' bounds), as transformers' eager mode finds it on the host and passes no mask; a decision a graph
    capture records and checks at each replay (core/capture.py)."""
    if mask.dtype != torch.bool or mask.bounds is None or not mask.shape.numel() or mask.bounds[0] <= 0:
        return False
    capture.host_decision(mask, "all_any", "aten.scaled_dot_product_attention's mask (true everywhere, from "
                                           "values known on the host: no mask)")
    return True


def _sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        raise Unfit("not 4-D")
    b, h, sq, d = q.shape
    sk = k.shape[-2]
    grouped = enable_gqa and k.shape[1] == v.shape[1] and k.shape[1] and h % k.shape[1] == 0
    if k.shape[-1] != d or v.shape[-1] != d or dropout_p or not (k.shape[1] == v.shape[1] == h or grouped):
        raise Unfit("query, key and value of other head_dims, dropout, or key/value heads that do not divide the "
                    "query's")
    for t in (q, k, v):  # (a loop, not any() over a generator: this runs once per attention layer)
        tt = t.tt
        if tt is not None and tt.dtype not in _SDPA_DTYPES:
            raise Unfit("ttnn's sdpa takes bfloat16/bfloat8_b q, k, v only (float32 storage)")
    if attn_mask is not None and is_causal:
        raise Unfit("mask and is_causal together")
    if attn_mask is not None:
        if isinstance(attn_mask, (int, float)) or len(attn_mask.shape) > 4:
            raise Unfit("mask shape")
        attn_mask = _additive_mask(attn_mask, b, h, sq, sk)
    wide = -d % api.TILE_SIZE
    if wide:
        q, k, v = (api.run("pad", t, [(0, 0), (0, 0), (0, 0), (0, wide)], 0.0) for t in (q, k, v))
    out = api.run("transformer.scaled_dot_product_attention", q, k, v, attn_mask=attn_mask,
                  is_causal=is_causal, scale=scale if scale is not None else 1.0 / math.sqrt(d),
                  compute_kernel_config=policy.compute_config("sdpa", q.index))
    return slice_handle(out, 3, 0, d) if wide else out
