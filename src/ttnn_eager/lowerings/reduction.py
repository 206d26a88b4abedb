"""Reductions: all/any (mask checks), equal, sum, mean, amax, cumsum; counting (histc, bincount); logsumexp,
var/std and var_mean/std_mean."""
from __future__ import annotations

import builtins
import math

import torch

from ..core import capture
from ..core import layout as policy
from ..core.layout import PROMOTE, TILE, TILE_FLOAT, TILE_FLOAT_CL
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import EXACT_FLOAT32, dim
from .views import reshape, share

aten = torch.ops.aten


def _dims(x, d):
    """The reduced dimensions, non-negative; None for all of them (dim None or an empty list, as PyTorch)."""
    if d is None or not isinstance(d, int) and len(d) == 0:
        return None
    ds = [d] if isinstance(d, int) else list(d)
    return [dim(i, len(x.shape)) for i in ds]


def value_range(x, exact: bool = False) -> tuple[int, int]:
    """(lowest, highest) of an integer tensor's values: its value bounds where known (`exact`: only bounds that
    are the exact extremes), else one read of the extremes from the device (a sync, as CUDA's bincount)."""
    b = x.bounds
    if b is not None and (b[2] or not exact):
        return b[0], b[1]
    return int(api.download(_reduce("min", x, None, False)).item()), \
        int(api.download(_reduce("max", x, None, False)).item())


def largest_magnitude(x) -> int:
    """The largest |value| of an integer tensor (value_range: its bounds, or one read of its extremes)."""
    lo, hi = value_range(x)
    return builtins.max(-lo, hi)


def _reduce(op: str, x, d, keepdim, out_dtype=None):
    dims = _dims(x, d)
    if not x.shape:  # a 0-d tensor: its reduction is its value
        return policy.retag(share(x), out_dtype or x.dtype)
    ckc = policy.compute_config("reduce", x.index)
    if dims is None:
        out = api.run(op, x, out_dtype=out_dtype, compute_kernel_config=ckc)
        return reshape(out, [1] * len(x.shape) if keepdim else [])
    out = api.run(op, x, dim=dims if len(dims) > 1 else dims[0], keepdim=keepdim, out_dtype=out_dtype,
                  compute_kernel_config=ckc)
    shape = [1 if i in dims else s for i, s in enumerate(x.shape)] if keepdim else \
        [s for i, s in enumerate(x.shape) if i not in dims]
    return reshape(out, shape)


def _known_all_any(x, want_all: bool):
    """all()/any() over the whole tensor answered from the values' known bounds, or None."""
    if x.bounds is None or not x.shape.numel():
        return None
    lo, hi, exact = x.bounds
    if lo > 0 or hi < 0:
        return True                       # no element can be zero
    if not exact:
        return None
    if lo == hi == 0:
        return False                      # every element is zero
    if lo == 0 or hi == 0:                # a zero (the min or max) and a non-zero both occur
        return not want_all
    return None if want_all else True     # lo < 0 < hi: a non-zero occurs; a zero may or may not


def _all_or_any(x, d, keepdim, want_all: bool):
    """all (min) or any (max) of x != 0; over a whole tensor with known bounds, answered on the host."""
    from .factory import cast, full_handle
    if d is None and not keepdim and (known := _known_all_any(x, want_all)) is not None:
        capture.host_decision(x, "all_any", f"aten.{'all' if want_all else 'any'} (= {known}, from values known "
                                            f"on the host)")
        return full_handle((), known, torch.bool, x.index)
    return _reduce("min" if want_all else "max", cast(x, torch.bool), d, keepdim, torch.bool)


@lowering(aten.all.default, aten.all.dim, aten.all.dims, ttnn=["ne", "min"], needs=TILE,
          notes="a device-side min over (x != 0); over the whole of an uploaded integer/bool tensor (a "
                "mask), answered from its known bounds without a device read")
def all(x, d=None, keepdim=False):
    return _all_or_any(x, d, keepdim, want_all=True)


@lowering(aten._is_all_true.default, ttnn=["ne", "min"], needs=TILE,
          notes="torch._check_tensor_all's test: all() of a bool tensor")
