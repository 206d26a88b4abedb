"""3-D convolutions as one 2-D convolution (TT-NN has conv2d, no conv3d route: lowerings/conv.py refuses them).

A conv3d of x [N, C, D, H, W] by w [O, C/g, kD, kH, kW] is, at output depth d, the sum over the kD taps of
conv2d(x[:, :, d*sD + k*dD], w[:, :, k]) -- a conv2d over the C*kD channels of the kD depth slices each output
depth sees. So the input is zero-padded in depth, its kD strided depth windows (one slice each) stacked beside
the channels as [N, C, kD, OD, H, W], laid out as a batch of N*OD images of C*kD channels, and convolved once
with the weight read as [O, C/g*kD, kH, kW] (a view: channel c*kD + k is w[:, c, k]; the channels of a group
stay consecutive, so groups= carries over). The result [N*OD, O, OH, OW] is read back as [N, O, OD, OH, OW].
Every step is an aten op that is lowered (constant_pad_nd, slice, stack, permute, reshape, convolution), so
the video models' convolutions (torchvision r3d/mc3/r2plus1d, Swin3D's patch embedding) run on the device.

Transposed 3-D convolutions are not decomposed (the CPU fallback).
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
