"""Indexing assignment: index_put (`x[i] = v`, `x[mask] = v`), index_copy, index_add, index_fill, masked_scatter, scatter,
scatter_add, scatter_reduce (sum, mean, amax, amin). The in-place forms (`index_put_`, `scatter_`, ...) run these and write the
result into the tensor (dispatch), through views too (Note [writes through views] in views.py).

Two device routes, both without reading the device:
- rows: integer index tensors (after any leading `:`) fold into one flat row number of x viewed as
  [rows, rest] (indexing.flat_rows); the values, broadcast to [n, rest], go in with ttnn.scatter (or
  ttnn.scatter_add when accumulating) along the rows. Leading `:` dimensions are permuted behind the indexed
  ones first and back after.
- masks: a bool mask selects elements; values that broadcast over the selection are a ttnn.where; values
  given one per selected row (masked_scatter) are gathered by the running count of the mask (ttnn.cumsum in
  int32) and then a ttnn.where. Only there PyTorch's count check needs the number of selected elements, and
  only when the source could be too short is it read from the device.

Index tensors uploaded from the host are range-checked (IndexError, as PyTorch) from their known bounds;
indices computed on the device are clamped into range instead, so a bad index can never address memory
outside the tensor (PyTorch's CUDA backend asserts on the device there).
"""
from __future__ import annotations

import builtins
import math

import torch

from ..core import layout as policy
from ..core.layout import ANY, TILE
from ..core.registry import Unfit, device_mismatch, lowering
from ..device import api
from ._common import EXACT_FLOAT32, dim, is_handle, known_inside, known_outside
from .indexing import device_indices, flat_rows, gather_handle
from .views import expand, permute_handle, reshape, scatter_along, slice_handle

aten = torch.ops.aten


def _constant(value, like: api.Handle) -> api.Handle:
    """A Python scalar (or a 0-d device tensor) as a 0-d device tensor of like's dtype."""
    from .factory import cast, full_handle
    if is_handle(value):
        return cast(value, like.dtype)
    return full_handle((), value, like.dtype, like.index)


def _broadcast_error(values: api.Handle, shape) -> RuntimeError:
    return RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
                        f"indexing result of shape {list(shape)}")


def _expand_values(values: api.Handle, shape) -> api.Handle:
    try:
        torch.broadcast_shapes(tuple(values.shape), tuple(shape))
    except RuntimeError:
        raise _broadcast_error(values, shape) from None
    if len(values.shape) > len(shape):
        if any(s != 1 for s in values.shape[:len(values.shape) - len(shape)]):
            raise _broadcast_error(values, shape)
        values = reshape(values, values.shape[len(values.shape) - len(shape):])
    return expand(values, shape)


def _in_range(rows: api.Handle, n: int) -> api.Handle:
    """Row numbers clamped into [0, n) unless known to be there (device-computed indices: see the docstring)."""
    if known_inside(rows.bounds, 0, n):
        return rows
    return api.run("clamp", policy.signed(rows), min=0, max=n - 1)


def _put_rows(x: api.Handle, indices: list, values: api.Handle, accumulate: bool) -> api.Handle:
    """x[i_0, ..., i_k-1] = values (or +=) for integer index tensors on x's leading dimensions."""
    k = len(indices)
    rows_of, shape = flat_rows(x, indices)
    rest = list(x.shape[k:])
    n_rows, width, n = math.prod(x.shape[:k]), math.prod(rest), math.prod(shape)
    values = _expand_values(values, shape + rest)
    if n == 0 or x.shape.numel() == 0:
        return x
    table, values = policy.for_write(reshape(x, (n_rows, width)), reshape(values, (n, width)))
    where = expand(reshape(_in_range(rows_of, n_rows), (n, 1)), (n, width))
    out = scatter_along("scatter_add" if accumulate else "scatter", table, 0, where, values)
    return reshape(out, x.shape)


