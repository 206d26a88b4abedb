"""TtnnTensor: the torch.Tensor of a `ttnn:N` device.

A wrapper subclass (`torch.Tensor._make_wrapper_subclass`): PyTorch keeps the metadata (shape, dtype,
device `ttnn:N`, requires_grad), the Python object keeps `_handle`, the device tensor (device.api.Handle).
Its dispatch keys are PrivateUse1 (renamed `ttnn`), Python and the autograd keys, so autograd and
CompositeImplicitAutograd decompositions run above us and every remaining aten op reaches
`__torch_dispatch__` -> dispatch.dispatch. The device buffer is freed when the last TtnnTensor holding
its handle dies.
"""
from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=None)
def torch_device(index: int) -> torch.device:
    return torch.device("ttnn", index)


class TtnnTensor(torch.Tensor):
    # No __slots__: torch.utils.swap_tensors (Module.to keeps Parameter identity with it) refuses to swap
    # objects with different __slots__.

    @staticmethod
    def __new__(cls, handle, requires_grad: bool = False):
        r = torch.Tensor._make_wrapper_subclass(cls, handle.shape, dtype=handle.dtype,
                                                device=torch_device(handle.index), requires_grad=requires_grad)
        r._handle = handle
        return r

    # Behave like a plain tensor at the __torch_function__ level (no re-wrapping of results).
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch.dispatch(func, args, kwargs or _NO_KWARGS)

    def __repr__(self, *, tensor_contents=None):
        from ..device import api as device_api
        from .dispatch import refresh
        value = device_api.download(refresh(self._handle))
        contents = torch._tensor_str._tensor_str(value, len("tensor("))
        text = torch._tensor_str._str(self, tensor_contents=contents)
        prefix = f"{type(self).__name__}("
        return "tensor(" + text[len(prefix):] if text.startswith(prefix) else text

    def __format__(self, format_spec):
        # torch.Tensor.__format__ formats a 0-d tensor as its number only when `type(self) is Tensor`: a
        # wrapper subclass got its repr, so f"expert_{idx}" (Switch Transformers' module lookup) read
        # "expert_tensor(0, device='ttnn:0')". Hashing is PyTorch's already (identity).
        if self.dim() == 0:
            return self.detach().item().__format__(format_spec)
        return object.__format__(self, format_spec)

    # Tensor.tolist/numpy refuse wrapper subclasses: go through the CPU like a user would.
    def tolist(self):
        return self.cpu().tolist()

    def numpy(self, *, force: bool = False):
        return self.detach().cpu().numpy()

    # A "traceable wrapper subclass": nn.Module._apply then moves parameters with torch.utils.swap_tensors,
    # which keeps Parameter identity and so tied weights stay tied.
    def __tensor_flatten__(self):
        return [], self._handle

    @staticmethod
    def __tensor_unflatten__(inner_tensors, handle, outer_size, outer_stride):
        return TtnnTensor(handle)

    def __deepcopy__(self, memo):
        # PyTorch's Tensor.__deepcopy__ would deep-copy `_handle` (a ttnn tensor cannot be copied that way):
        # a clone shares the device tensor copy-on-write, and the rest of __dict__ (a Parameter's marker) is copied
        import copy
        new = memo.get(id(self))
        if new is None:
            if not self.is_leaf:
                raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                                   "deepcopy protocol at the moment.")
            with torch.no_grad():
                new = self.clone()
            new.requires_grad_(self.requires_grad)
            memo[id(self)] = new
            for k, v in self.__dict__.items():
                if k != "_handle":
                    setattr(new, k, copy.deepcopy(v, memo))
            if self.grad is not None:
                new.grad = copy.deepcopy(self.grad, memo)
        return new

    def untyped_storage(self):
        # A wrapper subclass has no storage PyTorch can read (its data_ptr raises). Libraries that tell shared
        # tensors apart by their storage -- transformers' save_pretrained (id_tensor_storage), safetensors --
        # get the device tensor's identity and size instead: tied weights (one handle) share it, clones do not.
        return _DeviceStorage(self._handle, self)

    def __reduce_ex__(self, protocol):
        # pickling / torch.save / copy.deepcopy: the value through the CPU, rebuilt on this device (or on
        # torch.load's map_location) by PyTorch's own rebuild function for devices without storage -- one
        # that torch.load's weights_only unpickler (PyTorch's default) allows
        return torch._utils._rebuild_device_tensor_from_cpu_tensor, (
            self.detach().cpu(), self.dtype, str(self.device), self.requires_grad)


class _DeviceStorage:
    """What `TtnnTensor.untyped_storage()` shows: an identity (data_ptr: the device tensor's handle, unique
    while it lives), a size and the device. The values are on the device: read them with `.cpu()`."""

    __slots__ = ("_ptr", "_nbytes", "device")

    def __init__(self, handle, tensor):
        self._ptr, self._nbytes, self.device = id(handle), tensor.numel() * tensor.element_size(), tensor.device

    def data_ptr(self) -> int:
        return self._ptr

    def nbytes(self) -> int:
        return self._nbytes

    def size(self) -> int:
        return self._nbytes

    def __len__(self) -> int:
        return self._nbytes


_NO_KWARGS: dict = {}  # never written: dispatch only reads kwargs
from . import dispatch as _dispatch  # noqa: E402  (dispatch imports this module: bound once both exist)
