"""Convolutions: conv1d and conv2d as TT-NN conv2d, their transposes as TT-NN conv_transpose2d.

Layout decisions. PyTorch's images are NCHW; TT-NN's conv2d reads a channels-last image flattened to
[1, 1, N*H*W, C] and writes its result the same way, [1, 1, N*OH*OW, O]. So the input is permuted to NHWC
and reshaped (a view of the same values), and the result reshaped and permuted back to NCHW: two permutes
per convolution, the price of keeping PyTorch's NCHW contract on every tensor the user can see.
conv1d is conv2d with a height of 1 (the weight gains a unit kernel height in its prepared form).

Weights. TT-NN re-lays out conv weights and bias into a form that depends on the input's size and the
sharding conv2d picks (ttnn.prepare_conv_weights / prepare_conv_bias); the layout policy makes that form
once per (parameter, configuration) and keeps it (layout.prepared), so a steady-state forward converts
nothing. A kernel parameter is staged on the host until then (core/layout.py), so the prepared form is its
only device copy; the weight arrives as it is (STAGED: not uploaded for this op).

Transposed convolutions (ConvTranspose1d/2d) are TT-NN's conv_transpose2d the same way, their weights
([in, out, kh, kw]) mirrored by their preparation as PyTorch's semantics ask.

Refused before ttnn (Unfit: the counted CPU fallback, or a strict-mode error naming op and argument):
3-D convolutions (TT-NN has no route), groups other than 1 or depthwise (groups == in_channels, one input
channel per filter), depthwise 1x1 kernels (TT-NN's 1x1 path is a matmul that fails validation for them),
and transposed convolutions with groups or dilation.
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import ANY, STAGED, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from .views import permute_handle, reshape

aten = torch.ops.aten


def _pair(v, n: int) -> tuple:
    v = tuple(v)
    return v * n if len(v) == 1 else v


def _prepared(weight, bias, spec: dict, input_dtype, transposed: bool = False):
    """The conv weight and bias in conv2d's (or conv_transpose2d's) form for `spec` (made once:
    layout.prepared)."""
    op = "conv_transpose2d" if transposed else "conv2d"
    key = (op, input_dtype, tuple(sorted(spec.items())))
    common = dict(input_memory_config=api.enum("DRAM_MEMORY_CONFIG"), input_layout=api.TILE, **spec,
                  device=api.device(weight.index), input_dtype=input_dtype, conv_config=_config(input_dtype))
    prepare_w, prepare_b, extra = "prepare_conv_weights", "prepare_conv_bias", {}
    if transposed:  # weights [in, out / groups, kh, kw], mirrored by the preparation (PyTorch's semantics)
        prepare_w, prepare_b, extra = "prepare_conv_transpose2d_weights", "prepare_conv_transpose2d_bias", \
            {"mirror_kernel": True}

    def weights(h):
        shape = tuple(h.shape) if len(h.shape) == 4 else (h.shape[0], h.shape[1], 1, h.shape[2])  # 1-d
        return api.prepare(prepare_w, "weight_tensor", h, shape, weights_format="IOHW" if transposed else "OIHW",
                           has_bias=bias is not None, **common, **extra)

    w = policy.prepared(weight, key, weights)
    b = None
    if bias is not None:
        bias_kwargs = {k: v for k, v in common.items() if k != "output_padding"}
        b = policy.prepared(bias, key, lambda h: api.prepare(prepare_b, "bias_tensor", h, (1, 1, 1, h.shape[0]),
                                                             **bias_kwargs))
    return w, b


def _config(weights_dtype):
    """One Conv2dConfig for prepare_conv_weights/_bias and conv2d (they must agree): the weights in the
    activations' dtype (prepare_conv_bias needs it stated), TT-NN's defaults otherwise."""
    return api.enum("Conv2dConfig")(weights_dtype=weights_dtype)


def _check(x, weight, groups, transposed, dilation):
    nd = len(weight.shape) - 2
    if nd not in (1, 2):
        raise Unfit(f"convolution: {nd}-d convolution has no TT-NN route (conv1d/conv2d only)")
    c_in = x.shape[1]
    if transposed and (groups != 1 or any(d != 1 for d in dilation)):
        raise Unfit(f"convolution: transposed with groups={groups}, dilation={list(dilation)} "
                    f"(TT-NN conv_transpose2d here: groups 1, dilation 1)")
    if groups != 1 and not (groups == c_in and weight.shape[1] == 1):
        raise Unfit(f"convolution: groups={groups} (TT-NN conv2d here: groups 1 or depthwise)")
    if groups != 1 and all(k == 1 for k in weight.shape[2:]):  # TT-NN runs 1x1 kernels as a matmul (no groups)
        raise Unfit(f"convolution: groups={groups} with a 1x1 kernel (TT-NN's 1x1 path is a plain matmul)")
    if x.shape.numel() == 0:
        raise Unfit("convolution: empty input")


def _out_size(size, k, s, p, d, op, transposed) -> int:
    if transposed:
        return (size - 1) * s - 2 * p + d * (k - 1) + op + 1
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@lowering(aten.convolution.default, ttnn=["permute", "reshape", "conv2d", "conv_transpose2d"],
          needs={"input": TILE_FLOAT, "weight": STAGED, "bias": ANY},
          notes="conv1d/conv2d and their transposes (NCHW in and out; NHWC on the device); weights prepared "
                "once per input size; 3-d and grouped (other than depthwise; any groups when transposed) "
                "convolutions run on the CPU fallback")
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _check(x, weight, groups, transposed, dilation)
    one_d = len(weight.shape) == 3
    if one_d:  # conv1d: [N, C, L] as [N, C, 1, L]
        x = reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
        output_padding = (0, *output_padding)
    stride, padding, dilation = _pair(stride, 2), _pair(padding, 2), _pair(dilation, 2)
    output_padding = _pair(output_padding, 2)
    n, c, h, w = x.shape
    out_channels = weight.shape[1] if transposed else weight.shape[0]
    kh, kw = (1, weight.shape[2]) if one_d else tuple(weight.shape[2:])
    oh, ow = (_out_size(size, k, s, p, d, op, transposed) for size, k, s, p, d, op in
              zip((h, w), (kh, kw), stride, padding, dilation, output_padding))
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Calculated output size: ({out_channels}x{oh}x{ow}). Output size is too small")
    spec = dict(in_channels=c, out_channels=out_channels, batch_size=n, input_height=h, input_width=w,
                kernel_size=(kh, kw), stride=stride, padding=padding, dilation=dilation, groups=groups)
    if transposed:
        spec["output_padding"] = output_padding
    pw, pb = _prepared(weight, bias, spec, x.tt_dtype, transposed)
    flat = reshape(permute_handle(x, (0, 2, 3, 1)), (1, 1, n * h * w, c))
    extra = {"mirror_kernel": True} if transposed else {}
    out = api.run("conv_transpose2d" if transposed else "conv2d", input_tensor=flat, weight_tensor=pw,
                  bias_tensor=pb, device=api.device(x.index), dtype=x.tt_dtype, conv_config=_config(x.tt_dtype),
                  **spec, **extra)
    out = permute_handle(reshape(out, (n, oh, ow, out_channels)), (0, 3, 1, 2))
    return reshape(out, (n, out_channels, ow)) if one_d else out
