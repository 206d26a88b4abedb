"""Activations beyond the transformer set (elementwise.py has relu, gelu, silu, sigmoid, tanh): each one
TT-NN unary op where TT-NN has it with PyTorch's parameters, else a short composition.

ELU's family (aten.elu carries SELU's scale and CELU's input_scale) is ttnn.elu between two scalings;
PReLU (aten._prelu_kernel) is where(x > 0, x, weight * x) with the weight broadcast over the channel
dimension; GLU halves the input along `dim` (two slices) and gates one half with the other's sigmoid;
log_softmax is x - max - log(sum(exp(x - max))) (no TT-NN op takes PyTorch's dim and dtype).
"""
from __future__ import annotations

import torch

from ..core.layout import TILE_FLOAT, TILE_FLOAT_CL, keeps_channels_last
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import dim
from .elementwise import _unary
from .views import reshape, slice_handle

aten = torch.ops.aten


def _f(v) -> float:
    return float(v)


@lowering(aten.elu.default, ttnn=["elu", "multiply", "gt", "where"], needs=TILE_FLOAT,
          notes="scale (SELU) multiplies the result; input_scale (CELU) the negative branch's input")
def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    if input_scale != 1:  # input_scale scales the negative branch only: alpha * (exp(x * input_scale) - 1)
        negative = api.run("elu", api.run("multiply", x, _f(input_scale)), alpha=_f(alpha))
        out = api.run("where", api.run("gt", x, 0.0), x, negative)
    else:
        out = api.run("elu", x, alpha=_f(alpha))
    return api.run("multiply", out, _f(scale)) if scale != 1 else out


@lowering(aten.celu.default, ttnn=["multiply", "elu", "gt", "where"], needs=TILE_FLOAT)
def celu(x, alpha=1.0):
    return elu(x, alpha, 1.0, 1.0 / _f(alpha))


@lowering(aten.hardswish.default, ttnn=["hardswish"], needs=TILE_FLOAT_CL, notes="channels-last images stay so")
@keeps_channels_last
def hardswish(x):
    return api.run("hardswish", x)


@lowering(aten.hardsigmoid.default, ttnn=["hardsigmoid"], needs=TILE_FLOAT_CL, notes="channels-last images stay so")
@keeps_channels_last
def hardsigmoid(x):
    return api.run("hardsigmoid", x)


@lowering(aten.mish.default, ttnn=["mish"], needs=TILE_FLOAT)
def mish(x):
    return api.run("mish", x)


@lowering(aten.softplus.default, ttnn=["softplus"], needs=TILE_FLOAT)
def softplus(x, beta=1.0, threshold=20.0):
    return api.run("softplus", x, beta=_f(beta), threshold=_f(threshold))


@lowering(aten.hardshrink.default, ttnn=["hardshrink"], needs=TILE_FLOAT)
def hardshrink(x, lambd=0.5):
    return api.run("hardshrink", x, lambd=_f(lambd))


@lowering(aten.softshrink.default, ttnn=["softshrink"], needs=TILE_FLOAT)
def softshrink(x, lambd=0.5):
    return api.run("softshrink", x, lambd=_f(lambd))


@lowering(aten.threshold.default, ttnn=["threshold"], needs=TILE_FLOAT, notes="x if x > threshold else value")
def threshold(x, threshold, value):
    return api.run("threshold", x, _f(threshold), _f(value))


@lowering(aten.log_sigmoid_forward.default, ttnn=["log_sigmoid"], needs=TILE_FLOAT,
          notes="the buffer output (the CPU kernel's, for its backward) is an unwritten tensor: ours needs none")
def log_sigmoid_forward(x):
    # the buffer (the CPU kernel's, for its backward) is not needed by ours: x's shape, never written
    return api.run("log_sigmoid", x), api.Handle(None, None, x.dtype, x.shape, x.index)


@lowering(aten._prelu_kernel.default, ttnn=["gt", "multiply", "where"], needs=TILE_FLOAT,
          notes="weight broadcast over dim 1 (one per channel) or a single value")
def prelu_kernel(x, weight):
    n = weight.shape.numel()
    if n != 1 and (len(x.shape) < 2 or x.shape[1] != n):
        raise Unfit(f"_prelu_kernel: weight of {n} values for input {list(x.shape)}")
    w = reshape(weight, [1] * len(x.shape)) if n == 1 else \
        reshape(weight, [1, n] + [1] * (len(x.shape) - 2))
    positive = api.run("gt", x, 0.0)
    return reshape(api.run("where", positive, x, api.run("multiply", x, w)), x.shape)


@lowering(aten.sign.default, ttnn=["sign"], needs=TILE_FLOAT)
def sign(x):
    return api.run("sign", x)


log1p = _unary("log1p", "log1p", aten.log1p.default)
expm1 = _unary("expm1", "expm1", aten.expm1.default)


@lowering(aten.xlogy.Tensor, ttnn=["log", "multiply", "eq", "where"], needs=TILE_FLOAT,
          notes="0 where x == 0 (even for y == 0), NaN where y is NaN")
def xlogy(x, y):
    out = api.run("multiply", x, api.run("log", y))
    out = api.run("where", api.run("eq", x, 0.0), 0.0, out)
    dtype = torch.promote_types(x.dtype, y.dtype)
    dtype = dtype if dtype.is_floating_point else torch.get_default_dtype()  # integers/bools give float32
    return api.run("where", api.run("ne", y, y), y, out, out_dtype=dtype)  # NaN propagates from y


@lowering(aten.glu.default, ttnn=["slice", "sigmoid", "multiply"], needs=TILE_FLOAT)
def glu(x, d=-1):
    d = dim(d, len(x.shape))
    size = x.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    a, b = slice_handle(x, d, 0, size // 2), slice_handle(x, d, size // 2, size)
    return api.run("multiply", a, api.run("sigmoid", b))


@lowering(aten._log_softmax.default, ttnn=["max", "subtract", "exp", "sum", "log"], needs=TILE_FLOAT,
          notes="x - max - log(sum(exp(x - max))) along dim")
def log_softmax(x, d, half_to_float=False):
    if not len(x.shape):
        return api.run("multiply", x, 0.0)
    d = dim(d, len(x.shape))
    shifted = api.run("subtract", x, api.run("max", x, dim=d, keepdim=True))
    total = api.run("sum", api.run("exp", shifted), dim=d, keepdim=True)
    return api.run("subtract", shifted, api.run("log", total))
