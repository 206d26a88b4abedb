"""Sampling at computed points: grid_sampler_2d (F.grid_sample; deformable attention of RT-DETR, D-FINE,
DEIMv2, PP-DocLayout), and torchvision's roi_align (the R-CNN heads; a late lowering, see its section below).

The sampling positions decide which input elements are read, so they are computed in float32 on the device
(policy.to_float32 of the grid): in bfloat16 a position of an 80-pixel-wide level is off by up to a quarter
pixel, and PyTorch's own decomposition run in bfloat16 lands 5% away from the CPU. As PyTorch's CPU kernel
(GridSamplerKernel.cpp) computes, per axis of size S:

    unnormalize   (g + 1) * (S - 1) / 2  (align_corners)   (g + 1) * S / 2 - 0.5  (otherwise)
    padding       zeros: as it is; border: clamped to [0, S - 1]; reflection: folded back into the span
                  (|x| mod 2*span by a floor of the quotient, min(extra, 2*span - extra)), then clamped
    bilinear      x0 = floor(x), weights e = 1 - (x - x0) and w = x - x0 of columns x0 and x0 + 1
    nearest       round(x), halves to even (std::nearbyint)
    bicubic       unpadded x: the taps floor(x) - 1 .. floor(x) + 2, each padded on its own (get_value_bounded),
                  weighted by the cubic convolution coefficients (A = -0.75) of t = x - floor(x); the 4x4 taps
                  of a point are 16 reads (vision position tables of GLM-4V / GLM-4.5V)

The corners are then read by one ttnn.embedding each: the input channels-last as a table of N*H*W rows of C
([N, C, H, W] -> [N, H, W, C] -> [N*H*W, C]), the row of corner (n, y, x) being n*H*W + y*W + x, computed in
float32 (exact below 2**24, else Unfit) and cast to uint32. A corner outside the input (zeros padding, or the
x0 + 1 beside a position clamped to S - 1) reads row 0 with weight 0 (its weight times 0: a NaN position of
zeros padding gives NaN, as on the CPU; border and reflection clamp NaN to 0, as the CPU's vectorized kernel).
The gathered bfloat16 rows are weighted and summed in float32 and rounded once to the input's storage:
[N*Ho*Wo, C] -> [N, C, Ho, Wo]. Against float32 PyTorch on bfloat16-exact inputs the result is within one
bfloat16 rounding; with float32 storage it is float32 PyTorch (tests/test_breadth.py).

Refused (Unfit: the counted CPU fallback): inputs of 2**24 or more positions (N*H*W: the row numbers would
not be exact in float32), and grids whose working set would pass WORKING_BYTES (each [N, Ho*Wo, 1] float32
column is padded to 32 wide in TILE: 128 bytes per sampled point, ~16 of them live, ~48 for bicubic, plus the
gathered rows). Empty tensors never reach the lowering (the dispatcher's zero-size path; it runs
grid_sampler_2d's argument checks on the CPU, whose meta kernel has none).
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import TILE_FLOAT
from ..core.registry import Unfit, late_lowering, lowering
from ..device import api
from ._common import EXACT_FLOAT32
from .embedding import lookup
from .views import permute_handle, reshape, slice_handle

aten = torch.ops.aten

WORKING_BYTES = 2 << 30  # device memory one call may hold at once (see the module docstring)
_FLOAT = {"dtype": api.FLOAT32}  # comparisons as float32 0/1


def _run(op, *args, **kwargs):
    return api.run(op, *args, out_dtype=torch.float32, **kwargs)


def _reflect(x, size: int, align_corners: bool):
    """PyTorch's reflect_coordinates (vectorized CPU form): x folded into [0, span] (align_corners: span =
    size - 1) or [-0.5, size - 0.5]."""
    twice = 2 * (size - 1) if align_corners else 2 * size
    if twice == 0:
        return _run("multiply", x, 0.0)
    a = _run("abs", x if align_corners else _run("add", x, 0.5))
    flips = _run("floor", _run("divide", a, float(twice)))
    extra = _run("subtract", a, _run("multiply", flips, float(twice)))
    out = _run("minimum", extra, _run("rsub", extra, float(twice)))
    return out if align_corners else _run("subtract", out, 0.5)


def _unnormalize(g, size: int, align_corners: bool):
    """The float32 source position along an axis of `size` of the normalized coordinates g (float32), unpadded."""
    if align_corners:
        return _run("multiply", _run("add", g, 1.0), (size - 1) / 2)
    return _run("subtract", _run("multiply", _run("add", g, 1.0), size / 2), 0.5)


def _pad(x, size: int, padding_mode: int, align_corners: bool):
    """Positions x under the padding mode: zeros as they are, border clamped, reflection folded then clamped."""
    if padding_mode == 2:
        x = _reflect(x, size, align_corners)
    if padding_mode in (1, 2):  # (a NaN position clamps to 0, as the CPU's vectorized max(x, 0) does)
        x = _run("clamp", _run("where", _run("isnan", x), 0.0, x), min=0.0, max=float(size - 1))
    return x


def _taps(p, size: int, interpolation_mode: int, padding_mode: int, align_corners: bool) -> list:
    """The samples of unnormalized positions p along an axis of `size`: [(position, weight)]. Bilinear and
    nearest pad p first, then read floor(p) and floor(p) + 1 (weights 1 - t and t of t = p - floor(p)) or
    round(p) (weight 1); bicubic reads floor(p) - 1 .. floor(p) + 2 with the cubic convolution coefficients of
    t, each tap padded on its own (GridSamplerKernel.cpp's get_value_bounded). A position outside
    [0, size - 1] is 0 with weight 0 (its weight times 0: NaN stays NaN, as on the CPU)."""
    if interpolation_mode == 2:
        low = _run("floor", p)
        t = _run("subtract", p, low)
        return [_bounded(_pad(_run("add", low, float(step)) if step else low, size, padding_mode, align_corners),
                         weight, size) for step, weight in zip((-1, 0, 1, 2), _cubic(t))]
    p = _pad(p, size, padding_mode, align_corners)
    if interpolation_mode == 1:
        return [_bounded(_run("round", p), None, size)]
    low = _run("floor", p)
    toward_high = _run("subtract", p, low)
    return [_bounded(position, weight, size)
            for position, weight in ((low, _run("rsub", toward_high, 1.0)), (_run("add", low, 1.0), toward_high))]


def _bounded(position, weight, size: int):
    """(position, weight) read as (0, 0 * weight) where the position is outside [0, size - 1] (weight None: 1)."""
    inside = _inside(position, 0.0, float(size - 1))
    return _run("where", inside, position, 0.0), inside if weight is None else _run("multiply", weight, inside)


CUBIC_A = -0.75  # PyTorch's cubic convolution constant (UpSample.h)


def _cubic(t) -> list:
    """The cubic convolution coefficients of taps -1, 0, 1, 2 at fraction t, in the CPU kernel's order of
    operations (get_cubic_coefficients): ((A*x - 5A)*x + 8A)*x - 4A for 1 < x < 2, ((A+2)*x - (A+3))*x*x + 1
    for x <= 1, x the distance to the tap."""
    a = CUBIC_A

    def far(x):
        inner = _run("add", _run("multiply", _run("subtract", _run("multiply", x, a), 5 * a), x), 8 * a)
        return _run("subtract", _run("multiply", inner, x), 4 * a)

    def near(x):
        inner = _run("multiply", _run("subtract", _run("multiply", x, a + 2), a + 3), x)
        return _run("add", _run("multiply", inner, x), 1.0)

    return [far(_run("add", t, 1.0)), near(t), near(_run("rsub", t, 1.0)), far(_run("rsub", t, 2.0))]


def _table(x):
    """The input [N, C, H, W] as a table of N*H*W rows of C (channels-last): row n*H*W + y*W + x."""
    n, c, h, w = x.shape
    return reshape(permute_handle(x, (0, 2, 3, 1)), (n * h * w, c))


def _accumulate(out, table, row, weight, dtype):
    """out + weight * table[row] in float32, [m, C]: row and weight (float32, m elements in one shape; every row
    in range) give one ttnn.embedding of the table's bfloat16 rows (three of a float32 table)."""
    m, c = row.shape.numel(), table.shape[1]
    ids = policy.as_integer(reshape(row, (1, m)), api.UINT32)
    ids.bounds = (0, table.shape[0] - 1, False)
    rows = reshape(policy.to_float32(lookup(table, ids, dtype, tile_table=True)), (m, c))
    term = _run("multiply", rows, reshape(weight, (m, 1)))
    return term if out is None else _run("add", out, term)


def _channels_first(out, dtype, shape):
    """The float32 rows [N*Ho*Wo, C] as the result [N, C, Ho, Wo] in the storage of torch dtype `dtype`."""
    n, c, ho, wo = shape
    out = policy.stored(api.Handle(out.tt, out.shadow, dtype, out.shape, out.index))
    return reshape(permute_handle(reshape(out, (n, ho * wo, c)), (0, 2, 1)), shape)


def _inside(x, low: float, high: float):
    """1.0 where low <= x <= high (NaN: 0.0), float32."""
    return _run("multiply", _run("ge", x, low, **_FLOAT), _run("le", x, high, **_FLOAT))


@lowering(aten.grid_sampler_2d.default,
          ttnn=["typecast", "slice", "arange", "add", "subtract", "rsub", "multiply", "floor", "round", "abs", "divide",
                "minimum", "isnan", "clamp", "ge", "le", "where", "permute", "reshape", "embedding"],
          needs={"input": TILE_FLOAT, "grid": TILE_FLOAT},
          notes="bilinear, nearest and bicubic, padding zeros/border/reflection, align_corners either way: "
                "positions and weights in float32, each corner (bicubic: each of 16 taps) one ttnn.embedding of "
                "the channels-last input; inputs of 2**24+ positions and working sets beyond 2 GiB Unfit")
def grid_sampler_2d(x, grid, interpolation_mode, padding_mode, align_corners):
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise Unfit(f"grid_sampler_2d: interpolation_mode {interpolation_mode}, padding_mode {padding_mode} "
                    "(bilinear, nearest and bicubic; zeros, border and reflection)")
    if len(x.shape) != 4 or len(grid.shape) != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]:
        raise Unfit(f"grid_sampler_2d: input {list(x.shape)} and grid {list(grid.shape)}")
    n, c, h, w = x.shape
    _, ho, wo, _ = grid.shape
    m = n * ho * wo
    if not (m and c and h and w):
        raise Unfit("grid_sampler_2d of an empty tensor")
    if n * h * w >= EXACT_FLOAT32:
        raise Unfit(f"grid_sampler_2d: {n * h * w} input positions (row numbers exact in float32 below 2**24)")
    columns = 48 if interpolation_mode == 2 else 16  # float32 [N, Ho*Wo, 1] columns live at once
    if m * (columns * 32 + 3 * -(-c // 32) * 32) * 4 > WORKING_BYTES:
        raise Unfit(f"grid_sampler_2d: {m} sampled points of {c} channels (working set beyond {WORKING_BYTES} B)")
    g = reshape(policy.to_float32(grid), (n, ho * wo, 2))
    gx = _unnormalize(slice_handle(g, 2, 0, 1), w, align_corners)  # [N, Ho*Wo, 1] each
    gy = _unnormalize(slice_handle(g, 2, 1, 2), h, align_corners)
    base = api.create("arange", (0, n * h * w, h * w), api.FLOAT32, api.TILE, x.index, torch.float32)
    base = reshape(base, (n, 1, 1))

    x_taps = _taps(gx, w, interpolation_mode, padding_mode, align_corners)
    y_taps = _taps(gy, h, interpolation_mode, padding_mode, align_corners)
    y_taps = [(_run("add", _run("multiply", y, float(w)), base), weight) for y, weight in y_taps]  # row offsets
    table = _table(x)
    out = None
    for y_row, y_weight in y_taps:
        for x_col, x_weight in x_taps:
            out = _accumulate(out, table, _run("add", y_row, x_col), _run("multiply", y_weight, x_weight), x.dtype)
    return _channels_first(out, x.dtype, (n, c, ho, wo))


# ----------------------------------------------------------------------------------------------- roi_align
# torchvision.ops.roi_align (Faster/Mask/Keypoint R-CNN's MultiScaleRoIAlign): each box's pooled_height x
# pooled_width bins, each the mean of sampling_ratio x sampling_ratio bilinear samples, as torchvision's CPU
# kernel (roi_align_kernel.cpp) computes them, in float32 from the boxes:
#     start = box * spatial_scale - (0.5 if aligned), size = end - start (at least 1 unless aligned),
#     bin = size / pooled, sample (p, i) at start + p * bin + (i + 0.5) * bin / ratio
#     a sample outside [-1, S] reads 0; else clamped to [0, S - 1], low = floor, high = min(low + 1, S - 1)
# Per sample offset (i, j) the positions of all boxes and bins are [K, ph, 1] (rows) and [K, 1, pw] (columns),
# broadcast to [K, ph, pw]; each of the 4 corners is one ttnn.embedding of the channels-last input, at row
# batch * H*W + y*W + x (the batch index is the box's first column), and the weighted rows (weights over the
# sample count) are summed in float32 over all ratio**2 * 4 reads, then rounded once.
# sampling_ratio <= 0 (adaptive: ceil(size / pooled) samples per bin, a number per box read from its values) is
# refused (Unfit: the counted CPU fallback); torchvision's detection models pass 2.

def _roi_axis(p, size: int, scale: float):
    """Along an axis of `size`: (row offset of the low and high sample, their weights) of positions p, the
    weights 0 outside [-1, size] and times `scale` (1 / samples per bin)."""
    inside = _inside(p, -1.0, float(size))
    p = _run("clamp", p, min=0.0, max=float(size - 1))
    low = _run("floor", p)
    high = _run("clamp", _run("add", low, 1.0), max=float(size - 1))
    toward_high = _run("multiply", _run("subtract", p, low), inside)
    toward_low = _run("subtract", inside, toward_high)
    if scale != 1.0:
        toward_high, toward_low = _run("multiply", toward_high, scale), _run("multiply", toward_low, scale)
    return (low, toward_low), (high, toward_high)


@late_lowering("torchvision::roi_align.default",
               ttnn=["typecast", "slice", "reshape", "arange", "multiply", "subtract", "add", "divide", "clamp",
                     "floor", "ge", "le", "permute", "embedding"],
               needs={"input": TILE_FLOAT, "rois": TILE_FLOAT},
               notes="positions and weights in float32 from the boxes; each sample's 4 corners one ttnn.embedding "
                     "of the channels-last input, summed in float32; adaptive sampling_ratio (<= 0) Unfit")
def roi_align(x, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    if sampling_ratio <= 0:
        raise Unfit(f"roi_align: sampling_ratio {sampling_ratio} (adaptive: samples per bin from each box's size)")
    if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 5:
        raise Unfit(f"roi_align: input {list(x.shape)} and boxes {list(rois.shape)}")
    n, c, h, w = x.shape
    k, ph, pw = rois.shape[0], pooled_height, pooled_width
    m = k * ph * pw
    if n * h * w >= EXACT_FLOAT32:
        raise Unfit(f"roi_align: {n * h * w} input positions (row numbers exact in float32 below 2**24)")
    if m * (16 * 32 + 3 * -(-c // 32) * 32) * 4 > WORKING_BYTES:
        raise Unfit(f"roi_align: {m} bins of {c} channels (working set beyond {WORKING_BYTES} B)")
    boxes = policy.to_float32(rois)

    def column(j, shape):
        return reshape(slice_handle(boxes, 1, j, j + 1), shape)

    offset = 0.5 if aligned else 0.0
    axes = []
    for lo, hi, pooled, shape in ((2, 4, ph, (k, 1, 1)), (1, 3, pw, (k, 1, 1))):
        start = _run("subtract", _run("multiply", column(lo, shape), float(spatial_scale)), offset)
        extent = _run("subtract", _run("subtract", _run("multiply", column(hi, shape), float(spatial_scale)), offset),
                      start)
        if not aligned:
            extent = _run("clamp", extent, min=1.0)
        step = _run("divide", extent, float(pooled))
        bins = api.create("arange", (0, pooled, 1), api.FLOAT32, api.TILE, x.index, torch.float32)
        axes.append((_run("add", start, _run("multiply", step, bins)), step))  # [K, 1, pooled]: each bin's start
    (y_bins, y_step), (x_bins, x_step) = axes
    y_bins = reshape(y_bins, (k, ph, 1))
    base = _run("multiply", column(0, (k, 1, 1)), float(h * w))
    scale = 1.0 / (sampling_ratio * sampling_ratio)
    columns = []
    for j in range(sampling_ratio):
        xs = _run("add", x_bins, _run("multiply", x_step, (j + 0.5) / sampling_ratio))
        columns.append(_roi_axis(xs, w, 1.0))
    table = _table(x)
    out = None
    for i in range(sampling_ratio):
        ys = _run("add", y_bins, _run("multiply", y_step, (i + 0.5) / sampling_ratio))
        for y_row, y_weight in _roi_axis(ys, h, scale):
            y_row = _run("add", _run("multiply", y_row, float(w)), base)  # [K, ph, 1]
            for x_axis in columns:
                for x_col, x_weight in x_axis:
                    out = _accumulate(out, table, _run("add", y_row, x_col), _run("multiply", y_weight, x_weight),
                                      x.dtype)
    return _channels_first(out, x.dtype, (k, c, ph, pw))
