"""Small helpers shared by the lowerings."""
from __future__ import annotations

import collections
import functools

import torch

from ..device import api


EXACT_FLOAT32 = 1 << 24  # integers up to this magnitude are exact in float32 (the device's integer arithmetic)


def is_handle(x) -> bool:
    return isinstance(x, api.Handle)


def dim(d: int, ndim: int) -> int:
    """A dimension index made non-negative (PyTorch's wrap rule; 0-d tensors accept 0 and -1)."""
    if 0 <= d < ndim:
        return d
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


@functools.lru_cache(maxsize=None)
def _probe(dtype: torch.dtype, zero_dim: bool) -> torch.Tensor:
    return torch.empty(() if zero_dim else (1,), dtype=dtype)


def _operand(x):
    """What type promotion depends on: a tensor's dtype and whether it is 0-d; a Python scalar's type."""
    return (x.dtype, len(x.shape) == 0) if isinstance(x, api.Handle) else type(x)


@functools.lru_cache(maxsize=None)
def _result_type(a, b) -> torch.dtype:
    # PyTorch's own rule (torch.result_type, ~2 us a call), once per combination
    return torch.result_type(*(_probe(*k) if type(k) is tuple else k() for k in (a, b)))


def promote_scalar(dtype: torch.dtype, scalar) -> torch.dtype:
    """The dtype of (a tensor of `dtype`) op (a Python scalar), by PyTorch's promotion."""
    return _result_type((dtype, False), type(scalar))


def result_dtype(a, b) -> torch.dtype:
    """PyTorch's type promotion of two operands (handles or Python scalars; at least one handle)."""
    return _result_type(_operand(a), _operand(b))


def known_outside(bounds, low: int, high: int):
    """An index value known (from a tensor's value bounds) to occur and to lie outside [low, high), else None.
    Only exact bounds prove that a value occurs: a range (a view or a selection of some of the values, e.g.
    one column of nonzero()'s result) may be wider than the values it holds, and proves nothing."""
    if bounds is None or not bounds[2]:
        return None
    lo, hi, _ = bounds
    return hi if hi >= high else lo if lo < low else None


def known_inside(bounds, low: int, high: int) -> bool:
    """Every value of a tensor is known (from its value bounds, exact or a range) to lie in [low, high)."""
    return bounds is not None and low <= bounds[0] and bounds[1] < high


def check_broadcast(a, b) -> None:
    """PyTorch's error for shapes that do not broadcast (cheap: no work when the shapes are equal)."""
    if a == b:
        return
    for i, (x, y) in enumerate(zip(reversed(a), reversed(b))):
        if x != y and x != 1 and y != 1:
            dim = max(len(a), len(b)) - 1 - i
            raise RuntimeError(f"The size of tensor a ({a[len(a) - 1 - i]}) must match the size of tensor b "
                               f"({b[len(b) - 1 - i]}) at non-singleton dimension {dim}")


def contiguous_shape(shape, numel: int) -> tuple:
    """Resolve a -1 in a view/reshape size."""
    if -1 not in shape:
        return tuple(shape)
    shape = list(shape)
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if not known:
        raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} because the unspecified "
                           "dimension size -1 can be any value and is ambiguous")
    shape[shape.index(-1)] = numel // known
    return tuple(shape)


def batch_chunks(n: int, most: int) -> list:
    """[0, n) as the fewest chunks [b0, b1) of at most `most` (>= 1), of nearly equal sizes (at most two
    sizes: one prepared form or program each): the batches TT-NN's sliding-window ops take in one call."""
    count = -(-n // most)
    size, extra = divmod(n, count)
    bounds = [0]
    for i in range(count):
        bounds.append(bounds[-1] + size + (i < extra))
    return list(zip(bounds[:-1], bounds[1:]))


# ----------------------------------------------------------------------------------------------- constant tables
TABLE_CACHE_BYTES = 128 << 20  # constant tables kept per process (least recently used dropped first)

_tables: collections.OrderedDict = collections.OrderedDict()  # (index, tt_dtype, key) -> (Handle, bytes)


def device_table(key: tuple, make, tt_dtype, index: int) -> api.Handle:
    """A constant table of the lowerings (FFT's DFT matrices, the rotary's half turn): `make()`, a float tensor
    computed on the host, uploaded TILE in `tt_dtype` to device `index` once per `key` and kept in a small
    cache (TABLE_CACHE_BYTES, least recently used out): a steady-state forward uploads none;
    torch.ttnn.empty_cache() (and an out-of-memory retry) drops them."""
    full = (index, tt_dtype, key)
    hit = _tables.get(full)
    if hit is not None and hit[0].tt is not None:
        _tables.move_to_end(full)
        return hit[0]
    w = make().float()
    h = api.upload(w, tt_dtype, api.TILE, index, dtype=torch.float32)
    _tables[full] = (h, api.buffer_bytes(tuple(w.shape), tt_dtype, api.TILE))
    total = sum(b for _, b in _tables.values())
    while total > TABLE_CACHE_BYTES and len(_tables) > 1:
        _, (_, b) = _tables.popitem(last=False)
        total -= b
    return h


@api.on_empty_cache
def clear_tables(index: int | None = None) -> bool:
    """Drop the cached tables of device `index` (None: of every device); their device buffers are freed when
    nothing else holds them. torch.ttnn.empty_cache() and the out-of-memory retry call it. True when any was
    dropped."""
    keys = [key for key in _tables if index is None or key[0] == index]
    for key in keys:
        del _tables[key]
    return bool(keys)
