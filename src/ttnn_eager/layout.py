"""The layout and dtype policy: the one place that decides how a tensor is stored on the device.

TT-NN computes on TILE tensors: 32x32 tiles, the last two dimensions padded to multiples of 32, the logical
shape kept beside the padded one. ttnn 0.81.1 also accepts ROW_MAJOR for its data-movement ops and, as
docs/layouts.md measures, for embedding indices, typecast and gather. So every tensor is uploaded TILE and
stays TILE; the one ROW_MAJOR tensor is an embedding table (converted once, in place, at its first lookup).

Storage (at upload, `storage_for`):
    torch.float32    bfloat16 TILE   (float32 with configure(float32_storage="float32"); the torch dtype
                                      PyTorch sees stays float32, like a TF32 switch)
    torch.bfloat16   bfloat16 TILE
    torch.float16    bfloat16 TILE   (TT-NN has no float16)
    torch.bool       bfloat16 TILE   (0.0 / 1.0; comparisons on the device produce the same)
    integer dtypes   uint32 TILE when every value is >= 0 (token ids, positions, masks), else int32 TILE;
                     int64 values must fit in int32 (checked at upload). uint32 storage is how the backend
                     knows a tensor is non-negative: embedding and gather take it as indices without any
                     conversion, and subtraction (which could wrap around) first converts it to int32.
    matmul weights   with configure(weight_dtype="bfloat8_b"): 2-D parameters (both sizes >= 32) are
                     stored bfloat8_b TILE at upload; an embedding table among them is widened back to
                     bfloat16 once, at its first lookup
    float64, complex: refused (TypeError naming a dtype to use)

Needs (declared by each lowering per argument, applied by `ensure` before the lowering runs):
    ANY         as it is
    TILE        TILE layout, dtype kept
    TILE_FLOAT  TILE layout, floating dtype (integer/bool tensors are converted to bfloat16)
    PROMOTE     TILE layout; all PROMOTE arguments of one call share a device dtype (floating if any is)
    SIGNED      TILE layout; uint32 converted to int32 (ops that may produce negative values)
    (scatter)   ttnn.scatter takes TILE, but float32 only ROW_MAJOR (scatter_layout)
    INDEX       uint32, any layout (embedding and gather indices)
    TABLE       ROW_MAJOR bfloat16 (embedding tables; converted in place, so once)
`ensure` changes a handle's layout in place -- the converted form replaces the old one, so a weight
converted once stays converted and no second copy is kept -- while a dtype change that may lose information
gives a new handle. Each conversion is counted in `layout_conversions`.
"""
from __future__ import annotations

import dataclasses

import torch

from . import config, counters
from . import device_api as api

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
BFLOAT16_MAX = float(torch.finfo(torch.bfloat16).max)


@dataclasses.dataclass(frozen=True)
class Need:
    name: str
    layout: object = None   # api.TILE / api.ROW_MAJOR / None (keep)
    dtype: str = "keep"     # "keep" | "float" | "promote" | "signed" | "uint32" | "bfloat16"

    def __repr__(self):
        return self.name


ANY = Need("ANY")
TILE = Need("TILE", api.TILE)
TILE_FLOAT = Need("TILE_FLOAT", api.TILE, "float")
PROMOTE = Need("PROMOTE", api.TILE, "promote")
SIGNED = Need("SIGNED", api.TILE, "signed")
INDEX = Need("INDEX", None, "uint32")
TABLE = Need("TABLE", api.ROW_MAJOR, "bfloat16")

_FLOAT_DEVICE = {torch.float32: None, torch.bfloat16: api.BFLOAT16, torch.float16: api.BFLOAT16,
                 torch.bool: api.BFLOAT16}
_INT = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
_FLOAT_TT = (api.BFLOAT16, api.FLOAT32, api.BFLOAT8_B)


def float_device_dtype():
    return api.FLOAT32 if config.settings["float32_storage"] == "float32" else api.BFLOAT16


