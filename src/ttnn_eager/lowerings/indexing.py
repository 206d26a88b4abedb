"""Indexing: gather, and advanced indexing `x[i0, i1, ...]` (index.Tensor) as an embedding lookup.

`x[i0, ..., ik-1]` with k index tensors on the leading dimensions is a row gather: the indices, broadcast to
one shape, fold into one flat row number (sum of i_j * stride_j, negative indices wrapped as in PyTorch)
and ttnn.embedding reads those rows of x viewed as [rows, rest]. Other patterns (None between indices,
bool masks) are Unfit and run on the CPU fallback. The table stays TILE: ttnn.embedding accepts it (docs/layouts.md).
"""
from __future__ import annotations

import math

import torch

from ..core import layout as policy
from ..core.layout import ANY, INDEX, TILE, TILE_FLOAT
from ..core.registry import Unfit, device_mismatch, lowering
from ..device import api
from ._common import dim, known_outside
from .views import expand, reshape

aten = torch.ops.aten


def gather_handle(x: api.Handle, d: int, index: api.Handle) -> api.Handle:
    """ttnn.gather(x, d, index) with the two in one layout (TILE: ttnn.gather TT_FATALs on an input and an index
    of two layouts, e.g. an index made ROW_MAJOR by an op or an upload of no elements) and the index uint32."""
    if not x.shape.numel() or not index.shape.numel():
        raise Unfit("ttnn.gather of no elements")
    x, index = policy.ensure(x, TILE), policy.relayout(policy.ensure(index, INDEX), api.TILE)
    return api.run("gather", x, d, index=index, out_dtype=x.dtype)


@lowering(aten.gather.default, ttnn=["gather"], needs={"self": TILE, "index": INDEX},
          notes="0-d and 1-D tensors gathered as one row; index and input in one layout (TILE)")
def gather(x, d, index, *, sparse_grad=False):
    d = dim(d, len(x.shape))
    if len(x.shape) <= 1 and len(index.shape) <= 1:  # ttnn.gather needs a rank it can bring to 4-D: one row
        row = gather_handle(reshape(x, (1, x.shape.numel())), 1, reshape(index, (1, index.shape.numel())))
        return reshape(row, index.shape)
    return gather_handle(x, d, index)


def _wrapped(i: api.Handle, size: int) -> api.Handle:
    """PyTorch's negative-index rule, on the device: i < 0 -> i + size (uint32 indices are never negative)."""
    if i.tt_dtype == api.UINT32:
        return i
    negative = api.run("lt", i, 0)
    return api.run("where", negative, api.run("add", i, size), i)


def flat_rows(x: api.Handle, indices: list) -> tuple:
    """k integer index tensors on x's leading dimensions as one flat row number of x viewed as
    [rows, rest] (sum of i_j * stride_j, negative indices wrapped), broadcast to the indices' common shape:
    (rows handle of that shape, the shape). Indices known (from the host) to be out of range raise
    PyTorch's IndexError."""
    k = len(indices)
    shape = list(torch.broadcast_shapes(*[tuple(i.shape) for i in indices]))
    for j, i in enumerate(indices):
        if (bad := known_outside(i.bounds, -x.shape[j], x.shape[j])) is not None:
            raise IndexError(f"index {bad} is out of bounds for dimension {j} with size {x.shape[j]}")
    need = TILE if all(i.tt_dtype == api.UINT32 for i in indices) else policy.SIGNED  # one integer dtype
    flat = None
    for j, i in enumerate(indices):
        stride = math.prod(x.shape[j + 1:k])
        i = _wrapped(policy.ensure(i, need), x.shape[j])
        term = api.run("multiply", i, stride) if stride != 1 else i
        flat = term if flat is None else api.run("add", flat, term)
    return expand(flat, shape), shape


def device_indices(indices, index: int) -> list:
    """Index tensors as device handles: CPU index tensors are uploaded (PyTorch lets a CPU index tensor index
    a tensor of any device); None (a `:`) stays None."""
    return [policy.to_device(i, index) if isinstance(i, torch.Tensor) else i for i in indices]


@lowering(aten.index.Tensor, ttnn=["multiply", "add", "embedding", "permute", "arange", "gather"], needs=ANY,
          mixed_devices=True,
          notes="adjacent integer index tensors after any leading ':' (x[..., [-2], :]: the indexed dimensions "
                "permuted to the front and back); floating/bool tables gather rows by ttnn.embedding (bfloat16 "
                "rows), integer tables elements by ttnn.gather (exact); bool masks: their set positions, read "
                "to the host (the result's shape depends on them); CPU index tensors are uploaded")
