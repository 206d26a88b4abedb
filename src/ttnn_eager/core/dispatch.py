"""The single entry point of every aten op on a `ttnn` device.

    dispatch(func, args, kwargs)
      1. a CompositeImplicitAutograd op that arrives whole (inference_mode skips the autograd keys) and has
         no lowering of its own is decomposed, as PyTorch would above us
      2. the registered lowering runs: tensors become device Handles in the layout the lowering declares
         (layout.ensure), CPU 0-d tensors become Python scalars, other CPU tensors are refused
         ("Expected all tensors to be on the same device ...")
      3. in-place (`add_`) and out= (`add.out`) ops with no lowering of their own run their functional op's
         lowering and write the result into the tensor PyTorch hands back
      4. an op whose PyTorch decomposition is allowlisted (core/decompositions.py) is decomposed into lowered ops
      5. anything else runs on the CPU fallback: inputs downloaded, the op run by PyTorch on the CPU, outputs
         uploaded (in-place and out= semantics kept); warned once per op, counted in `fallbacks`; in strict
         mode an error naming the op instead.

Views: TT-NN tensors have no strides, so a view whose shape differs from its base gets its own device
tensor. Its handle remembers how it was derived (`_finish`); when the base has been written in place
since, the view is re-derived before use (`refresh`), and a write through the view is scattered into the
base (`write`, with the view op's inverse registered beside its lowering: registry.inverse_of), as PyTorch's
functionalization does.

The lowerings themselves are plug-ins: this module only looks them up (registry.REGISTRY); importing the
`lowerings` package fills the registry (the package root does it before the first op reaches us).
"""
from __future__ import annotations

import functools
import math
import os
import warnings

import torch
from torch.utils._pytree import tree_map

from .. import config, counters
from ..device import api, runtime
from . import capture, decompositions, layout
from .registry import BY_ID, COMPLEX_BY_ID, FUSIONS, INVERSES, REGISTRY, Unfit, device_mismatch, late_entry, scatter_into
from .registry import output_aliases as _aliases
from . import tensor as _tensor
from .tensor import add_view, handle_of, maybe_handle, new_tensor

aten = torch.ops.aten


class FallbackError(NotImplementedError):
    """Strict mode: an aten op has no TT-NN lowering."""


_C64 = torch.complex64  # stored as real pairs (layout.py); only complex lowerings take one (_complex)


# ----------------------------------------------------------------------------------------------- helpers
@functools.lru_cache(maxsize=None)
def _is_cia(func) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")


def _get(args, kwargs, where, name):
    if isinstance(where, int) and where < len(args):
        return args[where]
    return kwargs.get(name)


class _Call:
    """Turns one call's arguments into what a lowering receives."""

    __slots__ = ("index", "promote", "mixed", "complex", "host_only", "numbers", "call")

    def __init__(self, mixed: bool, index: int | None = None, promote: list | None = None, numbers: bool = True,
                 call: tuple = ((), {})):
        # index: the device of the tensor arguments seen so far; promote: the PROMOTE handles seen so far;
        # numbers: the lowering takes a 0-d CPU tensor as a Python number (registry.Lowering.numbers), else it
        # gets it on the device of the call's (args, kwargs)
        self.index, self.promote, self.mixed = index, promote if promote is not None else [], mixed
        self.numbers, self.call = numbers, call
        self.complex = False  # a complex tensor argument was seen: the call goes to _complex
        self.host_only = False  # an int64 tensor kept on the host (api.keep_on_host): the call falls back

    def arg(self, a, need):
        h = maybe_handle(a)
        if h is not None:
            if h.source is not None:
                refresh(h)
            if h.index != self.index:
                if self.index is not None:
                    raise device_mismatch(f"ttnn:{self.index}", f"ttnn:{h.index}")
                self.index = h.index
            if need is None:
                return h
            if h.tt is None and api.is_host_only(h):
                self.host_only = True
                return h
            if h.dtype is _C64:
                self.complex = True
                return h
            if need.dtype == "promote":
                if not need.channels_last and len(h.shape) == 4 and h.tt is not None and layout.is_channels_last(h):
                    layout.to_nchw(h)  # (layout.py: channels-last residency)
                if layout.sharded_made:
                    layout.interleaved(h)  # (layout.py: decode-layout residency)
                self.promote.append(h)
                return h
            return layout.ensure(h, need)
        if isinstance(a, torch.Tensor):
            if self.mixed:
                return a
            if a.dim() == 0 and a.device.type == "cpu":  # PyTorch lets 0-d CPU tensors mix with any device
                if self.numbers:
                    value = a.item()
                    self.host_only |= not layout.fits_int32(value)  # (an int64 beyond int32: the CPU computes)
                    return value
                index = self.index if self.index is not None else _device_index(*self.call)
                return self.arg(new_tensor(layout.to_device(a, index)), need)
            first = f"ttnn:{self.index}" if self.index is not None else "ttnn:0"
            raise device_mismatch(first, str(a.device))
        if type(a) in (list, tuple):
            return type(a)(self.arg(x, need) for x in a)
        return a

    def promoted(self, hargs: list, hkwargs: dict):
        """PROMOTE arguments brought to one device dtype (layout.ensure_promoted), swapped in where they are."""
        new = layout.ensure_promoted(self.promote)
        if new is self.promote:
            return hargs, hkwargs
        promoted = dict(zip(map(id, self.promote), new))
        return _swap(hargs, promoted), {k: _swap(v, promoted) for k, v in hkwargs.items()}


def _swap(x, new: dict):
    """x with every handle h replaced by new[id(h)] (a module-level function: a recursive closure would be a
    reference cycle keeping the call's device tensors alive until the garbage collector runs)."""
    if type(x) in (list, tuple):
        return type(x)(_swap(y, new) for y in x)
    return new.get(id(x), x)


def _wrap(x):
    if type(x) is api.Handle:
        return new_tensor(x)
    if type(x) in (list, tuple):
        return type(x)(_wrap(y) for y in x)
    return x


def refresh(h: api.Handle) -> api.Handle:
    """A view with its own device tensor (reshape, transpose, slice, ... of a base) is re-derived from its
    base when the base was written in place since: the view sees the base's update, as in PyTorch."""
    src = h.source
    if src is None:
        return h
    base, version, fn, hargs, hkwargs, pos = src
    refresh(base)
    if base.version != version:
        new = fn(*hargs, **hkwargs)
        h.assign(new[pos] if pos is not None else new)
        h.version += 1
        h.source = (base, base.version, fn, hargs, hkwargs, pos)
    return h


def write_into(target: torch.Tensor, h: api.Handle) -> torch.Tensor:
    """In-place / out= semantics: `target` (and every tensor sharing its storage) now holds h's value. An out=
    tensor of another size (an empty one, PyTorch's usual out=) is resized: a fresh storage holding h."""
    dst = handle_of(target)
    if getattr(target, "_dynamo_static_input_type", None) is not None:
        dst.pinned = True  # torch._dynamo.mark_static_address(target): its address must not change
    if h.shape.numel() != target.numel() and dst.source is None and tuple(h.shape) != tuple(dst.shape):
        _tensor.reset(target, layout.retag(h, target.dtype))
        return target
    write(dst, h)
    return target


