"""The lowering registry: aten op -> the function that runs it as TT-NN ops.

A lowering is a small function registered for the aten op(s) it implements:

    @lowering(aten.addmm.default, ttnn=["linear"], needs=TILE)
    def addmm(bias, a, b, *, beta=1, alpha=1): ...

It receives device `Handle`s where the aten op has tensors (already in the layout/dtype `needs` asks for:
one Need for every tensor argument, or a dict by schema argument name with "*" for the rest), Python scalars
elsewhere, and returns Handle(s) (or a host value such as a Python number for `.item()`). It never converts
layouts by hand and never calls ttnn directly: conversions are the layout policy's, ttnn calls the device
API's. The registry is also the documentation: docs/ops.md is generated from it.
"""
from __future__ import annotations

import dataclasses
import functools

import torch

from .layout import ANY, Need

aten = torch.ops.aten


@dataclasses.dataclass
class Lowering:
    op: torch._ops.OpOverload
    fn: callable
    ttnn: tuple            # the TT-NN ops it becomes (for docs and reports)
    needs: object          # Need, or {arg name or "*": Need}
    notes: str             # limits, semantics worth knowing
    mixed_devices: bool    # accepts CPU tensors beside ttnn ones (copies between devices)
    numbers: bool = True   # takes a Python number for a tensor argument (registered for a Scalar overload too)
    # Worked out once from the schema, so that dispatch does no schema work per call:
    tensor_positions: tuple = ()  # (position, Need) of each positional tensor argument
    by_name: dict = dataclasses.field(default_factory=dict)  # Need of each argument by name (None: no tensor)
    aliases: tuple = ()      # output_aliases(op): views and in-place/out= results

    def __post_init__(self):
        names = []
        for arg in self.op._schema.arguments:
            is_tensor = "Tensor" in str(arg.type)
            need = None
            if is_tensor:
                if isinstance(self.needs, Need):
                    need = self.needs
                else:
                    need = self.needs.get(arg.name, self.needs.get("*", ANY))
            names.append((arg.name, need, arg.kwarg_only))
        positional = [n for _, n, kw in names if not kw]
        self.tensor_positions = tuple((i, n) for i, n in enumerate(positional) if n is not None)
        self.by_name = {name: n for name, n, _ in names}
        self.aliases = output_aliases(self.op)

    def need_summary(self) -> str:
        parts = []
        for arg in self.op._schema.arguments:
            need = self.by_name.get(arg.name)
            if need is not None:
                parts.append(f"{arg.name}: {need!r}")
        return ", ".join(parts) or "-"


REGISTRY: dict = {}  # aten OpOverload -> Lowering
BY_ID: dict = {}     # id(aten OpOverload) -> Lowering: the same, for dispatch (OpOverload hashes in Python)
# Complex tensors (core/layout.py: stored as real pairs) are computed only by the lowerings registered with
# complex=True (lowerings/complex.py): dispatch sends a call with a complex tensor argument there, or to the
# CPU fallback when the op has none. The same aten op may have both (mul: real and complex).
COMPLEX: dict = {}   # aten OpOverload -> Lowering for calls with complex tensor arguments
COMPLEX_BY_ID: dict = {}


@functools.lru_cache(maxsize=None)
def output_aliases(func) -> tuple:
    """Outputs that alias an input, from the schema's alias annotations: ((output index, input position (or
    name if kwarg-only), input name, is_write), ...). Views (transpose, split) and in-place/out= results."""
    out = []
    args = func._schema.arguments
    for ri, ret in enumerate(func._schema.returns):
        if ret.alias_info is None:
            continue
        target = ret.alias_info.before_set
        for ai, arg in enumerate(args):
            if arg.alias_info is None:
                continue
            # a list of views (split, unbind) names no set on the return; its input aliases into "*"
            if arg.alias_info.before_set == target or (not target and "*" in arg.alias_info.after_set):
                out.append((ri, arg.name if arg.kwarg_only else ai, arg.name, ret.alias_info.is_write))
                break
    return tuple(out)


class Unfit(Exception):
    """Raised by a lowering when this call's arguments do not fit the TT-NN op (e.g. a head size that is
    not a multiple of 32 for fused attention). The dispatcher then decomposes the op into smaller aten
    ops (CompositeImplicitAutograd ops) or runs it on the CPU fallback, as for an op with no lowering.
    `replaced`: {argument name: (position, value)} the lowering found equivalent for this call (sdpa's mask
    known on the host to mask nothing: None), which the decomposition then takes instead."""

    def __init__(self, reason: str = "", replaced: dict | None = None):
        super().__init__(reason)
        self.replaced = replaced or {}


