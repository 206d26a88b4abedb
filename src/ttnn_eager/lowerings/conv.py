"""Convolutions: conv1d and conv2d as TT-NN conv2d.

Layout decisions. PyTorch's images are NCHW; TT-NN's conv2d reads a channels-last image flattened to
[1, 1, N*H*W, C] and writes its result the same way, [1, 1, N*OH*OW, O]. So the input is permuted to NHWC
and reshaped (a view of the same values), and the result reshaped and permuted back to NCHW: two permutes
per convolution, the price of keeping PyTorch's NCHW contract on every tensor the user can see.
conv1d is conv2d with a height of 1 (the weight gains a unit kernel height in its prepared form).

Weights. TT-NN re-lays out conv weights and bias into a form that depends on the input's size and the
sharding conv2d picks (ttnn.prepare_conv_weights / prepare_conv_bias); the layout policy makes that form
once per (parameter, configuration) and keeps it (layout.prepared), so a steady-state forward converts
nothing.

Refused before ttnn (Unfit: the counted CPU fallback, or a strict-mode error naming op and argument):
3-D convolutions, transposed convolutions (ttnn's conv_transpose2d is not wired yet), and groups other than
1 or depthwise (groups == in_channels == out_channels / k).
"""
from __future__ import annotations

import torch

from .. import device_api as api
from .. import layout as policy
from ..layout import ANY, TILE_FLOAT
from ..registry import Unfit, lowering
from .views import permute_handle, reshape

aten = torch.ops.aten


def _pair(v, n: int) -> tuple:
    v = tuple(v)
    return v * n if len(v) == 1 else v


def _spec(x, weight, stride, padding, dilation, groups) -> dict:
    """conv2d's keyword arguments for this call (those prepare_conv_weights takes too)."""
    n, c, h, w = x.shape
    return dict(in_channels=c, out_channels=weight.shape[0], batch_size=n, input_height=h, input_width=w,
                kernel_size=tuple(weight.shape[2:]), stride=stride, padding=padding, dilation=dilation,
                groups=groups)


def _prepared(weight, bias, spec: dict, input_dtype):
    """The conv weight and bias in conv2d's form for `spec` (made once: layout.prepared)."""
    key = ("conv2d", input_dtype, tuple(sorted(spec.items())))
    common = dict(input_memory_config=api.enum("DRAM_MEMORY_CONFIG"), input_layout=api.TILE, **spec,
                  device=api.device(weight.index), input_dtype=input_dtype, conv_config=_config(input_dtype))

    def weights(h):
        shape = tuple(h.shape) if len(h.shape) == 4 else (h.shape[0], h.shape[1], 1, h.shape[2])  # conv1d
        return api.prepare("prepare_conv_weights", "weight_tensor", h, shape, weights_format="OIHW",
                           has_bias=bias is not None, **common)

    w = policy.prepared(weight, key, weights)
    b = None
    if bias is not None:
        b = policy.prepared(bias, key, lambda h: api.prepare("prepare_conv_bias", "bias_tensor", h,
                                                             (1, 1, 1, h.shape[0]), **common))
    return w, b


def _config(weights_dtype):
    """One Conv2dConfig for prepare_conv_weights/_bias and conv2d (they must agree): the weights in the
    activations' dtype (prepare_conv_bias needs it stated), TT-NN's defaults otherwise."""
    return api.enum("Conv2dConfig")(weights_dtype=weights_dtype)


def _check(x, weight, groups, transposed):
    nd = len(weight.shape) - 2
    if transposed:
        raise Unfit("convolution: transposed=True (conv_transpose) is not lowered")
    if nd not in (1, 2):
        raise Unfit(f"convolution: {nd}-d convolution has no TT-NN route (conv1d/conv2d only)")
    c_in = x.shape[1]
    if groups != 1 and not (groups == c_in and weight.shape[1] == 1):
        raise Unfit(f"convolution: groups={groups} (TT-NN conv2d here: groups 1 or depthwise)")
    if x.shape.numel() == 0:
        raise Unfit("convolution: empty input")


@lowering(aten.convolution.default, ttnn=["permute", "reshape", "conv2d"],
          needs={"input": TILE_FLOAT, "weight": ANY, "bias": ANY},
          notes="conv1d/conv2d (NCHW in and out; NHWC on the device); weights prepared once per input size; "
                "3-d, transposed and grouped (other than depthwise) convolutions run on the CPU fallback")
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _check(x, weight, groups, transposed)
    unbatched_1d = len(weight.shape) == 3
    if unbatched_1d:  # conv1d: [N, C, L] as [N, C, 1, L]
        x = reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
    stride, padding, dilation = _pair(stride, 2), _pair(padding, 2), _pair(dilation, 2)
    spec = _spec(x, weight, stride, padding, dilation, groups)
    n, c, h, w = x.shape
    kh, kw = (1, weight.shape[2]) if unbatched_1d else tuple(weight.shape[2:])
    spec["kernel_size"] = (kh, kw)
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Calculated output size: ({weight.shape[0]}x{oh}x{ow}). Output size is too small")
    pw, pb = _prepared(weight, bias, spec, x.tt_dtype)
    flat = reshape(permute_handle(x, (0, 2, 3, 1)), (1, 1, n * h * w, c))
    out = api.run("conv2d", input_tensor=flat, weight_tensor=pw, bias_tensor=pb, device=api.device(x.index),
                  dtype=x.tt_dtype, conv_config=_config(x.tt_dtype), **spec)
    out = permute_handle(reshape(out, (n, oh, ow, weight.shape[0])), (0, 3, 1, 2))
    return reshape(out, (n, weight.shape[0], ow)) if unbatched_1d else out
