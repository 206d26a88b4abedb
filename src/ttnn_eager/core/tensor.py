"""The tensor of a `ttnn:N` device: a plain PrivateUse1 `torch.Tensor`, its device value found through its storage.

    new_tensor(handle)   a new ttnn tensor holding `handle` (device.api.Handle), contiguous, with its own storage
    handle_of(t)         the Handle of a ttnn tensor: its storage's base Handle, or the Handle of the view it is
    maybe_handle(x)      handle_of(x) for a ttnn tensor, None for anything else (the dispatcher's one check; in C++:
                         csrc/tensor.cpp's handle, which leaves subclasses and views not seen yet to _maybe_handle)
    is_ttnn(x)           x is a tensor on a ttnn device
    TtnnTensor           not a class of tensors any more: `isinstance(x, ttnn_eager.TtnnTensor)` is is_ttnn(x)

PyTorch owns the TensorImpl and its storage (sizes, strides, offset, version counter, `_base`, autograd).
The storage is non-owning, made in C++ (csrc/tensor.cpp, with the tensor) with a unique fake address
(tied tensors share it, clones do not: DDP, safetensors and save_pretrained tell storages apart by it) and its
real size (view kernels check bounds against it). Its Python object, which PyTorch keeps as long as the
StorageImpl lives, holds:

    _ttnn_handle   the base Handle: the device tensor of the whole storage (its shape, contiguous, offset 0)
    _ttnn_views    {(sizes, strides, offset, dtype): Handle} for views with a device tensor of their own
                   (TT-NN tensors have no strides): made by dispatch._finish for view ops, or derived on first
                   use for aliases PyTorch made in C++ without calling us (dispatch.derive_view)

Every alias of a storage -- views made by the dispatcher, `detach`, `.data`, autograd's own -- finds its
value from its geometry: the base's geometry is the base Handle, others are looked up (and derived on a
miss). A view's Handle keeps `source` (how it derives from its base: dispatch.refresh re-derives it after a
write into the base, dispatch.write scatters a write through it into the base). The device buffers are freed
with the storage.
"""
from __future__ import annotations

import functools
import itertools
import torch

_CPU = torch._C.DispatchKey.CPU
_SET = torch.ops.aten.set_.source_Storage_storage_offset


@functools.lru_cache(maxsize=None)
def torch_device(index: int) -> torch.device:
    return torch.device("ttnn", index)


@functools.lru_cache(maxsize=4096)
def contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


_next = [1 << 32]  # fake device addresses: unique per storage, spaced so that data_ptr ranges never overlap


def _address(nbytes: int) -> int:
    a = _next[0]
    _next[0] = a + ((nbytes + 63) & ~63) + 64
    return a


def new_tensor(h) -> torch.Tensor:
    """A new ttnn tensor holding the Handle `h`: its own storage (unique fake address, h's size in bytes), h as
    the storage's base Handle. Made in one call of the C++ part (csrc/tensor.cpp: the tensor, its storage and
    the Handle set on it)."""
    shape = h.shape
    dtype = h.dtype
    nbytes = shape.numel() * dtype.itemsize
    return _NATIVE.new_tensor(shape, dtype, h.index, _address(nbytes), nbytes, h)


def alias(base: torch.Tensor, sizes, strides, offset: int) -> torch.Tensor:
    """A tensor on base's storage with this geometry, as as_strided's device-generic CPU kernel makes it (the
    alias a view op returns: dispatch._aliases_of), in one call of the C++ part."""
    return _NATIVE.alias(base._cdata, sizes, strides, offset)


@functools.cache
def _native():
    from . import native
    return native.tensors()


def reset(t: torch.Tensor, h) -> torch.Tensor:
    """t (the same TensorImpl: Python object, autograd identity) now is a fresh storage holding h, with h's shape:
    out= into a tensor of another size, resize_."""
    fresh = new_tensor(h)
    _SET._op_dk(_CPU, t, fresh.untyped_storage(), 0, h.shape, contiguous_strides(tuple(h.shape)))
    return t


derive_view = None  # (base Handle, tensor) -> the Handle of an alias with a geometry not seen before: dispatch's


def _maybe_handle(x):
    """The Handle of a ttnn tensor, None for any other object (the Python way: maybe_handle's cases that the
    C++ lookup leaves to it)."""
    if not isinstance(x, torch.Tensor):
        return None
    try:
        s = x.untyped_storage()
    except (RuntimeError, NotImplementedError):  # no storage (sparse, nested, a wrapper subclass)
        return None
    h = getattr(s, "_ttnn_handle", None)
    if h is None:
        return None
    if x.dtype is h.dtype and x.storage_offset() == 0 and x.shape == h.shape and x.is_contiguous():
        return h
    return _view_handle(x, s, h)


_NATIVE = _native()
maybe_handle = _NATIVE.handle  # The Handle of a ttnn tensor, None for any other object: csrc/tensor.cpp's
_NATIVE.set_slow(_maybe_handle)  # handle() for plain tensors whose geometry is the base's or a view's seen
# before (one C call, no Python frame), else _maybe_handle


def handle_of(t: torch.Tensor):
    h = maybe_handle(t)
    if h is None:
        raise TypeError(f"ttnn_eager: expected a tensor on a ttnn device, got "
                        f"{type(t).__name__ if not isinstance(t, torch.Tensor) else t.device}")
    return h


