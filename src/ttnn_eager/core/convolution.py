"""3-D convolutions and pools as 2-D ones (TT-NN has conv2d and the 2-D pools, no 3-D route: lowerings/conv.py
refuses 3-D convolutions, 3-D pools have no lowering).

A conv3d of x [N, C, D, H, W] by w [O, C/g, kD, kH, kW] is, at output depth d, the sum over the kD taps of
conv2d(x[:, :, d*sD + k*dD], w[:, :, k]) -- a conv2d over the C*kD channels of the kD depth slices each output
depth sees. So the input is zero-padded in depth, its kD strided depth windows (one slice each) stacked beside
the channels as [N, C, kD, OD, H, W], laid out as a batch of N*OD images of C*kD channels, and convolved once
with the weight read as [O, C/g*kD, kH, kW] (a view: channel c*kD + k is w[:, c, k]; the channels of a group
stay consecutive, so groups= carries over). The result [N*OD, O, OH, OW] is read back as [N, O, OD, OH, OW].
Every step is an aten op that is lowered (constant_pad_nd, slice, stack, permute, reshape, convolution), so
the video models' convolutions (torchvision r3d/mc3/r2plus1d, Swin3D's patch embedding) run on the device.

Transposed 3-D convolutions are not decomposed (the CPU fallback).

A 3-D pool is the 2-D pool of every frame (one batch of N*T images), then the same pool over the kT frames of
each temporal window: slices of the frame results padded in time, stacked, reduced (S3D's max and average pools):
  * max_pool3d_with_indices: per frame, max_pool2d_with_indices (the index within the frame); across a window,
    max over the stacked frames with its argmax k (the first maximum, as the CPU kernel's scan in time order), and
    the index (t*sT + k*dT - pT) * H*W + the winning frame's index. Time padding is -inf.
  * avg_pool3d: per frame, the 2-D window sums (avg_pool2d with divisor_override=1), summed over the window's
    frames (time padding 0) and divided by divisor_override or by PyTorch's divisor, computed once on the host
    from the shapes alone: the count of input positions in each window (count_include_pad=False), or of positions
    of the padded input (True; a ceil_mode window's overhang past the padding is not counted, as in PyTorch).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed or weight.dim() != 5 or x.dim() != 5 or not x.is_floating_point():
        return NotImplemented  # (integer convolutions: exact on the CPU fallback, as conv2d's)
    n, c, d, h, w = x.shape
    o, _, kd = weight.shape[:3]
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = (tuple(v) * (3 if len(v) == 1 else 1) for v in
                                                (stride, padding, dilation))
    od = (d + 2 * pd - dd * (kd - 1) - 1) // sd + 1
    if od < 1 or x.numel() == 0:
        return NotImplemented  # (PyTorch's error, from the CPU)
    if pd:
        x = aten.constant_pad_nd(x, [0, 0, 0, 0, pd, pd])
    windows = [x[:, :, k * dd: k * dd + (od - 1) * sd + 1: sd] for k in range(kd)]  # kD x [N, C, OD, H, W]
    stacked = torch.stack(windows, 2) if kd > 1 else windows[0].unsqueeze(2)      # [N, C, kD, OD, H, W]
    images = stacked.permute(0, 3, 1, 2, 4, 5).reshape(n * od, c * kd, h, w)
    kernel = weight.reshape(o, weight.shape[1] * kd, *weight.shape[3:])
    out = aten.convolution(images, kernel, bias, [sh, sw], [ph, pw], [dh, dw], False, [0, 0], groups)
    return out.reshape(n, od, o, *out.shape[2:]).permute(0, 2, 1, 3, 4)


TABLE = {
    aten.convolution.default: convolution,
}


def per_dim(v, n: int, default=None) -> tuple:
    """A pooling argument (an int, or a list of 1 or n; empty or None: `default`) as n values, as PyTorch reads
    kernel_size, stride, padding and dilation (the 2-D pools of lowerings/pooling.py too)."""
    v = default if (v is None or (isinstance(v, (list, tuple)) and not len(v))) else v
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return v * n if len(v) == 1 else v


def pool_output_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size (pooling_output_shape): a ceil_mode window must start inside the input or
    its left padding (the 2-D pools of lowerings/pooling.py too)."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _time_windows(y, kt, st, pt, dt, ot, fill):
    """The kT frames of each of the ot windows of y [N, T, ...] (padded in time with `fill`): [N, ot, kT, ...]."""
    t = y.shape[1]
    right = max(0, (ot - 1) * st + dt * (kt - 1) + 1 - t - pt)
    if pt or right:
        pads = [torch.full((y.shape[0], n, *y.shape[2:]), fill, dtype=y.dtype, device=y.device)
                for n in (pt, right)]
        y = torch.cat([pads[0], y, pads[1]], 1)
    return torch.stack([y[:, k * dt: k * dt + (ot - 1) * st + 1: st] for k in range(kt)], 2)


def _frames(x):
    """x [N, C, T, H, W] (or [C, T, H, W]) as the images [N*T, C, H, W], and N, T, unbatched."""
    unbatched = x.dim() == 4
    if unbatched:
        x = x.unsqueeze(0)
    n, c, t, h, w = x.shape
    return x.permute(0, 2, 1, 3, 4).reshape(n * t, c, h, w), n, t, unbatched


def _volumes(y, n, unbatched):
    """[N, OT, C, OH, OW] back to [N, C, OT, OH, OW] (or unbatched)."""
    y = y.permute(0, 2, 1, 3, 4)
    return y.squeeze(0) if unbatched else y


def _empty(func, x, *args):
    """A zero-size input's result: PyTorch's checks and shapes (the meta kernel), empty tensors on x's device."""
    outs = func(torch.empty(x.shape, dtype=x.dtype, device="meta"), *args)
    return tuple(torch.empty(o.shape, dtype=o.dtype, device=x.device) for o in outs) if isinstance(outs, tuple) \
        else torch.empty(outs.shape, dtype=outs.dtype, device=x.device)


