"""Upsampling. Nearest-neighbour (nn.Upsample, F.interpolate(mode="nearest")) by integer factors, as views:
each spatial dimension gains a unit dimension after it, expanded to the factor and merged back
([N, C, H, W] -> [N, C, H, 1, W, 1] -> [N, C, H, s, W, t] -> [N, C, H*s, W*t]). TT-NN's own upsample wants
a ROW_MAJOR channels-last input; these reshapes and one expand keep the NCHW TILE tensor as it is.

Linear, bilinear and bicubic (align_corners either way, any sizes and scales) as one matmul per axis by
PyTorch's own interpolation weights (below).

Nearest to other output sizes (or explicit scales that disagree with the sizes: PyTorch then samples other
source positions), 1-D and 2-D: one ttnn.gather per axis of the source positions PyTorch's own op picks.

Refused before ttnn (Unfit: the counted CPU fallback): 3-D nearest upsampling by non-integer factors, integer
inputs of the gathered nearest form, empty inputs of the interpolating modes.
"""
from __future__ import annotations

import torch

from ..core.layout import TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from .matmul import matmul_handles
from .views import expand, permute_handle, reshape

aten = torch.ops.aten


def _nearest(x, output_size, scales, op: str):
    k = len(output_size)
    lead = list(x.shape[:len(x.shape) - k])
    sizes = list(x.shape[len(x.shape) - k:])
    if len(x.shape) != k + 2 or x.shape.numel() == 0:
        raise Unfit(f"{op}: input of shape {list(x.shape)}")
    factors = []
    for size, out, scale in zip(sizes, output_size, scales):
        if out % size or scale is not None and abs(1.0 / scale - size / out) > 1e-9:
            return _nearest_gathered(x, output_size, scales, op)
        factors.append(out // size)
    if all(f == 1 for f in factors):
        return x
    spread = lead + [v for s in sizes for v in (s, 1)]
    grown = lead + [v for s, f in zip(sizes, factors) for v in (s, f)]
    return reshape(expand(reshape(x, spread), grown), lead + list(output_size))


def _source_positions(op, n: int, out: int, axis: int, k: int, scale) -> torch.Tensor:
    """The input position each of `out` outputs along `axis` (of k spatial axes) reads: PyTorch's CPU `op` run
    on the positions themselves (0, 1, ..., n - 1 along that axis; exact as float32)."""
    shape, size, axis_scales = [1, 1] + [1] * k, [1] * k, [None] * k
    shape[2 + axis], size[axis], axis_scales[axis] = n, out, scale
    return op(torch.arange(n, dtype=torch.float32).reshape(shape), size, *axis_scales).reshape(out).long()


def _nearest_gathered(x, output_size, scales, op: str):
    """Nearest to any output size (or explicit scales): per axis, a ttnn.gather of the source positions
    PyTorch's own op picks (uploaded once, expanded on the device to the gathered shape)."""
    from .indexing import gather_handle
    from ..core import layout as policy
    k = len(output_size)
    if k > 2:
        raise Unfit(f"{op}: output size {list(output_size)} of a 3-D upsampling (not integer factors)")
    if not x.dtype.is_floating_point:
        raise Unfit(f"{op}: {x.dtype} input (ttnn.gather of floating tensors)")
    aten_op = aten.upsample_nearest1d.default if k == 1 else aten.upsample_nearest2d.default
    out = x
    for axis, (n, size, scale) in enumerate(zip(x.shape[2:], output_size, scales)):
        positions = _source_positions(aten_op, n, size, axis, k, scale)
        if size == n and torch.equal(positions, torch.arange(n)):
            continue
        d = 2 + axis
        shape = list(out.shape)
        shape[d] = size
        view = [size if i == d else 1 for i in range(len(shape))]
        index = expand(policy.to_device(positions.reshape(view), x.index), shape)
        out = gather_handle(out, d, index)
    return out


@lowering(aten.upsample_nearest1d.default, aten.upsample_nearest2d.default, aten.upsample_nearest3d.default,
          ttnn=["reshape", "expand", "gather"], needs=TILE,
          notes="integer factors as views (expand); other output sizes or explicit scales of 1-D and 2-D: a "
                "ttnn.gather per axis of the source positions PyTorch's own op picks (floating inputs); 3-D: "
                "integer factors only")
def upsample_nearest(x, output_size, *scales):
    scales = list(scales) + [None] * (len(output_size) - len(scales))
    return _nearest(x, list(output_size), scales, f"upsample_nearest{len(output_size)}d")


# ----------------------------------------------------------------------------------------------- linear, bicubic
# Linear, bilinear and bicubic interpolation are separable: along each axis the output is a fixed linear map
# of the input, out = x @ M with M [in, out] depending only on the sizes, align_corners and the scale. M is
# PyTorch's own op run on the CPU on an identity (row i: the output of the unit impulse at input position i),
# so its weights -- the source-index rule, align_corners, explicit scales, bicubic's A = -0.75 and its
# clamped border taps -- are PyTorch's by construction. On the device each axis is one matmul (the width as
# it is, the height after a transpose): 2-D is matmul, permute, matmul, permute. The weights are uploaded per
# call as an [in, out] TILE matrix (counted in host_to_device), in the input's device dtype. (The .vec
# overloads F.interpolate calls are CompositeImplicitAutograd: they arrive as these.)

def _axis_weights(op, n: int, out: int, align_corners: bool, scale, two_d: bool) -> torch.Tensor:
    """The [n, out] matrix of one axis: PyTorch's CPU `op` (an upsample overload) on an identity."""
    if two_d:
        return op(torch.eye(n).reshape(1, n, 1, n), [1, out], align_corners, None, scale).reshape(n, out)
    return op(torch.eye(n).reshape(1, n, n), [out], align_corners, scale).reshape(n, out)


def _along_last(x, weights: torch.Tensor):
    if weights.shape[0] == weights.shape[1] and torch.equal(weights, torch.eye(weights.shape[0])):
        return x
    return matmul_handles(x, api.upload(weights, x.tt_dtype, api.TILE, x.index, dtype=x.dtype))


def _interpolate(op, x, output_size, align_corners, scales, name: str):
    two_d = len(output_size) == 2
    if len(x.shape) != len(output_size) + 2 or x.shape.numel() == 0 or any(o < 1 for o in output_size):
        raise Unfit(f"{name}: input of shape {list(x.shape)}, output size {list(output_size)}")
    scales = list(scales) + [None] * (len(output_size) - len(scales))
    per_axis = [_axis_weights(op, n, o, align_corners, s, two_d)
                for n, o, s in zip(x.shape[2:], output_size, scales)]
    out = _along_last(x, per_axis[-1])
    if two_d and not torch.equal(per_axis[0], torch.eye(x.shape[2])):
        out = permute_handle(_along_last(permute_handle(out, (0, 1, 3, 2)), per_axis[0]), (0, 1, 3, 2))
    return out


_NOTES = "separable: one matmul per axis by PyTorch's own weights (align_corners and explicit scales as PyTorch)"


@lowering(aten.upsample_bilinear2d.default, ttnn=["matmul", "permute"], needs=TILE_FLOAT, notes=_NOTES)
def upsample_bilinear2d(x, output_size, align_corners, scales_h=None, scales_w=None):
    return _interpolate(aten.upsample_bilinear2d.default, x, output_size, align_corners, (scales_h, scales_w),
                        "upsample_bilinear2d")


@lowering(aten.upsample_bicubic2d.default, ttnn=["matmul", "permute"], needs=TILE_FLOAT, notes=_NOTES)
def upsample_bicubic2d(x, output_size, align_corners, scales_h=None, scales_w=None):
    return _interpolate(aten.upsample_bicubic2d.default, x, output_size, align_corners, (scales_h, scales_w),
                        "upsample_bicubic2d")


def _separable_aa(output_size) -> None:
    """PyTorch's CPU antialiased kernels are separable except with an output of width or height 1, where they
    give every output row the first row's weights (torch 2.14: 6x4 -> 2x1 returns two equal rows): such calls
    run on the CPU fallback, which is PyTorch's answer."""
    if 1 in output_size:
        raise Unfit(f"antialiased output size {list(output_size)} (PyTorch's kernel is not separable there)")


@lowering(aten._upsample_bilinear2d_aa.default, ttnn=["matmul", "permute"], needs=TILE_FLOAT,
          notes=_NOTES + "; antialiased (F.interpolate(antialias=True)): its wider downscaling filter is in the weights")
def upsample_bilinear2d_aa(x, output_size, align_corners, scales_h=None, scales_w=None):
    _separable_aa(output_size)
    return _interpolate(aten._upsample_bilinear2d_aa.default, x, output_size, align_corners, (scales_h, scales_w),
                        "_upsample_bilinear2d_aa")


@lowering(aten._upsample_bicubic2d_aa.default, ttnn=["matmul", "permute"], needs=TILE_FLOAT,
          notes=_NOTES + "; antialiased, as bilinear's")
def upsample_bicubic2d_aa(x, output_size, align_corners, scales_h=None, scales_w=None):
    _separable_aa(output_size)
    return _interpolate(aten._upsample_bicubic2d_aa.default, x, output_size, align_corners, (scales_h, scales_w),
                        "_upsample_bicubic2d_aa")


@lowering(aten.upsample_linear1d.default, ttnn=["matmul"], needs=TILE_FLOAT, notes=_NOTES)
def upsample_linear1d(x, output_size, align_corners, scales=None):
    return _interpolate(aten.upsample_linear1d.default, x, output_size, align_corners, (scales,),
                        "upsample_linear1d")