def check_dtype(dtype: torch.dtype) -> None:
    if dtype in _FLOAT_DEVICE or dtype in _INT:
        return
    hint = "torch.float32" if dtype.is_floating_point or dtype.is_complex else "torch.int32"
    raise TypeError(f"ttnn devices do not support {dtype}; convert the tensor first, e.g. "
                    f"x.to({hint}) (supported: float32, bfloat16, float16, bool, int64, int32, int16, int8, uint8)")


def storage_for(dtype: torch.dtype, nonnegative: bool = False):
    """(device dtype, layout) for a tensor of torch dtype `dtype`."""
    check_dtype(dtype)
    if dtype in _INT:
        return (api.UINT32 if nonnegative else api.INT32), api.TILE
    return (_FLOAT_DEVICE[dtype] or float_device_dtype()), api.TILE


def _int_range(value: torch.Tensor):
    if not value.numel():
        return 0, 0
    lo, hi = int(value.min()), int(value.max())  # (bool tensors: 0/1)
    if lo < INT32_MIN or hi > INT32_MAX:
        raise RuntimeError(f"int64 values in [{lo}, {hi}] do not fit the device's int32 integers "
                           f"[{INT32_MIN}, {INT32_MAX}]; keep such tensors on the CPU or rescale them")
    return lo, hi


def is_matmul_weight(value: torch.Tensor) -> bool:
    return (isinstance(value, torch.nn.Parameter) and value.dim() == 2 and value.dtype.is_floating_point
            and min(value.shape) >= api.TILE_SIZE)


def to_device(value: torch.Tensor, index: int) -> api.Handle:
    """Upload a CPU tensor under the storage policy (the torch dtype PyTorch sees is kept)."""
    bounds = None
    if value.dtype in _INT or value.dtype == torch.bool:
        bounds = (*_int_range(value), True) if value.numel() else None
    tt_dtype, layout = storage_for(value.dtype, bounds is not None and bounds[0] >= 0)
    if config.settings["weight_dtype"] == "bfloat8_b" and is_matmul_weight(value):
        tt_dtype = api.BFLOAT8_B
    if value.numel() == 0:
        layout = api.ROW_MAJOR
    elif tt_dtype != api.FLOAT32 and value.dtype == torch.float32:
        value = _saturated(value)
    return api.upload(value, tt_dtype, layout, index, bounds=bounds)


def _saturated(value: torch.Tensor) -> torch.Tensor:
    """float32 values stored as bfloat16: finite ones beyond bfloat16's range become its largest finite
    value (see finite_scalar), infinities stay."""
    big = value.abs() > BFLOAT16_MAX
    if not bool(big.any()):
        return value
    return torch.where(big & value.isfinite(), value.sign() * BFLOAT16_MAX, value)


def materialize(h: api.Handle) -> api.Handle:
    """Give an unwritten (torch.empty) handle a device tensor: zeros."""
    if h.tt is None:
        tt_dtype, layout = storage_for(h.dtype)
        h.assign(api.create("zeros", (tuple(h.shape),), tt_dtype, layout, h.index, h.dtype))
    return h


def _relayout(h: api.Handle, layout) -> None:
    """Change h's layout in place (lossless, so every user of h may share the converted form)."""
    if layout is not None and h.layout != layout and h.shape.numel():
        new = api.run("to_layout", h, layout)
        counters.counts["layout_conversions"] += 1
        h.tt, h.shadow = new.tt, new.shadow


def _typecast(h: api.Handle, tt_dtype) -> api.Handle:
    """h converted to device dtype `tt_dtype`: a new handle (the original stays as it is). Block-float
    dtypes exist only in TILE, so a conversion to one tilizes first."""
    if h.tt_dtype == tt_dtype:
        return h
    if tt_dtype == api.BFLOAT8_B:
        _relayout(h, api.TILE)
    counters.counts["layout_conversions"] += 1
    out = api.run("typecast", h, tt_dtype)
    out.bounds = h.bounds  # the values, where representable, are unchanged (negative ones are checked by users)
    return out


