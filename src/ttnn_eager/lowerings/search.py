"""Search and selection: argmax/argmin, max/min (whole tensor and along a dimension), cummax/cummin, topk, sort,
isin, and multinomial sampling -- what greedy decoding, top-k/top-p sampling and beam search do every token.

    argmax      ttnn.argmax (bfloat16/float32 input; uint32 ROW_MAJOR result, tilized as the policy keeps
                every tensor TILE). Ties: the first index, as PyTorch.
    topk, sort  ttnn.topk / ttnn.sort: values in the input's dtype, indices uint16 or uint32 (ttnn picks by
                the size of the dimension), widened to uint32 -- torch dtype int64, as PyTorch.
    multinomial PyTorch's own algorithm for one sample or sampling without replacement (the Gumbel-max
                form): q ~ Exp(1) drawn on the host by PyTorch's generator (the same stream the CPU draws,
                so a seeded run samples what the CPU samples), uploaded; argmax(p / q) (or topk) on the
                device. Sampling with replacement of several samples runs on the CPU fallback.
    isin        eq of [n, 1] elements against [1, m] test elements, then max over the last dimension.

Integer inputs of argmax/topk are Unfit (ttnn takes floating inputs only) and run on the CPU fallback; sort takes
integers of known range as float32 keys.
"""
from __future__ import annotations

import builtins  # max and min are lowerings' names in this module

import math

import torch

from ..core import layout as policy
from ..core.layout import ANY, PROMOTE, TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import EXACT_FLOAT32, dim, known_outside
from .reduction import _reduce, value_range
from .views import reshape, same_values

aten = torch.ops.aten


def _floating(x, what: str):
    if not x.dtype.is_floating_point:
        raise Unfit(f"{what} of a {x.dtype} tensor (ttnn takes bfloat16/float32)")


def _indices(h: api.Handle, size: int) -> api.Handle:
    """An index result of ttnn (uint16/uint32, any layout) as the policy stores int64 indices: uint32 TILE."""
    out = policy.as_integer(h, api.UINT32)
    out.dtype = torch.int64
    out.bounds = (0, builtins.max(size - 1, 0), False)
    return out


def _keys(x, what: str) -> api.Handle:
    """x as keys ttnn's argmax takes: floating as it is, bools as their bfloat16 0/1, integers of known range
    (below 2**24: token ids, positions, masks) as exact float32 values; other integers are Unfit."""
    if x.dtype.is_floating_point or x.dtype == torch.bool:
        return x
    _exact_as_float32(x, what)
    return policy.to_float32(x)


def _exact_as_float32(x, what: str) -> None:
    """Integers compared as float32 keys must lie below 2**24 in magnitude: known from their value bounds, or
    read from the device (integers a computation made: MoE routers' expert ids after a scatter)."""
    lo, hi = value_range(x)
    if not (-EXACT_FLOAT32 <= lo and hi <= EXACT_FLOAT32):
        raise Unfit(f"{what} of {x.dtype} values in [{lo}, {hi}] (compared as float32 keys: exact within 2**24)")


def argmax_handle(x, d=None, keepdim=False) -> api.Handle:
    x = _keys(x, "argmax")
    n = len(x.shape)
    if d is None:
        shape, size = ([1] * n if keepdim else []), x.shape.numel()
    else:
        d = dim(d, n)
        size = x.shape[d] if n else 1
        shape = [1 if i == d else s for i, s in enumerate(x.shape)] if keepdim else \
            [s for i, s in enumerate(x.shape) if i != d]
    if size == 0:
        raise IndexError("argmax(): Expected reduction dim to be specified for input.numel() == 0.")
    if n == 0 or size == 1:  # one candidate: index 0
        from .factory import full_handle
        return full_handle(shape, 0, torch.int64, x.index)
    if d is None:  # over every element: a flat row (TILE inputs need a dim)
        out = api.run("argmax", reshape(x, (1, size)), dim=-1, out_dtype=torch.int64)
    else:
        out = api.run("argmax", x, dim=d, keepdim=keepdim, out_dtype=torch.int64)
    return reshape(_indices(out, size), shape)


@lowering(aten.argmax.default, ttnn=["argmax", "typecast"], needs=TILE,
          notes="ties give the first index; integers of known range (below 2**24, e.g. token ids) as float32 keys")
