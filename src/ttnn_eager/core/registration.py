"""Registers the `ttnn` device with PyTorch. Cheap: no ttnn import, no device opened.

    register(device_module, load_backend)   called once by the package root (ttnn_eager/__init__.py)

    - PrivateUse1 renamed to `ttnn` (torch.device("ttnn:0"), Tensor.is_ttnn, Module.ttnn()), `torch.ttnn`
      is the device module (features/device_module.py)
    - PrivateUse1 kernels for the factory and copy ops (they have no ttnn tensor argument, so only the
      `device=` argument routes them to us), and a boxed PrivateUse1 fallback for anything else
    - composite ops kept whole for inference (linear, matmul, scaled_dot_product_attention, layer_norm):
      an AutogradPrivateUse1 kernel sends them to the backend whole when no input needs a gradient, and
      decomposes them (so autograd records their parts and gradients are right) when one does
    - AutocastPrivateUse1: torch.autocast("cuda")'s kernels and lists (autocast.py); other ops fall through
    - torch.load(map_location="ttnn:N") keeps storages on the CPU (PyTorch cannot allocate a ttnn storage; see tensor.py)
    - the C++ hooks and device guard (native.py, csrc/hooks.cpp): pinned memory, N devices, the per-thread
      current device -- what the Python registration's own hooks cannot answer
    - Module._apply: a conversion involving a ttnn device swaps tensors (Parameter identity and ties kept);
      a failed swap (module.to("ttnn:0") while an autograd graph still holds a parameter) moves that
      module's parameters as new Parameters instead (ties kept), with a warning naming them
"""
from __future__ import annotations

import functools
import itertools

import torch

from . import autocast, native

BACKEND = "ttnn"

# Factory and copy ops that reach the backend through the PrivateUse1 key.
FACTORY_OPS = (
    "empty.memory_format", "empty_strided", "empty_like", "empty_permuted",
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "scalar_tensor",
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
    "arange", "arange.start", "arange.start_step",
    "rand", "rand.generator", "rand_like", "randn", "randn.generator", "randn_like",
    "randint", "randint.low", "randint.generator", "randint.low_generator", "randint_like",
    "randint_like.low_dtype", "randperm", "randperm.generator", "normal.float_float",
    "eye", "eye.m", "linspace", "tril_indices", "triu_indices",
    "_to_copy", "copy_",
)
# CompositeImplicitAutograd ops worth keeping whole for inference: each becomes one fused TT-NN op.
KEEP_WHOLE = ("linear", "matmul", "scaled_dot_product_attention", "layer_norm", "max_pool2d")
# Of those, the ops a tensor subclass takes whole when its tensors hold ttnn tensors: DTensor given a sharding
# rule for them (features/mesh registers linear's), op name -> True. Others decompose for subclasses.
WHOLE_FOR_SUBCLASSES: set = set()

_libs: list = []


def _op(qualname: str):
    name, _, overload = qualname.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def _to_backend(op):
    def kernel(*args, **kwargs):
        return _backend().dispatch(op, args, kwargs)
    return kernel


_RANDOM_LIKE = ("rand_like", "randn_like", "randint_like", "randint_like.low_dtype")
_FACTORY_KW = ("dtype", "layout", "device", "pin_memory", "memory_format")