def index(x, indices):
    from .views import permute_handle
    if not isinstance(x, api.Handle):
        raise device_mismatch("cpu", next(i.index for i in indices if isinstance(i, api.Handle)))
    indices = _mask_positions(list(device_indices(indices, x.index)), x)
    while indices and indices[-1] is None:  # trailing ':' select nothing
        indices.pop()
    lead = 0
    while lead < len(indices) and indices[lead] is None:
        lead += 1
    indices = indices[lead:]
    k = len(indices)
    if k == 0 or lead + k > len(x.shape) or any(i is None or i.dtype == torch.bool for i in indices):
        raise Unfit("only adjacent integer index tensors after leading ':'")
    if not x.shape.numel() or any(not i.shape.numel() for i in indices):  # no elements: nothing for ttnn
        meta = aten.index.Tensor(torch.empty(x.shape, device="meta"),
                                 [None] * lead + [torch.empty(i.shape, dtype=i.dtype, device="meta") for i in indices])
        return policy.to_device(torch.empty(meta.shape, dtype=x.dtype), x.index)
    n = len(x.shape)
    if lead:  # the indexed dimensions first, then the leading ones and the rest
        order = list(range(lead, lead + k)) + list(range(lead)) + list(range(lead + k, n))
        out = _index_leading(permute_handle(x, order), indices)
        s = len(out.shape) - (n - k)  # the broadcast index shape's rank
        back = list(range(s, s + lead)) + list(range(s)) + list(range(s + lead, len(out.shape)))
        return permute_handle(out, back)
    return _index_leading(x, indices)


def _mask_positions(indices: list, x) -> list:
    """Bool masks among the indices as PyTorch reads them: a k-dimensional mask is the k integer index tensors of
    its set positions (mask.nonzero().unbind(1)). How many are set decides the result's shape, so the mask is
    read to the host (one device-to-host read, as PyTorch's CUDA kernel syncs; a graph capture refuses it)."""
    out, at = [], 0
    for i in indices:
        if i is not None and i.dtype in (torch.bool, torch.uint8):
            k = len(i.shape)
            if tuple(i.shape) != tuple(x.shape[at:at + k]):
                bad = next((j for j in range(k) if at + j >= len(x.shape) or i.shape[j] != x.shape[at + j]), 0)
                raise IndexError(f"The shape of the mask {list(i.shape)} at index {bad} does not match the shape "
                                 f"of the indexed tensor {list(x.shape)} at index {at + bad}")
            positions = torch.nonzero(api.download(i))
            out += [policy.to_device(positions[:, j].contiguous(), x.index) for j in range(k)]
            at += k
        else:
            out.append(i)
            at += 1
    return out