def argmax(x, d=None, keepdim=False):
    return argmax_handle(x, d, keepdim)


@lowering(aten.argmin.default, ttnn=["neg", "argmax"], needs=TILE, notes="argmax of -x")
def argmin(x, d=None, keepdim=False):
    _floating(x, "argmin")
    return argmax_handle(api.run("neg", x), d, keepdim)


@lowering(aten.max.default, ttnn=["max"], needs=TILE, notes="the whole tensor (e.g. a stopping check)")
def max(x):
    if not x.shape.numel():
        raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    return _reduce("max", x, None, False)


@lowering(aten.min.default, ttnn=["min"], needs=TILE, notes="the whole tensor")
def min(x):
    if not x.shape.numel():
        raise RuntimeError("min(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    return _reduce("min", x, None, False)


def _float32_keys(x, what: str) -> api.Handle:
    """x's values as float32 device values of torch dtype float32 (a new handle; the caller converts results
    back to x's dtype): floats and bools widened, integers as _keys admits them (below 2**24: exact). Not
    policy.retag, which would store float32 as bfloat16 (1001 as 1000)."""
    k = policy.to_float32(_keys(x, what))
    return api.Handle(k.tt, k.shadow, torch.float32, k.shape, k.index)


def _dim_keys(x, what: str) -> api.Handle:
    """max/min along a dimension compare floats as they are, integers as _float32_keys; bool Unfit."""
    if x.dtype == torch.bool:
        raise Unfit(f"{what} of a bool tensor")
    return x if x.dtype.is_floating_point else _float32_keys(x, what)


@lowering(aten.max.dim, ttnn=["max", "argmax", "typecast"], needs=TILE,
          notes="values and indices; integers below 2**24 as float32 keys")
def max_dim(x, d, keepdim=False):
    keys = _dim_keys(x, "max(dim)")
    return policy.retag(_reduce("max", keys, d, keepdim), x.dtype), argmax_handle(keys, d, keepdim)


@lowering(aten.min.dim, ttnn=["min", "neg", "argmax", "typecast"], needs=TILE,
          notes="values and indices; integers below 2**24 as float32 keys")
def min_dim(x, d, keepdim=False):
    keys = _dim_keys(x, "min(dim)")
    return policy.retag(_reduce("min", keys, d, keepdim), x.dtype), argmax_handle(api.run("neg", keys), d, keepdim)


# ----------------------------------------------------------------------------------------------- cummax, cummin
# A log-step (Hillis-Steele) scan along the dimension: after the step of shift s, each position holds the
# extreme of the 2s positions ending at it, with its index; a step combines each position's window with the
# window s positions before it (a copy shifted along the dimension, its first s positions repeated: the same
# window again, a no-op). Values and indices are carried in float32 (exact: indices below 2**24, bfloat16
# values widened, integers of known range below 2**24 as float32 keys), so ttnn.where takes one dtype.
# PyTorch's rule (cummax_cummin_helper: take element i if it is NaN, or if the running value is not NaN and
# element i >= it): the index of the LAST maximum (ties take the later index), and a NaN sticks, its index
# the last NaN's. Combining an earlier window p with a later one c: take p iff c is not NaN and (p is NaN or
# p > c) -- strict, so ties keep c's later index.
def _shifted(h: api.Handle, d: int, s: int) -> api.Handle:
    """h shifted by s along d, its first s positions repeated in front: [h[:s], h[:-s]]."""
    from .views import cat, slice_handle
    size = h.shape[d]
    return cat([slice_handle(h, d, 0, s), slice_handle(h, d, 0, size - s)], d)


def _cumulative_extreme(x, d, compare: str, what: str):
    from .factory import full_handle
    from .views import expand, share
    n = len(x.shape)
    d = dim(d, builtins.max(n, 1))
    size = x.shape[d] if n else 1
    if size <= 1 or not x.shape.numel():  # one candidate per position (a 0-d tensor too): x itself, index 0
        return share(x), full_handle(x.shape, 0, torch.int64, x.index)
    nan = x.dtype.is_floating_point  # (integer and bool keys have none)
    values = _float32_keys(x, what)
    span = api.create("arange", (0, size, 1), api.FLOAT32, api.TILE, x.index, torch.float32)
    indices = expand(reshape(span, [size if i == d else 1 for i in range(n)]), x.shape)
    s = 1
    while s < size:
        before, before_at = _shifted(values, d, s), _shifted(indices, d, s)
        take = api.run(compare, before, values)
        if nan:
            later_nan = api.run("isnan", values)
            take = api.run("logical_and", api.run("logical_not", later_nan),
                           api.run("logical_or", api.run("isnan", before), take))
        values = api.run("where", take, before, values)
        indices = api.run("where", take, before_at, indices)
        s *= 2
    out = policy.stored(policy.retag(values, x.dtype))
    idx = policy.retag(indices, torch.int64)
    idx.bounds = (0, size - 1, False)
    return same_values(out, x, every_value=False), idx


@lowering(aten.cummax.default, ttnn=["slice", "concat", "gt", "isnan", "logical_and", "logical_or", "logical_not",
                                     "where", "arange", "typecast"], needs=TILE,
          notes="a log-step scan of (value, index) pairs in float32 (ceil(log2(n)) steps of shifted copies); "
                "ties give the last index and NaN propagates with its index, as PyTorch; integers of known "
                "range (below 2**24: positions, token ids) as float32 keys, others on the CPU fallback")
def cummax(x, d):
    return _cumulative_extreme(x, d, "gt", "cummax")


@lowering(aten.cummin.default, ttnn=["slice", "concat", "lt", "isnan", "logical_and", "logical_or", "logical_not",
                                     "where", "arange", "typecast"], needs=TILE,
          notes="cummax's scan with lt")
def cummin(x, d):
    return _cumulative_extreme(x, d, "lt", "cummin")


@lowering(aten.topk.default, ttnn=["topk"], needs=TILE, notes="floating inputs; indices widened to uint32")
def topk(x, k, d=-1, largest=True, sorted=True):
    _floating(x, "topk")
    n = len(x.shape)
    d = dim(d, n)
    size = x.shape[d] if n else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"selected index k out of range")
    if n == 0 or k == 0:
        raise Unfit("0-d input or k == 0")
    values, idx = api.run("topk", x, k, dim=d, largest=largest, sorted=sorted)
    return values, _indices(idx, size)