def _put_mask(x: api.Handle, mask: api.Handle, values: api.Handle, accumulate: bool) -> api.Handle:
    """x[mask] = values (or +=) for a bool mask over x's leading dimensions."""
    m = len(mask.shape)
    if tuple(mask.shape) != tuple(x.shape[:m]):
        bad = next((i for i in range(m) if i >= len(x.shape) or mask.shape[i] != x.shape[i]), 0)
        raise IndexError(f"The shape of the mask {list(mask.shape)} at index {bad} does not match the shape of "
                         f"the indexed tensor {list(x.shape)} at index {bad}")
    rest = list(x.shape[m:])
    full_mask = expand(reshape(mask, list(mask.shape) + [1] * len(rest)), x.shape)
    per_row = len(values.shape) > len(rest) and values.shape[len(values.shape) - len(rest) - 1] != 1
    if per_row:  # one value row per selected row: PyTorch's masked_scatter, with its count checked
        source = values
        selected = _count(mask)
        if tuple(source.shape) != tuple([selected] + rest):
            raise _broadcast_error(source, [selected] + rest)
        spread = _spread(x, full_mask, source)
    else:
        spread = _expand_values(values, rest) if rest else _expand_values(values, [])
        spread = expand(spread, x.shape)
    x, spread = policy.for_write(x, spread)
    if full_mask.tt_dtype != x.tt_dtype:  # ttnn's where and add take no mixed dtypes: the 0/1 mask in x's
        full_mask = policy.like(full_mask, x)  # (integer, or float32 with float32 storage)
    if accumulate:
        return api.run("add", x, api.run("where", full_mask, spread, 0.0 if x.dtype.is_floating_point else 0),
                       out_dtype=x.dtype)
    return api.run("where", full_mask, spread, x, out_dtype=x.dtype)


def _count(mask: api.Handle) -> int:
    """How many elements of a bool mask are set: from its known bounds, else read from the device."""
    from .reduction import sum as reduce_sum
    b = mask.bounds
    if b is not None and b[2] and b[0] == b[1]:
        return mask.shape.numel() if b[0] else 0
    return int(api.download(reduce_sum(policy.ensure(mask, TILE))).item())


def _spread(x: api.Handle, full_mask: api.Handle, source: api.Handle) -> api.Handle:
    """The source's elements laid out at the set positions of full_mask (x's shape), in order: the running
    count of the mask (int32 cumsum, exact) picks each position's source element."""
    numel = x.shape.numel()
    if not source.shape.numel():
        # The callers checked the mask selects no more than the source holds: nothing. (An empty source is
        # never relaid out -- ROW_MAJOR -- and ttnn.gather TT_FATALs on an index of another layout.)
        return x
    flat_mask = reshape(policy.ensure(full_mask, TILE), (1, numel))
    running = api.run("cumsum", policy.retag(flat_mask, torch.int32), 1, out_dtype=torch.int32)
    pick = api.run("clamp", api.run("subtract", running, 1), min=0, max=max(source.shape.numel() - 1, 0))
    flat_source = reshape(policy.ensure(source, TILE), (1, source.shape.numel()))
    picked = gather_handle(flat_source, 1, pick)
    return reshape(picked, x.shape)


def _indexed_first(x: api.Handle, indices: list) -> tuple:
    """indices = [None] * p + k index tensors: the permutation that brings the indexed dimensions first
    (None when p == 0), refusing index patterns other than that (Unfit)."""
    p = 0
    while p < len(indices) and indices[p] is None:
        p += 1
    tensors = indices[p:]
    if not tensors or any(i is None for i in tensors) or p + len(tensors) > len(x.shape):
        raise Unfit("index tensors must follow any leading ':' without gaps")
    if p == 0:
        return tensors, None, p
    k = len(tensors)
    order = list(range(p, p + k)) + list(range(p)) + list(range(p + k, len(x.shape)))
    return tensors, order, p


