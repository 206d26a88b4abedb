"""Views and data movement: view/reshape, transpose/permute, expand, squeeze/unsqueeze, slice/select, diagonal,
unfold, clone, and the writes through views (slice_scatter, select_scatter, diagonal_scatter).

TT-NN tensors have no strides, so a view whose shape differs from its base is a new device tensor (ttnn
reshape/permute/slice); a write through it reaches the base through the view op's inverse (Note [writes
through views], below). A view with the base's shape
(alias, detach, a same-shape view, expand to the same size) shares the base's handle, so in-place writes are
seen by both. Values never change: a device tensor is never modified in place (an in-place op replaces the
handle's tensor), which is also why clone/contiguous need no device copy.
"""
from __future__ import annotations

import math

import torch

from ..core import layout as policy
from ..core.layout import ANY, ANY_CL, PROMOTE, STAGED, TILE
from ..core.registry import Unfit, inverse_of, lowering
from ..device import api
from ._common import contiguous_shape, dim

aten = torch.ops.aten


def share(x: api.Handle) -> api.Handle:
    """A new handle on the same device tensor (copy-on-write: in-place ops replace, never modify), or on the
    same host value of a staged one."""
    return x.shared()


def same_values(out: api.Handle, x: api.Handle, every_value: bool = True) -> api.Handle:
    """`out` holds x's values (all of them, rearranged or repeated; or, every_value=False, some of them): it
    keeps x's known value bounds (as a range only, when some values may be gone)."""
    b = x.bounds
    out.bounds = b if b is None or every_value else (b[0], b[1], False)
    return out


def reshape(x: api.Handle, shape) -> api.Handle:
    shape = contiguous_shape(shape, x.shape.numel())
    if math.prod(shape) != x.shape.numel():
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.shape.numel()}")
    if tuple(shape) == tuple(x.shape):
        return x
    if x.tt is None or x.shape.numel() == 0:
        return _without_data(x, shape)
    x = policy.permute_layout(x, shape)  # (a tiny-last-dimensions result: ROW_MAJOR, as a permute's)
    out = api.run("reshape", x, tuple(shape) or (1,))
    out.shape = torch.Size(shape)
    return same_values(out, x)


def _without_data(x: api.Handle, shape) -> api.Handle:
    """The result of a view op on a tensor with no elements, or one not yet written (still unwritten)."""
    if x.tt is None:
        return api.Handle(None, None, x.dtype, shape, x.index)
    return policy.to_device(torch.empty(shape, dtype=x.dtype), x.index)


@lowering(aten.view.default, aten._unsafe_view.default, ttnn=["reshape"], needs=ANY,
          notes="a new device tensor unless the shape is unchanged (then the same handle)")
def view(x, size):
    return reshape(x, size)


# ----------------------------------------------------------------------------------------------- dtype views
# Note [dtype views]: view(dtype) reinterprets bits. The device stores a tensor's *value* (layout.py: uint8 as
# uint32, float32 maybe as bfloat16), so the bits are computed: each element's bit pattern as an unsigned word
# (a uint32 tensor: ttnn.bitcast for 32- and 16-bit floats, the value masked to 8 bits for bytes), words cut
# into bytes or bytes joined into words (shifts, and/or, little-endian as PyTorch's CPU), then the words read
# as the new dtype (ttnn.bitcast back). A float32 stored as bfloat16 has the bits of its stored value; a float32
# made from bits is stored float32 (exact, whatever float32_storage says). A write through the view comes back
# the same way (the view of the new value as the base's dtype). The byte buffer transformers' paged cache
# allocates (torch.zeros(n_bytes, dtype=uint8) viewed as the model's dtype) takes this route; its bytes are
# stored as uint32 values (4 device bytes per byte) -- docs/serving.md.
_BITS = {torch.float32: 32, torch.int32: 32, torch.bfloat16: 16, torch.uint8: 8, torch.int8: 8}


