"""The mock device: the whole real ttnn library with no hardware behind it, and shadow execution for values.

A mock device (device/runtime.py lays out the rig) runs ttnn for real -- validation, program factories, the
DRAM/L1 allocator -- but executes nothing: reading a result back would give zeros. So every Handle also
carries `shadow`, the torch tensor its device tensor would hold, and this backend computes it:

    stored(value, tt_dtype)        an upload's value: what the device holds after storing it as tt_dtype
    rounded(value, tt_dtype, ...)  the same, for a staged tensor's host value (api.stage)
    value(op, args, kwargs, out)   a ttnn op's result value: TT-NN's own golden function
                                   (`ttnn.get_golden_function`), or a reference from REFERENCES where ttnn has
                                   none, evaluated in float32 on the arguments' shadows -- the hardware
                                   numerics model (numerics.py) for matrix-engine ops -- and rounded to the
                                   output's device dtype (bfloat16 by `.to(torch.bfloat16)`, bfloat8_b through
                                   ttnn's own host conversion)
    read(h)                        a download: the shadow (ttnn.to_torch is not called: it returns zeros here,
                                   and late in long sessions it was seen to block forever)

`shadows_off()` runs a block as hardware does, with no shadow execution (host-time benchmarks). The card
backend (card.py) has the same interface and returns no values: the card computes them. device/api.py picks
one of the two once, when it is imported.
"""
from __future__ import annotations

import contextlib
import functools
import math

import torch

from . import numerics
from .base import Handle, _resolve, shape_of, ttnn

# How a device dtype is held on the host (shadow values).
_HOST_DTYPE = {
    ttnn.bfloat16: torch.bfloat16, ttnn.bfloat8_b: torch.bfloat16, ttnn.bfloat4_b: torch.bfloat16,
    ttnn.float32: torch.float32, ttnn.int32: torch.int32, ttnn.uint32: torch.int64,
    ttnn.uint16: torch.int32, ttnn.uint8: torch.int32,
}
_BLOCK_FLOAT = (ttnn.bfloat8_b, ttnn.bfloat4_b)
# Keyword arguments that steer how the device computes, not what: never passed to a golden function.
_DEVICE_ONLY_KWARGS = ("memory_config", "compute_kernel_config", "core_grid", "queue_id", "device")


def _round(value: torch.Tensor, tt_dtype) -> torch.Tensor:
    """What the device holds after storing `value` as `tt_dtype`."""
    if tt_dtype in _BLOCK_FLOAT:  # shared-exponent blocks: let ttnn's own host conversion do the packing
        packed = ttnn.from_torch(value.float(), dtype=tt_dtype, layout=ttnn.TILE_LAYOUT)
        return ttnn.to_torch(packed).to(torch.bfloat16).reshape(value.shape)
    target = _HOST_DTYPE[tt_dtype]
    if not target.is_floating_point and value.is_floating_point():
        value = value.round()
    return value.to(target)


class PerChip(list):
    """The value of a mesh tensor whose chips hold different values (a shard each, a partial sum each): one
    torch tensor per chip, in the mesh's row-major order. A value every chip holds alike (a replicated
    tensor: uploads, and every op on replicated inputs) stays one torch tensor."""


def _chip(value, c: int):
    return value[c] if type(value) is PerChip else value


def _on_chip(x, c: int):
    """An op's argument as chip c sees it: Handles with per-chip values become chip c's Handle."""
    if isinstance(x, Handle) and type(x.shadow) is PerChip:
        return Handle(x.tt, x.shadow[c], x.dtype, x.shape, x.index)
    if isinstance(x, (list, tuple)):
        return type(x)(_on_chip(y, c) for y in x)
    return x


def _per_chip(args) -> bool:
    for x in args:
        if isinstance(x, Handle) and type(x.shadow) is PerChip:
            return True
        if isinstance(x, (list, tuple)) and _per_chip(x):
            return True
    return False


class _Unknown(Exception):
    """An input's value is unknown (made with shadows off): so is the result's."""


def _golden_input(x):
    if isinstance(x, Handle):
        s = x.shadow
        if s is None:
            raise _Unknown
        return s.float() if s.dtype == torch.bfloat16 else s
    if isinstance(x, (list, tuple)):
        return type(x)(_golden_input(y) for y in x)
    return x




@functools.lru_cache(maxsize=None)
def _reference(op: str):
    ref = REFERENCES.get(op)
    if ref is not None:
        return ref
    try:
        return ttnn.get_golden_function(_resolve(op))
    except Exception as e:  # pragma: no cover - every op we use has one or a reference
        raise NotImplementedError(f"ttnn.{op} has no golden function and no reference in device/mock.py REFERENCES") from e