def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    if not x.numel():
        return _empty(aten.max_pool3d_with_indices.default, x, kernel_size, stride, padding, dilation, ceil_mode)
    if x.dim() not in (4, 5) or not x.is_floating_point():
        return NotImplemented  # (PyTorch's errors and integer pools: the CPU fallback)
    (kt, kh, kw), (pt, ph, pw), (dt, dh, dw) = per_dim(kernel_size, 3), per_dim(padding, 3), per_dim(dilation, 3)
    st, sh, sw = per_dim(stride, 3, kernel_size)
    ot = pool_output_size(x.shape[-3], kt, st, pt, dt, ceil_mode)
    if ot < 1 or 2 * pt > kt or 2 * ph > kh or 2 * pw > kw:
        return NotImplemented
    images, n, t, unbatched = _frames(x)
    h, w = images.shape[-2:]
    v, i = aten.max_pool2d_with_indices(images, [kh, kw], [sh, sw], [ph, pw], [dh, dw], ceil_mode)
    v, i = v.reshape(n, t, *v.shape[1:]), i.reshape(n, t, *i.shape[1:])
    values, k = _time_windows(v, kt, st, pt, dt, ot, float("-inf")).max(2)        # [N, OT, C, OH, OW]
    within = _time_windows(i, kt, st, pt, dt, ot, 0).gather(2, k.unsqueeze(2)).squeeze(2)
    start = torch.arange(ot, device=x.device).reshape(1, ot, 1, 1, 1) * st - pt
    index = (start + k * dt) * (h * w) + within
    return _volumes(values, n, unbatched), _volumes(index, n, unbatched)


def avg_pool3d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if not x.numel():
        return _empty(aten.avg_pool3d.default, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)
    if x.dim() not in (4, 5) or not x.is_floating_point() or divisor_override == 0:
        return NotImplemented
    (kt, kh, kw), (pt, ph, pw) = per_dim(kernel_size, 3), per_dim(padding, 3)
    st, sh, sw = per_dim(stride, 3, kernel_size)
    ot = pool_output_size(x.shape[-3], kt, st, pt, 1, ceil_mode)
    if ot < 1 or 2 * pt > kt or 2 * ph > kh or 2 * pw > kw:
        return NotImplemented
    images, n, t, unbatched = _frames(x)
    sums = aten.avg_pool2d(images, [kh, kw], [sh, sw], [ph, pw], ceil_mode, True, 1)
    sums = _time_windows(sums.reshape(n, t, *sums.shape[1:]), kt, st, pt, 1, ot, 0.0).sum(2)
    if divisor_override is not None:
        return _volumes(sums / divisor_override, n, unbatched)
    ones = torch.ones(1, 1, *x.shape[-3:])  # the divisor of every window, from the shapes (host, float32)
    if count_include_pad:
        ones = torch.nn.functional.pad(ones, [pw, pw, ph, ph, pt, pt], value=1.0)
    counts = aten.avg_pool3d(ones, [kt, kh, kw], [st, sh, sw], [0, 0, 0] if count_include_pad else [pt, ph, pw],
                             ceil_mode, True, 1)[0, 0]                          # [OT, OH, OW]
    counts = counts[:ot, :sums.shape[-2], :sums.shape[-1]].unsqueeze(1)       # [OT, 1, OH, OW]
    return _volumes(sums / counts.to(x.device), n, unbatched)


POOLS = {
    aten.max_pool3d_with_indices.default: max_pool3d_with_indices,
    aten.avg_pool3d.default: avg_pool3d,
}