def _random_like(op):
    """rand_like & co. of a non-contiguous x keep its strides (memory_format=preserve), and PyTorch's CPU
    kernels then draw differently (randn: per element in memory order, not the vectorized contiguous fill).
    Drawn here on a CPU template of x's strides, uploaded in memory order and permuted back: the CPU's
    values, in the CPU's places, with its strides (VITS' prior noise is a transposed randn_like)."""
    base = _to_backend(op)

    def kernel(x, *args, **kwargs):
        if kwargs.get("memory_format") in (None, torch.preserve_format) and not x.is_contiguous():
            order = sorted(range(x.dim()), key=lambda d: (-x.stride(d), d))
            if x.permute(order).is_contiguous():  # dense, no overlaps (else PyTorch draws contiguous too)
                from . import capture
                capture.refuse(f"a random factory ({op}: drawn on the host, so a replay would repeat the "
                               f"same numbers)")
                template = torch.empty_strided(x.shape, x.stride(), dtype=kwargs.get("dtype") or x.dtype)
                value = op(template, *args, **{k: v for k, v in kwargs.items() if k not in _FACTORY_KW})
                back = sorted(range(x.dim()), key=order.__getitem__)
                return value.permute(order).to(kwargs.get("device") or x.device).permute(back)
        return base(x, *args, **kwargs)
    return kernel


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _subclass(t) -> bool:
    """A tensor subclass that handles ops itself (DTensor, FSDP2's), not one of PyTorch's tracing tensors
    (FakeTensor, FunctionalTensor: torch.compile traces through the whole op as for a plain tensor)."""
    cls = type(t)
    return cls not in _PLAIN and not cls.__module__.startswith("torch._subclasses")


_BACKEND_DEVICES: set = set()  # the ttnn devices seen by _keep_whole (a set lookup: device.type costs ~0.3 us)


def _keep_whole(op):
    def kernel(*args, **kwargs):
        grad = torch.is_grad_enabled()
        subclass = elsewhere = False
        for t in (*args, *kwargs.values()) if kwargs else args:  # (one pass: this runs before every linear)
            if not isinstance(t, torch.Tensor):
                continue
            if grad and t.requires_grad:
                return op.decompose(*args, **kwargs)  # autograd sees (and differentiates) the parts
            if type(t) not in _PLAIN and _subclass(t):
                subclass = True
            device = t.device
            if device not in _BACKEND_DEVICES:
                if device.type == BACKEND:
                    _BACKEND_DEVICES.add(device)
                else:
                    elsewhere = True
        if subclass:
            # a tensor subclass (DTensor of tensor parallelism, FSDP2's params): what PyTorch does without this
            # kernel -- the parts reach the subclass's __torch_dispatch__, which would not handle the whole op --
            # unless the subclass has a rule for the whole op (WHOLE_FOR_SUBCLASSES)
            if op.name() not in WHOLE_FOR_SUBCLASSES:
                return op.decompose(*args, **kwargs)
            with torch._C._AutoDispatchBelowAutograd():
                return op(*args, **kwargs)
        if not elsewhere and not torch._C._len_torch_dispatch_stack():
            # nothing but the backend lies below autograd for these tensors: call it directly instead of
            # re-entering PyTorch's dispatcher (a round trip of ~5 us per op)
            return _backend().dispatch(op, args, kwargs)
        with torch._C._AutoDispatchBelowAutograd():  # a dispatch mode or other tensors: the full way
            return op(*args, **kwargs)
    return kernel


_load_backend = None  # given by register(): returns the dispatch module with every lowering registered


@functools.cache
def _backend():
    """The dispatch module (loaded at the first op, not at registration: registering the device must not
    import ttnn), with a PrivateUse1 kernel of its own for every lowered op (_register_kernels)."""
    dispatch = _load_backend()
    _register_kernels(dispatch)
    return dispatch