def lowering(*ops, ttnn=(), needs: object = ANY, notes: str = "", mixed_devices: bool = False,
             complex: bool = False):
    """Register the decorated function as the lowering of each aten overload in `ops` (complex=True: of its
    calls with complex tensor arguments, which receive their handles as they are: needs is ANY)."""
    table, by_id = (COMPLEX, COMPLEX_BY_ID) if complex else (REGISTRY, BY_ID)

    # A 0-d CPU tensor beside device tensors (PyTorch lets it mix with any device) reaches a lowering as a
    # Python number when the lowering takes numbers -- one of its overloads has a Scalar argument (add.Scalar
    # beside add.Tensor) -- and as a device tensor otherwise (maximum, clamp.Tensor, lerp.Tensor: dispatch._Call).
    numbers = any(str(a.type) in ("number", "Optional[number]") for op in ops for a in op._schema.arguments)

    def register(fn):
        for op in ops:
            if op in table:
                raise RuntimeError(f"{op} already has a lowering ({table[op].fn.__qualname__})")
            table[op] = by_id[id(op)] = Lowering(op, fn, tuple(ttnn), needs, notes, mixed_devices, numbers)
        return fn
    return register


# Eager fusions (config "eager_fusion"): an op whose first argument is a deferred value (Handle.pending: a
# convolution not yet run, lowerings/conv.py) may fold itself into it -- an eval batch norm into the
# convolution's weight and bias, an activation into its conv2d -- instead of running its lowering. The function
# gets the call's (args, kwargs) as dispatch got them and returns the op's result (Handles), or None: not
# fusable, the lowering runs (and its reading the argument runs the deferred convolution first).
FUSIONS: dict = {}  # id(aten OpOverload) -> fn(args, kwargs) -> result or None


def fusion(*ops):
    """Register the decorated function as the eager fusion of each aten overload in `ops` (see FUSIONS)."""
    def register(fn):
        for op in ops:
            FUSIONS[id(op)] = fn
        return fn
    return register


# Lowerings of ops that a library defines when it loads (torchvision::roi_align): the op exists only once its
# library is imported, which ttnn_eager does not do (importing torchvision costs ~1.5 s). They are registered by
# qualified name and each becomes a Lowering the first time dispatch meets its op. They stay out of REGISTRY,
# whose contents (docs/ops.md, the tests' every-lowering guards) must not depend on what a process has run.
LATE: dict = {}       # "namespace::name.overload" -> (fn, ttnn, needs, notes)
LATE_BY_ID: dict = {}  # id(OpOverload) -> its Lowering, or None (each op looked up once)


def late_lowering(qualname: str, ttnn=(), needs: object = ANY, notes: str = ""):
    """Register the decorated function as the lowering of the library op `qualname` (e.g.
    "torchvision::roi_align.default"), made when dispatch first meets it (see LATE)."""
    def register(fn):
        if qualname in LATE:
            raise RuntimeError(f"{qualname} already has a lowering ({LATE[qualname][0].__qualname__})")
        LATE[qualname] = (fn, tuple(ttnn), needs, notes)
        return fn
    return register


def late_entry(func):
    """The Lowering of `func` among the LATE ones, or None."""
    key = id(func)
    if key not in LATE_BY_ID:
        spec = LATE.get(f"{func._schema.name}.{func._overloadname}")
        LATE_BY_ID[key] = None if spec is None else Lowering(func, spec[0], spec[1], spec[2], spec[3], False)
    return LATE_BY_ID[key]


def device_mismatch(a, b) -> RuntimeError:
    """PyTorch's error for tensors of two devices in one op (a, b: devices, or ttnn device indices)."""
    a, b = (f"ttnn:{d}" if isinstance(d, int) else str(d) for d in (a, b))
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!")


# Note [writes through views]
# A view with its own device tensor remembers how it derives from its base (dispatch._finish records the view
# lowering and its arguments). A write into such a view is a write of its base: the view's new value is
# scattered into the base by the view op's inverse below -- what PyTorch's functionalization does with
# slice_scatter, select_scatter and diagonal_scatter -- and every other view of that base is re-derived from
# it on its next use (dispatch.refresh). `expand` has no inverse: PyTorch refuses writes into an expanded
# tensor (several of its elements are one memory location), and so does scatter_into.
INVERSES: dict = {}  # view lowering -> inverse(base, value, *view_args, pos=None, **view_kwargs) -> new base


def inverse_of(*view_fns):
    """Register the decorated function as the inverse of the view lowerings `view_fns` (lowerings/views.py)."""
    def register(fn):
        for v in view_fns:
            INVERSES[v] = fn
        return fn
    return register


def scatter_into(view_fn, base, value, args, kwargs, pos):
    """The new value of `base` after `value` is written into its view `view_fn(base, *args, **kwargs)[pos]`."""
    inverse = INVERSES.get(view_fn)
    if inverse is None:
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")
    return inverse(base, value, *args, pos=pos, **kwargs)