def _words(x: api.Handle) -> api.Handle:
    """x's bit patterns as unsigned values of its width (uint32 TILE)."""
    x = policy.ensure(x, TILE)
    if x.dtype == torch.bfloat16:
        return policy.as_integer(api.run("bitcast", x, api.UINT16, out_dtype=torch.int32), api.UINT32)
    if x.dtype == torch.float32:
        return api.run("bitcast", policy.to_float32(x), api.UINT32, out_dtype=torch.int32)
    if x.tt_dtype == api.UINT32 and x.dtype != torch.int8:  # (int32, uint8 known non-negative: their bits)
        return x
    if x.dtype == torch.int32:
        return api.run("bitcast", policy.as_integer(x), api.UINT32, out_dtype=torch.int32)
    low = api.run("bitwise_and", policy.as_integer(x), 0xFF)  # int8 / uint8: the low byte of the value
    return policy.as_integer(low, api.UINT32)


def _from_words(u: api.Handle, dtype: torch.dtype) -> api.Handle:
    """Unsigned words (uint32) of dtype's width as a tensor of `dtype`."""
    if dtype == torch.float32:
        out = api.run("bitcast", u, api.FLOAT32, out_dtype=dtype)
    elif dtype == torch.int32:
        out = api.run("bitcast", u, api.INT32, out_dtype=dtype)
    elif dtype == torch.bfloat16:
        out = api.run("bitcast", policy.as_integer(u, api.UINT16), api.BFLOAT16, out_dtype=dtype)
    elif dtype == torch.uint8:
        out = policy.retag(u, dtype)
        out.bounds = (0, 255, False)
    else:  # int8: (b ^ 128) - 128
        flipped = api.run("bitwise_xor", policy.as_integer(u), 0x80, out_dtype=torch.int32)
        out = policy.retag(api.run("subtract", flipped, 0x80, out_dtype=torch.int32), dtype)
        out.bounds = (-128, 127, False)
    return out


def _split(u: api.Handle, k: int, bits: int) -> api.Handle:
    """Words [..., n] of k * bits bits as k words of `bits` each, little-endian: [..., n * k]."""
    mask = (1 << bits) - 1
    parts = []
    for j in range(k):
        part = api.run("bitwise_right_shift", u, j * bits) if j else u
        part = api.run("bitwise_and", part, mask) if j < k - 1 else part  # (the last: the shift leaves it alone)
        parts.append(unsqueeze(part, len(u.shape)))
    return reshape(cat(parts, -1), list(u.shape[:-1]) + [u.shape[-1] * k])


def _join(u: api.Handle, k: int, bits: int) -> api.Handle:
    """Words [..., n * k] of `bits` bits joined k at a time, little-endian: [..., n]."""
    n = u.shape[-1] // k
    grouped = reshape(u, list(u.shape[:-1]) + [n, k])
    out = None
    for j in range(k):
        part = select(grouped, -1, j)
        part = api.run("bitwise_left_shift", part, j * bits) if j else part
        out = part if out is None else api.run("bitwise_or", out, part)
    return out


