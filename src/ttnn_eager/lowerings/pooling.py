"""2-D pooling: max_pool2d (with and without indices), avg_pool2d, adaptive_avg_pool2d as TT-NN's
sliding-window pools.

Layout decisions (as in conv.py): TT-NN pools read a channels-last image flattened to [1, 1, N*H*W, C] and
write [1, 1, N*OH*OW, C], so the NCHW input is permuted to NHWC and the result permuted back. max/avg pools
are asked for a TILE result in DRAM (what every consumer wants); adaptive_avg_pool2d returns ROW_MAJOR, which
the layout policy tilizes (counted). Unbatched [C, H, W] inputs are pooled as a batch of one.

max_pool2d's indices come from TT-NN (uint16: refused above 65535 positions per image) and are PyTorch's:
flat positions h * W + w in each channel's plane. Ties (equal values, e.g. after bfloat16 rounding) may pick
a different position than the CPU's first-wins rule; the values agree.

Float32-stored inputs (configure(float32_storage="float32")): TT-NN's pools take bfloat16 only, and a
bfloat16 copy would lose the values' low bits, so such a pool is its windows (conv.windows: one strided slice
per tap of the input padded with -inf or zeros, NCHW as it is), stacked [kk, N*C, OH, OW] and reduced over
the taps: a max, exact; a sum times 1 / PyTorch's divisor per output position (made on the host from the
pool of a ones image: count_include_pad, ceil_mode and divisor_override as PyTorch counts). max_pool2d's
indices are then the first tap whose window equals the maximum (PyTorch's first-wins rule, exact in float32):
its offset in the image, chosen tap by tap from the last with ttnn.where, plus each window's top-left
position; a window of -inf alone gets its first position in the image, as PyTorch's (padding is never its
candidate). NaN is not handled apart: the CPU's index of a NaN window may differ.

Refused before ttnn (Unfit: the counted CPU fallback, or a strict-mode error naming the op and argument):
3-D pools, padding more than half the kernel (PyTorch's own error comes from the fallback), empty inputs,
and adaptive max pooling to sizes that do not divide the input (TT-NN's adaptive pool takes uniform windows
only; adaptive average pooling then averages PyTorch's bins slice by slice).
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.convolution import per_dim, pool_output_size
from ..core.layout import TILE, TILE_FLOAT, TILE_FLOAT_CL
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import batch_chunks
from .conv import windows
from .padding import constant_pad_nd
from .views import cat, permute_handle, reshape, slice_handle

aten = torch.ops.aten
_UINT16_POSITIONS = 1 << 16


def _pair(v, default=None) -> tuple:
    return per_dim(v, 2, default)


def _as_batch(x, op: str):
    """x as [N, C, H, W] and whether it was unbatched ([C, H, W])."""
    if len(x.shape) == 3:
        return _as_batch(reshape(x, (1, *x.shape)), op)[0], True
    if len(x.shape) != 4:
        raise Unfit(f"{op}: input of {len(x.shape)} dims")
    if x.shape.numel() == 0:
        raise Unfit(f"{op}: empty input")
    return x, False


def _bfloat16(x) -> bool:
    """Whether TT-NN's pools take x (bfloat16 only); else the pool is its windows (see above)."""
    return x.tt_dtype == api.BFLOAT16


def _stacked_windows(x, kernel, stride, padding, dilation, oh: int, ow: int, fill: float):
    """x [N, C, H, W] padded with `fill` -- and past its padding where ceil_mode's last window reaches -- as
    the stack [kk, N*C, OH, OW] of its windows (conv.windows)."""
    n, c, h, w = x.shape
    extra = [max(0, (o - 1) * s + d * (k - 1) + 1 - (size + 2 * p))
             for o, s, d, k, size, p in zip((oh, ow), stride, dilation, kernel, (h, w), padding)]
    (ph, pw), (eh, ew) = padding, extra
    if ph or pw or eh or ew:
        x = constant_pad_nd(x, (pw, pw + ew, ph, ph + eh), fill)
    parts = [reshape(t, (1, n * c, oh, ow)) for t in windows(x, kernel, stride, dilation, oh, ow)]
    return cat(parts, 0) if len(parts) > 1 else parts[0]


