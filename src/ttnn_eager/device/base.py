"""What the device API (api.py) and its two backends (card.py, mock.py) share: ttnn itself, imported once
the runtime has set the variables it reads; `Handle`, a device tensor and what PyTorch sees of it; and two
look-ups in ttnn (an op by name, a tensor's shape)."""
from __future__ import annotations

import functools
import weakref

import torch

from . import runtime

RUNTIME = runtime.get()  # must come before `import ttnn`: it sets the variables ttnn reads
import ttnn  # noqa: E402


class Handle:
    """A device tensor and what PyTorch sees of it.

    tt      the ttnn.Tensor (layout, device dtype, logical and padded shape are its own), or None for a
            tensor created by torch.empty and not yet written
    shadow  on a mock device: the value of `tt` as a torch tensor of its host dtype; else None
    dtype   the torch dtype PyTorch sees (float32 may be stored as bfloat16: see layout.py)
    shape   the torch shape PyTorch sees
    index   the device index (`ttnn:<index>`)
    bounds  (min, max, exact) of an integer or bool tensor's values when known without reading the device
            (uploads, constants, and views of them), else None; exact: min and max both occur (not only
            a range). Lets the embedding check token ids, and `mask.all()` be answered, with no device read
    version, source   view bookkeeping (see dispatch.refresh)
    root    when `tt` shares its device buffer with another ttnn tensor (ttnn returns its input's buffer
            for a reshape that keeps the tiles, a no-op slice, permute, to_layout, ...): that buffer's first
            tensor object, held so that its reference count counts every tensor on the buffer (see overwrite)
    pinned  its tensor asked for a fixed device address (torch._dynamo.mark_static_address, as transformers'
            StaticCache does): in-place writes keep its buffer (dispatch.write, overwrite)
    host    a *staged* tensor (api.stage): (value, device dtype, layout) kept on the host while `tt` is None;
            the first use that needs a device tensor uploads it (layout.materialize -> api.upload_staged)
    forms   the prepared forms made from this tensor (layout.prepared), held by the handle itself so that
            they die with it: a form that refers back to its handle is a plain reference cycle, which the
            garbage collector frees, where a weak-keyed cache holding the form would keep both alive forever
    pending a *deferred* value (eager fusion, lowerings/conv.py `Deferred`): an object whose run() returns the
            Handle of the value, computed then; `tt` and `shadow` are unset slots until then. Reading `tt` or
            `shadow` -- any reader: a lowering, a view, a download, a shadow read, a graph capture -- fails over
            to __getattr__, which runs it first (`force`), so no reader can see an uncomputed value; only a
            fusion reads `pending` itself (dispatch.FUSIONS). An assignment of `tt` (an overwrite) drops it at
            the next reading; `assign` drops it or hands it over.
    """

    __slots__ = ("tt", "shadow", "pending", "dtype", "shape", "index", "bounds", "version", "source", "root",
                 "pinned", "host", "forms", "__weakref__")

    # `tt` and `shadow` are plain slots, read at the cost of an attribute on every op's path (as properties
    # they cost ~50 ns a read, 10-27 reads an op). A deferred handle has both slots unset, so that a read
    # fails over to __getattr__, which computes the value first: no reader can see an uncomputed value, and
    # no reader of an ordinary handle pays for the check.

    def __init__(self, tt, shadow, dtype: torch.dtype, shape, index: int, bounds=None):
        self.pending = None
        self.tt, self.shadow, self.dtype, self.index = tt, shadow, dtype, index
        self.shape = shape if type(shape) is torch.Size else torch.Size(shape)
        self.bounds = bounds  # (min, max, exact) of integer/bool values when known from the host, else None
        self.version = 0      # bumped by every in-place write
        self.source = None    # for a view with its own device tensor: how to re-derive it (dispatch.refresh)
        self.root = None      # the tensor object whose buffer `tt` shares, if any
        self.pinned = False   # in-place writes keep the device buffer
        self.host = None      # (value, device dtype, layout) of a staged tensor (tt is None), else None
        self.forms = None     # prepared forms (layout.prepared), else None

    def __getattr__(self, name):
        # only reached for an unset slot: `tt`/`shadow` of a deferred handle (computed now), else AttributeError
        if (name == "tt" or name == "shadow") and self.pending is not None:
            self.force()
            return getattr(self, name)
        raise AttributeError(f"'Handle' object has no attribute '{name}'")

    def defer(self, pending) -> "Handle":
        """This handle's value is now `pending`'s, computed at its first reading (see `pending`)."""
        _unset(self)
        self.root = None
        self.pending = pending
        DEFERRED.add(self)
        return self

    def force(self) -> "Handle":
        """A deferred handle's value computed now (its pending run: the same result for every handle it was
        handed to); a no-op for any other handle. A deferred handle given a `tt` or `shadow` since (an
        overwrite) keeps that, the other None: its deferred value is dropped."""
        pending = self.pending
        if pending is not None:
            assigned = _is_set(self, "tt") or _is_set(self, "shadow")
            self.pending = None
            DEFERRED.discard(self)
            if assigned:
                for name in ("tt", "shadow"):
                    if not _is_set(self, name):
                        setattr(self, name, None)
                return self
            out = pending.run()
            self.tt, self.shadow, self.root, self.bounds = out.tt, out.shadow, out.root, out.bounds
        return self

    def shared(self) -> "Handle":
        """A new handle on the same value: the same device tensor (copy-on-write: in-place ops replace it,
        never modify it), or the same host value of a staged tensor."""
        h = Handle(self.tt, self.shadow, self.dtype, self.shape, self.index, self.bounds)
        h.host, h.root = self.host, self.root
        return h

    def assign(self, other: "Handle") -> None:
        """This handle now holds other's value: its device tensor (or staged host value), shadow and known
        value bounds. The prepared forms made from the old value are dropped."""
        if other.pending is not None:  # a deferred value stays deferred (dispatch.write of a fused result)
            self.defer(other.pending)
            self.bounds = other.bounds
        else:
            if self.pending is not None:  # (an overwrite of a deferred value: dropped)
                self.pending = None
                DEFERRED.discard(self)
            self.tt, self.shadow, self.bounds, self.root = other.tt, other.shadow, other.bounds, other.root
        self.host, self.forms = other.host, None

    @property
    def layout(self):
        return self.tt.layout if self.tt is not None or self.host is None else self.host[2]

    @property
    def tt_dtype(self):
        return self.tt.dtype if self.tt is not None or self.host is None else self.host[1]

    @property
    def padded_shape(self):
        return tuple(self.tt.padded_shape)

    def __repr__(self):
        if self.pending is not None:
            where = "deferred"
        elif self.tt is not None:
            where = f"{self.tt.layout}, {self.tt.dtype}, padded {self.padded_shape}"
        else:
            where = "unwritten" if self.host is None else f"staged on the host, {self.host[1]}"
        return f"Handle(ttnn:{self.index}, {tuple(self.shape)}, {self.dtype}, {where})"


