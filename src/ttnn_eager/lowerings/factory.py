"""Factories, copies between devices, dtype casts, scalars.

Constant factories (zeros, ones, full and their _like/new_ forms) are created on the device by ttnn.full.
Random factories, arange, eye and the like are computed by PyTorch on the host -- so they equal the CPU's
under the same torch.manual_seed -- and uploaded.
"""
from __future__ import annotations

import torch

from ..core import capture
from ..core import layout as policy
from ..core.layout import ANY, STAGED, TILE
from ..core.registry import Unfit, lowering
from ..device import api
from ..device.runtime import index_of
from ._common import is_handle
from .views import share


def _index(device) -> int:
    """The ttnn device index a factory's `device=` names. A result asked for on another device
    (`zeros_like(x, device="cpu")`) is not the device's to make: PyTorch's CPU kernel makes it, where it was asked."""
    if device is not None and torch.device(device).type != "ttnn":
        raise Unfit(f"the result is asked for on {device}")
    return index_of(device)

aten = torch.ops.aten


def _dtype(dtype):
    return torch.get_default_dtype() if dtype is None else dtype


def full_handle(shape, value, dtype: torch.dtype, index: int, like: api.Handle | None = None) -> api.Handle:
    """A constant on the device; `like`: the tensor it is made like (its storage may follow: layout.storage_like)."""
    policy.check_dtype(dtype)
    if dtype is torch.complex64:  # stored as a real pair (layout.py): made on the host
        return policy.to_device(torch.full(tuple(shape), value, dtype=dtype), index)
    nonnegative = not isinstance(value, bool) and value >= 0
    tt_dtype, tt_layout = (policy.storage_for(dtype, nonnegative) if like is None
                           else policy.storage_like(like, dtype, nonnegative))
    shape = tuple(shape)
    if 0 in shape or (not dtype.is_floating_point and not policy.fits_int32(value)):
        # no elements: nothing for ttnn.full to make; an int64 constant beyond int32: kept on the host
        return policy.to_device(torch.full(shape, value, dtype=dtype), index)
    if dtype == torch.bool:
        value = float(bool(value))
    elif isinstance(value, float):
        value = policy.finite_constant(value, tt_dtype)
    out = api.create("full", (shape,), tt_dtype, tt_layout, index, dtype, fill_value=value)
    if not dtype.is_floating_point:
        out.bounds = (int(value), int(value), True)  # a known constant
    return out


@lowering(aten.empty.memory_format, aten.empty_strided.default, aten.empty_permuted.default,
          notes="no device memory until first written (then it is zeros)")
def empty(size, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, **_):
    policy.check_dtype(_dtype(dtype))
    return api.Handle(None, None, _dtype(dtype), size, _index(device))


@lowering(aten.zeros.default, ttnn=["full"])
def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full_handle(size, 0, _dtype(dtype), _index(device))


@lowering(aten.ones.default, ttnn=["full"])
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full_handle(size, 1, _dtype(dtype), _index(device))


@lowering(aten.full.default, ttnn=["full"])
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    if dtype is None:
        dtype = torch.tensor(fill_value).dtype if not isinstance(fill_value, float) else torch.get_default_dtype()
    return full_handle(size, fill_value, dtype, _index(device))


def _like(x, dtype, device):
    return (x.dtype if dtype is None else dtype), (x.index if device is None else _index(device))


@lowering(aten.empty_like.default, notes="no device memory until first written")
def empty_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype, index = _like(x, dtype, device)
    return api.Handle(None, None, dtype, x.shape, index)


@lowering(aten.zeros_like.default, ttnn=["full"])
def zeros_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full_handle(x.shape, 0, *_like(x, dtype, device), like=x)


@lowering(aten.ones_like.default, ttnn=["full"])
def ones_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full_handle(x.shape, 1, *_like(x, dtype, device), like=x)