def write(dst: api.Handle, h: api.Handle) -> None:
    """dst now holds h's value. When dst is a view with its own device tensor, the write reaches its base --
    the view's new value scattered into the base (registry.scatter_into), recursively for a view of a view --
    and every other view of that base sees it (refresh). Note [writes through views] in registry.py.

    A base normally takes h's device tensor (TT-NN tensors are values: the old buffer is freed, memory stays
    flat, no extra op). A pinned base -- its tensor marked with torch._dynamo.mark_static_address, as
    transformers' StaticCache marks its keys, values and positions for CUDA graphs -- keeps its buffer: h's
    value is copied into it (device.api.overwrite: one ttnn.copy), where no other tensor shares that buffer."""
    if tuple(h.shape) != tuple(dst.shape):
        if h.shape.numel() != dst.shape.numel() or h.tt is None:
            raise RuntimeError(f"output with shape {list(dst.shape)} doesn't match the broadcast shape {list(h.shape)}")
        h = BY_ID[id(aten.view.default)].fn(h, dst.shape)  # the view lowering: a reshape of the value
    h = layout.retag(h, dst.dtype)
    src = dst.source
    if src is not None:
        base, _, fn, hargs, hkwargs, pos = src
        refresh(base)
        if api.is_host_only(h) or api.is_host_only(base):  # (int64 values beyond int32: no lowering takes them)
            fn = _view_on_host(fn)
        write(base, scatter_into(fn, base, h, hargs[1:], hkwargs, pos))
        dst.source = (base, base.version, fn, hargs, hkwargs, pos)
        dst.assign(h)  # the value, and what is known of it, are h's now
    elif not (dst.pinned and api.overwrite(dst, h)):
        dst.assign(h)
    dst.version += 1


def _finish(entry, func, result, args, kwargs, hargs, hkwargs):
    """The result of an op whose outputs alias an input (schema alias annotations): a view output is a real
    alias of its base (the same storage, PyTorch's geometry for it: _aliases) whose own device tensor
    remembers how it derives from its base (for refresh); an in-place/out= output is the tensor the caller
    passed, now holding the result."""
    if entry.aliases == _VIEW_OF_FIRST and type(result) is api.Handle and not kwargs \
            and type(base := hargs[0]) is api.Handle:  # (the common view op: its geometry computed directly)
        kind = _VIEW_KINDS.get(func)
        if kind is not None and (alias := _view(kind, args, result)) is not None:  # (in C++: csrc/tensor.cpp)
            if result is not base:
                result.source = (base, base.version, entry.fn, hargs, hkwargs, None)
            return alias
        geometry = _GEOMETRY.get(func)
        try:
            g = geometry(*args) if geometry is not None else None
        except TypeError:  # an argument form the fast path does not take (SymInts): the general way
            g = None
        if g is not None:
            size, stride, offset = g
            alias = _tensor.alias(args[0], size, stride, offset)
            if result is not base:
                result.source = (base, base.version, entry.fn, hargs, hkwargs, None)
            add_view(alias, result, (tuple(size), tuple(stride), offset, alias.dtype))
            return alias
    single = type(result) is not list and type(result) is not tuple
    outs = [result] if single else list(result)
    view_of = None
    for ri, where, name, is_write in entry.aliases:
        if is_write:
            if ri < len(outs):
                orig = _get(args, kwargs, where, name)
                if outs[ri] is not orig and type(outs[ri]) is api.Handle:
                    write_into(orig, outs[ri])
                outs[ri] = orig
            continue
        base = _get(hargs, hkwargs, where, name)
        if type(base) is api.Handle:
            view_of = (_get(args, kwargs, where, name), base)
    if view_of is not None:
        base_t, base = view_of
        views = _aliases_of(func, args, kwargs, base_t, outs)
        for pos, out in enumerate(outs):
            if type(out) is not api.Handle:
                continue
            alias = views[pos]
            if alias is None:  # the op copied (reshape, contiguous of a non-contiguous tensor): a tensor of its own
                outs[pos] = new_tensor(_own(out, base))
                continue
            if out is not base:
                out.source = (base, base.version, entry.fn, hargs, hkwargs, None if single else pos)
            add_view(alias, out)
            outs[pos] = alias
    return _wrap(outs[0]) if single else tuple(_wrap(o) for o in outs)


_VIEW_OF_FIRST = ((0, 0, "self", False),)  # entry.aliases of a view op of one result aliasing `self` (transpose)


def _own(h: api.Handle, base: api.Handle) -> api.Handle:
    """h as the value of a new tensor: a handle of its own when it is (or derives from) another tensor's."""
    if h is base or h.source is not None:
        return h.shared()
    return h


_AS_STRIDED = aten.as_strided.default
_DTYPE_VIEWS = (aten.view_as_real.default, aten.view_as_complex.default)
_SET = aten.set_.source_Storage_storage_offset
_CPU_KEY = torch._C.DispatchKey.CPU


