"""Constant padding (`F.pad(x, pad, value=v)`, aten.constant_pad_nd): ttnn.pad on the TILE tensor.

ttnn 0.81.1 pads a TILE tensor on the device only at the end of each dimension ("on device tile padding
does not support front padding"), so padding before the first element, and negative padding (cropping),
are Unfit and run on the CPU fallback, as are 1-D tensors (measured: ttnn's result buffer is too small). transformers' repetition penalty pads its scores by one column at the
end every generated token.
"""
from __future__ import annotations

import torch

from .. import device_api as api
from .. import layout as policy
from ..layout import TILE
from ..registry import Unfit, lowering

aten = torch.ops.aten


@lowering(aten.constant_pad_nd.default, ttnn=["pad"], needs=TILE,
          notes="padding after the last element of each dimension, floating tensors; else the CPU fallback")
def constant_pad_nd(x, pad, value=0):
    n = len(x.shape)
    if len(pad) % 2 or len(pad) // 2 > n:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}" if len(pad) % 2 else
                           f"Length of pad should be no more than twice the number of dimensions of the input. "
                           f"Pad length is {len(pad)} while the input has {n} dimensions.")
    pairs = [(0, 0)] * n
    for i in range(len(pad) // 2):  # PyTorch lists the last dimension first
        pairs[n - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if any(before != 0 or after < 0 for before, after in pairs) or not x.dtype.is_floating_point or n < 2:
        raise Unfit("front or negative padding, a non-floating tensor, or a 1-D one (ttnn 0.81.1 fails to "
                    "size the result of a padded 1-D TILE tensor)")
    if all(after == 0 for _, after in pairs):
        return x
    return api.run("pad", x, pairs, policy.finite_scalar(float(value)))