def _typecast_ref(x, dtype, **_):
    return x


def _to_layout_ref(x, *_, **__):
    return x


def _linear_ref(a, b, transpose_a=False, transpose_b=False, *, bias=None, activation=None, **_):
    # ttnn 0.81.1's linear golden tests `len(bias) == 2` (meaning a 2-D bias) and so rejects a 1-D bias of
    # two features (BertForQuestionAnswering's start/end logits).
    if transpose_a:
        a = a.transpose(-1, -2)
    if transpose_b:
        b = b.transpose(-1, -2)
    out = a @ b
    if bias is not None:
        out = out + bias.reshape(-1)
    if activation is not None:
        from ttnn.operations.activations import get_golden_function_for_activation
        out = get_golden_function_for_activation(activation)(out)
    return out


def _nhwc_to_nchw(x, batch_size, input_h, input_w, channels):
    return x.reshape(batch_size, input_h, input_w, -1)[..., :channels].permute(0, 3, 1, 2)


def _nchw_to_flat(x):  # [N, C, H, W] -> [1, 1, N*H*W, C]: how TT-NN's sliding-window ops return results
    n, c, h, w = x.shape
    return x.permute(0, 2, 3, 1).reshape(1, 1, n * h * w, c)


def _pool_padding(padding):
    """[pad_h, pad_w] or [top, bottom, left, right] as F.pad's (left, right, top, bottom)."""
    if len(padding) == 2:
        return (padding[1], padding[1], padding[0], padding[0])
    return (padding[2], padding[3], padding[0], padding[1])


def _max_pool2d_ref(x, batch_size, input_h, input_w, channels, kernel_size, stride, padding, dilation,
                    ceil_mode=False, return_indices=False, **_):
    # (ttnn's golden imports a module of tt-metal's test tree that the wheel does not ship)
    x = _nhwc_to_nchw(x, batch_size, input_h, input_w, channels)
    pad = _pool_padding(padding)
    if pad[0] != pad[1] or pad[2] != pad[3]:
        x, pad = torch.nn.functional.pad(x, pad, value=-math.inf), (0, 0, 0, 0)
    out, indices = torch.nn.functional.max_pool2d(x, kernel_size, stride, (pad[2], pad[0]), dilation, ceil_mode,
                                                  return_indices=True)
    return (_nchw_to_flat(out), _nchw_to_flat(indices)) if return_indices else _nchw_to_flat(out)


def _avg_pool2d_ref(x, batch_size, input_h, input_w, channels, kernel_size, stride, padding, ceil_mode=False,
                    count_include_pad=True, divisor_override=None, **_):
    x = _nhwc_to_nchw(x, batch_size, input_h, input_w, channels)
    pad = _pool_padding(padding)
    symmetric = pad[0] == pad[1] and pad[2] == pad[3]
    out = torch.nn.functional.avg_pool2d(x, kernel_size, stride, (pad[2], pad[0]) if symmetric else 0, ceil_mode,
                                         count_include_pad, divisor_override)
    return _nchw_to_flat(out)


def _conv_transpose2d_ref(input_tensor, weight_tensor, in_channels, out_channels, batch_size, input_height,
                          input_width, kernel_size, stride, padding, output_padding=(0, 0), dilation=(1, 1),
                          groups=1, bias_tensor=None, **_):
    # (ttnn has no golden for conv_transpose2d) weight_tensor: PyTorch's [in, out / groups, kh, kw]
    x = _nhwc_to_nchw(input_tensor, batch_size, input_height, input_width, in_channels)
    bias = bias_tensor.reshape(-1) if bias_tensor is not None else None
    out = torch.nn.functional.conv_transpose2d(x, weight_tensor.float(), bias, stride, padding, output_padding,
                                               groups, dilation)
    return _nchw_to_flat(out)


def _adaptive_avg_pool2d_ref(x, batch_size, input_h, input_w, channels, output_size, **_):
    x = _nhwc_to_nchw(x, batch_size, input_h, input_w, channels)
    return _nchw_to_flat(torch.nn.functional.adaptive_avg_pool2d(x, output_size))


def _rand_ref(shape, dtype=None, low=0.0, high=1.0, seed=0, **_):
    # ttnn.rand on a card uses its own generator; the mock's stand-in is a torch generator under the same
    # seed: the same seed gives the same values (reproducible), not the card's bits
    g = torch.Generator().manual_seed(int(seed))
    return torch.rand(tuple(shape), generator=g) * (high - low) + low