def _index_leading(x, indices):
    """x[i0, ..., ik-1] with the index tensors on x's leading dimensions."""
    k = len(indices)
    flat, shape = flat_rows(x, indices)
    rest = list(x.shape[k:])
    m, width = math.prod(shape), math.prod(rest)
    flat = reshape(flat, (1, m))
    if not x.dtype.is_floating_point and x.dtype != torch.bool:
        return reshape(_gather_elements(x, flat, m, width), shape + rest)
    split = next((c for c in range(1, width + 1) if width % c == 0 and width // c <= EMBEDDING_WIDTH), width)
    if split > 1:  # wide rows: each row as `split` rows of width / split, looked up one after the other
        flat, m, width = _spread(flat, m, split), m * split, width // split
    table = reshape(policy.ensure(x, TILE_FLOAT), (math.prod(x.shape[:k]) * split, width))
    from .embedding import lookup
    rows = lookup(table, policy.ensure(flat, INDEX), x.dtype, tile_table=True)
    return reshape(rows, shape + rest)


# Elements in a table row that ttnn.embedding gathers: its row buffers are in L1 (a [2, 401408] bfloat16 table,
# LightGlue's flip of [2, 2, 784, 256] descriptors, asked for 1.7 MB of L1's 1.5 MB); wider rows are split.
EMBEDDING_WIDTH = 32768


def _spread(flat, m: int, width: int) -> api.Handle:
    """Row numbers `flat` ([1, m]) of a [rows, width] tensor as the numbers of its elements (row * width +
    column), [1, m * width]: the same rows of its view as [rows * width, 1]."""
    column = api.create("arange", (0, width, 1), flat.tt_dtype, api.TILE, flat.index, flat.dtype)
    flat = api.run("add", api.run("multiply", reshape(flat, (m, 1)), width), reshape(column, (1, width)))
    return reshape(flat, (1, m * width))


def _gather_elements(x, flat, m: int, width: int) -> api.Handle:
    """Rows `flat` ([1, m] row numbers) of an integer x viewed as [rows, width], as one ttnn.gather of the
    elements (row * width + column) from x flattened to one row: exact for any int32 values, where
    ttnn.embedding takes bfloat16 tables only. [1, m * width] elements."""
    if width > 1:
        flat = _spread(flat, m, width)
    return gather_handle(reshape(policy.ensure(x, TILE), (1, x.shape.numel())), 1, flat)


@lowering(aten.flip.default, ttnn=["arange", "multiply", "add", "embedding", "gather", "permute"], needs=ANY,
          notes="each flipped dimension an index.Tensor of reversed positions made on the device")
def flip(x, dims):
    n = len(x.shape)
    ds = [dim(d, n) for d in dims]
    if len(set(ds)) != len(ds):
        raise RuntimeError("dims has duplicates, original flip dims size=" f"{len(ds)}, but unique flip dims size={len(set(ds))}")
    from .views import share
    out = share(x)
    for d in ds if n else ():  # (a 0-d tensor is its own flip)
        size = x.shape[d]
        if size <= 1:
            continue
        positions = api.create("arange", (0, size, 1), api.INT32, api.TILE, x.index, torch.int64)
        reversed_ = api.run("add", api.run("multiply", positions, -1), size - 1)
        reversed_.bounds = (0, size - 1, True)
        out = index(out, [None] * d + [reversed_])
    return out


def _host_result(x: api.Handle, fn):
    """fn of x's value read back to the host, uploaded (each tensor of a tuple): for ops whose result's shape
    depends on the values (one device-to-host read, as PyTorch's CUDA kernels sync; a graph capture refuses it)."""
    out = fn(api.download(x))
    if isinstance(out, tuple):
        return tuple(policy.to_device(t, x.index) for t in out)
    return policy.to_device(out, x.index)


@lowering(aten.nonzero.default, ttnn=["to_torch", "from_torch"], needs=ANY,
          notes="the result's shape depends on the values: x read to the host, PyTorch's nonzero there, the "
                "indices uploaded (a graph capture refuses the read)")
def nonzero(x):
    return _host_result(x, torch.nonzero)


@lowering(aten.masked_select.default, ttnn=["expand", "to_torch", "embedding", "gather"], needs=ANY,
          notes="x[mask] of the two broadcast to one shape: the mask read to the host (the result's length is its "
                "count), the elements gathered as index.Tensor does")
def masked_select(x, mask):
    from .views import expand as expand_to
    if mask.dtype != torch.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = list(torch.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    if not shape:  # 0-d: as one element
        shape = [1]
        x, mask = reshape(x, shape), reshape(mask, shape)
    return index(expand_to(x, shape), [expand_to(mask, shape)])


@lowering(aten.rot90.default, ttnn=["permute", "gather", "embedding"], needs=ANY,
          notes="flips (flip's lowering) and a transpose of the two dimensions, as PyTorch composes it")
def rot90(x, k=1, dims=(0, 1)):
    from .views import share, transpose
    n = len(x.shape)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if n < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {n}")
    d0, d1 = dim(dims[0], n), dim(dims[1], n)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return transpose(flip(x, [d1]), d0, d1)
    if k == 2:
        return flip(x, [d0, d1])
    if k == 3:
        return transpose(flip(x, [d0]), d0, d1)
    return share(x)


@lowering(aten._unique2.default, ttnn=["to_torch", "from_torch"], needs=ANY,
          notes="torch.unique: the result's length is the number of distinct values: x read to the host, "
                "PyTorch's _unique2 there (values, inverse, counts), uploaded (a graph capture refuses the read)")
def unique2(x, sorted=True, return_inverse=False, return_counts=False):
    return _host_result(x, lambda v: aten._unique2.default(v, sorted, return_inverse, return_counts))


@lowering(aten.unique_consecutive.default, ttnn=["to_torch", "from_torch"], needs=ANY,
          notes="the result's length is the number of runs: x read to the host, PyTorch's unique_consecutive "
                "there, uploaded, as _unique2 (Qwen2.5-VL's window boundaries; a graph capture refuses the read)")
def unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    return _host_result(x, lambda v: aten.unique_consecutive.default(v, return_inverse, return_counts, dim))


@lowering(aten.repeat_interleave.Tensor, ttnn=["to_torch", "from_torch"], needs=ANY,
          notes="the result's length is the repeats' sum: the repeats read to the host, PyTorch's indices "
                "uploaded (a graph capture refuses the read)")
def repeat_interleave(repeats, *, output_size=None):
    return _host_result(repeats, lambda r: torch.repeat_interleave(r, output_size=output_size))