def _register_kernels(dispatch) -> None:
    """One PrivateUse1 kernel per op that reaches the backend (a kernel of its own costs ~1.5 us of PyTorch's
    dispatcher, the boxed fallback ~7.6 us): every lowered op, and every op PyTorch implements for all
    backends (CompositeExplicitAutograd: detach, expand, new_zeros, the _foreach ops, ...) -- those would run
    in C++ and never reach us otherwise, and the backend sees the same ops as a tensor subclass's
    __torch_dispatch__ would. Of the composite (CompositeImplicitAutograd) ops only those kept whole do
    (KEEP_WHOLE: their AutogradPrivateUse1 kernel decides): a PrivateUse1 kernel of a composite op hides its
    autograd formula (reshape would stop being a view for autograd), so the others decompose in C++ as
    PyTorch would, also under inference_mode."""
    from .registry import REGISTRY
    done = set(FACTORY_OPS) | set(_CPU_KERNELS) | {"as_strided_"}
    lib = torch.library.Library("aten", "IMPL")
    names = set()
    for op in REGISTRY:
        name = op._schema.name + ("." + op._overloadname if op._overloadname != "default" else "")
        if name[len("aten::"):] in KEEP_WHOLE or not torch._C._dispatch_has_kernel_for_dispatch_key(
                op.name(), "CompositeImplicitAutograd"):
            names.add(name)
    for qual in torch._C._dispatch_get_all_op_names():
        if not qual.startswith("aten::"):
            continue
        if (torch._C._dispatch_has_kernel_for_dispatch_key(qual, "CompositeExplicitAutograd")
                or torch._C._dispatch_has_kernel_for_dispatch_key(qual, "CompositeExplicitAutogradNonFunctional")) \
                and not torch._C._dispatch_has_kernel_for_dispatch_key(qual, "PrivateUse1"):
            names.add(qual)
    for qual in sorted(names):
        name = qual[len("aten::"):]
        if name in done or name.partition(".")[0] in _NOT_OURS:
            continue
        try:
            op = _op(name)
        except AttributeError:
            continue
        if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1"):
            continue
        lib.impl(op, _to_backend(op), "PrivateUse1")
    _libs.append(lib)


# ops whose PyTorch kernel is device-generic metadata (a TensorImpl on the same storage): the CPU kernel itself
_CPU_KERNELS = ("set_.source_Storage_storage_offset", "set_.source_Storage", "as_strided")
# ops left to PyTorch's own kernels (they read metadata only, or are PyTorch's tensor plumbing). detach, alias
# and lift_fresh make an alias of the same geometry in C++ (found through the storage: tensor.py); made here in
# Python, the alias would already have a Python object, and nn.Parameter(x) (_make_subclass of x.detach())
# refuses those.
_NOT_OURS = {"detach", "alias", "lift_fresh", "set_", "as_strided", "as_strided_", "is_same_size", "_has_same_storage_numel", "_version",
             "record_stream", "_nested_tensor_from_mask_left_aligned", "sym_size", "sym_stride", "sym_numel",
             "sym_storage_offset", "sym_is_contiguous", "_unsafe_set_version_counter", "lift", "_make_dep_token",
             "resize_as_", "_assert_async", "_functional_assert_async", "_print", "_assert_tensor_metadata",
             "_pin_memory", "is_pinned"}  # PyTorch's own: a device tensor is not pinned, and cannot be


def _reshape_alias(x, size, stride):
    return _backend().dispatch(torch.ops.aten.view.default, (x, size), {})


def _cpu_kernel(op):
    def kernel(*args, **kwargs):
        return op._op_dk(torch._C.DispatchKey.CPU, *args, **kwargs)
    return kernel


def _as_strided_(x, size, stride, storage_offset=None):
    """as_strided_ as set_ onto the tensor's own storage: the CPU kernel of as_strided_ crashes the process
    (SIGSEGV) on a ttnn tensor -- adaptive_avg_pool2d to 1x1 of a channels-last-strided input calls it
    (torchvision's Swin and MaxViT heads), so does nn.Module code restriding its own outputs."""
    offset = x.storage_offset() if storage_offset is None else storage_offset
    torch.ops.aten.set_.source_Storage_storage_offset._op_dk(
        torch._C.DispatchKey.CPU, x, x.untyped_storage(), offset, size, stride)
    return x


def _boxed_fallback(op, *args, **kwargs):
    return _backend().dispatch(op, args, kwargs)


