"""Elementwise ops: arithmetic, activations, comparisons, logic, where/masked_fill.

Binary ops broadcast as PyTorch does (TT-NN's binary ops broadcast both operands); Python scalars go to
TT-NN's scalar forms. The result's torch dtype follows PyTorch's type promotion; on the device the operands
share one dtype (PROMOTE: an integer operand meeting a floating one is converted to bfloat16).
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import PROMOTE, PROMOTE_CL, SIGNED, TILE, TILE_CL, TILE_FLOAT, TILE_FLOAT_CL, keeps_channels_last
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import check_broadcast, is_handle, promote_scalar, result_dtype

aten = torch.ops.aten


def _scalar(v, like=None):
    """A Python scalar operand of a ttnn op computing in `like`'s device dtype (a handle, or None: the
    float storage): bools become floats, float constants stay finite (layout.finite_constant)."""
    if isinstance(v, (bool, float)):
        return policy.finite_constant(float(v), like.tt_dtype if like is not None and like.tt is not None else None)
    return v


def _fit(out_dtype: torch.dtype, op: str, a, b):
    """Bring tensor operands to a device dtype in which the op is exact for these operands: floating when
    the result or a scalar is floating, signed when a scalar is negative or the op subtracts (uint32 storage
    would wrap around). Either operand may be a Python scalar (or None)."""
    if out_dtype.is_floating_point or isinstance(a, float) or isinstance(b, float):
        return _as(a, TILE_FLOAT), _as(b, TILE_FLOAT)
    if op in ("subtract", "rsub") or any(not is_handle(x) and x is not None and x < 0 for x in (a, b)):
        return _as(a, SIGNED), _as(b, SIGNED)
    return a, b


def _as(x, need):
    return policy.ensure(x, need) if is_handle(x) else x


_BOOL_RESULT = {"dtype": api.BFLOAT16}  # every device bool is bfloat16 0/1
_REVERSED = {"add": "add", "multiply": "multiply", "subtract": "rsub", "rsub": "subtract"}


def binary(op: str, a, b, out_dtype: torch.dtype):
    """ttnn.<op>(a, b) with a or b possibly a Python scalar (an integer tensor meeting a float scalar is
    computed in floating point, as PyTorch promotes it)."""
    if (is_handle(a) and not a.shape.numel()) or (is_handle(b) and not b.shape.numel()):
        # an empty operand: an empty result, no ttnn call (TT-NN broadcasts the padded empty tile, and refuses)
        shape = torch.broadcast_shapes(*(x.shape for x in (a, b) if is_handle(x)))
        return policy.to_device(torch.empty(shape, dtype=out_dtype), (a if is_handle(a) else b).index)
    a, b = _fit(out_dtype, op, a, b)
    kwargs = _BOOL_RESULT if out_dtype == torch.bool else {}
    if is_handle(a):
        if is_handle(b):
            check_broadcast(a.shape, b.shape)
            return api.run(op, a, b, out_dtype=out_dtype, **kwargs)
        return api.run(op, a, _scalar(b, a), out_dtype=out_dtype, **kwargs)
    reversed_op = _REVERSED.get(op)
    if reversed_op is None:
        raise NotImplementedError(f"{op} with a scalar first operand")
    return api.run(reversed_op, b, _scalar(a, b), out_dtype=out_dtype, **kwargs)


def _scaled(b, alpha):
    if alpha == 1:
        return b
    return api.run("multiply", b, _scalar(alpha)) if is_handle(b) else b * alpha


@lowering(aten.add.Tensor, aten.add.Scalar, ttnn=["add"], needs=PROMOTE_CL,
          notes="integer results keep known value bounds (positions: a StaticCache's write row); an int64 sum "
                "known to leave int32 (the device's integers) is refused, so the CPU fallback computes it; "
                "channels-last images of one shape stay so")
@keeps_channels_last
def add(a, b, *, alpha=1):
    dtype = result_dtype(a, b)
    integer = not dtype.is_floating_point and dtype != torch.bool and type(alpha) is int
    bounds = _sum_bounds(_known(a), _known(b), alpha) if integer else None
    if bounds is _WRAPS and dtype == torch.int64:  # (int32 wraps in PyTorch too)
        raise Unfit("the integer sum's known values leave int32, the device's integers")
    out = binary("add", a, _scaled(b, alpha), dtype)
    if integer:
        out.bounds = None if bounds is _WRAPS else bounds
    return out


def _known(x):
    """(min, max, exact) of an integer operand known on the host (a Python int, or a tensor's bounds)."""
    if type(x) is int:
        return x, x, True
    return x.bounds if is_handle(x) else None


_WRAPS = "wraps"


def _sum_bounds(a, b, alpha: int):
    """Bounds of a + alpha * b from the operands' bounds: min and max add up; both occur when one side is a
    single known value (a position plus an offset); None when unknown, _WRAPS when int32 could wrap."""
    if a is None or b is None:
        return None
    lo_b, hi_b = sorted((alpha * b[0], alpha * b[1]))
    lo, hi = a[0] + lo_b, a[1] + hi_b
    if lo < policy.INT32_MIN or hi > policy.INT32_MAX:
        return _WRAPS
    return lo, hi, a[2] and b[2] and (a[0] == a[1] or b[0] == b[1])


@lowering(aten.sub.Tensor, aten.sub.Scalar, ttnn=["subtract"], needs=PROMOTE)
def sub(a, b, *, alpha=1):
    return binary("subtract", a, _scaled(b, alpha), result_dtype(a, b))


@lowering(aten.rsub.Tensor, aten.rsub.Scalar, ttnn=["rsub"], needs=PROMOTE, notes="other - alpha * self")
def rsub(a, b, *, alpha=1):
    return binary("rsub", _scaled(a, alpha), b, result_dtype(a, b))


@lowering(aten.mul.Tensor, aten.mul.Scalar, ttnn=["multiply"], needs=PROMOTE_CL,
          notes="channels-last images of one shape stay so")
@keeps_channels_last
def mul(a, b):
    return binary("multiply", a, b, result_dtype(a, b))


def _unary(name: str, ttnn_op: str, *ops, notes: str = ""):
    @lowering(*ops, ttnn=[ttnn_op], needs=TILE_FLOAT_CL, notes=notes or "integer/bool inputs give float32, as PyTorch")
    @keeps_channels_last
    def lower(x):
        return api.run(ttnn_op, x, out_dtype=x.dtype if x.dtype.is_floating_point else torch.get_default_dtype())
    lower.__name__ = lower.__qualname__ = name
    return lower


tanh = _unary("tanh", "tanh", aten.tanh.default)
sigmoid = _unary("sigmoid", "sigmoid", aten.sigmoid.default)
exp = _unary("exp", "exp", aten.exp.default)
log = _unary("log", "log", aten.log.default)
log2 = _unary("log2", "log2", aten.log2.default)  # (the FPN level of torchvision detection's box pooler)
log10 = _unary("log10", "log10", aten.log10.default)
sqrt = _unary("sqrt", "sqrt", aten.sqrt.default)
rsqrt = _unary("rsqrt", "rsqrt", aten.rsqrt.default)
erf = _unary("erf", "erf", aten.erf.default)
silu = _unary("silu", "silu", aten.silu.default)
reciprocal = _unary("reciprocal", "reciprocal", aten.reciprocal.default)


@lowering(aten.relu.default, ttnn=["relu", "clamp"], needs=TILE_CL, notes="integers: clamp at 0 in int32")
@keeps_channels_last
def relu(x):
    if x.dtype == torch.bool:
        raise NotImplementedError("Boolean inputs not supported for relu")
    if x.dtype.is_floating_point:
        return api.run("relu", x)
    return clamp(x, min=0)


@lowering(aten.neg.default, ttnn=["neg"], needs=SIGNED)
def neg(x):
    return api.run("neg", x)


@lowering(aten.abs.default, ttnn=["abs"], needs=TILE)
def abs(x):
    return api.run("abs", x)


@lowering(aten.gelu.default, ttnn=["gelu"], needs=TILE_FLOAT, notes="approximate='none' (erf) and 'tanh'")
def gelu(x, *, approximate="none"):
    if approximate == "tanh":
        return api.run("gelu", x, variant=api.enum("GeluVariant.Tanh"))
    return api.run("gelu", x)


@lowering(aten.pow.Tensor_Scalar, ttnn=["pow", "square", "multiply"], needs=TILE,
          notes="integer tensors to integer powers: exact while results fit float32's 24-bit mantissa")
def pow(x, exponent):
    dtype = promote_scalar(x.dtype, exponent)
    if not dtype.is_floating_point:  # an integer power of an integer tensor
        if exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        if exponent == 2:
            x = policy.signed(x) if x.dtype != torch.bool else policy.retag(x, dtype)
            return api.run("multiply", x, x, out_dtype=dtype)
        from .factory import cast
        out = api.run("pow", policy.to_float32(x), float(exponent), out_dtype=torch.float32)
        return cast(api.run("round", out), dtype)
    x = policy.ensure(x, TILE_FLOAT)
    if exponent == 2:
        return api.run("square", x, out_dtype=dtype)
    return api.run("pow", x, _scalar(exponent, x), out_dtype=dtype)


@lowering(aten.clamp.default, ttnn=["clamp"], needs=TILE,
          notes="integers clamp in int32 (uint32 is refused by ttnn); float bounds make the result float")
def clamp(x, min=None, max=None):
    dtype = x.dtype
    for bound in (min, max):
        if bound is not None:
            dtype = promote_scalar(dtype, bound)
    x = policy.ensure(x, TILE_FLOAT) if dtype.is_floating_point else policy.signed(x)
    return api.run("clamp", x, min=_scalar(min, x) if min is not None else None,
                   max=_scalar(max, x) if max is not None else None, out_dtype=dtype)


@lowering(aten.clamp_min.default, ttnn=["clamp"], needs=TILE)
def clamp_min(x, min):
    return clamp(x, min=min)


@lowering(aten.clamp_max.default, ttnn=["clamp"], needs=TILE)
def clamp_max(x, max):
    return clamp(x, max=max)


def _clamp_by(compare: str, x, bound):
    dtype = result_dtype(x, bound)
    x, bound = _fit(dtype, "where", x, bound)
    check_broadcast(x.shape, bound.shape)
    return api.run("where", api.run(compare, x, bound, dtype=api.BFLOAT16, out_dtype=torch.bool), bound, x,
                   out_dtype=dtype)


@lowering(aten.clamp_min.Tensor, ttnn=["lt", "where"], needs=PROMOTE, notes="where(x < min, min, x), broadcast")
def clamp_min_tensor(x, min):
    return _clamp_by("lt", x, min)


@lowering(aten.clamp_max.Tensor, ttnn=["gt", "where"], needs=PROMOTE, notes="where(x > max, max, x), broadcast")
def clamp_max_tensor(x, max):
    return _clamp_by("gt", x, max)


@lowering(aten.clamp.Tensor, ttnn=["lt", "gt", "where"], needs=PROMOTE,
          notes="max(min(x, max), min) as PyTorch: where(x < min, min, x), then where(> max, max, .); either "
                "bound may be None; broadcast")
def clamp_tensor(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    out = x if min is None else _clamp_by("lt", x, min)
    return out if max is None else _clamp_by("gt", out, max)


# ----------------------------------------------------------------------------------------------- comparisons
def _compare(name: str, ttnn_op: str, *ops):
    @lowering(*ops, ttnn=[ttnn_op], needs=PROMOTE, notes="bool result stored as bfloat16 0/1")
    def lower(a, b):
        return binary(ttnn_op, a, b, torch.bool)
    lower.__name__ = lower.__qualname__ = name
    return lower


eq = _compare("eq", "eq", aten.eq.Tensor, aten.eq.Scalar)
ne = _compare("ne", "ne", aten.ne.Tensor, aten.ne.Scalar)
gt = _compare("gt", "gt", aten.gt.Tensor, aten.gt.Scalar)
ge = _compare("ge", "ge", aten.ge.Tensor, aten.ge.Scalar)
lt = _compare("lt", "lt", aten.lt.Tensor, aten.lt.Scalar)
le = _compare("le", "le", aten.le.Tensor, aten.le.Scalar)



def _float_class(name: str, ttnn_op: str, op, integer_value: bool):
    """isnan / isinf: TT-NN's test on a float tensor (bool result, bfloat16 0/1); an integer or
    bool tensor holds no NaN or inf, so its answer is a constant, as on the CPU."""
    @lowering(op, ttnn=[ttnn_op], needs=TILE, notes="bool result stored as bfloat16 0/1; integer inputs: "
              "a constant (GradScaler's and the HF Trainer's inf/NaN checks)")
    def lower(x):
        if not x.dtype.is_floating_point:
            from .factory import full_handle
            return full_handle(x.shape, integer_value, torch.bool, x.index)
        return api.run(ttnn_op, policy.ensure(x, TILE_FLOAT), out_dtype=torch.bool)
    lower.__name__ = lower.__qualname__ = name
    return lower


isnan = _float_class("isnan", "isnan", aten.isnan.default, False)
isinf = _float_class("isinf", "isinf", aten.isinf.default, False)
# isfinite is CompositeImplicitAutograd in PyTorch: it reaches the backend as eq/abs/ne, all lowered


@lowering(aten.nan_to_num.default, ttnn=["isnan", "isinf", "gt", "where"], needs=TILE,
          notes="NaN, +inf and -inf each replaced by where (defaults: 0 and the dtype's largest finite values, "
                "bfloat16's under bfloat16 storage); integer tensors: themselves")
def nan_to_num(x, nan=None, posinf=None, neginf=None):
    if not x.dtype.is_floating_point:
        from .views import share
        return share(x)
    x, info = policy.ensure(x, TILE_FLOAT), torch.finfo(x.dtype)
    hi, lo = info.max if posinf is None else float(posinf), info.min if neginf is None else float(neginf)
    infinite = api.run("where", api.run("gt", x, 0.0, out_dtype=torch.bool), _scalar(hi, x), _scalar(lo, x),
                       out_dtype=x.dtype)
    y = api.run("where", api.run("isinf", x, out_dtype=torch.bool), infinite, x, out_dtype=x.dtype)
    return api.run("where", api.run("isnan", x, out_dtype=torch.bool), _scalar(0.0 if nan is None else float(nan), x),
                   y, out_dtype=x.dtype)

_C_NAMES = {torch.float32: "Float", torch.bfloat16: "BFloat16", torch.float16: "Half"}


def _not_for_floats(name: str, dtype: torch.dtype) -> NotImplementedError:
    """PyTorch's error for a bitwise op on a floating tensor."""
    return NotImplementedError(f'"{name}_cpu" not implemented for \'{_C_NAMES.get(dtype, dtype)}\'')


def _integers(a, b):
    """Integer operands of a bitwise op in one integer device dtype (a bool, stored bfloat16 0/1, becomes
    int32 0/1; uint32 meets int32 as int32), with no detour through bfloat16."""
    hs = [x for x in (a, b) if is_handle(x)]
    target = api.UINT32 if all(h.tt_dtype == api.UINT32 for h in hs) else api.INT32
    return [policy.as_integer(x, target) if is_handle(x) else x for x in (a, b)]


def _bool_or_int(name: str, logical: str, bitwise: str, *ops):
    @lowering(*ops, ttnn=[logical, bitwise], needs=TILE, notes="bool: logical op on 0/1; integers: bitwise "
              "in int32/uint32 (a bool operand converted to 0/1)")
    def lower(a, b):
        if a.dtype == torch.bool and not is_handle(b):  # with a Python bool: a, not a, or a constant
            from .factory import full_handle
            if logical == "logical_xor":
                return api.run("logical_not", a) if b else a
            absorbing = bool(b) if logical == "logical_or" else not bool(b)
            return full_handle(a.shape, bool(b), torch.bool, a.index) if absorbing else a
        dtype = result_dtype(a, b)
        if dtype == torch.bool:
            return binary(logical, a, b, torch.bool)
        if dtype.is_floating_point:
            raise _not_for_floats(name, dtype)
        a, b = _integers(a, b)
        if is_handle(b):
            check_broadcast(a.shape, b.shape)
        return api.run(bitwise, a, b if is_handle(b) else int(b), out_dtype=dtype)
    lower.__name__ = lower.__qualname__ = name
    return lower


bitwise_and = _bool_or_int("bitwise_and", "logical_and", "bitwise_and", aten.bitwise_and.Tensor,
                           aten.bitwise_and.Scalar)
bitwise_or = _bool_or_int("bitwise_or", "logical_or", "bitwise_or", aten.bitwise_or.Tensor,
                          aten.bitwise_or.Scalar)
bitwise_xor = _bool_or_int("bitwise_xor", "logical_xor", "bitwise_xor", aten.bitwise_xor.Tensor,
                           aten.bitwise_xor.Scalar)


def _logical(name: str, ttnn_op: str, op):
    @lowering(op, ttnn=["ne", ttnn_op], needs=PROMOTE, notes="any dtype: x != 0, then the logical op on 0/1")
    def lower(a, b):
        from .factory import cast, full_handle
        if not is_handle(b):  # a CPU 0-d tensor: a, not a, or a constant
            if ttnn_op == "logical_xor":
                return api.run("logical_not", cast(a, torch.bool)) if b else cast(a, torch.bool)
            absorbing = bool(b) if ttnn_op == "logical_or" else not bool(b)
            return full_handle(a.shape, bool(b), torch.bool, a.index) if absorbing else cast(a, torch.bool)
        check_broadcast(a.shape, b.shape)
        return binary(ttnn_op, cast(a, torch.bool), cast(b, torch.bool), torch.bool)
    lower.__name__ = lower.__qualname__ = name
    return lower


logical_and = _logical("logical_and", "logical_and", aten.logical_and.default)
logical_or = _logical("logical_or", "logical_or", aten.logical_or.default)
logical_xor = _logical("logical_xor", "logical_xor", aten.logical_xor.default)


@lowering(aten.bitwise_not.default, ttnn=["logical_not", "bitwise_not"], needs=TILE,
          notes="bool: logical not; integers: bitwise; floating: PyTorch's error")
def bitwise_not(x):
    if x.dtype == torch.bool:
        return api.run("logical_not", x)
    if x.dtype.is_floating_point:
        raise _not_for_floats("bitwise_not", x.dtype)
    return api.run("bitwise_not", x)


@lowering(aten.logical_not.default, ttnn=["logical_not", "eq"], needs=TILE, notes="any dtype: x == 0")
def logical_not(x):
    if x.dtype == torch.bool:
        return api.run("logical_not", x)
    return binary("eq", x, 0, torch.bool)


# ----------------------------------------------------------------------------------------------- selection
def _condition(condition, like):
    """ttnn.where takes no mixed dtypes: the condition (bool tensors are bfloat16 0/1 on the device) in the
    values' device dtype when they are integers or float32, converted exactly."""
    if like is None or like.tt_dtype in (api.BFLOAT16, api.BFLOAT8_B) or condition.tt_dtype == like.tt_dtype:
        return condition
    return policy.like(condition, like)


@lowering(aten.where.self, ttnn=["where"],
          needs={"condition": TILE, "*": PROMOTE}, notes="integer operands: the condition in their device dtype")
def where(condition, a, b):
    dtype = result_dtype(a, b) if (is_handle(a) or is_handle(b)) else torch.get_default_dtype()
    a, b = _fit(dtype, "where", a, b)
    if not dtype.is_floating_point and dtype != torch.bool:
        a, b = _as(a, SIGNED), _as(b, SIGNED)  # integer values in int32 (and so the condition)
    like = a if is_handle(a) else b if is_handle(b) else None
    condition = _condition(condition, like)
    return api.run("where", condition, _scalar(a, like) if not is_handle(a) else a,
                   _scalar(b, like) if not is_handle(b) else b, out_dtype=dtype)


@lowering(aten.masked_fill.Scalar, aten.masked_fill.Tensor, ttnn=["where"], needs={"mask": TILE, "*": PROMOTE})
def masked_fill(x, mask, value):
    x, value = _fit(x.dtype, "where", x, value)
    if is_handle(value) and value.tt_dtype != x.tt_dtype:
        value = policy.like(value, x)
    mask = _condition(mask, x)
    return api.run("where", mask, _scalar(value, x) if not is_handle(value) else value, x, out_dtype=x.dtype)