def _sort(x, d, descending, stable):
    n = len(x.shape)
    if n == 0 or x.shape.numel() == 0:
        raise Unfit("0-d or empty input")
    d = dim(d, n)
    if x.dtype.is_floating_point:
        kwargs = {"stable": True} if stable else {}
        values, idx = api.run("sort", x, dim=d, descending=descending, **kwargs)
        return values, _indices(idx, x.shape[d])
    # Integers and bool (mixture-of-experts routing sorts expert ids): ttnn.sort takes floating keys, so
    # the values are sorted as float32 -- exact for integers of known range below 2**24 -- and converted
    # back. Ties are the rule among small integers: kept in index order (stable), which is one of the
    # orders PyTorch's unstable sort may give.
    if x.dtype != torch.bool:
        _exact_as_float32(x, "sort")
    keys = policy.to_float32(x) if x.dtype != torch.bool else x  # (bool: bfloat16 0/1 already)
    values, idx = api.run("sort", keys, dim=d, descending=descending, stable=True,
                          out_dtype=torch.float32 if x.dtype != torch.bool else torch.bool)
    return same_values(policy.retag(values, x.dtype), x), _indices(idx, x.shape[d])


@lowering(aten.sort.default, ttnn=["sort", "typecast"], needs=TILE,
          notes="indices widened to uint32; integers within 2**24 (from their value bounds, else one read of "
                "their extremes) sort as float32 keys, stably; others run on the CPU fallback")
def sort(x, d=-1, descending=False):
    return _sort(x, d, descending, False)


@lowering(aten.sort.stable, ttnn=["sort", "typecast"], needs=TILE,
          notes="stable=True keeps tied order; integers as in sort.default")
def sort_stable(x, *, stable=None, dim=-1, descending=False):
    return _sort(x, dim, descending, bool(stable))