def is_all_true(x):
    if x.dtype != torch.bool:
        raise RuntimeError(f"Expected only a boolean tensor, got {x.dtype}")
    return _all_or_any(x, None, False, want_all=True)


@lowering(aten.any.default, aten.any.dim, aten.any.dims, ttnn=["ne", "max"], needs=TILE)
def any(x, d=None, keepdim=False):
    return _all_or_any(x, d, keepdim, want_all=False)


@lowering(aten.equal.default, ttnn=["eq", "min", "to_torch"], needs=PROMOTE,
          notes="all(a == b) on the device, then its one value read (PyTorch's result is a Python bool: a host "
                "sync either way); shapes must be equal (no broadcast), dtypes promote")
def equal(a, b):
    from .elementwise import binary
    from .factory import local_scalar_dense
    if tuple(a.shape) != tuple(b.shape):
        return False
    if not a.shape.numel():
        return True
    return bool(local_scalar_dense(_all_or_any(binary("eq", a, b, torch.bool), None, False, want_all=True)))


@lowering(aten.sum.default, aten.sum.dim_IntList, ttnn=["sum"], needs=TILE,
          notes="integer and bool sums accumulate in float32 (the matrix engine's Dst): on the device only when "
                "exact, i.e. terms x largest magnitude below 2**24 (from the dtype, the known value bounds, or "
                "one read of the extremes); larger ones run on the CPU fallback")
def sum(x, d=None, keepdim=False, *, dtype=None):
    out_dtype = dtype or (torch.int64 if x.dtype == torch.bool or not x.dtype.is_floating_point else x.dtype)
    if not out_dtype.is_floating_point:
        _exact_integer_sum(x, d)
    return _reduce("sum", x, d, keepdim, out_dtype)


def _exact_integer_sum(x, d) -> None:
    """An integer sum is exact in float32 when every partial sum is: terms x the largest magnitude below
    2**24 (the dtype's range first, so bool/int8/uint8 masks need no read; else value_range). Else Unfit: the
    CPU's int64 sum (which the device could not hold beyond int32 anyway)."""
    dims = _dims(x, d)
    terms = x.shape.numel() if dims is None or not x.shape else math.prod(x.shape[i] for i in dims)
    if x.dtype == torch.bool:
        largest = 1
    else:
        info = torch.iinfo(x.dtype)
        largest = builtins.max(-info.min, info.max)
        if terms * largest >= EXACT_FLOAT32 and terms:
            largest = largest_magnitude(x)
    if terms * largest >= EXACT_FLOAT32:
        raise Unfit(f"a sum of {terms} {x.dtype} terms up to {largest} in magnitude (the device accumulates in "
                    f"float32: exact below 2**24)")


@lowering(aten.mean.default, aten.mean.dim, ttnn=["mean", "reshape"], needs=TILE_FLOAT_CL,
          notes="over H and W of a channels-last image (squeeze-excitation, a classifier's pooling): the mean of "
                "its flat pixels, the result channels-last")
def mean(x, d=None, keepdim=False, *, dtype=None):
    if len(x.shape) == 4 and x.tt is not None and policy.is_channels_last(x):
        if sorted(_dims(x, d) or []) == [2, 3] and dtype in (None, x.dtype):
            return _spatial_mean(x, keepdim)
        policy.to_nchw(x)  # (other dimensions: reduced in NCHW)
    return _reduce("mean", x, d, keepdim, dtype or x.dtype)


def _spatial_mean(x, keepdim: bool):
    """The mean over H and W of a channels-last image x [N, C, H, W] (layout.py: stored [1, 1, N*H*W, C]): over
    the pixels of each image -- [1, N, H*W, C] (a reshape when N > 1) reduced along its rows, [1, N, 1, C] -- kept
    channels-last ([N, C, 1, 1] stored [1, 1, N, C]) or, without keepdim, [N, C]."""
    n, c, h, w = x.shape
    pixels = policy.flat(x)
    if n > 1:
        pixels = reshape(pixels, (1, n, h * w, c))
    out = api.run("mean", pixels, dim=2, keepdim=True, compute_kernel_config=policy.compute_config("reduce", x.index))
    if not keepdim:
        return reshape(out, (n, c))
    return policy.channels_last(out if n == 1 else reshape(out, (1, 1, n, c)), (n, c, 1, 1))