@lowering(aten.index_put.default, aten._unsafe_index_put.default,
          ttnn=["scatter", "scatter_add", "where", "cumsum", "gather"], needs=ANY, mixed_devices=True,
          notes="integer indices after any leading ':' (ttnn.scatter of rows), or one bool mask over leading "
                "dimensions (ttnn.where); other patterns run on the CPU fallback; CPU index tensors are uploaded")
def index_put(x, indices, values, accumulate=False):
    if not is_handle(x):
        raise device_mismatch("cpu", next(i.index for i in indices if is_handle(i)))
    if isinstance(values, torch.Tensor) and values.dim():
        raise device_mismatch(x.index, values.device)
    if isinstance(values, torch.Tensor):  # a 0-d CPU tensor: its value
        values = values.item()
    x = policy.materialize(x)
    indices = device_indices(indices, x.index)
    if not x.shape.numel():  # no element to write (the shapes are checked as PyTorch does, on the meta device)
        aten.index_put.default(torch.empty(x.shape, device="meta"), [None if i is None else torch.empty(
            i.shape, dtype=i.dtype, device="meta") for i in indices], torch.empty(values.shape, device="meta")
            if is_handle(values) else torch.tensor(values, device="meta"))
        return x
    while indices and indices[-1] is None:
        indices.pop()
    if not is_handle(values):
        values = _constant(values, x)
    if not indices:  # x[...] = values
        x, values = policy.for_write(x, _expand_values(values, x.shape))
        return api.run("add", x, values, out_dtype=x.dtype) if accumulate else policy.retag(values, x.dtype)
    masks = [i for i in indices if i is not None and i.dtype in (torch.bool, torch.uint8)]
    if masks:
        if len(indices) != 1:
            raise Unfit("a bool mask beside other indices")
        return _put_mask(x, indices[0], values, accumulate)
    tensors, order, p = _indexed_first(x, indices)
    if not x.shape.numel() or any(not i.shape.numel() for i in tensors):  # no element is written
        return x
    if order is None:
        return _put_rows(x, tensors, values, accumulate)
    # x[:, ..., i] = v: the indexed dimensions first, the values' likewise, and back
    shape = list(torch.broadcast_shapes(*[tuple(i.shape) for i in tensors]))
    r = len(shape)
    result_shape = list(x.shape[:p]) + shape + list(x.shape[p + len(tensors):])
    values = _expand_values(values, result_shape)
    values = permute_handle(values, list(range(p, p + r)) + list(range(p)) + list(range(p + r, len(result_shape))))
    out = _put_rows(permute_handle(x, order), tensors, values, accumulate)
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return permute_handle(out, inverse)


@lowering(aten.index_copy.default, ttnn=["scatter"], needs=ANY)
def index_copy(x, d, index, source):
    d = dim(d, len(x.shape))
    if len(index.shape) > 1:
        raise IndexError("index_copy_(): Index should have dimension 1 or 0 (got {})".format(len(index.shape)))
    indices, source = _along(x, d, index, source, "index_copy_")
    if d and index.shape.numel() and is_handle(x) and x.shape.numel():
        # along an inner dimension (a static KV cache's update at dim 2): one ttnn.scatter along d of the index
        # broadcast over the source, not index_put's permutes of the dimension to the front and back
        at = reshape(indices[d], [index.shape.numel() if i == d else 1 for i in range(len(x.shape))])
        return _scatter("scatter", x, d, expand(at, source.shape), source)
    return index_put(x, indices, source)


def _along(x, d: int, index, source, name: str):
    """index_copy/index_add: the index_put indices of `index` along dim d (non-negative), and source in the
    slice shape they write (PyTorch's error when source has another shape)."""
    expected = list(x.shape)
    if len(x.shape):
        expected[d] = index.shape.numel()
    if list(source.shape) != expected and source.shape.numel() != math.prod(expected):
        raise RuntimeError(f"{name}(): Source/destination tensor must have same slice shapes. Destination "
                           f"slice shape: {expected} and source slice shape: {list(source.shape)}")
    return [None] * d + [reshape(index, (index.shape.numel(),))], reshape(source, expected)