def register(device_module, load_backend) -> None:
    """`device_module` becomes `torch.ttnn`; `load_backend()` returns the dispatch module, lowerings
    registered (the package root wires the two: the core imports neither features nor lowerings)."""
    global _load_backend
    if torch._C._get_privateuse1_backend_name() == BACKEND:
        return
    _load_backend = load_backend
    # PyTorch's Python-backend set-up (torch.utils.backend_registration._setup_privateuseone_for_python_backend)
    # with the C++ hooks and device guard of native.py in place of its Python ones (pinned memory, N devices)
    native.register(device_module.device_count)  # first: builds them if needed, and a failure registers nothing
    torch.utils.rename_privateuse1_backend(BACKEND)
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module(BACKEND, device_module)
    from ..device import runtime
    runtime.use_thread_current_device(native.current_device, native.set_current_device)
    from . import tensor  # noqa: F401  (its storage patches: no C++ allocation of a ttnn storage)

    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(_boxed_fallback, "PrivateUse1")
    fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    kernels = torch.library.Library("aten", "IMPL")
    for name in FACTORY_OPS:
        op = _op(name)
        kernels.impl(op, (_random_like if name in _RANDOM_LIKE else _to_backend)(op), "PrivateUse1")
    for name in _CPU_KERNELS:
        op = _op(name)
        kernels.impl(op, _cpu_kernel(op), "PrivateUse1")
    kernels.impl(_op("as_strided_"), _as_strided_, "PrivateUse1")
    # reshape's composite emits _reshape_alias(self, size, stride) where a view will do: it is that view
    kernels.impl(_op("_reshape_alias"), _reshape_alias, "PrivateUse1")
    for name in KEEP_WHOLE:
        op = _op(name)
        kernels.impl(op, _keep_whole(op), "AutogradPrivateUse1")
    autocast.register(kernels)
    _libs.extend([fallback, kernels])
    _patch_module_apply()
    # torch.load(..., map_location="ttnn:0") maps every storage of the file to ttnn:0; PyTorch's own
    # deserializer for the device would allocate a ttnn storage, which does not exist (the process dies).
    # Storages stay on the CPU instead: a ttnn tensor is saved as its CPU value plus its device (tensor.py)
    # and moved to the device when rebuilt.
    torch.serialization.register_package(15, _no_tag, _keep_storage_on_cpu)


def _no_tag(storage):
    return None


def _keep_storage_on_cpu(storage, location: str):
    if location == BACKEND or location.startswith(BACKEND + ":"):
        return storage
    return None


_REPLACED_WARNING = (
    "module.to(): {names} could not be swapped for {its} moved copy in place: something else still references "
    "{them} -- most often the autograd graph of an earlier forward run with grad enabled whose output is still "
    "alive. {Each} is now a new Parameter on the target device (what PyTorch does for a device whose tensors "
    "cannot take over a CPU tensor's data); tied weights stay tied, but references held elsewhere (an optimizer "
    "made before the move, the old graph) still see the old tensor. To keep Parameter identity, run such a "
    "forward under `torch.no_grad()` or `del` its output before moving, and make optimizers after the move.")

_moving: list = []  # the outermost conversion's ({id(original parameter): (original, new)}, [names replaced])


def _replace_parameters(module, fn) -> list:
    """module's own parameters that a swap could not move, moved as PyTorch moves them without swaps (a new
    Parameter holding fn(param), its grad moved too; one per original, so ties hold), then its buffers (never
    swapped). Parameters already converted (fn returns them unchanged) stay. Returns the names replaced."""
    replaced = []
    moved = _moving[-1][0]
    for key, p in module._parameters.items():
        if p is None:
            continue
        if id(p) in moved:
            module._parameters[key] = moved[id(p)][1]
            continue
        with torch.no_grad():
            data = fn(p)
        if data is p:
            continue
        new = torch.nn.Parameter(data, p.requires_grad)
        if p.grad is not None:
            with torch.no_grad():
                new.grad = fn(p.grad)
        moved[id(p)] = (p, new)
        module._parameters[key] = new
        replaced.append(f"{module._get_name()}.{key}")
    for key, b in module._buffers.items():
        if b is not None:
            module._buffers[key] = fn(b)
    return replaced