@lowering(aten.amax.default, ttnn=["max"], needs=TILE)
def amax(x, d=(), keepdim=False):
    return _reduce("max", x, d, keepdim)


@lowering(aten.amin.default, ttnn=["min"], needs=TILE)
def amin(x, d=(), keepdim=False):
    return _reduce("min", x, d, keepdim)


@lowering(aten.cumsum.default, ttnn=["cumsum"], needs=TILE,
          notes="integer and bool inputs sum as int64 (PyTorch's default), in int32 on the device: exact")
def cumsum(x, d, *, dtype=None):
    out = dtype or (x.dtype if x.dtype.is_floating_point else torch.int64)
    if out != x.dtype:
        x = policy.retag(x, out)  # (bool's bfloat16 0/1 become int32: a running count stays exact)
    d = dim(d, len(x.shape))
    result = api.run("cumsum", x, d, out_dtype=out)
    if x.bounds is not None and not out.is_floating_point:  # a running sum of n terms in [lo, hi]
        n = x.shape[d] if x.shape else 1
        lo, hi = x.bounds[0], x.bounds[1]
        result.bounds = (builtins.min(lo, lo * n), builtins.max(hi, hi * n), False)
    return result


_NORMAL_MIN = float(torch.finfo(torch.float32).tiny)  # the smallest normal float32 (and bfloat16)


@lowering(aten.linalg_vector_norm.default, ttnn=["abs", "max", "clamp", "divide", "multiply", "sum", "sqrt"],
          needs=TILE_FLOAT,
          notes="ord 2, 1 and inf; ord 2 of values below 1 scaled by the largest magnitude (as BLAS's nrm2): the "
                "device has no subnormals, so squares of values below ~1e-19 would flush to zero (a norm of 0 "
                "where the CPU's is finite); other orders run on the CPU fallback")
def vector_norm(x, ord=2, d=None, keepdim=False, *, dtype=None):
    if ord == 2:  # s * sqrt(sum((x / s)^2)), s = |x|_max clamped to [tiny, 1]: tiny values scaled up, large ones
        # as they are (their squares overflow to inf as the CPU's do), 0 and inf exact
        scale = api.run("clamp", _reduce("max", api.run("abs", x), d, True), min=_NORMAL_MIN, max=1.0)
        y = api.run("divide", x, scale)
        norm = api.run("multiply", api.run("sqrt", _reduce("sum", api.run("multiply", y, y), d, True)), scale)
        if keepdim:
            return norm
        dims = _dims(x, d)
        return reshape(norm, [] if dims is None else [s for i, s in enumerate(x.shape) if i not in dims])
    if ord == 1:
        return _reduce("sum", api.run("abs", x), d, keepdim)
    if ord == math.inf:
        return _reduce("max", api.run("abs", x), d, keepdim)
    raise Unfit(f"ord={ord}")


# ----------------------------------------------------------------------------------------------- counting
# histc and bincount (a mixture-of-experts router counts the tokens of each expert) as a one-hot matrix
# summed over the elements: each element's bin compared with arange(bins) ([n, 1] == [1, bins]) and the
# [n, bins] 0/1 matrix summed over n in float32 -- exact counts below 2**24, no device read. The result's
# dtype is PyTorch's (the input's for histc, int64 or the weights' for bincount); float results stay in
# float32 storage, so that counts beyond 256 are not rounded to bfloat16.
def _span(n: int, index: int) -> api.Handle:
    """[1, n] float32: 0, 1, ..., n - 1 (bin numbers)."""
    span = api.create("arange", (0, n, 1), api.FLOAT32, api.TILE, index, torch.float32)
    return reshape(span, (1, n))


def _column(x: api.Handle) -> api.Handle:
    """x's elements as an [n, 1] float32 column."""
    return reshape(policy.to_float32(x), (x.shape.numel(), 1))


def _count_bins(bin_of: api.Handle, bins: int, weight=None) -> api.Handle:
    """[n, 1] bin numbers (float32; any other value counts nowhere) -> [bins] float32 counts (or sums of the
    [n, 1] weights)."""
    hot = api.run("eq", bin_of, _span(bins, bin_of.index), dtype=api.FLOAT32, out_dtype=torch.float32)
    if weight is not None:
        hot = api.run("multiply", hot, weight)
    return reshape(_reduce("sum", hot, 0, False, torch.float32), (bins,))