@lowering(aten.index_add.default, ttnn=["multiply", "scatter_add"], needs=ANY,
          notes="index_put with accumulate (ttnn.scatter_add of rows; repeated indices add up); alpha scales "
                "the source")
def index_add(x, d, index, source, *, alpha=1):
    d = dim(d, len(x.shape))
    if len(index.shape) > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector")
    indices, source = _along(x, d, index, source, "index_add_")
    if alpha != 1:
        source = api.run("multiply", policy.ensure(source, TILE), alpha)
    return index_put(x, indices, source, accumulate=True)


@lowering(aten.index_copy_.default, ttnn=["update_cache", "scatter"], needs={"source": TILE, "*": ANY},
          notes="a KV cache's decode step -- one position of a [users, heads, length, dim] cache, known on the "
                "host -- is ttnn.update_cache into the cache's own buffer; otherwise index_copy, written back")
def index_copy_(x, d, index, source):
    row = _cache_row(x, d, index, source)
    if row is None:
        return index_copy(x, d, index, source)
    if source.shape[0] > 1:  # [users, heads, 1, dim] -> update_cache's [1, heads, users, dim]
        source = permute_handle(source, (2, 1, 0, 3))
    return api.update_in_place("update_cache", x, source, row)


_CACHE_DTYPES = (api.BFLOAT16, api.FLOAT32, api.BFLOAT8_B)  # what ttnn.update_cache takes


def _cache_row(x, d, index, source) -> int | None:
    """The cache position index_copy_ writes, when ttnn.update_cache can write it in place: x a base tensor
    [users <= 32, heads, length, dim] in TILE that no other tensor shares (device.api.sole_owner), d = 2, one
    position known on the host (the index's bounds: transformers' StaticLayer computes it as
    arange + cumulative_length, both known), source [users, heads, 1, dim] of x's dtype. Else None."""
    if (len(x.shape) != 4 or dim(d, 4) != 2 or index.shape.numel() != 1 or x.source is not None
            or x.dtype != source.dtype or tuple(source.shape) != (x.shape[0], x.shape[1], 1, x.shape[3])
            or x.shape[0] > 32 or not api.sole_owner(x)):
        return None
    b = index.bounds
    if b is None or b[0] != b[1] or not 0 <= b[0] < x.shape[2]:
        return None
    if x.layout != api.TILE or x.tt_dtype not in _CACHE_DTYPES or source.tt_dtype not in _CACHE_DTYPES:
        return None
    return b[0]


@lowering(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor, ttnn=["scatter"], needs=ANY)
def index_fill(x, d, index, value):
    d = dim(d, len(x.shape))
    return index_put(x, [None] * d + [reshape(index, (index.shape.numel(),))], _constant(value, x))


@lowering(aten.masked_scatter.default, ttnn=["cumsum", "gather", "where"], needs=ANY,
          notes="the running count of the mask (int32 cumsum) picks each set position's source element")
def masked_scatter(x, mask, source):
    shape = torch.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    x = expand(policy.materialize(x), shape)
    full_mask = expand(mask, shape)
    if source.shape.numel() < x.shape.numel() and _count(full_mask) > source.shape.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in mask")
    if x.shape.numel() == 0:
        return x
    x, spread = policy.for_write(x, _spread(x, full_mask, source))
    return api.run("where", full_mask, spread, x, out_dtype=x.dtype)