def _patch_module_apply() -> None:
    """Module.to("ttnn:0") (and back, and dtype conversions on the device) keeps Parameter identity, so tied
    weights stay tied and references held elsewhere (optimizers, hooks) see the moved tensors: PyTorch swaps
    the tensors (torch.utils.swap_tensors) where torch.__future__.set_swap_module_params_on_conversion(True)
    says so. A plain PrivateUse1 tensor is no "compatible shallow-copy type" of a CPU tensor (PyTorch's dense
    backends only), so without the swap `param.data = ...` is not used, new Parameters are made and ties
    break silently. The flag is PyTorch-global: it is set only for the duration of a conversion that
    involves a ttnn device (a parameter or buffer on one, or a conversion to one).

    A swap fails when something else holds the parameter (PyTorch's "_apply(): Couldn't swap LayerNorm.weight",
    its cause a use_count message): typically the autograd graph of a CPU forward whose output is alive, where
    `.to("cuda")` works. The module whose own parameter failed then moves its own parameters as PyTorch does
    without swaps (_replace_parameters: new Parameters, ties kept across the whole conversion), so the module is
    moved whole -- never left half on each device -- and one warning names the parameters replaced."""
    M = torch.nn.Module
    if getattr(M._apply, "_ttnn_eager_wrapped", False):
        return
    apply = M._apply

    def swapped(self, fn, recurse):
        from . import tensor
        future = torch.__future__
        if future.get_swap_module_params_on_conversion() or not (
                tensor.names_ttnn(fn) or any(tensor.is_ttnn(t) for t in itertools.chain(self.parameters(), self.buffers()))):
            return apply(self, fn, recurse)
        future.set_swap_module_params_on_conversion(True)
        try:
            return apply(self, fn, recurse)
        finally:
            future.set_swap_module_params_on_conversion(False)

    def moved(self, fn, recurse):
        try:
            return swapped(self, fn, recurse)
        except RuntimeError as err:
            if not str(err).startswith("_apply(): Couldn't swap") or "use_count" not in str(err.__cause__):
                raise
            # this module's own parameter (a child's failure is handled by the child's own call): its children
            # are done, its parameters and buffers are moved without swaps
            _moving[-1][1].extend(_replace_parameters(self, fn))
            return self

    @functools.wraps(apply)
    def _apply(self, fn, recurse=True):
        if _changes_nothing(self, fn, recurse):
            return self
        if _moving:
            return moved(self, fn, recurse)
        _moving.append(({}, []))
        try:
            out = moved(self, fn, recurse)
            replaced = _moving[-1][1]
        finally:
            _moving.pop()
        if replaced:
            import warnings
            one = len(replaced) == 1
            warnings.warn(_REPLACED_WARNING.format(
                names=", ".join(replaced), its="its" if one else "their", them="it" if one else "them",
                Each="It" if one else "Each"), stacklevel=2)
        return out

    _apply._ttnn_eager_wrapped = True
    M._apply = _apply


def _changes_nothing(module, fn, recurse: bool) -> bool:
    """fn is Module.to's conversion to the device and dtype every parameter and buffer of a module on a ttnn device
    already has (switch_transformers' router calls `self.classifier.to(self.dtype)` in its forward): PyTorch's
    _apply would set each tensor to itself; with swaps (above) it would swap each with itself, which fails on a
    parameter a compiled graph's guards hold a weak reference to ("Cannot swap t1 because it has weakref")."""
    code = getattr(fn, "__code__", None)
    if code is None or fn.__name__ != "convert" or not fn.__closure__ \
            or not {"device", "dtype"} <= set(code.co_freevars):
        return False
    try:
        cells = dict(zip(code.co_freevars, (c.cell_contents for c in fn.__closure__)))
    except ValueError:  # (an empty cell)
        return False
    device, dtype = cells["device"], cells["dtype"]
    if cells.get("convert_to_format") is not None:
        return False
    tensors = list(itertools.chain(module.parameters(recurse=recurse), module.buffers(recurse=recurse)))
    from . import tensor
    return bool(tensors) and all(
        tensor.is_ttnn(t) and (device is None or torch.device(device) == t.device)
        and (dtype is None or not (t.is_floating_point() or t.is_complex()) or t.dtype == dtype) for t in tensors)