def _result(counts: api.Handle, dtype: torch.dtype) -> api.Handle:
    return counts if dtype == torch.float32 else policy.retag(counts, dtype)


@lowering(aten.histc.default, ttnn=["typecast", "subtract", "multiply", "divide", "floor", "where", "ge", "le",
                                    "arange", "eq", "sum"], needs=TILE,
          notes="PyTorch's bin rule ((x - min) * bins / (max - min), floored; max in the last bin; values outside "
                "[min, max] skipped) in float32, counted as a one-hot sum (exact); integer inputs too, as CUDA "
                "(the CPU kernel takes floats only); min == max: the data's range, one read of its extremes")
def histc(x, bins=100, min=0, max=0):
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and x.shape.numel():  # the range of the data: one read of its extremes (as PyTorch's kernels)
        if x.dtype.is_floating_point:
            lo, hi = (float(api.download(_reduce(op, x, None, False)).item()) for op in ("min", "max"))
        else:
            lo, hi = map(float, value_range(x, exact=True))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histc: range of [{lo:g}, {hi:g}] is not finite")
    if lo == hi:  # (every value equal, or no value)
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc(): max must be larger than min")
    if x.dtype.is_floating_point and x.dtype != torch.float32 and x.dtype != torch.bfloat16:
        raise Unfit(f"{x.dtype} input")
    keys = _column(x)
    pos = api.run("floor", api.run("divide", api.run("multiply", api.run("subtract", keys, lo), float(bins)),
                                   hi - lo))
    pos = api.run("where", api.run("eq", keys, hi), float(bins - 1), pos)  # the right edge: the last bin
    inside = api.run("logical_and", api.run("ge", keys, lo), api.run("le", keys, hi))
    pos = api.run("where", inside, pos, -1.0)
    return _result(_count_bins(pos, bins), x.dtype)


@lowering(aten.bincount.default, ttnn=["typecast", "max", "arange", "eq", "multiply", "sum"], needs=TILE,
          notes="the length (max + 1) is known from an upload's exact value bounds, else read from the device "
                "(PyTorch's CUDA kernel reads it too); weights multiply the one-hot rows")
def bincount(x, weights=None, minlength=0):
    if len(x.shape) != 1 or x.dtype.is_floating_point or x.dtype == torch.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (tuple(weights.shape) != tuple(x.shape)):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if weights is not None and weights.dtype not in (torch.float32, torch.bfloat16):
        raise Unfit(f"{weights.dtype} weights")
    lo, top = value_range(x, exact=True)  # the result's length depends on the values
    if lo < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    bins = max(minlength, top + 1)
    weight = None if weights is None else _column(weights)
    return _result(_count_bins(_column(x), bins, weight), torch.int64 if weights is None else weights.dtype)



# ----------------------------------------------------------------------------------------------- statistics
# logsumexp, var and std in float32 on the device (a bfloat16 x - mean would lose the spread of values far
# from zero), back to the storage policy's dtype at the end.
def _dropped(x, dims) -> list:
    return [] if dims is None else [s for i, s in enumerate(x.shape) if i not in dims]


def _float32(x, dtype: torch.dtype) -> api.Handle:
    """x's values in float32 on the device, tagged as torch dtype `dtype` (policy.stored brings a result
    back to that dtype's storage)."""
    h = policy.to_float32(x)
    return api.Handle(h.tt, h.shadow, dtype, h.shape, h.index)


@lowering(aten.logsumexp.default, ttnn=["typecast", "max", "isinf", "where", "subtract", "exp", "sum", "log", "add"],
          needs=TILE, notes="m + log(sum(exp(x - m))) with m the max (0 where infinite, as PyTorch), in float32; "
                            "integer inputs give float32")
def logsumexp(x, d, keepdim=False):
    dtype = x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()
    dims = _dims(x, d)
    f = _float32(x, dtype)
    if not x.shape:  # log(exp(x))
        return policy.stored(f)
    m = _reduce("max", f, dims, True)
    m = api.run("where", api.run("isinf", m), 0.0, m)
    total = _reduce("sum", api.run("exp", api.run("subtract", f, m)), dims, True)
    out = api.run("add", api.run("log", total), m)
    return policy.stored(out if keepdim else reshape(out, _dropped(x, dims)))