def _check_scatter_shapes(x, d: int, index, src) -> None:
    """PyTorch's shape rules of scatter (RuntimeError, its words), which ttnn's scatter validates with a
    TT_FATAL ("input_rank == source_rank", "index_shape[probe_dim] <= source_shape[probe_dim]",
    "index_shape[probe_dim] <= input_shape[probe_dim]" for the other dimensions)."""
    n = len(index.shape)  # (a 0-d tensor counts as 1-d of size 1 here, as in PyTorch)
    if is_handle(src) and max(len(src.shape), 1) != max(n, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    too_big = any(index.shape[i] > x.shape[i] for i in range(n) if i != d)
    if is_handle(src):
        if too_big or any(index.shape[i] > (src.shape[i] if src.shape else 1) for i in range(n)):
            raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(x.shape)} apart "
                               f"from dimension {d} and to be no larger size than src {list(src.shape)}")
    elif too_big:
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(x.shape)} apart "
                           f"from dimension {d}")


def _scatter(op: str, x, d, index, src):
    """torch.scatter / scatter_add: src's leading part (index's shape) written (added) into x at index along d."""
    n = len(x.shape)
    d = dim(d, n)
    if len(index.shape) != max(n, 1) and index.shape.numel():
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if index.shape.numel() == 0:
        return x
    if n == 0:
        return policy.for_write(x, src if is_handle(src) else _constant(src, x))[1]
    _check_scatter_shapes(x, d, index, src)
    if (bad := known_outside(index.bounds, 0, x.shape[d])) is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {x.shape[d]}")
    if is_handle(src):
        if not src.shape:  # a 0-d source is PyTorch's 1-d of one element (the index: one element, checked)
            src = reshape(src, [1])
        for i in range(n):
            src = slice_handle(src, i, 0, index.shape[i])
    else:
        src = expand(_constant(src, x), index.shape)
    index = _in_range(index, x.shape[d])
    x, src = policy.for_write(policy.materialize(x), src)
    return scatter_along(op, x, d, index, src)


@lowering(aten.scatter.src, aten.scatter.value, ttnn=["scatter"], needs=ANY)
def scatter(x, d, index, src):
    return _scatter("scatter", x, d, index, src)


@lowering(aten.scatter_add.default, ttnn=["scatter_add"], needs=ANY)
def scatter_add(x, d, index, src):
    return _scatter("scatter_add", x, d, index, src)


SCATTER_EXTREME_MAX = 1 << 24  # elements of amax/amin's one-hot [..., index, self] comparison


def _as_float32(h: api.Handle) -> api.Handle:
    out = policy.to_float32(h)
    return api.Handle(out.tt, out.shadow, torch.float32, out.shape, out.index)