_TT, _SHADOW = Handle.tt, Handle.shadow  # the slots' descriptors


def _is_set(h: Handle, name: str) -> bool:
    try:
        (_TT if name == "tt" else _SHADOW).__get__(h, Handle)  # (not getattr: no __getattr__ fallback)
    except AttributeError:
        return False
    return True


def _unset(h: Handle) -> None:
    """h's tt and shadow slots emptied (a deferred handle: reading either reaches Handle.__getattr__)."""
    for d in (_TT, _SHADOW):
        try:
            d.__delete__(h)
        except AttributeError:
            pass


DEFERRED = weakref.WeakSet()  # the live handles that were given a deferred value (Handle.defer)


def force_deferred() -> None:
    """Compute every deferred value now (before a graph capture: a value deferred outside it must not be
    computed inside it, where its ops would be recorded)."""
    for h in list(DEFERRED):
        h.force()
    DEFERRED.clear()


def shape_of(tt) -> torch.Size:
    """A ttnn tensor's logical shape as a torch.Size (indexing ttnn.Shape is ~4x faster than iterating it)."""
    s = tt.shape
    return torch.Size([s[i] for i in range(len(s))])


@functools.lru_cache(maxsize=None)
def _resolve(op: str):
    fn = ttnn
    for part in op.split("."):
        fn = getattr(fn, part)
    return fn