@lowering(aten.isin.Tensor_Tensor, ttnn=["eq", "max"], needs=PROMOTE,
          notes="[n, 1] == [1, m], then max over m (small test sets: token ids)")
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    from .factory import full_handle
    if not elements.shape.numel() or not test_elements.shape.numel():
        return full_handle(elements.shape, bool(invert), torch.bool, elements.index)
    column = reshape(elements, (elements.shape.numel(), 1))
    row = reshape(test_elements, (1, test_elements.shape.numel()))
    hits = api.run("eq", column, row, dtype=api.BFLOAT16, out_dtype=torch.bool)
    found = api.run("max", hits, dim=-1, keepdim=True, out_dtype=torch.bool)
    if invert:
        found = api.run("logical_not", found)
    return reshape(found, elements.shape)


@lowering(aten.multinomial.default, ttnn=["from_torch", "divide", "argmax", "topk"], needs=TILE_FLOAT,
          notes="PyTorch's Gumbel-max form: Exp(1) noise drawn on the host by PyTorch's generator (so a "
                "seeded run samples what the CPU does), argmax/topk of p / noise on the device; several "
                "samples with replacement run on the CPU fallback")
def multinomial(probs, num_samples, replacement=False, *, generator=None):
    n = len(probs.shape)
    if n not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    categories = probs.shape[-1]
    if replacement and num_samples > 1:
        raise Unfit("several samples with replacement")
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if not probs.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {probs.dtype}")
    # PyTorch's CPU kernel draws the noise in the probabilities' dtype, shaped like them
    noise = torch.empty(tuple(probs.shape), dtype=probs.dtype).exponential_(1, generator=generator)
    ratio = api.run("divide", probs, policy.to_device(noise, probs.index))
    if num_samples == 1:
        return argmax_handle(ratio, -1, True)
    return topk(ratio, num_samples, -1)[1]


@lowering(aten.index_select.default, ttnn=["permute", "embedding"], needs={"self": ANY, "index": ANY},
          notes="rows of the selected dimension gathered by an embedding lookup (beam search's cache reorder); "
                "integer tensors by one gather of their elements, exact (vision towers' patch-grid positions)")
def index_select(x, d, index):
    from .indexing import index as index_rows
    from .views import permute_handle
    n = len(x.shape)
    d = dim(d, builtins.max(n, 1))
    if len(index.shape) > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if n == 0:
        raise Unfit("0-d tensor")
    if known_outside(index.bounds, -x.shape[d], x.shape[d]) is not None:
        raise IndexError(f"index out of range in self")
    order = [d] + [i for i in range(n) if i != d]
    out = index_rows(permute_handle(x, order), [reshape(index, (index.shape.numel(),))])
    back = [order.index(i) for i in range(n)]
    return permute_handle(out, back)


BUCKETIZE_MAX = 1 << 24  # elements of the [values, boundaries] comparison


@lowering(aten.bucketize.Tensor, ttnn=["ge", "gt", "sum", "typecast"], needs=TILE,
          notes="the count of boundaries below each value (<= with right=True): [n, 1] against [1, m] compared "
                "in the values' device dtype, summed in float32 (exact); values of another dtype than the "
                "boundaries', or more than 2**24 comparisons, run on the CPU fallback")
def bucketize(x, boundaries, *, out_int32=False, right=False):
    if len(boundaries.shape) != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({len(boundaries.shape)})")
    if x.dtype != boundaries.dtype:
        raise Unfit(f"{x.dtype} values against {boundaries.dtype} boundaries")
    if x.dtype == torch.bool:
        raise Unfit("bool values (PyTorch's own error)")
    dtype = torch.int32 if out_int32 else torch.int64
    m, n = boundaries.shape[0], x.shape.numel()
    if n * m > BUCKETIZE_MAX:
        raise Unfit(f"{n} values against {m} boundaries")
    if not n or not m:
        from .factory import full_handle
        return full_handle(x.shape, 0, dtype, x.index)
    values = reshape(x, (n, 1))
    if values.tt_dtype != boundaries.tt_dtype:  # (uint32 and int32 storage of one integer dtype)
        values, boundaries = policy.signed(values), policy.signed(boundaries)
    below = api.run("ge" if right else "gt", values, reshape(boundaries, (1, m)), dtype=api.FLOAT32,
                    out_dtype=torch.float32)                                       # boundary <(=) value: 1.0
    counts = _reduce("sum", below, 1, False, torch.float32)
    out = reshape(policy.retag(counts, dtype), x.shape)
    out.bounds = (0, m, False)
    return out