def _window_max_pool(x, kernel, stride, padding, dilation, oh: int, ow: int, with_indices: bool):
    """A float32 max pool as the maximum of its windows; the indices the first tap that holds it (see above)."""
    from .reduction import _reduce
    n, c, h, w = x.shape
    stacked = _stacked_windows(x, kernel, stride, padding, dilation, oh, ow, float("-inf"))
    values = _reduce("max", stacked, [0], True)
    if not with_indices:
        return reshape(values, (n, c, oh, ow))
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    first = None
    for t in reversed(range(kh * kw)):
        i, j = divmod(t, kw)
        hit = api.run("eq", slice_handle(stacked, 0, t, t + 1), values)
        offset = float(i * dh * w + j * dw)
        first = api.run("multiply", hit, offset) if first is None else api.run("where", hit, offset, first)
    rows, cols = torch.arange(oh).view(oh, 1) * sh - ph, torch.arange(ow) * sw - pw  # each window's tap (0, 0)
    flat = api.run("add", first, _constant(rows * w + cols, x))
    # a window whose maximum is -inf (all its values): PyTorch's index is its first position in the image
    # (padding is never a candidate), which -inf padding would otherwise be
    inside = (rows - rows.clamp(max=0).div(dh, rounding_mode="floor") * dh) * w + \
        cols - cols.clamp(max=0).div(dw, rounding_mode="floor") * dw
    flat = api.run("where", api.run("eq", values, float("-inf")), _constant(inside, x), flat)
    indices = policy.retag(flat, torch.int64)
    indices.bounds = (0, h * w - 1, False)
    return reshape(values, (n, c, oh, ow)), reshape(indices, (n, c, oh, ow))


def _window_avg_pool(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, oh, ow):
    """A float32 average pool as the sum of its windows times 1 / PyTorch's divisor of each position (made on
    the host: the pool of a ones image over the count of its elements each window holds)."""
    from .reduction import _reduce
    n, c, h, w = x.shape
    total = _reduce("sum", _stacked_windows(x, kernel, stride, padding, (1, 1), oh, ow, 0.0), [0], True)
    ones = torch.ones(1, 1, h, w)
    mean = torch.nn.functional.avg_pool2d(ones, kernel, stride, padding, ceil_mode, count_include_pad,
                                          divisor_override)
    count = torch.nn.functional.avg_pool2d(ones, kernel, stride, padding, ceil_mode, True, 1)
    scale = torch.where(count > 0, mean / count.clamp(min=1), 0.0).reshape(oh, ow)
    return reshape(api.run("multiply", total, _constant(scale, x)), (n, c, oh, ow))


def _constant(value: torch.Tensor, x):
    """A host-made [OH, OW] map on x's device in x's device dtype (float32: window positions up to 2^24 and
    divisors exact)."""
    return api.upload(value.float().contiguous(), x.tt_dtype, api.TILE, x.index, dtype=torch.float32)


def _flat_nhwc(x):
    return policy.nhwc(x)  # (a channels-last x as it is: layout.py)


def _plain(x):
    """x stored NCHW: a channels-last image is permuted (once, in place) for the routes that slice or reduce it
    in NCHW (float32 windows, batch chunks, one window over everything, PyTorch's bins)."""
    if x.tt is not None and len(x.shape) == 4 and policy.is_channels_last(x):
        policy.to_nchw(x)
    return x


def _unbatch(out, unbatched: bool):
    return reshape(out, tuple(out.shape[1:])) if unbatched else out