def view_dtype_handle(x: api.Handle, dtype: torch.dtype) -> api.Handle:
    if dtype == x.dtype:
        return x
    meta = torch.empty(x.shape, dtype=x.dtype, device="meta").view(dtype)  # PyTorch's shape and errors
    if x.dtype not in _BITS or dtype not in _BITS:
        raise Unfit(f"view({dtype}) of a {x.dtype} tensor: the bits of {x.dtype} or {dtype} are not computed on "
                    f"the device (Note [dtype views]: {', '.join(str(d) for d in _BITS)})")
    if x.tt is None or not x.shape.numel():
        return _without_data(x, meta.shape) if x.tt is None else policy.to_device(torch.empty(meta.shape, dtype=dtype), x.index)
    src, dst = _BITS[x.dtype], _BITS[dtype]
    u = _words(x)
    if src > dst:
        u = _split(u, src // dst, dst)
    elif src < dst:
        u = _join(u, dst // src, src)
    out = _from_words(u, dtype)
    out.shape = meta.shape
    return out


@lowering(aten.view.dtype, ttnn=["bitcast", "bitwise_and", "bitwise_or", "bitwise_left_shift", "bitwise_right_shift",
                                 "bitwise_xor", "subtract", "reshape", "slice", "concat", "typecast"], needs=ANY,
          notes="the bits computed on the device (Note [dtype views] in lowerings/views.py): float32, int32, "
                "bfloat16, uint8, int8; a float32 made from bits is stored float32; a write through it reaches the "
                "base the same way")
def view_dtype(x, dtype):
    return view_dtype_handle(x, dtype)


@lowering(aten.clone.default, needs=STAGED, notes="shares the device tensor copy-on-write: no device op")
@lowering(aten.lift_fresh_copy.default, needs=STAGED,
          notes="a compiled graph's tensor constant (torch.tensor(...) in the model), copied: as clone")
def clone(x, *, memory_format=None):
    return share(x)


@lowering(aten.unsqueeze.default, ttnn=["reshape"], needs=ANY)
def unsqueeze(x, d):
    d = dim(d, len(x.shape) + 1)
    shape = list(x.shape)
    shape.insert(d, 1)
    return reshape(x, shape)


@lowering(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, ttnn=["reshape"], needs=ANY)
def squeeze(x, dims=None):
    n = len(x.shape)
    if dims is None:
        dims = range(n)
    elif isinstance(dims, int):
        dims = [dims]
    drop = {dim(d, n) for d in dims}
    return reshape(x, [s for i, s in enumerate(x.shape) if not (i in drop and s == 1)])


def permute_handle(x: api.Handle, dims) -> api.Handle:
    n = len(x.shape)
    dims = [dim(d, n) for d in dims]
    identity = list(range(n))
    if dims == identity:
        return x
    if sorted(dims) != identity:
        raise RuntimeError(f"permute(): dims {dims} is not a permutation of the {n} dimensions")
    return _permuted(x, dims)


def _permuted(x: api.Handle, dims: list) -> api.Handle:
    """permute_handle of a checked permutation `dims` (non-negative, not the identity)."""
    shape = x.shape
    out_shape = [shape[d] for d in dims]
    tt = x.tt
    if tt is None or shape.numel() == 0:
        return _without_data(x, out_shape)
    if len(dims) == 4 and policy.is_channels_last(x):
        if dims == [0, 2, 3, 1]:  # NCHW -> NHWC of an image stored so (ConvNeXt after its depthwise conv)
            return reshape(policy.flat(x), out_shape)
        policy.to_nchw(x)
    x = policy.permute_layout(x, out_shape)
    return same_values(api.run("permute", x, dims), x)


@lowering(aten.permute.default, ttnn=["permute", "reshape"], needs=ANY_CL,
          notes="NCHW -> NHWC of a channels-last image, and NHWC -> NCHW of a floating TILE image (kept "
                "channels-last): a reshape of its stored form")
def permute(x, dims):
    if (len(x.shape) == 4 and [dim(d, 4) for d in dims] == [0, 3, 1, 2] and x.tt is not None and x.shape.numel()
            and x.layout == api.TILE and x.dtype.is_floating_point and not policy.is_channels_last(x)):
        return policy.from_nhwc(x)  # NHWC -> NCHW: kept channels-last (layout.py; the aten op only: a lowering's
        # own permute_handle gets a plain NCHW tensor)
    return permute_handle(x, dims)


@lowering(aten.transpose.int, ttnn=["permute"], needs=ANY)
def transpose(x, dim0, dim1):
    n = len(x.shape)
    if n < 2:
        return x
    a, b = dim(dim0, n), dim(dim1, n)
    if a == b:
        return x
    order = list(range(n))
    order[a], order[b] = b, a
    return _permuted(x, order)  # (a permutation by construction: permute_handle's checks are not needed)


@lowering(aten.t.default, ttnn=["permute"], needs=ANY)
def t(x):
    if len(x.shape) > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {len(x.shape)}D")
    return transpose(x, 0, 1) if len(x.shape) == 2 else x


def expand(x: api.Handle, size) -> api.Handle:
    size = list(size)
    lead = len(size) - len(x.shape)
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(size)}) must be greater or equal to "
                           f"the number of dimensions in the tensor ({len(x.shape)})")
    for i, s in enumerate(size):
        if s == -1:
            size[i] = x.shape[i - lead]
    if tuple(size) == tuple(x.shape):
        return x
    src = x if lead == 0 else reshape(x, [1] * lead + list(x.shape))
    for s_in, s_out in zip(src.shape, size):
        if s_in != s_out and s_in != 1:
            raise RuntimeError(f"The expanded size of the tensor ({s_out}) must match the existing size ({s_in})")
    if src.shape.numel() == 0 or src.tt is None:
        return _without_data(src, size)
    return same_values(api.run("expand", src, tuple(size)), x)