def is_float(tt_dtype) -> bool:
    return tt_dtype in _FLOAT_TT


def satisfies(tt, need: Need) -> bool:
    """The device tensor `tt` is already in the form `need` asks for, so `ensure` has nothing to do (for
    PROMOTE: its layout; one dtype across the arguments is ensure_promoted's to check)."""
    if need.layout is not None and tt.layout != need.layout:
        return False
    kind = need.dtype
    return (kind == "keep" or kind == "promote" or kind == "float" and is_float(tt.dtype)
            or kind == "signed" and tt.dtype != api.UINT32 or kind == "uint32" and tt.dtype == api.UINT32
            or kind == "bfloat16" and tt.dtype != api.BFLOAT8_B)


def ensure(h: api.Handle, need: Need) -> api.Handle:
    """h in the form `need` asks for: layout changes and lossless widenings happen in place (and stay),
    other dtype changes give a new handle."""
    if h.tt is None:
        materialize(h)
    if satisfies(h.tt, need):
        return h  # the common case
    if need.dtype == "float" and not is_float(h.tt_dtype):
        h = _typecast(h, api.BFLOAT16)
    elif need.dtype == "signed" and h.tt_dtype == api.UINT32:
        h = _typecast(h, api.INT32)
    elif need.dtype == "uint32" and h.tt_dtype != api.UINT32:
        h = _typecast(h, api.UINT32)
    elif need.dtype == "bfloat16" and h.tt_dtype == api.BFLOAT8_B:  # widening: exact, so in place
        new = _typecast(h, api.BFLOAT16)
        h.tt, h.shadow = new.tt, new.shadow
    _relayout(h, need.layout)
    return h


_TABLE_PARTS: "weakref.WeakKeyDictionary" = None


def table_parts(h: api.Handle) -> list:
    """An embedding table as ttnn.embedding takes it (ROW_MAJOR bfloat16), as a list of tables whose rows sum
    to the table's rows: [h] itself (converted in place, see TABLE) -- or, for a float32 table (float32
    storage), three bfloat16 tables hi + mid + lo that add up to the float32 values exactly (each part holds
    the next 8 bits of the mantissa), built once and kept while h holds the same device tensor."""
    global _TABLE_PARTS
    if h.tt is None or h.tt_dtype != api.FLOAT32:
        return [ensure(h, TABLE)]
    if _TABLE_PARTS is None:
        import weakref
        _TABLE_PARTS = weakref.WeakKeyDictionary()
    cached = _TABLE_PARTS.get(h)
    if cached is not None and cached[0] is h.tt:
        return cached[1]
    parts, rest = [], ensure(h, TILE)
    for i in range(3):
        part = _typecast(rest, api.BFLOAT16)
        if i < 2:
            rest = api.run("subtract", rest, _typecast(part, api.FLOAT32))
        _relayout(part, api.ROW_MAJOR)
        parts.append(part)
    _TABLE_PARTS[h] = (h.tt, parts)
    return parts


def to_float32(h: api.Handle) -> api.Handle:
    """h computed in float32 on the device (a new handle), for ops whose result bfloat16 would change."""
    return _typecast(ensure(h, TILE), api.FLOAT32)


def finite_scalar(value: float) -> float:
    """A float scalar for an op whose result the device stores as bfloat16: a finite value beyond
    bfloat16's range (torch.finfo(torch.float32).min, the attention masks' "minus infinity") saturates to
    bfloat16's largest finite value instead of rounding to an infinity, so that a fully masked softmax row
    stays uniform as on the CPU (an infinity there would give NaN). Exact under float32 storage."""
    if abs(value) > BFLOAT16_MAX and value not in (float("inf"), float("-inf")) \
            and float_device_dtype() != api.FLOAT32:
        return BFLOAT16_MAX if value > 0 else -BFLOAT16_MAX
    return value