def _nchw(out, n, oh, ow, c, unbatched: bool):
    """A pool's flat NHWC result [1, 1, N*OH*OW, C]: unbatched, [C, OH, OW] (NCHW); else it stays
    channels-last, as PyTorch's [N, C, OH, OW] (layout.py: channels-last residency). TT-NN writes [N, OH, OW, C]
    instead when it slices the input through DRAM (measured on ttnn 0.81.1: 1024 8x8 images of 128 channels,
    max pool 2x2; 512 of them come flat): made flat first."""
    flat = (1, 1, n * oh * ow, c)
    if tuple(out.tt.shape) != flat:
        out = reshape(out, flat)
    if not unbatched:
        return policy.channels_last(out, (n, c, oh, ow))
    out = permute_handle(reshape(out, (n, oh, ow, c)), (0, 3, 1, 2))
    return reshape(out, (c, oh, ow))


def _window(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _pair(kernel_size)
    stride = _pair(stride, kernel)
    padding, dilation = _pair(padding), _pair(dilation)
    for k, p, d in zip(kernel, padding, dilation):
        if p > (d * (k - 1) + 1) // 2 or k < 1:
            raise Unfit(f"{op}: padding={list(padding)} is more than half the kernel {list(kernel)}")
    n, c, h, w = x.shape
    oh = pool_output_size(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
    ow = pool_output_size(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)
    if oh < 1 or ow < 1:
        raise Unfit(f"{op}: output size {oh}x{ow} is too small")
    return kernel, stride, padding, dilation, oh, ow


def _covers_all(x, kernel, padding, dilation) -> bool:
    """A window wider than the padded input (ceil_mode's single window: EfficientNet's AvgPool2d(2560) over a
    7x7 map). TT-NN's sliding-window setup never returns or crashes on these (SIGSEGV), so they are not sent
    to it: the one window sees the whole input, a reduction over H and W."""
    over = [d * (k - 1) + 1 > size + 2 * p for size, k, p, d in zip(x.shape[2:], kernel, padding, dilation)]
    if any(over) and not all(over):
        raise Unfit(f"a window {list(kernel)} wider than the padded input {list(x.shape[2:])} in one dimension only")
    return all(over)


def _tile_dram() -> dict:
    return dict(output_layout=api.TILE, memory_config=api.enum("DRAM_MEMORY_CONFIG"))


# TT-NN's pools, like conv2d, slice their output for L1 by rows and columns but never by the batch: a batch of
# many small images (Hiera's windowed query pooling: 2048 windows of 4x4 x 256 channels) stops in TT_FATAL
# "DRAM Auto slice could not find valid slice configuration" (op_slicing.cpp). Measured on the mock device
# (bfloat16; max and average pools, kernels 2 and 3, images 4x4 to 16x16 alike): 1024 images of 256 channels
# pass and 2048 fail, 256 of 1024 pass and 512 fail, 2048 of 64 pass. A batch of more than
# POOL_BATCH_CHANNELS images x channels is pooled in chunks of whole images (half the largest measured to pass).
POOL_BATCH_CHANNELS = 1 << 17


def _in_batches(pool, x):
    """pool(part) of the [N, C, H, W] x in chunks of whole images (POOL_BATCH_CHANNELS), concatenated along
    the batch (each result of a tuple apart); pool(x) when it fits."""
    n, c = x.shape[0], x.shape[1]
    chunks = batch_chunks(n, max(1, POOL_BATCH_CHANNELS // c))
    if len(chunks) == 1:
        return pool(x)
    parts = [pool(slice_handle(x, 0, b0, b1)) for b0, b1 in chunks]
    parts = [tuple(map(_plain, p)) if isinstance(p, tuple) else _plain(p) for p in parts]  # (NCHW, to concatenate)
    return tuple(cat(list(p), 0) for p in zip(*parts)) if isinstance(parts[0], tuple) else cat(parts, 0)


def _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, with_indices: bool):
    x, unbatched = _as_batch(x, "max_pool2d")
    kernel, stride, padding, dilation, oh, ow = _window("max_pool2d", x, kernel_size, stride, padding, dilation,
                                                        ceil_mode)
    n, c, h, w = x.shape
    if n * c > POOL_BATCH_CHANNELS or with_indices or not _bfloat16(x) or _covers_all(x, kernel, padding, dilation):
        x = _plain(x)
    if n * c > POOL_BATCH_CHANNELS:
        out = _in_batches(lambda part: _max_pool(part, kernel_size, stride, padding, dilation, ceil_mode,
                                                 with_indices), x)
        return tuple(_unbatch(o, unbatched) for o in out) if with_indices else _unbatch(out, unbatched)
    if _covers_all(x, kernel, padding, dilation):  # (oh == ow == 1: the maximum of each image's channel)
        if with_indices:
            raise Unfit("max_pool2d_with_indices: a window wider than the padded input")
        from .reduction import _reduce
        return _unbatch(_reduce("max", x, [2, 3], True), unbatched)
    if not _bfloat16(x):
        out = _window_max_pool(x, kernel, stride, padding, dilation, oh, ow, with_indices)
        return tuple(_unbatch(o, unbatched) for o in out) if with_indices else _unbatch(out, unbatched)
    if with_indices and h * w > _UINT16_POSITIONS:
        raise Unfit(f"max_pool2d_with_indices: {h}x{w} positions per image exceed TT-NN's uint16 indices")
    args = (_flat_nhwc(x), n, h, w, c, list(kernel), list(stride), list(padding), list(dilation))
    if not with_indices:
        out = api.run("max_pool2d", *args, ceil_mode=ceil_mode, **_tile_dram())
        return _nchw(out, n, oh, ow, c, unbatched)
    # with indices TT-NN writes ROW_MAJOR only: the policy tilizes both results (and widens the uint16 indices)
    values, indices = api.run("max_pool2d", *args, ceil_mode=ceil_mode, return_indices=True,
                              memory_config=api.enum("DRAM_MEMORY_CONFIG"))
    values = policy.ensure(values, TILE)
    indices.dtype = torch.int64
    indices = policy.ensure(policy.ensure(indices, policy.INDEX), TILE)
    indices.bounds = (0, h * w - 1, False)
    return _nchw_plain(values, n, oh, ow, c, unbatched), _nchw_plain(indices, n, oh, ow, c, unbatched)


def _nchw_plain(out, n, oh, ow, c, unbatched: bool):
    out = permute_handle(reshape(out, (n, oh, ow, c)), (0, 3, 1, 2))
    return reshape(out, (c, oh, ow)) if unbatched else out


@lowering(aten.max_pool2d.default, ttnn=["permute", "reshape", "max_pool2d", "full", "slice", "concat", "max"],
          needs=TILE_FLOAT_CL, notes="kept whole for inference (no indices); NHWC on the device; float32-stored: the "
                                  "maximum of its windows")
def max_pool2d(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, with_indices=False)


@lowering(aten.max_pool2d_with_indices.default, ttnn=["permute", "reshape", "max_pool2d", "typecast", "full", "slice",
                                                       "concat", "max", "eq", "multiply", "where", "add"],
          needs=TILE_FLOAT, notes="indices from TT-NN (uint16, so at most 65536 positions per image); ties may "
                                  "pick another position than the CPU; float32-stored: the maximum of its windows, "
                                  "the indices the first tap holding it (exact, PyTorch's ties)")
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, with_indices=True)


@lowering(aten.avg_pool2d.default, ttnn=["permute", "reshape", "avg_pool2d", "full", "slice", "concat", "sum",
                                         "multiply"],
          needs=TILE_FLOAT_CL, notes="ceil_mode, count_include_pad and divisor_override as in PyTorch; float32-stored: "
                                  "the sum of its windows times 1 / PyTorch's divisor")
def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    x, unbatched = _as_batch(x, "avg_pool2d")
    kernel, stride, padding, _, oh, ow = _window("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override <= 0:
        raise Unfit("avg_pool2d: divisor_override must be positive")
    n, c, h, w = x.shape
    if n * c > POOL_BATCH_CHANNELS or not _bfloat16(x) or _covers_all(x, kernel, padding, [1, 1]):
        x = _plain(x)
    if n * c > POOL_BATCH_CHANNELS:
        return _unbatch(_in_batches(lambda part: avg_pool2d(part, kernel_size, stride, padding, ceil_mode,
                                                            count_include_pad, divisor_override), x), unbatched)
    if _covers_all(x, kernel, padding, [1, 1]):  # the one window: the sum of the image over PyTorch's divisor
        from .reduction import _reduce
        divisor = divisor_override or ((h + 2 * padding[0]) * (w + 2 * padding[1]) if count_include_pad else h * w)
        return _unbatch(api.run("multiply", _reduce("sum", x, [2, 3], True), 1.0 / divisor), unbatched)
    if not _bfloat16(x):
        return _unbatch(_window_avg_pool(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
                                         oh, ow), unbatched)
    out = api.run("avg_pool2d", _flat_nhwc(x), n, h, w, c, list(kernel), list(stride), list(padding),
                  ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=divisor_override,
                  **_tile_dram())
    return _nchw(out, n, oh, ow, c, unbatched)


_MAX_BINS = 64  # adaptive bins computed one slice each (sizes that do not divide the input)


def _bin_means(x, d: int, out: int):
    """PyTorch's adaptive average bins along dimension d: bin i averages [floor(i*n/out), ceil((i+1)*n/out))
    (a window is a product of intervals, so averaging rows then columns averages the window)."""
    n = x.shape[d]
    parts = [api.run("mean", slice_handle(x, d, i * n // out, -(-(i + 1) * n // out)), dim=d, keepdim=True)
             for i in range(out)]
    return cat(parts, d) if len(parts) > 1 else parts[0]


@lowering(aten._adaptive_avg_pool2d.default, ttnn=["permute", "reshape", "adaptive_avg_pool2d", "to_layout",
                                                   "slice", "mean", "concat"],
          needs=TILE_FLOAT_CL, notes="TT-NN's adaptive pool where the output size divides the input (its ROW_MAJOR "
                                  "result tilized by the policy); else PyTorch's bins as slices and means")
def adaptive_avg_pool2d(x, output_size):
    x, unbatched = _as_batch(x, "adaptive_avg_pool2d")
    oh, ow = (x.shape[-2 + i] if s is None else s for i, s in enumerate(_pair(output_size)))
    n, c, h, w = x.shape
    if oh < 1 or ow < 1:
        raise Unfit(f"adaptive_avg_pool2d: output_size={[oh, ow]}")
    if h % oh or w % ow or not _bfloat16(x):
        x = _plain(x)
    if h % oh or w % ow:  # TT-NN's pool refuses windows of varying size (TT_THROW): rows, then columns
        if oh + ow > _MAX_BINS:
            raise Unfit(f"adaptive_avg_pool2d: output_size={[oh, ow]} does not divide the {h}x{w} input")
        out = _bin_means(_bin_means(x, 2, oh), 3, ow)
        return reshape(out, (c, oh, ow)) if unbatched else out
    if not _bfloat16(x):  # uniform windows: an average pool
        kernel = (h // oh, w // ow)
        return _unbatch(_window_avg_pool(x, kernel, kernel, (0, 0), False, True, None, oh, ow), unbatched)
    out = api.run("adaptive_avg_pool2d", _flat_nhwc(x), n, h, w, c, [oh, ow],
                  memory_config=api.enum("DRAM_MEMORY_CONFIG"))
    return _nchw(policy.ensure(out, TILE), n, oh, ow, c, unbatched)


@lowering(aten.adaptive_max_pool2d.default, ttnn=["permute", "reshape", "max_pool2d", "typecast"],
          needs=TILE_FLOAT, notes="output sizes that divide the input: a max pool of uniform windows (indices too)")
def adaptive_max_pool2d(x, output_size):
    oh, ow = (x.shape[-2 + i] if s is None else s for i, s in enumerate(_pair(output_size)))
    h, w = x.shape[-2], x.shape[-1]
    if oh < 1 or ow < 1 or h % oh or w % ow:
        raise Unfit(f"adaptive_max_pool2d: output_size={[oh, ow]} does not divide the {h}x{w} input")
    kernel = (h // oh, w // ow)
    return _max_pool(x, kernel, kernel, 0, 1, False, with_indices=True)
