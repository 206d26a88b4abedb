"""Elementwise math that text generation needs beyond the arithmetic in elementwise.py: the rotary
embeddings' cos/sin, minimum/maximum (clamps between tensors, length bookkeeping) and the triangular masks
(tril/triu: causal masks built by attention that is decomposed); floor_divide and remainder (beam
search: beam and token of each candidate; its log_softmax is in activation.py).

cos/sin/minimum/maximum/tril/triu are single TT-NN ops on TILE tensors (minimum/maximum follow PyTorch's
type promotion like the other binary ops: operands brought to one device dtype by PROMOTE); log_softmax is
the max-shifted form; floor_divide/remainder compute in float32 with a one-step correction, exact for
integers below 2**24 in magnitude (token ids, beam indices).
"""
from __future__ import annotations

import builtins  # (round is a lowering's name here)
import math

import torch

from ..core import layout as policy
from ..core.layout import PROMOTE, TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import check_broadcast, dim, is_handle, result_dtype
from .elementwise import _unary
from .factory import cast

aten = torch.ops.aten


@lowering(aten.cos.default, ttnn=["cos"], needs=TILE_FLOAT)
def cos(x):
    return api.run("cos", x, out_dtype=x.dtype if x.dtype.is_floating_point else torch.get_default_dtype())


@lowering(aten.sin.default, ttnn=["sin"], needs=TILE_FLOAT)
def sin(x):
    return api.run("sin", x, out_dtype=x.dtype if x.dtype.is_floating_point else torch.get_default_dtype())


def _binary_extreme(op: str, a, b):
    check_broadcast(a.shape, b.shape)
    return api.run(op, a, b, out_dtype=result_dtype(a, b))


@lowering(aten.minimum.default, ttnn=["minimum"], needs=PROMOTE)
def minimum(a, b):
    return _binary_extreme("minimum", a, b)


@lowering(aten.maximum.default, ttnn=["maximum"], needs=PROMOTE)
def maximum(a, b):
    return _binary_extreme("maximum", a, b)


def _check_matrix(name: str, x):
    if len(x.shape) < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


@lowering(aten.tril.default, ttnn=["tril"], needs=TILE, notes="bool masks as bfloat16 0/1")
def tril(x, diagonal=0):
    _check_matrix("tril", x)
    return api.run("tril", x, diagonal=diagonal)


@lowering(aten.triu.default, ttnn=["triu"], needs=TILE, notes="bool masks as bfloat16 0/1")
def triu(x, diagonal=0):
    _check_matrix("triu", x)
    return api.run("triu", x, diagonal=diagonal)


def _floor_quotient(a, b):
    """floor(a / b) in float32 and the float32 operands. The quotient of the divide (a multiply by the
    reciprocal for a scalar) may land a hair below an exact integer, so it is corrected by the remainder's
    rule: r = a - q * b must have b's sign and |r| < |b| (one step either way): exact for integers below
    2**24 in magnitude."""
    a = policy.to_float32(a) if is_handle(a) else float(a)
    b = policy.to_float32(b) if is_handle(b) else float(b)
    q = api.run("floor", api.run("divide", a, b) if is_handle(b) else api.run("multiply", a, 1.0 / b))
    r = api.run("subtract", a, api.run("multiply", q, b))
    rb = api.run("multiply", r, b)
    bb = api.run("multiply", b, b) if is_handle(b) else b * b
    below = api.run("lt", rb, 0.0, dtype=api.FLOAT32)  # r against b's sign: q one too big
    above = api.run("ge", rb, bb, dtype=api.FLOAT32)   # |r| >= |b|: q one too small
    q = api.run("add", api.run("subtract", q, below), above)
    return q, a, b


def _as_result(h, dtype: torch.dtype):
    """The float32 result h as torch dtype `dtype` (h is tagged with its operands' torch dtype, which may be
    an integer one although it holds float32 values: it is cast from what it holds)."""
    if dtype.is_floating_point:
        return policy.retag(h, dtype)
    return cast(api.Handle(h.tt, h.shadow, torch.float32, h.shape, h.index), dtype)