def _variance(x, d, correction, keepdim, what: str):
    return _moments(x, d, correction, keepdim, what)[0]


@lowering(aten.var.correction, ttnn=["typecast", "mean", "subtract", "multiply", "sum"], needs=TILE,
          notes="sum((x - mean)**2) / (n - correction) in float32; n <= correction runs on the CPU fallback")
def var(x, d=None, *, correction=None, keepdim=False):
    return policy.stored(_variance(x, d, correction, keepdim, "var"))


@lowering(aten.std.correction, ttnn=["typecast", "mean", "subtract", "multiply", "sum", "sqrt"], needs=TILE,
          notes="the square root of var.correction's result")
def std(x, d=None, *, correction=None, keepdim=False):
    return policy.stored(api.run("sqrt", _variance(x, d, correction, keepdim, "std")))


def _moments(x, d, correction, keepdim, what: str) -> tuple:
    """(variance, mean) in float32 from one mean: _variance's steps, the mean kept."""
    if not x.dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dims = _dims(x, d)
    n = math.prod(x.shape) if dims is None or not x.shape else math.prod(x.shape[i] for i in dims)
    divisor = n - (1 if correction is None else float(correction))
    if divisor <= 0:
        raise Unfit(f"{what} of {n} elements with correction {correction} (a division by {divisor})")
    f = _float32(x, x.dtype)
    mean = _reduce("mean", f, dims, True)
    centered = api.run("subtract", f, mean)
    variance = api.run("multiply", _reduce("sum", api.run("multiply", centered, centered), dims, keepdim),
                       1.0 / divisor)
    return variance, (mean if keepdim or not x.shape else reshape(mean, _dropped(x, dims)))


@lowering(aten.var_mean.correction, ttnn=["typecast", "mean", "subtract", "multiply", "sum"], needs=TILE,
          notes="var.correction's steps in float32, returning the mean it takes too")
def var_mean(x, d=None, *, correction=None, keepdim=False):
    variance, mean = _moments(x, d, correction, keepdim, "var_mean")
    return policy.stored(variance), policy.stored(mean)


@lowering(aten.std_mean.correction, ttnn=["typecast", "mean", "subtract", "multiply", "sum", "sqrt"], needs=TILE,
          notes="the square root of var_mean's variance, and the mean")
def std_mean(x, d=None, *, correction=None, keepdim=False):
    variance, mean = _moments(x, d, correction, keepdim, "std_mean")
    return policy.stored(api.run("sqrt", variance)), policy.stored(mean)


# ----------------------------------------------------------------------------------------------- products
PROD_MAX_TERMS = 16  # a product along a short dimension: one multiply per term


@lowering(aten.prod.dim_int, ttnn=["slice", "multiply", "typecast"], needs=TILE,
          notes="a short dimension (up to 16) as a chain of multiplies (deformable attention's H*W of its "
                "levels); integers in int32 when their value bounds keep the product inside it; others refused")
def prod(x, d, keepdim=False, *, dtype=None):
    from .elementwise import mul
    from .factory import cast
    from .views import select
    n = len(x.shape)
    d = dim(d, n) if n else 0
    size = x.shape[d] if n else 1
    if not n or size == 0 or size > PROD_MAX_TERMS:
        raise Unfit(f"a product over {size} terms (at most {PROD_MAX_TERMS}; 0-d or empty: the CPU's)")
    out_dtype = dtype or (x.dtype if x.dtype.is_floating_point else torch.int64)
    if not out_dtype.is_floating_point:
        lo, hi = value_range(x)
        if builtins.max(abs(lo), abs(hi)) ** size >= 2 ** 31:
            raise Unfit(f"integer products of values in [{lo}, {hi}] over {size} terms may leave int32")
    terms = [cast(select(x, d, k), out_dtype) for k in range(size)]
    out = terms[0]
    for t in terms[1:]:
        out = mul(out, t)
    return reshape(out, [1 if i == d else s for i, s in enumerate(x.shape)]) if keepdim else out
