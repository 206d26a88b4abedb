"""Reductions: all/any (mask checks), sum, mean, amax, cumsum."""
from __future__ import annotations

import math

import torch

from ..core import capture
from ..core import layout as policy
from ..core.layout import TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import dim
from .views import reshape, share

aten = torch.ops.aten


def _dims(x, d):
    """The reduced dimensions, non-negative; None for all of them (dim None or an empty list, as PyTorch)."""
    if d is None or not isinstance(d, int) and len(d) == 0:
        return None
    ds = [d] if isinstance(d, int) else list(d)
    return [dim(i, len(x.shape)) for i in ds]


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


@lowering(aten.any.default, aten.any.dim, aten.any.dims, ttnn=["ne", "max"], needs=TILE)
def any(x, d=None, keepdim=False):
    return _all_or_any(x, d, keepdim, want_all=False)


@lowering(aten.sum.default, aten.sum.dim_IntList, ttnn=["sum"], needs=TILE)
def sum(x, d=None, keepdim=False, *, dtype=None):
    out_dtype = dtype or (torch.int64 if x.dtype == torch.bool or not x.dtype.is_floating_point else x.dtype)
    return _reduce("sum", x, d, keepdim, out_dtype)


@lowering(aten.mean.default, aten.mean.dim, ttnn=["mean"], needs=TILE_FLOAT)
def mean(x, d=None, keepdim=False, *, dtype=None):
    return _reduce("mean", x, d, keepdim, dtype or x.dtype)


@lowering(aten.amax.default, ttnn=["max"], needs=TILE)
def amax(x, d=(), keepdim=False):
    return _reduce("max", x, d, keepdim)


@lowering(aten.amin.default, ttnn=["min"], needs=TILE)
def amin(x, d=(), keepdim=False):
    return _reduce("min", x, d, keepdim)


@lowering(aten.cumsum.default, ttnn=["cumsum"], needs=TILE)
def cumsum(x, d, *, dtype=None):
    return api.run("cumsum", x, dim(d, len(x.shape)), out_dtype=dtype or x.dtype)


@lowering(aten.linalg_vector_norm.default, ttnn=["abs", "multiply", "sum", "sqrt", "max"], needs=TILE_FLOAT,
          notes="ord 2, 1 and inf; other orders run on the CPU fallback")
def vector_norm(x, ord=2, d=None, keepdim=False, *, dtype=None):
    if ord == 2:
        squares = api.run("multiply", x, x)
        return api.run("sqrt", _reduce("sum", squares, d, keepdim))
    if ord == 1:
        return _reduce("sum", api.run("abs", x), d, keepdim)
    if ord == math.inf:
        return _reduce("max", api.run("abs", x), d, keepdim)
    raise Unfit(f"ord={ord}")