@lowering(aten.full_like.default, ttnn=["full"])
def full_like(x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full_handle(x.shape, fill_value, *_like(x, dtype, device), like=x)


@lowering(aten.new_zeros.default, ttnn=["full"])
def new_zeros(x, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full_handle(size, 0, *_like(x, dtype, device))


@lowering(aten.new_ones.default, ttnn=["full"])
def new_ones(x, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full_handle(size, 1, *_like(x, dtype, device))


@lowering(aten.new_full.default, ttnn=["full"])
def new_full(x, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full_handle(size, fill_value, *_like(x, dtype, device))


@lowering(aten.new_empty.default, aten.new_empty_strided.default, notes="no device memory until first written")
def new_empty(x, size, *args, dtype=None, layout=None, device=None, pin_memory=None):
    dtype, index = _like(x, dtype, device)
    return api.Handle(None, None, dtype, size, index)


@lowering(aten.scalar_tensor.default, ttnn=["full"], notes="made on the device (a Python scalar meeting a device "
          "tensor, e.g. torch.where(mask, -inf, x)): no transfer")
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = _dtype(dtype)
    value = bool(s) if dtype == torch.bool else float(s) if dtype.is_floating_point else \
        complex(s) if dtype.is_complex else int(s)
    return full_handle((), value, dtype, _index(device))


def _host_factory(op):
    """Run the factory on the host (device=cpu) with PyTorch's own generator, then upload."""
    name = op._schema.name.split("::")[1]
    random = name.startswith(("rand", "normal"))
    def lower(*args, **kwargs):
        if random:
            capture.refuse(f"a random factory (aten.{name}: drawn on the host, so a replay would "
                                     f"repeat the same numbers)")
        index = _index(kwargs.get("device"))
        kwargs = dict(kwargs, device=torch.device("cpu"))
        args = [api.download(a) if is_handle(a) else a for a in args]
        return policy.to_device(op(*args, **kwargs), index)
    lower.__name__ = lower.__qualname__ = f"host_{op._schema.name.split('::')[1]}"
    return lower


@lowering(aten.arange.default, aten.arange.start, aten.arange.start_step, ttnn=["arange"],
          notes="integer ranges made on the device; a floating range is computed on the host and uploaded")
def arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    if not all(isinstance(v, int) for v in (start, end, step)) or (dtype is not None and dtype.is_floating_point):
        host = torch.arange(start, end, step, dtype=dtype)
        return policy.to_device(host, _index(device))
    dtype = dtype or torch.int64
    n = max(0, -(-(end - start) // step))
    if n == 0:
        return policy.to_device(torch.empty(0, dtype=dtype), _index(device))
    last = start + (n - 1) * step
    tt_dtype, tt_layout = policy.storage_for(dtype, nonnegative=min(start, last) >= 0)
    out = api.create("arange", (start, end, step), tt_dtype, tt_layout, _index(device), dtype)
    out.bounds = (min(start, last), max(start, last), True)  # known: position ids get range-checked
    return out


for _op in (aten.rand.default,
            aten.rand.generator, aten.randn.default, aten.randn.generator, aten.randint.default,
            aten.randint.low, aten.randint.generator, aten.randint.low_generator, aten.randperm.default,
            aten.randperm.generator, aten.normal.float_float, aten.eye.default, aten.eye.m,
            aten.linspace.default, aten.tril_indices.default, aten.triu_indices.default):
    lowering(_op, ttnn=["from_torch"], notes="computed on the host by PyTorch, uploaded")(_host_factory(_op))


def _host_like(op):
    def lower(x, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, **kw):
        capture.refuse(f"a random factory (aten.{op._schema.name.split('::')[1]}: drawn on the host, "
                                 f"so a replay would repeat the same numbers)")
        dtype, index = _like(x, dtype, device)
        value = op(torch.empty(x.shape, dtype=dtype), *args, **kw)
        return policy.to_device(value, index)
    lower.__name__ = lower.__qualname__ = f"host_{op._schema.name.split('::')[1]}"
    return lower


for _op in (aten.rand_like.default, aten.randn_like.default, aten.randint_like.default,
            aten.randint_like.low_dtype):
    lowering(_op, ttnn=["from_torch"], notes="computed on the host by PyTorch, uploaded")(_host_like(_op))


# ----------------------------------------------------------------------------------------------- copies
def cast(h: api.Handle, dtype: torch.dtype) -> api.Handle:
    """h as torch dtype `dtype`, with PyTorch's conversion semantics (bool: != 0; float -> int truncates)."""
    if h.dtype == dtype:
        return h
    if h.host is not None:  # staged (a conv kernel): converted on the device
        policy.materialize(h)
    policy.check_dtype(dtype)
    if 0 in h.shape:  # no elements: nothing to convert (ttnn's typecast cannot take a zero-size tensor)
        return policy.to_device(torch.empty(h.shape, dtype=dtype), h.index)
    if h.dtype.is_complex and dtype == torch.bool:  # z != 0: either part non-zero (the pair's max of |part|)
        from .views import reshape, slice_handle
        pair = policy.ensure(policy.as_pair(policy.materialize(h)), TILE)
        re, im = (api.run("abs", slice_handle(pair, -1, k, k + 1)) for k in (0, 1))
        h = reshape(policy.retag(api.run("maximum", re, im), torch.float32), list(h.shape))
    elif h.dtype.is_complex and not dtype.is_complex:  # PyTorch's cast: the real parts
        h = policy.retag(h, torch.float32)
        if h.dtype == dtype:
            return h
    if dtype == torch.bool:
        out = api.run("ne", policy.ensure(h, TILE), 0, dtype=api.BFLOAT16, out_dtype=torch.bool)
        out.bounds = _nonzero_bounds(h.bounds)
        return out
    if h.dtype.is_floating_point and not dtype.is_floating_point and not dtype.is_complex:
        h = api.run("trunc", policy.ensure(h, TILE))
    out = policy.retag(h, dtype)
    if h.dtype == torch.bool and not dtype.is_floating_point and out.bounds is None:
        out.bounds = (0, 1, False)  # a mask's 0/1 (a range: which of them occur is not known)
    return out


def _nonzero_bounds(b):
    """Known bounds of (x != 0) from x's known bounds."""
    if b is None:
        return None
    lo, hi, exact = b
    if lo > 0 or hi < 0:
        return (1, 1, exact)
    if lo == hi == 0:
        return (0, 0, exact)
    return (0, 1, exact and (lo == 0 or hi == 0))  # then a zero and a non-zero both occur


@lowering(aten._to_copy.default, ttnn=["typecast", "from_torch", "to_torch"], mixed_devices=True, needs=STAGED,
          notes="device -> cpu downloads, cpu -> device uploads under the storage policy")
def to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    target = torch.device(device) if device is not None else None
    if not is_handle(x):  # a CPU tensor going to a ttnn device
        capture.refuse("a host-to-device copy of a CPU tensor (its value would be frozen into the graph)")
        value = x if dtype is None else x.to(dtype)
        return policy.to_device(value, index_of(target))
    dtype = x.dtype if dtype is None else dtype
    if target is not None and target.type != "ttnn":
        return policy.download(x).to(dtype)
    if target is not None and index_of(target) != x.index:
        return policy.to_device(api.download(x).to(dtype), index_of(target))
    out = cast(x, dtype)
    return share(x) if out is x else out


@lowering(aten.copy_.default, ttnn=["from_torch", "to_torch"], mixed_devices=True, needs=STAGED,
          notes="src is broadcast to self's shape; cpu <-> ttnn in either direction")
def copy_(dst, src, non_blocking=False):
    if not is_handle(dst):  # ttnn -> cpu: PyTorch hands back the CPU tensor itself
        return dst.copy_(policy.download(src))
    shape = tuple(dst.shape)
    if not is_handle(src):
        capture.refuse("a copy_ from a CPU tensor (its value would be frozen into the graph)")
        value = torch.as_tensor(src).to(dst.dtype).expand(shape)
        # (load_state_dict into a staged conv kernel: the new value is staged too, not uploaded as a TILE
        # [out, in, kh, kw] tensor, which would pad every kernel plane to 32x32)
        return policy.to_device(value, dst.index, into=dst)
    if src.index != dst.index:
        return policy.to_device(api.download(src).to(dst.dtype).expand(shape), dst.index)
    if tuple(src.shape) != shape:
        from .views import expand
        src = expand(policy.materialize(src), shape)
    return cast(src, dst.dtype)


@lowering(aten.copy.default, ttnn=["expand", "typecast", "from_torch", "to_torch"], mixed_devices=True, needs=STAGED,
          notes="the functional copy_ (what aot_autograd's functionalization makes of x.copy_(y) and of an out= into "
                "a view): src broadcast to self's shape and cast to its dtype, a new tensor on self's device")
def copy(x, src, non_blocking=False):
    if not is_handle(x):  # a CPU self: PyTorch's own copy on the host
        return aten.copy.default(x, policy.download(src) if is_handle(src) else src)
    shape = tuple(x.shape)
    if not is_handle(src) or src.index != x.index:
        capture.refuse("a copy from another device (its value would be frozen into the graph)")
        value = torch.as_tensor(src if not is_handle(src) else api.download(src))
        return policy.to_device(value.to(x.dtype).expand(shape).contiguous(), x.index)
    from .views import expand
    out = cast(src if tuple(src.shape) == shape else expand(policy.materialize(src), shape), x.dtype)
    return share(out) if out is src else out


@lowering(aten._local_scalar_dense.default, ttnn=["to_torch"],
          notes="a device-to-host sync (.item()), unless the value is known on the host (bounds)")
def local_scalar_dense(x):
    if x.bounds is not None and x.bounds[0] == x.bounds[1] and x.bounds[2]:
        capture.host_decision(x, "item", f"aten._local_scalar_dense (.item() = {x.bounds[0]}, from values known "
                                        f"on the host)")
        return bool(x.bounds[0]) if x.dtype == torch.bool else x.bounds[0]
    return api.download(x).item()


@lowering(aten.fill.Scalar, aten.fill.Tensor, ttnn=["full"], notes="fill_ runs this and writes the result")
def fill(x, value):
    if is_handle(value):  # a 0-d device tensor: its value, read once
        value = api.download(value).item()
    return full_handle(x.shape, value, x.dtype, x.index)


@lowering(aten.zero.default, ttnn=["full"], notes="zero_ runs this and writes the result")
def zero(x):
    return full_handle(x.shape, 0, x.dtype, x.index)