def as_integer(h: api.Handle, tt_dtype=api.INT32) -> api.Handle:
    """h (bool, stored bfloat16 0/1, or integer) in integer device dtype `tt_dtype` (int32 or uint32), TILE:
    for bitwise ops and integer results of index ops (ttnn's uint16 indices)."""
    return _typecast(ensure(h, TILE), tt_dtype)


def signed(h: api.Handle) -> api.Handle:
    return ensure(h, SIGNED)


def ensure_promoted(handles: list) -> list:
    """PROMOTE: TILE, and one device dtype for all -- floating if any is floating, else int32 (uint32 when
    all are uint32)."""
    first = handles[0].tt.dtype if handles[0].tt is not None else None
    if all(h.tt is not None and satisfies(h.tt, PROMOTE) and h.tt.dtype == first for h in handles):
        return handles  # the common case: nothing to do
    handles = [ensure(h, TILE) for h in handles]
    first = handles[0].tt.dtype
    if any(h.tt.dtype != first for h in handles[1:]):
        dtypes = [h.tt_dtype for h in handles]
        floats = [d for d in dtypes if is_float(d)]
        target = api.FLOAT32 if api.FLOAT32 in floats else (api.BFLOAT16 if floats else api.INT32)
        handles = [_typecast(h, target) for h in handles]
    return handles


def for_write(base: api.Handle, value: api.Handle) -> tuple:
    """(base, value) both TILE in one device dtype, for writing `value` into part of `base` (a scatter): the
    value takes the base's storage (a float value is rounded as the base stores it), except that a signed
    value makes an unsigned base signed (uint32 storage promises non-negative values)."""
    base, value = ensure(base, TILE), ensure(value, TILE)
    if base.tt_dtype == value.tt_dtype:
        return base, value
    if base.tt_dtype == api.UINT32 and not is_float(value.tt_dtype) and not (value.bounds and value.bounds[0] >= 0):
        return _typecast(base, api.INT32), _typecast(value, api.INT32)
    return base, _typecast(value, base.tt_dtype)


def scatter_layout(h: api.Handle):
    """The layout ttnn.scatter/scatter_add take for a tensor like h: TILE, except float32, which ttnn 0.81.1's
    scatter refuses in TILE ("!(input_dtype == FLOAT32 && input_layout == TILE)"): ROW_MAJOR then."""
    return api.ROW_MAJOR if h.tt_dtype == api.FLOAT32 else api.TILE


SCATTER_I32_TILE_MAX = 256  # ttnn 0.81.1: a 32-bit TILE index refused beyond this many along the scatter axis


def scatter_index_layout(index: api.Handle, d: int, base_layout):
    """The layout of ttnn.scatter's index: the base's, except a 32-bit TILE index longer than 256 along the
    scatter axis, which ttnn 0.81.1 refuses ("!(is_i32(index_dtype) && index_layout == TILE && index_shape[dim]
    > ...)"; e.g. top-p sampling's scatter over the vocabulary): ROW_MAJOR then, which it takes."""
    if base_layout == api.TILE and index.shape[d] > SCATTER_I32_TILE_MAX:
        return api.ROW_MAJOR
    return base_layout


def relayout(h: api.Handle, layout) -> api.Handle:
    """h in `layout` (changed in place: lossless, so every user of h may share the converted form)."""
    _relayout(h, layout)
    return h


def retag(h: api.Handle, dtype: torch.dtype) -> api.Handle:
    """The same value as torch dtype `dtype` (a new handle; the device tensor is converted when the
    storage policy stores `dtype` differently, e.g. an integer result written into a float tensor)."""
    if h.dtype == dtype:
        return h
    new = api.Handle(h.tt, h.shadow, dtype, h.shape, h.index, None if dtype.is_floating_point else h.bounds)
    if h.tt is None or dtype == torch.bool:
        return new
    if dtype in _INT:
        if is_float(new.tt_dtype):
            new = _typecast(new, api.INT32)
    elif new.tt_dtype != storage_for(dtype)[0]:
        new = _typecast(new, storage_for(dtype)[0])
    new.dtype = dtype
    return new