# References for ttnn ops whose golden function is missing or does more than we need. Inputs arrive as
# float32 (or integer) torch tensors; `run` rounds the result to the output's device dtype.
def _update_cache_ref(cache, x, update_idx, batch_offset=0, **_):
    """ttnn.update_cache: row `update_idx` of every user's cache (dim 2) from x [1, heads, users, dim] (the
    golden function writes into its argument, which may be shared: this one does not)."""
    out = cache.clone()
    out[:, :, update_idx, :] = x[0, :, batch_offset:batch_offset + cache.shape[0], :].transpose(0, 1)
    return out


def _paged_update_cache_ref(cache, x, update_idxs_tensor=None, page_table=None, **_):
    """ttnn.experimental.paged_update_cache (no golden function): user b's row x[0, b] ([kv heads, dim]) written
    at position update_idxs_tensor[b] of its sequence, in block page_table[b, position // block] of the cache
    [blocks, kv heads, block, dim], row position % block. Users whose position is negative are skipped."""
    out = cache.clone()
    block = cache.shape[2]
    for b, pos in enumerate(update_idxs_tensor.reshape(-1).tolist()):
        if pos >= 0:
            out[int(page_table[b, pos // block]), :, pos % block, :] = x[0, b, :cache.shape[1], :]
    return out


def _paged_sdpa_decode_ref(q, k_cache, v_cache, is_causal=True, page_table_tensor=None, cur_pos_tensor=None,
                           scale=None, **_):
    """ttnn.transformer.paged_scaled_dot_product_attention_decode, causal: user b's query heads q[0, b] attend
    to positions 0..cur_pos[b] of its sequence, read block by block through page_table[b] (its golden function
    refuses the -1 entries of unused blocks, which the kernel never reads); key/value heads grouped as
    enable_gqa does; a negative position is skipped (zeros)."""
    _, users, heads, d = q.shape
    kv, block = k_cache.shape[1], k_cache.shape[2]
    out = torch.zeros(1, users, heads, d)
    for b, pos in enumerate(cur_pos_tensor.reshape(-1).tolist()):
        if pos < 0:
            continue
        pages = page_table_tensor[b, :pos // block + 1].long()
        k, v = (c[pages].transpose(0, 1).reshape(kv, -1, d)[:, :pos + 1].float() for c in (k_cache, v_cache))
        out[0, b] = torch.nn.functional.scaled_dot_product_attention(
            q[0, b].float().unsqueeze(1), k, v, scale=scale, enable_gqa=True).squeeze(1)
    return out


def _rotary_embedding_hf_ref(x, cos, sin, is_decode_mode=False, **_):
    """ttnn.experimental.rotary_embedding_hf (no golden function): x * cos + rotate_half(x) * sin, the result of
    x's shape (no row padding). Prefill mode: x [1, heads, s, d], the first s rows of cos, sin [1, 1, >= s, d];
    decode mode: x [1, batch, heads, d], cos, sin [1, batch, 1, d] (a position a user)."""
    if not is_decode_mode:
        cos, sin = cos[..., :x.shape[-2], :], sin[..., :x.shape[-2], :]
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def _nlp_create_qkv_heads_decode_ref(x, num_heads, num_kv_heads=None, **_):
    """ttnn.experimental.nlp_create_qkv_heads_decode (no golden function): x [1, 1, users, (h + 2 kv) * d], each
    user's row of q, k, v heads side by side -> q [1, users, h, d], k and v [1, users, kv, d] (decode layout)."""
    kv = num_heads if num_kv_heads is None else num_kv_heads
    users = x.shape[2]
    heads = x.reshape(1, users, num_heads + 2 * kv, -1)
    return heads[:, :, :num_heads], heads[:, :, num_heads:num_heads + kv], heads[:, :, num_heads + kv:]


def _layer_norm_ref(x, *, epsilon=1e-12, residual_input_tensor=None, weight=None, bias=None, **_):
    """ttnn.layer_norm (its golden function adds the residual into its input, which may be shared)."""
    if residual_input_tensor is not None:
        x = x + residual_input_tensor
    w = weight.reshape(-1).float() if weight is not None else None
    b = bias.reshape(-1).float() if bias is not None else None
    return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), w, b, eps=epsilon)


_BITS = {ttnn.float32: torch.float32, ttnn.int32: torch.int32, ttnn.uint32: torch.int32,
         ttnn.bfloat16: torch.bfloat16, ttnn.uint16: torch.int16}  # a device dtype's bits as a torch dtype


def _bitcast_ref(x, dtype, **_):
    """ttnn.bitcast: x's bits as `dtype` (its golden function reads a uint32 shadow, held as int64, as 64-bit
    words). x arrives as its host value: float32 for bfloat16 shadows, int64 for uint32, int32 for uint16."""
    width = 16 if dtype in (ttnn.bfloat16, ttnn.uint16) else 32
    if x.is_floating_point():
        bits = x.to(torch.bfloat16 if width == 16 else torch.float32).view(torch.int16 if width == 16 else torch.int32)
    else:
        bits = x.to(torch.int16 if width == 16 else torch.int32)  # (wraps: the low bits)
    out = bits.view(_BITS[dtype])
    if dtype in (ttnn.uint32, ttnn.uint16):  # unsigned: the held value is non-negative
        out = out.to(torch.int64) & ((1 << width) - 1)
    return out


REFERENCES = {
    "bitcast": _bitcast_ref,
    "update_cache": _update_cache_ref,
    "experimental.paged_update_cache": _paged_update_cache_ref,
    "transformer.paged_scaled_dot_product_attention_decode": _paged_sdpa_decode_ref,
    "to_memory_config": _to_layout_ref,  # value unchanged: where it lives is not part of it
    "experimental.rotary_embedding_hf": _rotary_embedding_hf_ref,
    "experimental.nlp_create_qkv_heads_decode": _nlp_create_qkv_heads_decode_ref,
    "layer_norm": _layer_norm_ref,
    "typecast": _typecast_ref,          # the rounding to the output dtype is the whole op
    "to_layout": _to_layout_ref,        # value unchanged; padding is not part of the logical value
    "tilize": _to_layout_ref,
    "untilize": _to_layout_ref,
    "linear": _linear_ref,
    "max_pool2d": _max_pool2d_ref,
    "avg_pool2d": _avg_pool2d_ref,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d_ref,
    "conv_transpose2d": _conv_transpose2d_ref,
    "rand": _rand_ref,
}



# The collectives and the mesh partition: references across chips. Each takes the chips' values (a list, in
# the mesh's row-major order) and returns them per chip. On a 2-D mesh `cluster_axis` names the mesh axis the
# chips exchange along (1: within a row, 0: within a column); on a 1-D mesh every chip takes part.
def _groups(shape: tuple, cluster_axis) -> list:
    rows, cols = shape
    if cluster_axis is None:
        return [list(range(rows * cols))]
    if cluster_axis == 1:
        return [[r * cols + c for c in range(cols)] for r in range(rows)]
    return [[r * cols + c for r in range(rows)] for c in range(cols)]


def _across(values: list, shape: tuple, cluster_axis, combine) -> list:
    out = [None] * len(values)
    for group in _groups(shape, cluster_axis):
        for chip, value in zip(group, combine([values[c] for c in group])):
            out[chip] = value
    return out


def _all_gather_ref(values, shape, *, dim, cluster_axis=None, **_):
    return _across(values, shape, cluster_axis, lambda vs: [torch.cat(vs, dim)] * len(vs))


def _all_reduce_ref(values, shape, *, cluster_axis=None, **_):
    return _across(values, shape, cluster_axis, lambda vs: [torch.stack(vs).sum(0)] * len(vs))


def _reduce_scatter_ref(values, shape, *, dim, cluster_axis=None, **_):
    return _across(values, shape, cluster_axis, lambda vs: list(torch.stack(vs).sum(0).chunk(len(vs), dim)))


def _mesh_partition_ref(values, shape, *, dim, cluster_axis=None, **_):
    return _across(values, shape, cluster_axis, lambda vs: [v.chunk(len(vs), dim)[k] for k, v in enumerate(vs)])


ACROSS_CHIPS = {
    "all_gather": _all_gather_ref,
    "all_reduce": _all_reduce_ref,
    "reduce_scatter": _reduce_scatter_ref,
    "mesh_partition": _mesh_partition_ref,
}


def _across_chips(op: str, args, kwargs, out, mesh: tuple):
    x = args[0]
    if x.shadow is None:
        return None
    chips = mesh[0] * mesh[1]
    values = [_chip(x.shadow, c) for c in range(chips)]
    values = [v.float() if v.dtype == torch.bfloat16 else v for v in values]
    named = {k: v for k, v in kwargs.items() if k not in _DEVICE_ONLY_KWARGS}
    if len(args) > 1:
        named["dim"] = args[1]
    results = [_round(r.contiguous().reshape(shape_of(out)), out.dtype) for r in ACROSS_CHIPS[op](values, mesh, **named)]
    if all(r is results[0] or torch.equal(r, results[0]) for r in results[1:]):
        return results[0]  # every chip holds the same value: replicated
    return PerChip(results)


def shadow(op: str, args, kwargs, outs, mesh: tuple | None = None) -> list:
    """Shadow execution: the values of `outs` (results of ttnn.<op>), from the reference on the shadows:
    the hardware numerics model for the call's compute-kernel config where numerics.py has one, else the
    golden function (or REFERENCES) in float32; then rounded to the output's device dtype. On a mesh, an op
    on inputs whose chips hold different values is computed chip by chip (PerChip), and the collectives
    across chips (ACROSS_CHIPS)."""
    if mesh is not None:
        if op in ACROSS_CHIPS:
            return [_across_chips(op, args, kwargs, outs[0], mesh)]
        if _per_chip(args) or _per_chip(kwargs.values()):
            chips = [shadow(op, _on_chip(args, c), {k: _on_chip(v, c) for k, v in kwargs.items()}, outs)
                     for c in range(mesh[0] * mesh[1])]
            return [None if any(v[i] is None for v in chips) else PerChip(v[i] for v in chips)
                    for i in range(len(outs))]
    try:
        gkwargs = {k: _golden_input(v) for k, v in kwargs.items() if k not in _DEVICE_ONLY_KWARGS}
        gargs = _golden_input(args)
    except _Unknown:
        return [None] * len(outs)
    ref = (numerics.reference(op, kwargs.get("compute_kernel_config")) or _reference(op))(*gargs, **gkwargs)
    refs = ref if isinstance(ref, (list, tuple)) else (ref,)
    return [_round(r.reshape(shape_of(o)), o.dtype) for r, o in zip(refs, outs)]


class Mock:
    """The mock device backend (see the module docstring)."""

    traces = False  # tt-metal's trace capture crashes on a mock device: graphs replay op by op

    def __init__(self, runtime):
        self.runtime = runtime
        self.shadowing = True  # shadow execution on (off inside shadows_off)
        self.mesh = None       # (rows, columns) once a mesh of chips is open (mesh mode)

    def set_mesh(self, shape: tuple) -> None:
        self.mesh = shape

    def device_count(self) -> int:
        return self.runtime.chips

    def open_options(self) -> dict:
        return {}

    def device_name(self, index: int) -> str:
        return f"{self.runtime.board} (mock)"

    def stored(self, value: torch.Tensor, tt_dtype):
        out = _round(value, tt_dtype)  # an upload's value is known, shadows off or on
        if out.numel() and out.untyped_storage().data_ptr() == value.untyped_storage().data_ptr():
            out = out.clone()  # (a float32 or int32 upload: the device's copy, not the host tensor's memory)
        return out

    def rounded(self, value: torch.Tensor, tt_dtype, layout) -> torch.Tensor:
        return _round(value, tt_dtype)  # a staged tensor's host value (api.stage)

    def value(self, op: str, args, kwargs, out):
        return shadow(op, args, kwargs, (out,), self.mesh)[0] if self.shadowing else None

    def values(self, op: str, args, kwargs, outs) -> list:
        return shadow(op, args, kwargs, outs, self.mesh) if self.shadowing else [None] * len(outs)

    def created(self, op: str, args, tt_dtype, kwargs, out):
        if not self.shadowing:
            return None
        return _round(_reference(op)(*args, dtype=tt_dtype, **kwargs).reshape(shape_of(out)), out.dtype)

    def read_chips(self, h: Handle, chips: int) -> list:
        self.read(h)  # (the unknown-value error)
        return list(h.shadow) if type(h.shadow) is PerChip else [h.shadow] * chips

    def stored_chips(self, values: torch.Tensor, tt_dtype):
        return PerChip(_round(v.unsqueeze(0), tt_dtype) for v in values)

    def read(self, h: Handle) -> torch.Tensor:
        if h.shadow is None:
            raise RuntimeError("ttnn_eager: the value of this tensor is unknown: it was computed on the mock "
                               "device with shadow execution off (ttnn_eager.device.api.shadows_off, for host-time "
                               "benchmarks only)")
        return h.shadow[0] if type(h.shadow) is PerChip else h.shadow  # a mesh: chip 0's (rank 0's) value

    @contextlib.contextmanager
    def shadows_off(self):
        """Benchmarks only: within this block the mock device runs as hardware does, with no shadow execution,
        so host time is measured without the CPU stand-in's work (and its cache traffic). The values of the
        results of ttnn ops run inside (and of anything later computed from them) are unknown: downloading one
        raises."""
        saved, self.shadowing = self.shadowing, False
        try:
            yield
        finally:
            self.shadowing = saved

    def release(self) -> None:
        """At exit, before the devices close: the reference caches hold ttnn objects."""
        _reference.cache_clear()
