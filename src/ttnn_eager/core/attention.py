"""Decompositions of the fused attention op of nn.MultiheadAttention's fast path.

Under no_grad (eval, batch_first, ...) nn.MultiheadAttention on the CPU, CUDA or the PrivateUse1 device calls
`_native_multi_head_attention` (torchvision's ViT does; so do nn.TransformerEncoderLayer's self-attention
blocks). torch._decomp has no decomposition of it, so it would run whole on the CPU fallback. This is the CPU
kernel's math (aten/src/ATen/native/transformers/attention.cpp) in aten ops that are lowered -- the packed
input projection, q scaled by 1/sqrt(head_dim), q @ k^T, a masked softmax, @ v, the output projection -- so
the block runs on the device.

Mask semantics are the CPU kernel's: any mask becomes bool (a float mask: nonzero is masked, as the kernel's
`mask.to(kBool)`), True is masked; mask_type 0 is [L, L] (src_mask), 1 is [B, L] (key padding), 2 or None
any shape broadcasting to [B, H, L, S]; a query row whose keys are all masked gives zeros, as the kernel's
masked softmax does.
"""
from __future__ import annotations

import math

import torch

aten = torch.ops.aten


def _projection(x, weight, bias):
    return torch.nn.functional.linear(x, weight, bias)


def _heads(x, b, h, dh):
    return x.reshape(b, -1, h, dh).transpose(1, 2)  # [B, T, D] -> [B, H, T, dh]


def _bool_mask(mask, mask_type, b, length_t, length_s):
    """The mask as [.., T or 1, S] bool broadcasting to [B, H, T, S], or None for a shape not understood."""
    m = mask if mask.dtype == torch.bool else mask != 0
    if m.dim() == 2 and tuple(m.shape) == (b, length_s) and (mask_type == 1 or mask_type is None and b != length_t):
        return m.reshape(b, 1, 1, length_s)  # key padding: [B, S]
    if m.dim() == 2 and tuple(m.shape) == (length_t, length_s) and mask_type in (0, 2, None):
        return m  # src_mask: [T, S]
    if m.dim() == 4 and m.shape[-1] == length_s and mask_type in (2, None):
        return m
    return None


def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                proj_bias, mask=None, need_weights=True, average_attn_weights=True,
                                mask_type=None):
    if query.dim() != 3 or key.dim() != 3 or value.dim() != 3 or query.is_nested:
        return NotImplemented
    b, t, d = query.shape
    if d != embed_dim or embed_dim % num_head:
        return NotImplemented
    dh = embed_dim // num_head
    m = None if mask is None else _bool_mask(mask, mask_type, b, t, key.shape[1])
    if mask is not None and m is None:
        return NotImplemented
    if query is key and key is value:
        q, k, v = _projection(query, qkv_weight, qkv_bias).split(embed_dim, -1)
    else:
        (wq, wk, wv), (bq, bk, bv) = qkv_weight.split(embed_dim, 0), qkv_bias.split(embed_dim, 0)
        q, k, v = _projection(query, wq, bq), _projection(key, wk, bk), _projection(value, wv, bv)
    q, k, v = (_heads(x, b, num_head, dh) for x in (q, k, v))
    if m is None and not need_weights:  # (the CPU kernel's own choice too): fused where it fits, else decomposed
        ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return _projection(ctx.transpose(1, 2).reshape(b, t, embed_dim), proj_weight, proj_bias), None
    scores = (q * (1.0 / math.sqrt(dh))) @ k.transpose(-2, -1)  # [B, H, T, S]
    if m is None:
        attn = scores.softmax(-1)
    else:
        attn = scores.masked_fill(m, float("-inf")).softmax(-1)
        attn = attn.masked_fill(m.all(-1, keepdim=True), 0.0)  # every key masked: zeros (not NaN)
    ctx = (attn @ v).transpose(1, 2).reshape(b, t, embed_dim)
    out = _projection(ctx, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    if average_attn_weights:
        attn = attn.sum(1) / num_head
    return out, attn


TABLE = {
    aten._native_multi_head_attention.default: native_multi_head_attention,
}