def _meta_of(x):
    """A ttnn tensor as a meta tensor of its geometry (sizes, strides, offset) on a storage of its size."""
    if isinstance(x, torch.Tensor) and x.device.type == "ttnn":
        n = -(-x.untyped_storage().nbytes() // x.dtype.itemsize)
        return torch.empty(n, dtype=x.dtype, device=_META).as_strided(x.shape, x.stride(), x.storage_offset())
    if isinstance(x, torch.device) and x.type == "ttnn":
        return _META
    return x


# The geometry (sizes, strides, storage offset) of the common view ops, computed directly: running the meta
# kernel (_aliases_of's general way) costs ~100 us a view. Each returns None where it would have to think
# (the meta kernel then decides, and raises PyTorch's own errors).
def _dim(d: int, n: int) -> int:
    return d + n if d < 0 else d


def _g_view(x, size):
    if not x.is_contiguous():
        return None
    size = list(size)
    if size.count(-1) == 1:
        known = math.prod(v for v in size if v != -1)
        if known == 0:
            return None
        size[size.index(-1)] = x.numel() // known
    if math.prod(size) != x.numel() or any(v < 0 for v in size):
        return None
    return size, _tensor.contiguous_strides(tuple(size)), x.storage_offset()


def _g_transpose(x, d0, d1):
    n = x.dim()
    if not n:
        return None
    d0, d1 = _dim(d0, n), _dim(d1, n)
    size, stride = list(x.shape), list(x.stride())
    size[d0], size[d1], stride[d0], stride[d1] = size[d1], size[d0], stride[d1], stride[d0]
    return size, stride, x.storage_offset()


def _g_permute(x, dims):
    n = x.dim()
    dims = [_dim(d, n) for d in dims]
    if sorted(dims) != list(range(n)):
        return None
    return [x.shape[d] for d in dims], [x.stride(d) for d in dims], x.storage_offset()


def _g_unsqueeze(x, d):
    n = x.dim()
    d = _dim(d, n + 1)
    if not 0 <= d <= n:
        return None
    size, stride = list(x.shape), list(x.stride())
    stride.insert(d, size[d] * stride[d] if d < n else 1)
    size.insert(d, 1)
    return size, stride, x.storage_offset()


def _g_expand(x, size, *, implicit=False):
    n, m = x.dim(), len(size)
    if m < n:
        return None
    out_size, out_stride = [], []
    for i, want in enumerate(size):
        j = i - (m - n)
        have = x.shape[j] if j >= 0 else 1
        if want == -1:
            if j < 0:
                return None
            want = have
        if j >= 0 and have == want:
            out_stride.append(x.stride(j))
        elif have == 1:
            out_stride.append(0)
        else:
            return None
        out_size.append(want)
    return out_size, out_stride, x.storage_offset()


def _g_slice(x, d=0, start=None, end=None, step=1):
    n = x.dim()
    if not n or step is None or step < 1:
        return None
    d = _dim(d, n)
    length = x.shape[d]
    start = 0 if start is None else (start + length if start < 0 else start)
    end = length if end is None else (end + length if end < 0 else end)
    start, end = min(max(start, 0), length), min(max(end, 0), length)
    end = max(end, start)
    size, stride = list(x.shape), list(x.stride())
    size[d] = (end - start + step - 1) // step
    offset = x.storage_offset() + start * stride[d]
    stride[d] *= step
    return size, stride, offset


def _g_select(x, d, index):
    n = x.dim()
    if not n:
        return None
    d = _dim(d, n)
    length = x.shape[d]
    if not -length <= index < length:
        return None
    index = index + length if index < 0 else index
    size, stride = list(x.shape), list(x.stride())
    offset = x.storage_offset() + index * stride.pop(d)
    size.pop(d)
    return size, stride, offset


_GEOMETRY = {aten.view.default: _g_view, aten._unsafe_view.default: _g_view, aten.transpose.int: _g_transpose,
             aten.permute.default: _g_permute, aten.unsqueeze.default: _g_unsqueeze,
             aten.expand.default: _g_expand, aten.slice.Tensor: _g_slice, aten.select.int: _g_select,
             aten.t.default: lambda x: _g_transpose(x, 0, 1) if x.dim() == 2 else None}


# The same view ops' aliases made in one C++ call (csrc/tensor.cpp: view), their geometry computed as the _g_*
# functions compute it and their view Handle stored (add_view); None where those would return None.
_VIEW_KINDS = {aten.view.default: 0, aten._unsafe_view.default: 0, aten.transpose.int: 1, aten.permute.default: 2,
               aten.unsqueeze.default: 3, aten.expand.default: 4, aten.slice.Tensor: 5, aten.select.int: 6,
               aten.t.default: 7}
_view = _tensor._NATIVE.view


def _aliases_of(func, args, kwargs, base_t, outs):
    """For each output of the view op `func` (a list like outs): the alias of base_t PyTorch makes (its sizes,
    strides and offset from _GEOMETRY or else the op's meta kernel; the alias itself by the device-generic CPU
    kernel of as_strided: same storage, version counter and keys as the base), or None where the op copies."""
    geometry = _GEOMETRY.get(func)
    if geometry is not None and args and args[0] is base_t and len(outs) == 1:
        try:
            g = geometry(*args, **kwargs)
        except TypeError:  # an argument form the fast path does not take (SymInts, keywords): the meta kernel
            g = None
        if g is not None:
            return [_tensor.alias(base_t, *g)]
    margs, mkwargs = tree_map(_meta_of, (args, kwargs))
    m = func(*margs, **mkwargs)
    ms = list(m) if isinstance(m, (list, tuple)) else [m]
    mbase = margs[0] if args and args[0] is base_t else next(v for k, v in mkwargs.items() if kwargs[k] is base_t)
    sid = mbase.untyped_storage()._cdata
    res = []
    for o in ms:
        if not isinstance(o, torch.Tensor) or o.untyped_storage()._cdata != sid:
            res.append(None)
        elif func in _DTYPE_VIEWS:  # a view as another dtype: made by the op's own device-generic CPU kernel
            res.append(func._op_dk(_CPU_KEY, *args, **kwargs))
        elif o.dtype is not mbase.dtype:  # view.dtype (its own CPU kernel kills the process): an empty tensor
            alias = torch.empty(0, dtype=o.dtype, device=base_t.device)  # of the new dtype set to the storage
            res.append(_SET._op_dk(_CPU_KEY, alias, base_t.untyped_storage(), o.storage_offset(), o.shape,
                                   o.stride()))
        else:
            res.append(_tensor.alias(base_t, o.shape, o.stride(), o.storage_offset()))
    return res + [None] * (len(outs) - len(res))


# ----------------------------------------------------------------------------------------------- entry
_ATEN_CALLS, _ATEN_OPS = counters.aten_calls, counters.aten_ops  # (mutated in place, never rebound)
# keyword values that are not tensors nor hold any: scale, memory_format, approximate, dtype, ...
_PLAIN_KWARGS = frozenset((type(None), bool, int, float, str, torch.dtype, torch.memory_format, torch.layout,
                           torch.device))


def dispatch(func, args, kwargs):
    if counters.profile is not None:
        return counters.profile.run(func, _dispatch, args, kwargs)
    return _dispatch(func, args, kwargs)


def _dispatch(func, args, kwargs):
    key = id(func)
    entry = BY_ID.get(key)
    if entry is None:
        entry = late_entry(func)  # (a library's op: torchvision::roi_align)
        if entry is None:
            return _unlowered(func, args, kwargs)
    if key in _ATEN_OPS:  # counters.count_aten(func), inline
        _ATEN_CALLS[key] += 1
    else:
        counters.count_aten(func)
    if _has_empty(args) and (empty := _zero_size(entry, func, args, kwargs)) is not None:
        return empty
    if key in FUSIONS and api.DEFERRED and (fused := _fuse(FUSIONS[key], args, kwargs)) is not None:
        return _wrap(fused)
    if entry.numbers and (int in map(type, args) or kwargs and int in map(type, kwargs.values())) \
            and _wide_number(args, kwargs):  # (only an int can be too wide)
        return fallback(func, args, kwargs, reason=WIDE)
    # Arguments. The common case is inline: a device tensor (a view's: refreshed) already in the form its Need
    # asks for (PROMOTE: TILE and the same device dtype as the PROMOTE arguments before it). The first argument that is not
    # (or any kwarg) hands this call over to _Call, which does the general work.
    hargs = list(args)
    call = index = None
    promote = []
    for pos, need in entry.tensor_positions:
        if pos >= len(hargs):
            break
        a = hargs[pos]
        if call is None and (h := maybe_handle(a)) is not None:
            if h.source is not None:  # a view's own device tensor: re-derived first if its base changed
                refresh(h)
            tt = h.tt
            if tt is not None and (index is None or h.index == index) \
                    and h.dtype is not _C64 and layout.satisfies(tt, need) \
                    and (need.channels_last or not layout.channels_last_made or len(h.shape) != 4
                         or not layout.is_channels_last(h)) \
                    and (not layout.sharded_made or need.sharded or not tt.is_sharded()) \
                    and (need.dtype != "promote" or not promote or tt.dtype == promote[0].tt.dtype):
                if need.dtype == "promote":
                    promote.append(h)
                index = h.index
                hargs[pos] = h
                continue
        if call is None:
            call = _Call(entry.mixed_devices, index, promote, entry.numbers, (args, kwargs))
        hargs[pos] = call.arg(a, need)
    if not kwargs:
        hkwargs = {}
    elif call is None and all(type(v) in _PLAIN_KWARGS for v in kwargs.values()):
        hkwargs = kwargs.copy()  # (no tensor among them: _Call.arg would return each as it is)
    else:
        if call is None:
            call = _Call(entry.mixed_devices, index, promote, entry.numbers, (args, kwargs))
        hkwargs = {k: call.arg(v, entry.by_name.get(k)) for k, v in kwargs.items()}
    if call is not None and call.host_only:
        return fallback(func, args, kwargs, reason=WIDE)
    if call is not None and call.complex:
        return _complex(func, args, kwargs)
    if call is not None and call.promote:
        hargs, hkwargs = call.promoted(hargs, hkwargs)
    tt = None  # (a device tensor held by this frame would count as a second owner: api.sole_owner, release)
    return _invoke(entry, func, args, kwargs, hargs, hkwargs)


def _fuse(fn, args, kwargs):
    """An eager fusion's result (registry.FUSIONS) when the first argument is a deferred value, else None. The
    fusion gets handles for the call's device tensors; a CPU tensor or a view's own device tensor among them
    (to be refreshed) leaves the call to its lowering."""
    h = maybe_handle(args[0]) if args else None
    if h is None or h.pending is None:
        return None
    hargs = [h]
    for a in (*args[1:], *kwargs.values()):
        if isinstance(a, torch.Tensor):
            a = maybe_handle(a)
            if a is None or a.source is not None:
                return None
        hargs.append(a)
    if kwargs:
        hkwargs = dict(zip(kwargs, hargs[len(args):]))
        return fn(*hargs[:len(args)], **hkwargs)
    return fn(*hargs)


def _invoke(entry, func, args, kwargs, hargs, hkwargs):
    """A lowering run on the call's handles; its refusal (Unfit, or too big for the cores' L1) decomposes a
    CompositeImplicitAutograd op, else runs the CPU fallback. Under float32_storage="mixed", an op computing
    from bfloat16 parameters alone takes them in float32 (layout.from_parameters), as PyTorch computes."""
    if config.settings["float32_storage"] == "mixed" and not entry.aliases \
            and layout.from_parameters(func._opname, [*hargs, *hkwargs.values()]):
        hargs = [layout.to_float32(h) if type(h) is api.Handle and h.dtype.is_floating_point else h for h in hargs]
        hkwargs = {k: layout.to_float32(h) if type(h) is api.Handle and h.dtype.is_floating_point else h
                   for k, h in hkwargs.items()}
    try:
        result = entry.fn(*hargs, **hkwargs)
    except (Unfit, api.CoreMemoryError) as unfit:
        if _is_cia(func):
            for name, (pos, value) in getattr(unfit, "replaced", {}).items():
                if name in kwargs:
                    kwargs = {**kwargs, name: value}
                elif pos < len(args):
                    args = (*args[:pos], value, *args[pos + 1:])
            return func.decompose(*args, **kwargs)
        decomposition = decompositions.of_refused(func)
        if decomposition is not None:  # (3-D convolutions as 2-D ones: core/convolution.py)
            r = decomposition(*args, **kwargs)
            if r is not NotImplemented:
                return r
        return fallback(func, args, kwargs, reason=str(unfit))
    if entry.aliases:
        return _finish(entry, func, result, args, kwargs, hargs, hkwargs)
    if config.settings["float32_storage"] == "mixed" and not (func in _CROSS_DEVICE and hargs
                                                              and type(hargs[0]) is not api.Handle):
        result = layout.widened(result)  # (an upload keeps the storage policy's choice: bfloat16 parameters)
    return _wrap(result)


def _wide_number(args, kwargs) -> bool:
    """A Python int beyond the device's int32 integers given to an op that takes numbers, on integer tensors
    (on floating ones it is a float): ttnn would refuse it (TT_FATAL) or wrap it around, so the CPU computes."""
    values = (*args, *kwargs.values())
    return any(type(v) is int and not layout.fits_int32(v) for v in values) and any(
        isinstance(x, torch.Tensor) and not x.dtype.is_floating_point for x in values)


def _has_complex(args, kwargs) -> bool:
    for x in (*args, *kwargs.values()):
        for y in (x if type(x) in (list, tuple) else (x,)):
            if isinstance(y, torch.Tensor) and y.dtype is _C64 and y.device.type == "ttnn":
                return True
    return False


def _complex(func, args, kwargs):
    """A call with a complex tensor argument (stored as a real pair: layout.py): its complex lowering
    (registry.COMPLEX: lowerings/complex.py), which receives the handles as they are; with none, a
    CompositeImplicitAutograd op is decomposed and anything else runs on the CPU fallback."""
    entry = COMPLEX_BY_ID.get(id(func))
    if entry is None:
        if _is_cia(func):
            r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
        return fallback(func, args, kwargs, reason="no lowering of this op takes complex tensors")
    call = _Call(entry.mixed_devices)
    hargs = [call.arg(a, None) for a in args]
    hkwargs = {k: call.arg(v, None) for k, v in kwargs.items()}
    return _invoke(entry, func, args, kwargs, hargs, hkwargs)


# ----------------------------------------------------------------------------------------------- zero-size
def _has_empty_py(args) -> bool:
    """_has_empty the Python way (the C++ one's cases it leaves to Python: subclasses, symbolic sizes)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.numel() == 0 and a.device.type == "ttnn":
                return True
        elif type(a) in (list, tuple) and a and type(a[0]) is not int and any(  # (sizes and dims: ints only)
                isinstance(x, torch.Tensor) and x.numel() == 0 and x.device.type == "ttnn" for x in a):
            return True
    return False


_has_empty = _tensor._NATIVE.has_empty  # a ttnn tensor with no elements in args (csrc/tensor.cpp), else
_tensor._NATIVE.set_slow_empty(_has_empty_py)  # _has_empty_py for the cases it leaves to Python


# lowerings that take zero-size inputs themselves: cat skips them; factories read only their shape and dtype;
# _fft_r2c refuses them (the CPU fallback: PyTorch's CPU kernel raises for an empty batch, its meta kernel not);
# slice_scatter of an empty slice is its base (computed on the CPU it was a read of the whole base and an upload,
# which a graph capture refuses: Qwen3.5's interleaved mrope writes slices [2:30:3] that a shrunk head leaves
# empty, and its compiled forward ran eagerly at every call)
_TAKES_EMPTY = (aten.cat.default, aten.new_empty.default, aten.new_empty_strided.default, aten.new_zeros.default,
                aten.new_ones.default, aten.new_full.default, aten.empty_like.default, aten.zeros_like.default,
                aten.ones_like.default, aten.full_like.default, aten._fft_r2c.default, aten.slice_scatter.default)
# lowered ops whose meta kernels skip PyTorch's argument checks (grid_sampler_2d: "expected input to have
# non-empty spatial dimensions"): with a zero-size argument they run on the CPU, where the check is
_CHECKED_ON_CPU = (aten.grid_sampler_2d.default,)
_META, _CPU = torch.device("meta"), torch.device("cpu")


def _on(device: torch.device, x):
    """x as an argument of the op run on the meta device or the CPU instead of ttnn."""
    if isinstance(x, torch.Tensor):
        if device.type == "meta":
            return torch.empty(x.shape, dtype=x.dtype, device=device)
        h = maybe_handle(x)
        return api.download(refresh(h)) if h is not None else x
    return device if isinstance(x, torch.device) else x


def _zero_size(entry, func, args, kwargs):
    """A lowered op with a zero-size tensor argument never reaches ttnn (its kernels divide by the element
    count: a zero-size tensor can kill the process). The result's shapes and dtypes come from running the op
    on the meta device, and outputs with no elements are made without ttnn. A non-empty output computed from
    empty inputs (sum of nothing, [3,0] @ [0,4], a bias alone), and PyTorch's error for bad arguments, come
    from running the op on the CPU, where it costs nothing (the meta kernels' exception types may differ).
    A write into no elements changes nothing. None: the lowering runs as usual (views, which keep their own
    bookkeeping; copies between devices; cat, which skips empty parts)."""
    writes = [_get(args, kwargs, where, name) for _, where, name, w in entry.aliases if w]
    if writes and all(maybe_handle(t) is not None and t.numel() == 0 for t in writes):
        func(*tree_map(functools.partial(_on, _META), args))  # PyTorch's checks (shapes that do not broadcast)
        return writes[0] if len(writes) == 1 else tuple(writes)
    if entry.mixed_devices or func in _TAKES_EMPTY or any(not w for _, _, _, w in entry.aliases):
        return None
    index = _device_index(args, kwargs)
    call = _Call(False)
    tree_map(lambda x: call.arg(x, None) if isinstance(x, torch.Tensor) else x, (args, kwargs))  # same device?
    try:
        out = func(*tree_map(functools.partial(_on, _META), args), **tree_map(functools.partial(_on, _META), kwargs))
        outs = out if isinstance(out, (list, tuple)) else (out,)
        on_cpu = func in _CHECKED_ON_CPU or any(isinstance(o, torch.Tensor) and o.numel() for o in outs)
    except Exception:  # noqa: BLE001
        on_cpu = True
    if on_cpu:
        out = func(*tree_map(functools.partial(_on, _CPU), args), **tree_map(functools.partial(_on, _CPU), kwargs))
        outs = out if isinstance(out, (list, tuple)) else (out,)
    aliases = {ri: (where, name) for ri, where, name, _ in entry.aliases}
    results = []
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor):
            h = layout.to_device(torch.empty(o.shape, dtype=o.dtype) if o.is_meta else o, index)
            if i in aliases:  # in-place / out=: the caller's tensor, written
                o = write_into(_get(args, kwargs, *aliases[i]), h)
            else:
                o = new_tensor(h)
        results.append(o)
    return results[0] if not isinstance(out, (list, tuple)) else type(out)(results)


def _unlowered(func, args, kwargs):
    """An op with no lowering of its own: decomposed (CompositeImplicitAutograd), run through its functional
    lowering (in-place, out=), decomposed by PyTorch's decomposition (decompositions.ALLOWLIST), or run on
    the CPU fallback. An op lowered for complex tensors only (view_as_real) runs that lowering."""
    if id(func) in COMPLEX_BY_ID and _has_complex(args, kwargs):
        counters.count_aten(func)
        return _complex(func, args, kwargs)
    if _is_cia(func):
        r = func.decompose(*args, **kwargs)
        if r is not NotImplemented:
            return r
    derived = functional_of(func)
    if derived is not None:
        return _run_derived(func, derived, args, kwargs)
    counters.count_aten(func)
    decomposition = decompositions.get(func)
    if decomposition is not None:  # PyTorch's own, into ops that are lowered (decompositions.ALLOWLIST)
        r = decomposition(*args, **kwargs)
        if r is not NotImplemented:  # (some decompositions cover only some arguments)
            return r
    return fallback(func, args, kwargs)


# ----------------------------------------------------------------------------------------------- in-place, out=
@functools.lru_cache(maxsize=None)
def functional_of(func):
    """For `add_.Tensor` / `add.out`: the functional overload (`add.Tensor`) when it is lowered or on the
    decompositions allowlist, else None."""
    schema = func._schema
    name = schema.name.split("::")[1]
    packet = None
    if name.endswith("_") and not name.startswith("_"):
        packet = getattr(aten, name[:-1], None)
        # (transpose_.default's functional is transpose.int; floor_divide_.Tensor's floor_divide.default, taken
        # only when its arguments are the in-place op's)
        candidates = [func._overloadname, "int", "default"]
    elif func._overloadname == "out" or func._overloadname.endswith("_out"):
        packet = getattr(aten, name, None)
        base = func._overloadname[:-4] if func._overloadname.endswith("_out") else "default"
        candidates = [base, "Tensor", "default"]
    if packet is None:
        return None
    for ovl in candidates:
        op = getattr(packet, ovl, None)
        if op is not None and ovl == "default" != func._overloadname and _arguments(op) != _arguments(func):
            continue
        if op is not None and (op in REGISTRY or decompositions.get(op) is not None):
            return op  # lowered, or decomposed into lowered ops (hardtanh_ as hardtanh: ReLU6(inplace=True))
    return None


def _type_name(dtype: torch.dtype) -> str:
    """PyTorch's name of a dtype in its errors (Float, Long, Bool)."""
    return torch.empty(0, dtype=dtype).type().split(".")[-1].replace("Tensor", "")


def _arguments(op) -> list:
    """An op's arguments but its out= ones (which _run_derived writes): tanh.out's are tanh.default's."""
    return [(a.name, str(a.type), a.kwarg_only) for a in op._schema.arguments if not a.is_out]


def _inplace_view(func, functional, args, kwargs):
    """transpose_, t_, squeeze_, unsqueeze_, ...: the tensor itself becomes the view."""
    return _become(args[0], dispatch(functional, args, kwargs))


def _become(target: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
    """An in-place view op's effect: the tensor takes the view's geometry on its storage (as_strided_), whose
    handle is already known there; a view that is no alias (a copy) becomes the tensor's new storage."""
    if view.untyped_storage()._cdata == target.untyped_storage()._cdata:
        # set_ onto its own storage, not as_strided_: the CPU kernel of as_strided_ called below
        # ADInplaceOrView crashes the process on a tensor that is itself a view (y = x.unsqueeze(0); y.squeeze_(0))
        aten.set_.source_Storage_storage_offset._op_dk(_CPU_KEY, target, target.untyped_storage(),
                                                       view.storage_offset(), view.shape, view.stride())
    else:
        _tensor.reset(target, handle_of(view))
    return target


def _run_derived(func, functional, args, kwargs):
    if torch.Tag.inplace_view in func.tags:
        return _inplace_view(func, functional, args, kwargs)
    out_names = [a.name for a in func._schema.arguments if a.is_out]
    fkwargs = {k: v for k, v in kwargs.items() if k not in out_names}
    if out_names:
        result = dispatch(functional, args, fkwargs)
        targets = [kwargs[n] for n in out_names]
    else:
        target = args[0]
        if isinstance(target, torch.Tensor) and target.requires_grad and target.is_leaf \
                and (th := maybe_handle(target)) is not None:
            layout.train_storage(th)  # an optimizer update (the precision policy: layout.py)
        result = dispatch(functional, args, fkwargs)
        targets = [target]
    results = result if isinstance(result, (list, tuple)) else [result]
    for t, r in zip(targets, results):
        if maybe_handle(t) is None:
            raise device_mismatch(str(r.device), str(t.device))
        if out_names and not torch.can_cast(r.dtype, t.dtype):
            raise RuntimeError(f"result type {_type_name(r.dtype)} can't be cast to the desired output type "
                               f"{_type_name(t.dtype)}")
        write_into(t, handle_of(r))
    return targets[0] if len(targets) == 1 else tuple(targets)


# ----------------------------------------------------------------------------------------------- fallback
_warned: set = set()
_NOT_USER_CODE = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(torch.__file__))  # the package, torch
_CROSS_DEVICE = {aten.copy_.default, aten._to_copy.default}


WIDE = ("an int64 argument's values do not fit the device's int32 integers, so it is kept exactly on the host "
        "(e.g. a hash's powers of a large prime); results that fit int32 go back to the device")


def fallback(func, args, kwargs, reason: str = ""):
    """Run `func` on the CPU: download inputs, compute, upload outputs (in-place/out= written back).
    `reason`: why a lowering refused these arguments (its Unfit), named in strict mode's error."""
    if config.settings["strict"]:
        if reason:
            raise FallbackError(
                f"ttnn_eager strict mode: aten op {func} cannot run on TT-NN with these arguments ({reason}), "
                f"and strict mode forbids the CPU fallback. Run without strict mode (TTNN_EAGER_STRICT=0) to "
                f"fall back.")
        raise FallbackError(
            f"ttnn_eager strict mode: aten op {func} has no TT-NN lowering, and strict mode forbids the CPU "
            f"fallback. Run without strict mode (TTNN_EAGER_STRICT=0) to fall back, or add a lowering for it.")
    capture.refuse(f"aten op {func} has no TT-NN lowering: it would run on the CPU fallback")
    counters.counts["fallbacks"] += 1
    counters.fallback_by_op[func] += 1
    if func not in _warned:
        _warned.add(func)
        why = f"cannot run on TT-NN here ({reason})" if reason == WIDE else "has no TT-NN lowering"
        warnings.warn(f"ttnn_eager: aten op {func} {why}; it runs on the CPU "
                      f"(copies to and from the device). ttnn_eager.report() shows every such op.",
                      skip_file_prefixes=_NOT_USER_CODE)  # points at the user's line
    index = _device_index(args, kwargs)
    call = _Call(func in _CROSS_DEVICE)
    tree_map(lambda x: call.arg(x, None) if isinstance(x, torch.Tensor) else x, (args, kwargs))  # same device?

    def to_cpu(x):
        h = maybe_handle(x)
        if h is not None:
            return api.download(refresh(h))
        if isinstance(x, torch.device) and x.type == "ttnn":
            return torch.device("cpu")
        return x

    cpu_args, cpu_kwargs = tree_map(to_cpu, (args, kwargs))
    try:
        out = func(*cpu_args, **cpu_kwargs)
    except NotImplementedError as err:  # a kernel the CPU lacks for this dtype (histc of int32)
        out = _widened(func, cpu_args, cpu_kwargs, err)
    _write_back_lists(func, args, kwargs, cpu_args, cpu_kwargs)
    aliases = {ri: (where, name) for ri, where, name, is_write in _aliases(func) if is_write}
    views = {where for ri, where, name, is_write in _aliases(func) if not is_write}
    single = not isinstance(out, (list, tuple))
    outs = [out] if single else list(out)
    elsewhere = isinstance(kwargs.get("device"), torch.device) and kwargs["device"].type != "ttnn"
    alias_of = None
    if views == {0} and maybe_handle(args[0]) is not None:  # a view op: keep it a view of its base
        alias_of = _aliases_of(func, args, kwargs, args[0], outs)
    for i, o in enumerate(outs):
        if i in aliases:
            orig = _get(args, kwargs, *aliases[i])
            if maybe_handle(orig) is not None and torch.Tag.inplace_view in func.tags:
                _tensor.reset(orig, layout.to_device(o.contiguous(), orig.device.index))
            elif maybe_handle(orig) is not None:
                write_into(orig, layout.to_device(o, orig.device.index))
            outs[i] = orig
        elif isinstance(o, torch.Tensor) and elsewhere:  # asked for on another device: PyTorch put it there
            continue
        elif isinstance(o, torch.Tensor):
            h = layout.to_device(o.contiguous(), index)
            if alias_of is not None and alias_of[i] is not None:
                base = handle_of(args[0])
                h.source = (base, base.version, _cpu_view(func), [base, *args[1:]], dict(kwargs), None if single else i)
                add_view(alias_of[i], h)
                outs[i] = alias_of[i]
            else:
                outs[i] = new_tensor(h)
    return outs[0] if single else type(out)(outs)


def _write_back_lists(func, args, kwargs, cpu_args, cpu_kwargs) -> None:
    """The lists of tensors an op writes in place (`Tensor(a!)[]`: _foreach_copy_, the _foreach_*_ ops; they
    return nothing) written back from their CPU copies into the device tensors -- views included, through
    their bases."""
    for pos, arg in enumerate(func._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[pos] if pos < len(args) else kwargs.get(arg.name)
        if not isinstance(value, (list, tuple)):
            continue
        cpu_value = cpu_args[pos] if pos < len(cpu_args) else cpu_kwargs.get(arg.name)
        for d, c in zip(value, cpu_value):
            if maybe_handle(d) is not None:
                write_into(d, layout.to_device(c, d.device.index))


# Note [fallback dtypes]
# The fallback hands the CPU kernel the dtypes PyTorch sees (download gives each tensor its torch dtype: an
# int64 stored as int32 comes back int64, bool stays bool). Some CPU kernels lack dtypes that accelerator
# kernels have: `histc` of an int32 tensor works on CUDA and fails on the CPU ("histogram_cpu" not implemented
# for 'Int'), and transformers' mixture-of-experts layers call exactly that on every non-CPU device
# (`expert_ids.int()` unless the device is the CPU). Such a call is run once more with the named dtype's
# tensors widened to one the CPU kernel has and that holds their values exactly (integers and bool as int64,
# then float64; float16/bfloat16 as float32), and each output is cast back to the dtype the op gives for the
# original dtypes (its meta kernel's answer): the result is the accelerator's, not an error.
_DTYPE_NAMES = {"Int": torch.int32, "Long": torch.int64, "Short": torch.int16, "Char": torch.int8,
                "Byte": torch.uint8, "Bool": torch.bool, "Half": torch.float16, "BFloat16": torch.bfloat16}
_WIDER = {torch.float16: (torch.float32,), torch.bfloat16: (torch.float32,)}  # else (int64, float64)


def _widened(func, cpu_args, cpu_kwargs, err: NotImplementedError):
    """`func` on the CPU with the tensors of the dtype its kernel lacks widened (Note [fallback dtypes])."""
    import re
    found = re.search(r"not implemented for '(\w+)'", str(err))
    narrow = _DTYPE_NAMES.get(found.group(1)) if found else None
    if narrow is None:
        raise err
    try:
        meta = func(*tree_map(_meta_shaped, cpu_args), **tree_map(_meta_shaped, cpu_kwargs))
        want = [o.dtype if isinstance(o, torch.Tensor) else None
                for o in (meta if isinstance(meta, (list, tuple)) else (meta,))]
    except Exception:  # noqa: BLE001  (no meta kernel: outputs of the widened dtype go back to the narrow one)
        want = None
    for wide in _WIDER.get(narrow, (torch.int64, torch.float64)):
        if wide == narrow:
            continue
        def widen(x):
            return x.to(wide) if isinstance(x, torch.Tensor) and x.dtype == narrow else x
        try:
            out = func(*tree_map(widen, cpu_args), **tree_map(widen, cpu_kwargs))
        except NotImplementedError:
            continue
        single = not isinstance(out, (list, tuple))
        outs = [out] if single else list(out)
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                dtype = want[i] if want is not None and i < len(want) and want[i] is not None else \
                    (narrow if o.dtype == wide else o.dtype)
                outs[i] = o.to(dtype)
        return outs[0] if single else type(out)(outs)
    raise err


def _meta_shaped(x):
    """Any tensor as a meta tensor of its shape and dtype (for an op's output dtypes)."""
    return torch.empty(x.shape, dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor) else x


@functools.lru_cache(maxsize=None)
def _cpu_view(func):
    """A view op with no lowering, as a view run on the CPU: re-derived from its base when the base changes
    (refresh), and a write through it written into its base on the CPU (its inverse, registered beside the
    lowered views' in registry.INVERSES). Both are counted fallbacks: the view's semantics survive the fallback."""
    def view(base, *args, **kwargs):
        counters.counts["fallbacks"] += 1
        counters.fallback_by_op[func] += 1
        out = func(api.download(base), *args, **kwargs)
        if isinstance(out, (list, tuple)):
            return [layout.to_device(o.contiguous(), base.index) for o in out]
        return layout.to_device(out.contiguous(), base.index)

    def inverse(base, value, *args, pos=None, **kwargs):
        counters.counts["fallbacks"] += 1
        counters.fallback_by_op[func] += 1
        host = api.download(base).clone()
        part = func(host, *args, **kwargs)
        (part if pos is None else part[pos]).copy_(api.download(value))
        return layout.to_device(host, base.index)

    INVERSES[view] = inverse
    _CPU_VIEWS.add(view)
    return view


_CPU_VIEWS: set = set()  # the views _cpu_view made


def _view_on_host(fn):
    """The view lowering `fn` as the view of its aten op run on the CPU (_cpu_view), whose inverse scatters on
    the CPU: for a write through a view that involves int64 values kept on the host (api.keep_on_host)."""
    if fn in _CPU_VIEWS:
        return fn
    op = next((e.op for e in REGISTRY.values() if e.fn is fn), None)
    if op is None:
        raise RuntimeError("ttnn_eager: int64 values beyond the device's int32 integers cannot be written through "
                           "this view; compute with such tensors on the CPU")
    return _cpu_view(op)


def _device_index(args, kwargs) -> int:
    for x in list(args) + list(kwargs.values()):
        if isinstance(x, torch.Tensor) and x.device.type == "ttnn":
            return x.device.index
        if isinstance(x, (list, tuple)):
            for y in x:
                if isinstance(y, torch.Tensor) and y.device.type == "ttnn":
                    return y.device.index
        if isinstance(x, torch.device) and x.type == "ttnn":
            return x.index if x.index is not None else runtime.current_device()
    return runtime.current_device()


# ----------------------------------------------------------------------------------------------- C++-made aliases
def _strided(base: api.Handle, dtype, size, stride, offset) -> api.Handle:
    """An alias PyTorch made in C++ (as_strided, .view(dtype), a geometry the dispatcher never saw), derived
    on the host from its storage's base: a counted fallback, re-derived when the base changes (refresh). The
    base moves in its transfer layout (a flat buffer such as DDP's gradient bucket: unpadded)."""
    counters.counts["fallbacks"] += 1
    counters.fallback_by_op[_AS_STRIDED] += 1
    host = layout.download(base).contiguous().reshape(-1)
    if host.dtype is not dtype:
        host = host.view(dtype)
    return layout.to_device(host.as_strided(size, stride, offset).contiguous(), base.index)


def _strided_inverse(base: api.Handle, value: api.Handle, dtype, size, stride, offset, pos=None) -> api.Handle:
    counters.counts["fallbacks"] += 1
    counters.fallback_by_op[_AS_STRIDED] += 1
    host = layout.download(base).contiguous().clone()
    flat = host.reshape(-1)
    alias = (flat.view(dtype) if flat.dtype is not dtype else flat).as_strided(size, stride, offset)
    where = torch.arange(alias.untyped_storage().nbytes() // alias.element_size()).as_strided(size, stride, offset)
    if where.unique().numel() < where.numel():  # elements that overlap (Longformer's chunks): on the CPU their
        # value depends on the order of the kernel's loops; there is no one value to write back
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")
    alias.copy_(layout.download(value))
    return layout.to_device(host, base.index)


INVERSES[_strided] = _strided_inverse


def _run(base: api.Handle, size: tuple, offset: int) -> api.Handle:
    """A contiguous run of base's elements, of shape `size` from element `offset` (DDP's views into its flat
    gradient bucket, made in C++ by as_strided): a slice of the flattened base, reshaped, on the device (the
    view and slice lowerings), or derived on the host when the slice lowering refuses the base (its one row
    longer than a core's L1 holds: a default-vocabulary BERT's bucket)."""
    view, cut = BY_ID[id(aten.view.default)].fn, BY_ID[id(aten.slice.Tensor)].fn
    n = math.prod(size)
    try:
        return view(cut(view(base, [base.shape.numel()]), 0, offset, offset + n), list(size))
    except Unfit:  # a flat base of rows longer than a core's L1 holds: the host route, counted
        return _strided(base, base.dtype, size, _tensor.contiguous_strides(tuple(size)), offset)


def _run_inverse(base: api.Handle, value: api.Handle, size: tuple, offset: int, pos=None) -> api.Handle:
    """base with the run _run(base, size, offset) replaced by value (the slice_scatter lowering; the host route,
    counted, when the lowering refuses: a flat buffer of rows longer than a core's L1 holds)."""
    view, put = BY_ID[id(aten.view.default)].fn, BY_ID[id(aten.slice_scatter.default)].fn
    n = math.prod(size)
    try:
        flat = put(view(base, [base.shape.numel()]), view(value, [n]), 0, offset, offset + n)
    except Unfit:
        return _strided_inverse(base, value, base.dtype, size, _tensor.contiguous_strides(tuple(size)), offset)
    return view(flat, list(base.shape))


INVERSES[_run] = _run_inverse


WINDOW_SLICES_MAX = 64  # slices one dimension of a strided alias may take on the device (_windows)
WINDOW_GROWTH = 4       # and its runs at most this many times the elements of the base or the alias


def _windows(base: api.Handle, size: tuple, stride: tuple, offset: int) -> api.Handle:
    """An alias of any non-negative strides (as_strided: Longformer's overlapping chunks, a sliding window) on
    the device from its flattened base, one dimension at a time, outermost first: the tensor holds, per index
    of the dimensions done, the run of elements the remaining ones span (`extent`); each dimension of size m
    and stride s cuts that run into m runs of the next extent w (view, slice, cat, expand lowerings):
        w <= s   (disjoint runs)         a reshape into [m, s] rows, cut to w
        w = c s  (overlapping by blocks) the run as [m - 1 + c, s] blocks, c shifted slices of m blocks joined
        else                             m slices joined (up to WINDOW_SLICES_MAX; more: Unfit)
        s = 0                            expand
    Dimensions are taken in the order of their strides (a permuted alias is derived in that order and permuted
    back). A step whose runs would hold more than WINDOW_GROWTH times the elements of the base or of the alias
    is Unfit: the host route.
    The result is a copy: writes through it take the host route (_strided_inverse)."""
    view, cut, cat, expand = (BY_ID[id(op)].fn for op in (aten.view.default, aten.slice.Tensor, aten.cat.default,
                                                           aten.expand.default))
    k = len(size)
    if not k or 0 in size or any(s < 0 for s in stride) or base.tt is None or base.dtype.is_complex:
        raise Unfit("an alias of no elements, negative strides, an unwritten base or complex pairs")
    order = sorted(range(k), key=lambda i: -stride[i])  # outermost first (a permuted alias: permuted back)
    if order != list(range(k)):
        out = _windows(base, tuple(size[i] for i in order), tuple(stride[i] for i in order), offset)
        return BY_ID[id(aten.permute.default)].fn(out, [order.index(i) for i in range(k)])
    extent = [1] * (k + 1)  # extent[j]: the elements dimensions j.. span
    for j in reversed(range(k)):
        extent[j] = extent[j + 1] + (size[j] - 1) * stride[j]
    n = base.shape.numel()
    if offset + extent[0] > n:
        raise Unfit("an alias beyond its base")
    t = cut(view(base, [n]), 0, offset, offset + extent[0])
    lead = []
    room = WINDOW_GROWTH * max(n, math.prod(size))  # elements a step may hold (overlapping runs repeat some)
    for m, s, w in zip(size, stride, extent[1:]):
        if math.prod(lead) * m * w > room:
            raise Unfit(f"{m} runs of {w} every {s}: {math.prod(lead) * m * w} elements on the way")
        if m == 1 or s == 0:
            t = view(cut(t, -1, 0, w), lead + [1, w])
            if m > 1:
                t = expand(t, lead + [m, w])
        elif w <= s:  # extent of this dimension: (m - 1) s + w
            rows = view(cut(t, -1, 0, (m - 1) * s), lead + [m - 1, s]) if m > 1 else None
            last = view(cut(t, -1, (m - 1) * s, (m - 1) * s + w), lead + [1, w])
            t = cat([cut(rows, -1, 0, w), last], -2) if w < s else view(t, lead + [m, s])
        elif w % s == 0 and w // s <= WINDOW_SLICES_MAX:
            c = w // s
            blocks = view(t, lead + [m - 1 + c, s])
            t = cat([cut(blocks, -2, j, j + m) for j in range(c)], -1)
        elif m <= WINDOW_SLICES_MAX:
            t = cat([view(cut(t, -1, i * s, i * s + w), lead + [1, w]) for i in range(m)], -2)
        else:
            raise Unfit(f"{m} overlapping runs of {w} every {s}")
        lead.append(m)
    return view(t, list(size))


def _windows_inverse(base: api.Handle, value: api.Handle, size, stride, offset, pos=None) -> api.Handle:
    return _strided_inverse(base, value, base.dtype, size, stride, offset)


INVERSES[_windows] = _windows_inverse


def derive_view(base: api.Handle, t: torch.Tensor) -> api.Handle:
    """The Handle of an alias of base's storage with a geometry not seen before: a reshape of the base on the
    device when it is contiguous (PyTorch's own view of it, made in C++), a slice of it when it is a contiguous
    run of its elements (_run), runs cut and joined on the device for other non-negative strides (_windows),
    else derived on the host (_strided)."""
    refresh(base)
    if t.dtype is base.dtype and t.storage_offset() == 0 and t.is_contiguous() and t.numel() == base.shape.numel():
        fn = BY_ID[id(aten.view.default)].fn
        h = fn(base, list(t.shape))
        if h is base:
            return base
        h.source = (base, base.version, fn, [base, list(t.shape)], {}, None)
        return h
    tries = []  # (derivation, its arguments) on the device, in order
    if t.dtype is base.dtype and t.numel():
        if t.is_contiguous() and t.storage_offset() + t.numel() <= base.shape.numel():
            tries.append((_run, [base, tuple(t.shape), t.storage_offset()]))
        tries.append((_windows, [base, tuple(t.shape), tuple(t.stride()), t.storage_offset()]))
    for fn, args in tries:
        try:
            h = fn(*args)
        except Unfit:
            continue
        h.source = (base, base.version, fn, args, {}, None)
        return h
    args = [base, t.dtype, tuple(t.shape), t.stride(), t.storage_offset()]
    h = _strided(*args)
    h.source = (base, base.version, _strided, args, {}, None)
    return h


_tensor.derive_view = derive_view