def _reciprocal(b) -> float:
    """1 / b for a Python scalar divisor; 1 / +-0 is +-inf, so x / 0 is IEEE's +-inf (and NaN for 0 / 0)."""
    b = float(b)
    return 1.0 / b if b else math.copysign(math.inf, b)


@lowering(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode,
          ttnn=["typecast", "divide", "floor", "trunc"], needs=TILE,
          notes="true division (integers in float32); rounding_mode trunc/floor computed in float32, integer "
                "quotients exact below 2**24 (as floor_divide)")
def div(a, b, *, rounding_mode=None):
    dtype = result_dtype(a, b)
    if rounding_mode is not None and not dtype.is_floating_point:
        if not is_handle(b) and b == 0 or dtype == torch.bool:
            raise Unfit("integer division by a zero scalar or bools")
        q, fa, fb = _floor_quotient(a, b)
        if rounding_mode == "trunc":  # floor + 1 where the quotient is negative and inexact
            inexact = api.run("ne", api.run("subtract", fa, api.run("multiply", q, fb)), 0.0, dtype=api.FLOAT32)
            q = api.run("add", q, api.run("multiply", inexact, api.run("lt", q, 0.0, dtype=api.FLOAT32)))
        return _as_result(q, dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    # floats as stored; integers and bools in float32 (exact below 2**24). With a rounding mode, float32
    # throughout: trunc/floor of a bfloat16 quotient would be off by one near integers.
    # float32_storage="mixed": a bfloat16 parameter divided by a float32 activation in float32 too (ttnn's
    # divide computes in its first operand's dtype: a bfloat16 quotient, 2^-9 off)
    wide = is_handle(a) and is_handle(b) and api.FLOAT32 in (a.tt_dtype, b.tt_dtype)
    a, b = (policy.to_float32(x) if is_handle(x) and (rounding_mode is not None or not x.dtype.is_floating_point
                                                       or wide) else x for x in (a, b))
    out = api.run("divide", a, b, out_dtype=dtype) if is_handle(b) else api.run("multiply", a, _reciprocal(b),
                                                                                 out_dtype=dtype)
    if rounding_mode is not None:
        out = api.run(rounding_mode if rounding_mode == "floor" else "trunc", out)
    return policy.stored(out)  # (a float32 computation back to the storage policy's dtype)


@lowering(aten.floor_divide.default, aten.floor_divide.Scalar, ttnn=["typecast", "divide", "floor"],
          needs=TILE, notes="in float32: exact for integers below 2**24 (token ids, beam indices)")
def floor_divide(a, b):
    dtype = result_dtype(a, b)
    if not is_handle(b) and b == 0 or dtype == torch.bool:
        raise Unfit("division by a zero scalar or bools")
    q, _, _ = _floor_quotient(a, b)
    return _as_result(q, dtype)


@lowering(aten.remainder.Scalar, aten.remainder.Tensor, ttnn=["typecast", "divide", "floor", "multiply",
          "subtract"], needs=TILE, notes="a - floor(a / b) * b in float32 (the divisor's sign, as PyTorch); "
          "exact for integers below 2**24")
def remainder(a, b):
    dtype = result_dtype(a, b)
    if not is_handle(b) and b == 0 or dtype == torch.bool:
        raise Unfit("remainder by a zero scalar or bools")
    q, fa, fb = _floor_quotient(a, b)
    r = api.run("subtract", fa, api.run("multiply", q, fb))
    return _as_result(r, dtype)


# ----------------------------------------------------------------------------------------------- more math
# Single TT-NN ops with PyTorch's semantics (acos, erfinv, floor, round with decimals), and powers with a
# tensor exponent: ttnn.rpow (a scalar base: 10000 ** (i / d) of rotary tables) and ttnn.pow of two tensors.
acos = _unary("acos", "acos", aten.acos.default)
erfinv = _unary("erfinv", "erfinv", aten.erfinv.default)


# ------------------------------------------------------------------------------------ inverse hyperbolics
# Composed from lowered ops, not ttnn.atanh/asinh/acosh: TT-NN 0.81.1's golden functions record that the
# bfloat16 kernels return +inf where PyTorch gives NaN (atanh for |x| > 1, acosh for x < 1), and tt-metal's
# kernels of that era take log(x + sqrt(x*x +- 1)) / log((1+x)/(1-x)) directly (tt-metal issue 46862:
# cancellation near 0 and near +-1, x*x overflowing for large |x|). Here: odd functions from |x| with the
# sign restored, log1p forms near the identity, log(|x|) + ln 2 beyond _LARGE (where x*x + 1 == x*x in
# float32), and NaN outside the domain set explicitly.
_LARGE = 4096.0


def _float_result(x):
    """x (float storage, TILE_FLOAT) as the result's float dtype (integer/bool inputs: float32, as PyTorch)."""
    return policy.retag(x, x.dtype if x.dtype.is_floating_point else torch.get_default_dtype())


def _log_twice(a):
    """log(2a) = log(a) + ln 2: asinh(a) and acosh(a) for a > _LARGE (the next term, 1 / (4 a**2), is below
    float32's resolution)."""
    return api.run("add", api.run("log", a), math.log(2.0))


@lowering(aten.atanh.default, needs=TILE_FLOAT, ttnn=["abs", "clamp", "multiply", "rsub", "divide", "log1p", "sign",
          "gt", "where"], notes="sign(x) * log1p(2a / (1 - a)) / 2 with a = abs(x); +-inf at "
          "+-1, NaN beyond; integer/bool inputs give float32")
def atanh(x):
    x = _float_result(x)
    a = api.run("clamp", api.run("abs", x), min=0.0, max=1.0)
    r = api.run("log1p", api.run("divide", api.run("multiply", a, 2.0), api.run("rsub", a, 1.0)))
    r = api.run("multiply", api.run("multiply", r, 0.5), api.run("sign", x))
    return api.run("where", api.run("gt", api.run("abs", x), 1.0), math.nan, r)


@lowering(aten.asinh.default, needs=TILE_FLOAT, ttnn=["abs", "clamp", "multiply", "add", "sqrt", "divide", "log1p",
          "log", "gt", "where", "sign"], notes="sign(x) * log1p(a + a**2 / (1 + sqrt(1 + a**2))) with a = "
          "abs(x), log(2a) beyond a > 4096; integer/bool inputs give float32")
def asinh(x):
    x = _float_result(x)
    a = api.run("abs", x)
    s = api.run("clamp", a, min=0.0, max=_LARGE)  # (no overflow of s * s)
    s2 = api.run("multiply", s, s)
    root = api.run("add", api.run("sqrt", api.run("add", s2, 1.0)), 1.0)  # 1 + sqrt(1 + s**2)
    r = api.run("log1p", api.run("add", s, api.run("divide", s2, root)))
    r = api.run("where", api.run("gt", a, _LARGE), _log_twice(a), r)
    return api.run("multiply", r, api.run("sign", x))


@lowering(aten.acosh.default, needs=TILE_FLOAT, ttnn=["clamp", "add", "multiply", "sqrt", "log1p", "log", "gt",
          "lt", "where"], notes="log1p(t + sqrt(t * (t + 2))) with t = x - 1, log(2x) beyond "
          "x > 4096; 0 at 1, NaN below; integer/bool inputs give float32")
def acosh(x):
    x = _float_result(x)
    t = api.run("add", api.run("clamp", x, min=1.0, max=_LARGE), -1.0)
    r = api.run("log1p", api.run("add", t, api.run("sqrt", api.run("multiply", t, api.run("add", t, 2.0)))))
    r = api.run("where", api.run("gt", x, _LARGE), _log_twice(x), r)
    return api.run("where", api.run("lt", x, 1.0), math.nan, r)


def _integer_identity(x, name: str):
    """floor/round of an integer tensor: the tensor itself (a copy), as PyTorch; bools are PyTorch's error."""
    if x.dtype == torch.bool:
        raise NotImplementedError(f'"{name}_vml_cpu" not implemented for \'Bool\'')
    from .views import share
    return share(x)


@lowering(aten.floor.default, ttnn=["floor"], needs=TILE, notes="integer tensors: themselves, as PyTorch")
def floor(x):
    if not x.dtype.is_floating_point:
        return _integer_identity(x, "floor")
    return api.run("floor", x)


@lowering(aten.ceil.default, ttnn=["ceil"], needs=TILE, notes="integer tensors: themselves, as PyTorch")
def ceil(x):
    if not x.dtype.is_floating_point:
        return _integer_identity(x, "ceil")
    return api.run("ceil", x)


@lowering(aten.round.default, aten.round.decimals, ttnn=["round"], needs=TILE,
          notes="halves to even, as PyTorch; decimals rounds x * 10**decimals; integer tensors: themselves "
                "(decimals=0)")
def round(x, *, decimals=0):
    if not x.dtype.is_floating_point:
        if decimals:
            raise NotImplementedError(f"\"round_cpu\" not implemented for '{str(x.dtype).split('.')[-1].title()}'")
        return _integer_identity(x, "round")
    return api.run("round", x, decimals=decimals) if decimals else api.run("round", x)


def _integer_power(base, exponent, dtype: torch.dtype, run):
    """An integer power computed in float32 and rounded back: exact while the results fit float32's 24-bit
    mantissa; a negative exponent (PyTorch: 0 or +-1 by integer rules) is refused unless known not to occur."""
    if not (exponent.bounds is not None and exponent.bounds[0] >= 0):
        raise Unfit("integer powers with an exponent tensor not known to be non-negative")
    b = (base, base, True) if not is_handle(base) else base.bounds
    if b is None or builtins.max(abs(b[0]), abs(b[1])) ** exponent.bounds[1] >= 2 ** 24:
        raise Unfit("integer powers that may reach 2**24 (computed in float32)")
    out = run(policy.to_float32(base) if is_handle(base) else float(base), policy.to_float32(exponent))
    return cast(api.run("round", out), dtype)


@lowering(aten.pow.Scalar, ttnn=["rpow", "typecast", "round"], needs={"exponent": TILE},
          notes="base ** x as ttnn.rpow (a positive base; a negative or zero base runs on the CPU fallback)")
def pow_scalar(base, exponent):
    dtype = torch.result_type(base, torch.empty((1,), dtype=exponent.dtype))
    if isinstance(base, bool) or not base > 0:
        raise Unfit("a base <= 0 (ttnn.rpow computes through the base's logarithm)")
    if not dtype.is_floating_point:
        return _integer_power(base, exponent, dtype, lambda b, e: api.run("rpow", e, b, out_dtype=torch.float32))
    e = exponent if exponent.dtype.is_floating_point else policy.ensure(exponent, TILE_FLOAT)
    return api.run("rpow", e, float(base), out_dtype=dtype)


@lowering(aten.pow.Tensor_Tensor, ttnn=["pow", "typecast", "round"], needs=PROMOTE,
          notes="ttnn.pow of two tensors, broadcast; integer powers in float32 when the operands' known ranges "
                "keep them below 2**24 (else the CPU fallback)")
def pow_tensor(x, exponent):
    check_broadcast(x.shape, exponent.shape)
    dtype = result_dtype(x, exponent)
    if not dtype.is_floating_point:
        return _integer_power(x, exponent, dtype,
                              lambda b, e: api.run("pow", b, e, out_dtype=torch.float32))
    x, exponent = (policy.ensure(t, TILE_FLOAT) for t in (x, exponent))
    if x.tt_dtype != exponent.tt_dtype:
        x, exponent = policy.to_float32(x), policy.to_float32(exponent)
    return policy.stored(policy.retag(api.run("pow", x, exponent, out_dtype=dtype), dtype))