@lowering(aten.expand.default, ttnn=["expand"], needs=ANY, notes="materialized (TT-NN has no stride-0 views)")
def expand_op(x, size, *, implicit=False):
    return expand(x, size)


def _slice_range(size: int, start, end, step: int) -> tuple:
    """PyTorch's slice bounds: (start, end, length) clamped to a dimension of `size`."""
    start = 0 if start is None else start
    end = size if end is None else end
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    if step < 1:
        raise ValueError("slice step must be positive")
    return start, end, (end - start + step - 1) // step


def slice_handle(x: api.Handle, d: int, start, end, step: int = 1) -> api.Handle:
    n = len(x.shape)
    d = dim(d, n)
    size = x.shape[d]
    start, end, _ = _slice_range(size, start, end, step)
    if start == 0 and end == size and step == 1:
        return x
    shape = list(x.shape)
    shape[d] = (end - start + step - 1) // step
    if 0 in shape or x.tt is None:
        return _without_data(x, shape)
    if d == n - 1 and step == 1 and not policy.row_fits(x.shape, x.tt_dtype):
        piece = _row_piece(size, start, end, x.tt_dtype)
        if piece is not None:  # rows of pieces: a slice of whole pieces along the dimension before
            lead = tuple(x.shape[:-1])
            rows = slice_handle(reshape(x, (*lead, size // piece, piece)), n - 1, start // piece, end // piece)
            return reshape(rows, (*lead, end - start))
    _refuse_long_rows("slice", [x], d)
    begins, ends, steps = [0] * n, list(x.shape), [1] * n
    begins[d], ends[d], steps[d] = start, end, step
    return same_values(api.run("slice", x, begins, ends, steps), x, every_value=False)


def _row_piece(size: int, start: int, end: int, tt_dtype):
    """The widest piece p (a multiple of 32: a tile's width, no padding) that divides a row of `size` elements
    and both bounds of its slice [start, end), and fits a core's L1 (layout.row_fits); None if there is none. A
    row too long for ttnn.slice (float32 storage doubles its bytes: longformer's and led's diagonalized attention
    chunks, 197120 elements cut by 256 at the end) is then sliced as [size / p, p] rows of whole pieces."""
    piece = math.gcd(size, start, end)
    while piece % 64 == 0 and not policy.row_fits((piece,), tt_dtype):
        piece //= 2
    return piece if piece % 32 == 0 and policy.row_fits((piece,), tt_dtype) else None


def _refuse_long_rows(op: str, parts: list, d: int, out_shape=None) -> None:
    """Unfit when ttnn.<op> would hold a row longer than a core's L1 allows (layout.row_fits): a cut or join
    along the last dimension (ttnn works on rows then) or of ROW_MAJOR tensors, whose input or output row
    (`out_shape`) is too long -- a long 1-D buffer, such as DDP's flat gradient bucket, takes the CPU route."""
    rank = len(parts[0].shape)
    if d != rank - 1 and all(p.layout != api.ROW_MAJOR for p in parts):
        return
    shapes = [p.shape for p in parts] + ([out_shape] if out_shape is not None else [])
    for shape in shapes:
        if not policy.row_fits(shape, parts[0].tt_dtype):
            raise Unfit(f"ttnn.{op} of rows of {shape[-1] if len(shape) else 1} elements: longer than a core's "
                        f"L1 holds ({policy.ROW_BYTES_MAX >> 10} KiB a row)")


@lowering(aten.slice.Tensor, ttnn=["slice"], needs=ANY)
def slice_op(x, d=0, start=None, end=None, step=1):
    return slice_handle(x, d, start, end, step)


@lowering(aten.select.int, ttnn=["slice", "reshape"], needs=ANY)
def select(x, d, index):
    n = len(x.shape)
    d = dim(d, n)
    size = x.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(x.shape)} at dimension {d}")
    index %= size
    part = slice_handle(x, d, index, index + 1)
    shape = list(x.shape)
    del shape[d]
    return reshape(part, shape)


@lowering(aten.cat.default, ttnn=["concat"], needs=PROMOTE,
          notes="zero-size inputs are skipped (shapes and errors checked as PyTorch does, on the meta device)")
def cat(tensors, d=0):
    for i, t in enumerate(tensors):
        if not t.shape:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    meta = aten.cat.default([torch.empty(t.shape, dtype=t.dtype, device="meta") for t in tensors], d)
    parts = [t for t in tensors if t.shape.numel()]
    if not parts:
        return policy.to_device(torch.empty(meta.shape, dtype=meta.dtype), tensors[0].index)
    if len(parts) == 1:
        return policy.retag(share(parts[0]), meta.dtype)
    _refuse_long_rows("concat", parts, dim(d, len(meta.shape)), meta.shape)
    return api.run("concat", parts, dim=dim(d, len(meta.shape)), out_dtype=meta.dtype)


@lowering(aten.stack.default, ttnn=["reshape", "concat"], needs=PROMOTE)
def stack(tensors, d=0):
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if tuple(t.shape) != tuple(tensors[0].shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at "
                               f"entry 0 and {list(t.shape)} at entry {i}")
    d = dim(d, len(tensors[0].shape) + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


@lowering(aten.roll.default, ttnn=["slice", "concat", "reshape"], needs=ANY,
          notes="per rolled dimension: the last `shift` entries concatenated before the rest")
def roll(x, shifts, dims=()):
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return reshape(roll(reshape(x, (x.shape.numel(),)), shifts, [0]), x.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = x
    for shift, d in zip(shifts, dims):
        d = dim(d, len(x.shape))
        size = x.shape[d]
        if size and shift % size:
            cut = size - shift % size
            out = cat([slice_handle(out, d, cut, size), slice_handle(out, d, 0, cut)], d)
    return share(out) if out is x else out


UNFOLD_SLICES_MAX = 256  # slices (one per window, or one per window position) an unfold is built from


@lowering(aten.unfold.default, ttnn=["slice", "reshape", "concat", "permute"], needs=ANY,
          notes="windows of `size` every `step` along a dimension (a new last dimension): one strided slice per "
                "position in the window (or one slice per window, when fewer), concatenated: a copy, as every view "
                "here. Writes through it reach the base when windows do not overlap (step >= size); a write into "
                "overlapping windows (one element in several windows: its result on the CPU depends on the order "
                "of the loops) raises. More than 256 slices either way: refused")
def unfold(x, d, size, step):
    n = len(x.shape)
    d = dim(d, n)
    length = x.shape[d] if n else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if not n:
        return reshape(x, (1,))
    windows = (length - size) // step + 1
    shape = list(x.shape)
    shape[d] = windows
    if not x.shape.numel() or not size or x.tt is None:
        return _without_data(x, shape + [size])
    if min(size, windows) > UNFOLD_SLICES_MAX:
        raise Unfit(f"unfold into {windows} windows of {size}")
    if size <= windows:  # slice j: element j of every window, [..., windows, ..., 1]
        parts = [unsqueeze(slice_handle(x, d, j, j + step * (windows - 1) + 1, step), n) for j in range(size)]
        return same_values(cat(parts, n) if size > 1 else parts[0], x, every_value=False)
    rows = [unsqueeze(slice_handle(x, d, w * step, w * step + size), d) for w in range(windows)]  # [.., 1, .., size, ..]
    stacked = cat(rows, d) if windows > 1 else rows[0]                                      # [.., windows, .., size, ..]
    order = [i for i in range(n + 1) if i != d + 1] + [d + 1]
    return same_values(permute_handle(stacked, order), x, every_value=False)


@lowering(aten.split_with_sizes.default, ttnn=["slice"], needs=ANY)
def split_with_sizes(x, sizes, d=0):
    d = dim(d, len(x.shape))
    if sum(sizes) != x.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {x.shape[d]} "
                           f"(input tensor's size at dimension {d}), but got split_sizes={list(sizes)}")
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [slice_handle(x, d, s, s + n) for s, n in zip(starts, sizes)]


@lowering(aten.split.Tensor, ttnn=["slice"], needs=ANY)
def split(x, split_size, d=0):
    size = x.shape[dim(d, len(x.shape))]
    sizes = [min(split_size, size - s) for s in range(0, size, split_size)] or [0]
    return split_with_sizes(x, sizes, d)


@lowering(aten.unbind.int, ttnn=["slice", "reshape"], needs=ANY)
def unbind(x, d=0):
    return [select(x, d, i) for i in range(x.shape[dim(d, len(x.shape))])]


@lowering(aten.diagonal.default, ttnn=["permute", "slice", "gather", "reshape"], needs=ANY,
          notes="a gather of the diagonal's column indices from the band of rows it crosses")
def diagonal(x, offset=0, dim1=0, dim2=1):
    m, order, (r0, c0, length) = _diagonal_frame(x, offset, dim1, dim2)
    shape = list(m.shape[:-2]) + [length]
    if length == 0 or not x.shape.numel() or x.tt is None:
        return _without_data(x, shape)
    band = policy.ensure(slice_handle(m, -2, r0, r0 + length), TILE)  # [..., length, cols]
    picked = api.run("gather", band, len(m.shape) - 1, index=_diagonal_columns(band, c0), out_dtype=x.dtype)
    return same_values(reshape(picked, shape), x, every_value=False)


def _diagonal_frame(x: api.Handle, offset: int, dim1: int, dim2: int):
    """x with dim1, dim2 moved last (rows, cols), the order that does it, and the diagonal's first row,
    first column and length."""
    n = len(x.shape)
    d1, d2 = dim(dim1, n), dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    order = [i for i in range(n) if i not in (d1, d2)] + [d1, d2]
    m = permute_handle(x, order)
    r0, c0 = max(0, -offset), max(0, offset)
    return m, order, (r0, c0, max(0, min(m.shape[-2] - r0, m.shape[-1] - c0)))


def _diagonal_columns(band: api.Handle, c0: int) -> api.Handle:
    """The index of the diagonal's column in each row of `band` ([..., length, cols]): [..., length, 1]."""
    length = band.shape[-2]
    cols = (torch.arange(length) + c0).reshape(length, 1).expand(*band.shape[:-1], 1)
    return policy.ensure(policy.to_device(cols.contiguous(), band.index), TILE)


# ----------------------------------------------------------------------------------------------- writes
# Note [writes through views]
def _inverse_permutation(dims, n: int) -> list:
    inverse = [0] * n
    for i, d in enumerate(dims):
        inverse[dim(d, n)] = i
    return inverse


@inverse_of(view, unsqueeze, squeeze)
def _reshape_back(base, value, *args, pos=None, **kwargs):
    return reshape(value, base.shape)


@inverse_of(view_dtype)
def _view_dtype_back(base, value, dtype, pos=None):
    return view_dtype_handle(value, base.dtype)


@inverse_of(permute)
def _permute_back(base, value, dims, pos=None):
    return permute_handle(value, _inverse_permutation(dims, len(base.shape)))


@inverse_of(transpose)
def _transpose_back(base, value, dim0, dim1, pos=None):
    return transpose(value, dim0, dim1)


@inverse_of(t)
def _t_back(base, value, pos=None):
    return t(value)


@inverse_of(slice_op)
def _slice_back(base, value, d=0, start=None, end=None, step=1, pos=None):
    return slice_scatter_handle(base, value, d, start, end, step)


@inverse_of(select)
def _select_back(base, value, d, index, pos=None):
    return select_scatter(base, value, d, index)


@inverse_of(split_with_sizes)
def _split_with_sizes_back(base, value, sizes, d=0, pos=None):
    start = sum(sizes[:pos])
    return slice_scatter_handle(base, value, d, start, start + sizes[pos])


@inverse_of(split)
def _split_back(base, value, split_size, d=0, pos=None):
    start = pos * split_size
    return slice_scatter_handle(base, value, d, start, start + value.shape[dim(d, len(base.shape))])


@inverse_of(unbind)
def _unbind_back(base, value, d=0, pos=None):
    return select_scatter(base, value, d, pos)


@inverse_of(unfold)
def _unfold_back(base, value, d, size, step, pos=None):
    n = len(base.shape)
    d = dim(d, n) if n else 0
    if step < size:  # one base element in several windows: no single value to write back
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")
    if not n:
        return reshape(value, ())
    windows = value.shape[d]
    for j in range(size):  # element j of every window: base[j::step] along d
        part = select(value, n, j)
        base = slice_scatter_handle(base, part, d, j, j + step * (windows - 1) + 1, step)
    return base


@inverse_of(diagonal)
def _diagonal_back(base, value, offset=0, dim1=0, dim2=1, pos=None):
    return diagonal_scatter(base, value, offset, dim1, dim2)


def scatter_along(op: str, base: api.Handle, d: int, index: api.Handle, value: api.Handle) -> api.Handle:
    """ttnn.<op> (scatter, scatter_add): `base` with value's elements written (added) at `index` along d, as
    torch.scatter; the operands in the layout ttnn takes (layout.scatter_layout), the result TILE."""
    layout = policy.scatter_layout(base, dim(d, len(base.shape)), value)
    out = api.run(op, policy.relayout(base, layout), d,
                  policy.relayout(index, policy.scatter_index_layout(index, d, layout)),
                  policy.relayout(value, layout), out_dtype=base.dtype)
    return policy.relayout(out, api.TILE)


def slice_scatter_handle(base: api.Handle, value: api.Handle, d: int, start=None, end=None, step=1) -> api.Handle:
    """`base` with its slice [start:end:step] along d replaced by `value` (of exactly the slice's shape)."""
    n = len(base.shape)
    d = dim(d, n)
    start, end, length = _slice_range(base.shape[d], start, end, step)
    expected = list(base.shape)
    expected[d] = length
    if list(value.shape) != expected:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(value.shape)}, slice size = {expected}")
    if length == 0 or not base.shape.numel():  # (nothing written: the base, empty or not)
        return base
    base, value = policy.for_write(policy.materialize(base), policy.materialize(value))
    if length == base.shape[d]:
        return value
    if step == 1:  # the part before, the value, the part after
        _refuse_long_rows("concat", [base, value], d, base.shape)
        parts = [p for p in (slice_handle(base, d, 0, start), value, slice_handle(base, d, end, None)) if p.shape[d]]
        return api.run("concat", parts, dim=d, out_dtype=base.dtype)
    where = torch.arange(start, end, step).reshape([length if i == d else 1 for i in range(n)]).expand(expected)
    return scatter_along("scatter", base, d, policy.to_device(where.contiguous(), base.index), value)


@lowering(aten.slice_scatter.default, ttnn=["slice", "concat", "scatter"], needs=ANY,
          notes="step 1: concat of the parts before and after with the new slice; other steps: ttnn.scatter")
def slice_scatter(x, src, d=0, start=None, end=None, step=1):
    return slice_scatter_handle(x, src, d, start, end, step)


@lowering(aten.select_scatter.default, ttnn=["slice", "concat", "reshape"], needs=ANY)
def select_scatter(x, src, d, index):
    n = len(x.shape)
    d = dim(d, n)
    size = x.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select_scatter(): index {index} out of range for tensor of size {list(x.shape)} at "
                         f"dimension {d}")
    index %= size
    return slice_scatter_handle(x, unsqueeze(src, d), d, index, index + 1)


@lowering(aten.diagonal_scatter.default, ttnn=["permute", "slice", "scatter", "concat"], needs=ANY)
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    m, order, (r0, c0, length) = _diagonal_frame(x, offset, dim1, dim2)
    shape = list(m.shape[:-2]) + [length]
    if list(src.shape) != shape:
        raise RuntimeError(f"expected src to have a size equal to the diagonal of self. src size = "
                           f"{list(src.shape)}, diagonal size = {shape}")
    if length == 0 or not x.shape.numel():
        return x
    band = slice_handle(policy.materialize(m), -2, r0, r0 + length)
    band, column = policy.for_write(band, reshape(src, shape + [1]))
    band = scatter_along("scatter", band, len(m.shape) - 1, _diagonal_columns(band, c0), column)
    return permute_handle(slice_scatter_handle(m, band, -2, r0, r0 + length), _inverse_permutation(order, len(order)))