def _key(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.stride(), t.storage_offset(), t.dtype


def _view_handle(t, s, h):
    views = getattr(s, "_ttnn_views", None)
    if views is None:
        views = s._ttnn_views = {}
    key = _key(t)
    v = views.get(key)
    if v is None:
        v = views[key] = derive_view(h, t)
    return v


def add_view(t: torch.Tensor, h, key: tuple | None = None) -> None:
    """t (an alias of a ttnn storage) holds the view Handle h. `key`: t's geometry as _key gives it, when the
    caller knows it."""
    s = t.untyped_storage()
    base = s._ttnn_handle
    if h is base or (t.dtype is base.dtype and t.storage_offset() == 0 and t.shape == base.shape
                     and t.is_contiguous()):
        return
    views = getattr(s, "_ttnn_views", None)
    if views is None:
        views = s._ttnn_views = {}
    views[key or _key(t)] = h


def is_ttnn(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "ttnn"


class _IsTtnn(type):
    def __instancecheck__(cls, x) -> bool:
        return is_ttnn(x)


class TtnnTensor(metaclass=_IsTtnn):
    """`isinstance(x, ttnn_eager.TtnnTensor)`: x is a tensor on a ttnn device. A ttnn tensor is a plain
    `torch.Tensor` (device `ttnn:N`); make one with `.to("ttnn")` or a factory's `device="ttnn"`."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("ttnn_eager.TtnnTensor is not a tensor class: a ttnn tensor is a plain torch.Tensor on "
                        "a ttnn device (x.to('ttnn:0'), torch.zeros(..., device='ttnn:0')); use "
                        "isinstance(x, ttnn_eager.TtnnTensor) to check for one")


# ------------------------------------------------------------------------------------------- storages
def _patch_storage() -> None:
    """What PyTorch would do in C++ with a device storage (allocate one: no allocator exists for a Python
    backend, and the process would die) is done here in Python or refused with an error:
    storage.cpu() (torch.save of a storage, Tensor.tolist), storage.clone() (copy.deepcopy),
    UntypedStorage(n, device="ttnn") (refused)."""
    S = torch.storage.UntypedStorage
    if getattr(S, "_ttnn_patched", False):
        return
    orig_clone, orig_cpu, orig_new = S.clone, S.cpu, S.__new__

    def clone(self):
        h = getattr(self, "_ttnn_handle", None)
        if h is None:
            if self.device.type == "ttnn":
                raise RuntimeError("ttnn_eager: this ttnn storage holds no device tensor")
            return orig_clone(self)
        return new_tensor(h.shared()).untyped_storage()

    def cpu(self):
        h = getattr(self, "_ttnn_handle", None)
        if h is None:
            if self.device.type == "ttnn":
                raise RuntimeError("ttnn_eager: this ttnn storage holds no device tensor")
            return orig_cpu(self)
        from ..device import api
        value = api.download(h).contiguous()
        if value.dtype is torch.bool:
            value = value.to(torch.uint8)
        return value.reshape(-1).view(torch.uint8).clone().untyped_storage()

    def new(cls, *args, device=None, **kwargs):
        if device is not None and torch.device(device).type == "ttnn":
            raise RuntimeError("ttnn_eager: a ttnn storage cannot be allocated by itself (a Python backend has no "
                               "device allocator); make a tensor instead: torch.empty(n, dtype=torch.uint8, "
                               "device='ttnn:0'), or allocate on the CPU and move it with .to('ttnn:0')")
        return orig_new(cls, *args, device=device, **kwargs) if device is not None else orig_new(cls, *args, **kwargs)

    def refuse(name):
        orig = getattr(S, name)

        def method(self, *args, **kwargs):
            if self.device.type == "ttnn":
                raise RuntimeError(f"ttnn_eager: UntypedStorage.{name} is not supported on a ttnn storage (a Python "
                                   f"backend cannot allocate or resize device storage); work on tensors instead")
            return orig(self, *args, **kwargs)
        method.__name__ = name
        return method

    S.clone, S.cpu, S.__new__ = clone, cpu, new
    for name in ("resize_", "share_memory_", "pin_memory", "_share_filename_cpu_", "_share_fd_cpu_",
                 "fill_", "copy_", "_write_file", "__setitem__"):
        if hasattr(S, name):
            setattr(S, name, refuse(name))
    S._ttnn_patched = True


def _patch_reduce() -> None:
    """Pickling (torch.save, multiprocessing): a ttnn tensor is saved as its CPU value and its device, and rebuilt
    there by PyTorch's own rebuild function for device tensors (allowed by torch.load's weights_only unpickler),
    as PyTorch does for devices without storage -- a ttnn storage's bytes live on the device."""
    T = torch.Tensor
    if getattr(T, "_ttnn_patched", False):
        return
    orig = T.__reduce_ex__

    def __reduce_ex__(self, protocol):
        if type(self) is torch.Tensor and self.device.type == "ttnn":
            return torch._utils._rebuild_device_tensor_from_cpu_tensor, (
                self.detach().cpu(), self.dtype, str(self.device), self.requires_grad)
        return orig(self, protocol)

    T.__reduce_ex__ = __reduce_ex__
    T._ttnn_patched = True


def _patch_repr() -> None:
    """Printing formats the values on the CPU (as PyTorch does for xla/lazy/mtia tensors): formatting on the
    device would run (and fall back on) float64 and masked_select ops only to print."""
    import torch._tensor_str as ts
    if getattr(ts._tensor_str, "_ttnn_patched", False):
        return
    orig = ts._tensor_str

    def _tensor_str(self, indent):
        if self.device.type == "ttnn":
            self = self.detach().cpu()
        return orig(self, indent)
    _tensor_str._ttnn_patched = True
    ts._tensor_str = _tensor_str


def names_ttnn(fn) -> bool:
    """fn (Module._apply's conversion: Module.to's `convert`, Module.ttnn's lambda) names a ttnn device."""
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, torch.device) and v.type == "ttnn" or isinstance(v, str) and v.split(":")[0] == "ttnn":
            return True
    return False


_patch_storage()
_patch_reduce()
_patch_repr()