def _scatter_extreme(x, d, index, src, reduce: str, include_self: bool):
    """scatter_reduce amax/amin/prod (ttnn.scatter's reduce argument is not supported in ttnn 0.81.1): with d
    moved last, each index entry against every position of d ([..., k, 1] == [1, size]), src where they match and
    the reduction's identity elsewhere, reduced over k (prod: k multiplies); positions no index reaches keep x."""
    from .elementwise import where
    from .factory import cast
    from .reduction import _reduce
    from .views import unsqueeze
    n = len(x.shape)
    d = dim(d, builtins.max(n, 1))
    if not is_handle(src) or src.dtype != x.dtype or n == 0 or x.dtype == torch.bool:
        raise Unfit(f"scatter_reduce {reduce} of {x.dtype} (floating or integer tensors of one dtype only)")
    if not x.dtype.is_floating_point:  # integers known to be exact in float32 are reduced as float32
        if not all(known_inside(t.bounds, -EXACT_FLOAT32, EXACT_FLOAT32 + 1) for t in (x, src)):
            raise Unfit(f"scatter_reduce {reduce} of {x.dtype} values of unknown range (float32: exact below 2**24)")
        out = _scatter_extreme(_as_float32(x), d, index, _as_float32(src), reduce, include_self)
        return out if out is x else cast(out, x.dtype)
    if len(index.shape) != n or len(src.shape) != n:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if not index.shape.numel():
        return x
    if any(index.shape[i] != x.shape[i] for i in range(n) if i != d):
        raise Unfit("an index narrower than self outside the scattered dimension")
    size, k = x.shape[d], index.shape[d]
    if index.shape.numel() * size > SCATTER_EXTREME_MAX:
        raise Unfit(f"{index.shape.numel()} indices against {size} positions")
    if (bad := known_outside(index.bounds, 0, size)) is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    for i in range(n):
        src = slice_handle(src, i, 0, index.shape[i])
    order = [i for i in range(n) if i != d] + [d]
    back = [order.index(i) for i in range(n)]
    where_to = unsqueeze(policy.to_float32(permute_handle(index, order)), n)           # [..., k, 1]
    values = unsqueeze(permute_handle(src, order), n)                                  # [..., k, 1]
    span = reshape(api.create("arange", (0, size, 1), api.FLOAT32, api.TILE, x.index, torch.float32), (1, size))
    hot = api.run("eq", where_to, span, dtype=api.FLOAT32, out_dtype=torch.float32)  # [..., k, size]
    identity = 1.0 if reduce == "prod" else policy.finite_constant(-3.0e38 if reduce == "amax" else 3.0e38)
    picked = where(policy.like(hot, values), values, identity)
    if reduce == "prod":  # (a chain of k multiplies: k at most reduction.PROD_MAX_TERMS, else refused)
        from .reduction import prod
        reduced = prod(policy.ensure(picked, TILE), n - 1)
    else:
        reduced = _reduce("max" if reduce == "amax" else "min", policy.ensure(picked, TILE), n - 1, False)
    reached = _reduce("max", hot, n - 1, False)                                        # [..., size]: 1.0 if any
    base = permute_handle(policy.ensure(policy.materialize(x), TILE), order)
    if include_self:
        combine = {"amax": "maximum", "amin": "minimum", "prod": "multiply"}[reduce]
        reduced = api.run(combine, policy.like(reduced, base), base)
    return permute_handle(where(policy.like(reached, base), reduced, base), back)


@lowering(aten.scatter_reduce.two, ttnn=["scatter", "scatter_add", "divide", "eq", "where", "max", "min", "multiply"], needs=ANY,
          notes="reduce='sum' (ttnn.scatter_add; include_self=False: the written positions zeroed first by "
                "ttnn.scatter) and 'mean' of floating tensors (the sum over the count, a scatter_add of ones); "
                "'amax'/'amin' of floating tensors (integers of known range below 2**24: in float32) as a one-hot comparison of the index with every position, "
                "reduced (up to 2**24 comparisons; an index narrower than self outside dim is refused); 'prod' of "
                "floating tensors the same way, the matches multiplied (up to 16 index entries along dim; integer "
                "products run on the CPU fallback)")
def scatter_reduce(x, d, index, src, reduce, *, include_self=True):
    if reduce in ("amax", "amin") or reduce == "prod" and x.dtype.is_floating_point:
        return _scatter_extreme(x, d, index, src, reduce, include_self)
    if reduce not in ("sum", "mean") or reduce == "mean" and not x.dtype.is_floating_point:
        raise Unfit(f"scatter_reduce reduce={reduce!r} of {x.dtype} (ttnn's scatter adds or writes)")
    from .factory import full_handle
    base = x if include_self else _scatter("scatter", x, d, index, 0)
    total = _scatter("scatter_add", base, d, index, src)
    if reduce == "sum":
        return total
    ones = full_handle(x.shape, 1.0, x.dtype, x.index)
    count = _scatter("scatter_add", ones if include_self else _scatter("scatter", ones, d, index, 0), d, index, 1.0)
    if not include_self:  # positions nothing is written to keep x (count 0 there: divide by 1)
        count = api.run("where", api.run("eq", count, 0.0), 1.0, count)
    return api.run("divide", policy.ensure(total, TILE), policy.ensure(count, TILE), out_dtype=x.dtype)
