"""Complex tensors (complex64) on the device, stored as real pairs.

The storage policy (core/layout.py) keeps a complex64 tensor as its `view_as_real` value: a real device
tensor [*shape, 2] (real and imaginary parts last, float32 stored as the float policy says: bfloat16 by
default, float32 with configure(float32_storage="float32")), while the Handle keeps torch's view (complex64,
the complex shape). `layout.as_pair` / `layout.as_complex` see one as the other with no device op. So:

    view_as_real, view_as_complex   no device op: the same device tensor as the other dtype; both are views
                                    (writes through either reach the other: their inverses below)
    polar, complex                  cos/sin products, or the two parts side by side (concat)
    mul, add, sub, neg, conj        on the parts: (a + bi)(c + di) = (ac - bd) + (ad + bc)i
    abs                             sqrt(re^2 + im^2)
    views (view, unsqueeze, permute, slice, select, expand, cat, ...)   the real view of the pair, its
                                    trailing dimension of 2 kept; writes through them reach the base
    constant_pad_nd                 the pair padded with zeros (its trailing dimension not)
    _to_copy, copy_                 .cpu() / .to("ttnn") / dtype conversions (complex -> real: the real parts,
                                    as PyTorch's cast)

These are registered with `complex=True` (registry.COMPLEX): dispatch sends every call with a complex tensor
argument here, and a call whose op has no complex lowering runs on the CPU fallback (counted), which hands
the CPU the complex values PyTorch would have. FFTs are lowerings of their own (lowerings/fft.py: DFT matrix
products of the pairs). complex128 (like float64) and complex32 are refused by the storage policy.

A conjugate view (`x.conj()`, PyTorch's lazy conjugate bit) is made eagerly here: its device tensor holds the
conjugated values and the tensor carries no conjugate bit (`is_conj()` is False on the device).
"""
from __future__ import annotations

import builtins

import torch

from ..core import layout as policy
from ..core.layout import TILE, TILE_FLOAT, as_complex, as_pair
from ..core.registry import COMPLEX, INVERSES, Unfit, lowering
from ..device import api
from . import factory, views
from ._common import contiguous_shape, dim, is_handle

aten = torch.ops.aten
C64 = torch.complex64


# ----------------------------------------------------------------------------------------------- parts
def _pair(x: api.Handle) -> api.Handle:
    """x (complex) as its pair, TILE."""
    return policy.ensure(as_pair(policy.materialize(x)), TILE)


def _parts(p: api.Handle) -> tuple:
    """A pair [..., 2] as its real and imaginary parts, [..., 1] each."""
    return views.slice_handle(p, -1, 0, 1), views.slice_handle(p, -1, 1, 2)


def _join(re: api.Handle, im: api.Handle, parts: bool = False) -> api.Handle:
    """Real and imaginary parts as a complex tensor: of the complex shape each, or (parts=True) as _parts
    gives them, [..., 1]."""
    if not parts:
        re, im = views.unsqueeze(re, len(re.shape)), views.unsqueeze(im, len(im.shape))
    re, im = policy.ensure_promoted([policy.ensure(re, TILE_FLOAT), policy.ensure(im, TILE_FLOAT)])
    shape = torch.broadcast_shapes(re.shape, im.shape)
    re, im = views.expand(re, shape), views.expand(im, shape)
    if not shape.numel():
        return policy.to_device(torch.empty(shape[:-1], dtype=C64), re.index)
    p = api.run("concat", [re, im], dim=len(shape) - 1, out_dtype=torch.float32)
    return as_complex(p)


def _complex_arg(x, index: int):
    """An operand of a complex op as a complex handle (a real tensor: imaginary parts 0), or a Python
    number as a complex."""
    if not is_handle(x):
        return builtins.complex(x)
    return x if x.dtype is C64 else policy.retag(x, C64)


def _empty_result(shape, index: int) -> api.Handle:
    return policy.to_device(torch.empty(tuple(shape), dtype=C64), index)


def _run(op: str, a, b):
    """ttnn.<op> of two real operands (handles or Python floats), floating, one device dtype."""
    if is_handle(a) and is_handle(b):
        a, b = policy.ensure_promoted([policy.ensure(a, TILE_FLOAT), policy.ensure(b, TILE_FLOAT)])
        return api.run(op, a, b, out_dtype=torch.float32)
    if is_handle(a):
        return api.run(op, policy.ensure(a, TILE_FLOAT), float(b), out_dtype=torch.float32)
    return api.run({"subtract": "rsub"}.get(op, op), policy.ensure(b, TILE_FLOAT), float(a), out_dtype=torch.float32)


# ----------------------------------------------------------------------------------------------- views as the other dtype
@lowering(aten.view_as_real.default, needs=TILE, complex=True, notes="no device op: the stored pair itself")
def view_as_real(x):
    return as_pair(policy.materialize(x))


@lowering(aten.view_as_complex.default, ttnn=["typecast"], needs=TILE,
          notes="no device op (an integer-stored input is cast): the pair becomes the complex tensor's storage")
def view_as_complex(x):
    if x.dtype is not torch.float32:  # (half: complex32, which the device does not store; double is refused)
        raise Unfit(f"view_as_complex of {x.dtype} gives {x.dtype.to_complex()}, not stored on ttnn devices")
    if not x.shape or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return as_complex(policy.materialize(x))


def _view_as_real_back(base, value, pos=None):
    return as_complex(value)


def _view_as_complex_back(base, value, pos=None):
    return policy.retag(as_pair(value), base.dtype)


INVERSES[view_as_real] = _view_as_real_back
INVERSES[view_as_complex] = _view_as_complex_back


# ----------------------------------------------------------------------------------------------- makers
@lowering(aten.polar.default, ttnn=["cos", "sin", "multiply", "concat"], needs=TILE_FLOAT,
          notes="abs * cos(angle) + i abs * sin(angle)")
def polar(abs, angle):
    if abs.dtype is not torch.float32 or angle.dtype is not torch.float32:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got {abs.dtype} and "
                           f"{angle.dtype}" if abs.dtype == angle.dtype else
                           f"Expected object of scalar type {abs.dtype} but got scalar type {angle.dtype} for "
                           f"second argument")
    shape = torch.broadcast_shapes(abs.shape, angle.shape)
    if not shape.numel():
        return _empty_result(shape, abs.index)
    re = _run("multiply", abs, api.run("cos", angle))
    im = _run("multiply", abs, api.run("sin", angle))
    return _join(re, im)


@lowering(aten.complex.default, ttnn=["concat"], needs=TILE_FLOAT, notes="the two parts side by side")
def complex(real, imag):
    if real.dtype is not torch.float32 or imag.dtype is not torch.float32:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got {real.dtype} and "
                           f"{imag.dtype}")
    shape = torch.broadcast_shapes(real.shape, imag.shape)
    if not shape.numel():
        return _empty_result(shape, real.index)
    return _join(real, imag)


# ----------------------------------------------------------------------------------------------- arithmetic
@lowering(aten.mul.Tensor, aten.mul.Scalar, ttnn=["slice", "multiply", "subtract", "add", "concat"],
          complex=True, notes="(a + bi)(c + di) = (ac - bd) + (ad + bc)i; a real operand scales both parts")
def mul(a, b):
    if not is_handle(a) or a.dtype is not C64:  # the complex operand first
        a, b = b, a
    index = a.index
    if is_handle(b) and b.dtype is not C64:  # complex * real tensor: both parts scaled
        b = views.unsqueeze(b, len(b.shape))
        if not a.shape.numel() or not b.shape.numel():
            return _empty_result(torch.broadcast_shapes(a.shape, b.shape[:-1]), index)
        return as_complex(_run("multiply", _pair(a), b))
    if not is_handle(b) and not isinstance(b, builtins.complex):  # complex * real number
        if not a.shape.numel():
            return a
        return as_complex(_run("multiply", _pair(a), float(b)))
    if is_handle(b):
        shape = torch.broadcast_shapes(a.shape, b.shape)
        if not shape.numel():
            return _empty_result(shape, index)
        ar, ai = _parts(_pair(a))
        br, bi = _parts(_pair(b))
    else:
        if not a.shape.numel():
            return a
        ar, ai = _parts(_pair(a))
        br, bi = b.real, b.imag
    re = _run("subtract", _run("multiply", ar, br), _run("multiply", ai, bi))
    im = _run("add", _run("multiply", ar, bi), _run("multiply", ai, br))
    return _join(re, im, parts=True)


def _add(a, b, alpha, op: str):
    """a + alpha * b (op "add") or a - alpha * b ("subtract"), complex."""
    index = (a if is_handle(a) else b).index
    a, b = _complex_arg(a, index), _complex_arg(b, index)
    if alpha != 1:
        b = mul(b, alpha) if is_handle(b) else b * alpha
    shape = torch.broadcast_shapes(*(x.shape for x in (a, b) if is_handle(x)))
    if not shape.numel():
        return _empty_result(shape, index)
    if not is_handle(b) or not is_handle(a):  # a complex number: its two parts, broadcast over the pairs
        number, tensor = (b, a) if is_handle(a) else (a, b)
        parts = policy.to_device(torch.tensor([number.real, number.imag], dtype=torch.float32), index)
        if is_handle(a):
            return as_complex(_run(op, _pair(tensor), parts))
        return as_complex(_run(op, parts, _pair(tensor)))
    return as_complex(_run(op, _pair(a), _pair(b)))


@lowering(aten.add.Tensor, aten.add.Scalar, ttnn=["add"], complex=True, notes="pair + pair")
def add(a, b, *, alpha=1):
    return _add(a, b, alpha, "add")


@lowering(aten.sub.Tensor, aten.sub.Scalar, ttnn=["subtract"], complex=True, notes="pair - pair")
def sub(a, b, *, alpha=1):
    return _add(a, b, alpha, "subtract")


@lowering(aten.rsub.Tensor, aten.rsub.Scalar, ttnn=["subtract"], complex=True, notes="other - alpha * self")
def rsub(a, b, *, alpha=1):
    return _add(b, a if alpha == 1 else mul(a, alpha), 1, "subtract")


@lowering(aten.neg.default, ttnn=["neg"], complex=True)
def neg(x):
    if not x.shape.numel():
        return x
    return as_complex(api.run("neg", _pair(x)))


def conjugate(x: api.Handle) -> api.Handle:
    """x with its imaginary parts negated."""
    if not x.shape.numel():
        return views.share(x)
    re, im = _parts(_pair(x))
    return _join(re, api.run("neg", im), parts=True)


@lowering(aten._conj_physical.default, ttnn=["slice", "neg", "concat"], complex=True)
def _conj_physical(x):
    return conjugate(x)


@lowering(aten._conj.default, ttnn=["slice", "neg", "concat"], complex=True,
          notes="made eagerly, a copy: it holds the conjugated values and has no conjugate bit")
def _conj(x):
    return conjugate(x)


COMPLEX[aten._conj.default].aliases = ()  # a tensor of its own: an alias of the same geometry shares its base's
# device tensor (core/tensor.py), which holds the unconjugated values


@lowering(aten.abs.default, ttnn=["abs", "maximum", "minimum", "add", "divide", "multiply", "sqrt"], complex=True,
          notes="hypot(re, im) = m * sqrt(1 + (n / m)^2), m = max(abs(re), abs(im)), n = min: no overflow of the squares")
def abs(x):
    if not x.shape.numel():
        return policy.to_device(torch.empty(tuple(x.shape)), x.index)
    re, im = (api.run("abs", part) for part in _parts(_pair(x)))
    m, n = _run("maximum", re, im), _run("minimum", re, im)
    q = _run("divide", n, api.run("add", m, _TINY))  # (0 where both parts are 0)
    out = _run("multiply", m, api.run("sqrt", api.run("add", _run("multiply", q, q), 1.0)))
    return views.reshape(out, list(x.shape))


_TINY = float(torch.finfo(torch.float32).tiny)


# ----------------------------------------------------------------------------------------------- copies
@lowering(aten._to_copy.default, ttnn=["typecast", "from_torch", "to_torch"], mixed_devices=True, complex=True,
          notes="complex -> real keeps the real parts (PyTorch's cast)")
def _to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    return factory.to_copy(x, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
                           non_blocking=non_blocking, memory_format=memory_format)


@lowering(aten.copy_.default, ttnn=["from_torch", "to_torch"], mixed_devices=True, complex=True)
def copy_(dst, src, non_blocking=False):
    if is_handle(dst) and is_handle(src) and src.index == dst.index:
        if tuple(src.shape) != tuple(dst.shape):
            src = expand(policy.materialize(src), list(dst.shape))
        return policy.retag(src, dst.dtype)
    return factory.copy_(dst, src, non_blocking)


@lowering(aten.clone.default, aten.lift_fresh_copy.default, complex=True, notes="no device op (copy-on-write)")
def clone(x, *, memory_format=None):
    return views.share(x)


for _op, _fn in ((aten.zeros_like.default, factory.zeros_like), (aten.ones_like.default, factory.ones_like),
                 (aten.full_like.default, factory.full_like), (aten.empty_like.default, factory.empty_like),
                 (aten.new_zeros.default, factory.new_zeros), (aten.new_ones.default, factory.new_ones),
                 (aten.new_full.default, factory.new_full), (aten.new_empty.default, factory.new_empty),
                 (aten.fill.Scalar, factory.fill), (aten.zero.default, factory.zero)):
    lowering(_op, ttnn=["full"], complex=True, notes="a complex constant is made on the host, uploaded")(_fn)


# ----------------------------------------------------------------------------------------------- views
def _view(op, real_fn, adjust, ttnn=("reshape",)):
    """The complex lowering of view op `op`: the real view `real_fn` of the pair with arguments `adjust(n,
    *args, **kwargs) -> (args, kwargs)` (n: the complex tensor's rank; the pair's trailing dimension kept),
    and its inverse for writes through the view (the real view's inverse, on the pairs)."""
    def lower(x, *args, **kwargs):
        pargs, pkwargs = adjust(len(x.shape), *args, **kwargs)
        out = real_fn(as_pair(policy.materialize(x)), *pargs, **pkwargs)
        return [as_complex(o) for o in out] if isinstance(out, list) else as_complex(out)

    def inverse(base, value, *args, pos=None, **kwargs):
        pargs, pkwargs = adjust(len(base.shape), *args, **kwargs)
        back = INVERSES.get(real_fn)
        if back is None:
            from ..core.registry import scatter_into
            return scatter_into(real_fn, base, value, pargs, pkwargs, pos)  # (its error)
        return as_complex(back(as_pair(base), as_pair(value), *pargs, pos=pos, **pkwargs))

    name = op._schema.name.split("::")[1]
    lower.__name__ = lower.__qualname__ = name
    INVERSES[lower] = inverse
    return lowering(op, ttnn=list(ttnn), complex=True, notes="the real view of the pair")(lower)


def _dims_arg(n, dims=None):
    if dims is None:
        return [list(range(n))], {}
    return [[dim(d, n) for d in ([dims] if isinstance(dims, int) else dims)]], {}


def _one_dim(n, d, *rest, **kw):
    return [dim(d, n), *rest], kw


def _insert_dim(n, d):
    return [dim(d, n + 1)], {}


def _permute_arg(n, dims):
    return [[dim(d, n) for d in dims] + [n]], {}


def _transpose_arg(n, d0, d1):
    return [dim(d0, n), dim(d1, n)], {}


def _view_arg(n, size):
    return [list(size) + [2]], {}


def _reshape(p, size):
    return views.reshape(p, contiguous_shape(size[:-1], p.shape.numel() // 2) + (2,))


view = _view(aten.view.default, _reshape, _view_arg)
_unsafe_view = _view(aten._unsafe_view.default, _reshape, _view_arg)
unsqueeze = _view(aten.unsqueeze.default, views.unsqueeze, _insert_dim)
squeeze = _view(aten.squeeze.default, views.squeeze, _dims_arg)
squeeze_dim = _view(aten.squeeze.dim, views.squeeze, _dims_arg)
squeeze_dims = _view(aten.squeeze.dims, views.squeeze, _dims_arg)
permute = _view(aten.permute.default, views.permute, _permute_arg, ("permute",))
transpose = _view(aten.transpose.int, views.transpose, _transpose_arg, ("permute",))
t = _view(aten.t.default, lambda p: views.transpose(p, 0, 1) if len(p.shape) == 3 else p,
          lambda n: ([], {}), ("permute",))
slice = _view(aten.slice.Tensor, views.slice_op, _one_dim, ("slice",))
select = _view(aten.select.int, views.select, _one_dim, ("slice", "reshape"))
split = _view(aten.split.Tensor, views.split, lambda n, size, d=0: ([size, dim(d, n)], {}), ("slice",))
split_with_sizes = _view(aten.split_with_sizes.default, views.split_with_sizes,
                         lambda n, sizes, d=0: ([sizes, dim(d, n)], {}), ("slice",))
unbind = _view(aten.unbind.int, views.unbind, lambda n, d=0: ([dim(d, n)], {}), ("slice", "reshape"))
expand = _view(aten.expand.default, views.expand_op, lambda n, size, implicit=False: ([list(size) + [2]], {}),
               ("expand",))


@lowering(aten.cat.default, ttnn=["concat"], complex=True, notes="the pairs concatenated (real tensors promoted)")
def cat(tensors, d=0):
    n = max(len(x.shape) for x in tensors)
    pairs = [as_pair(policy.materialize(_complex_arg(x, x.index))) for x in tensors if x.shape.numel()
             or len(x.shape) == n]
    return as_complex(views.cat(pairs, dim(d, n)))


@lowering(aten.constant_pad_nd.default, ttnn=["full", "concat", "slice"], complex=True,
          notes="the pair padded (its dimension of 2 not): zeros only (torch.fft's n= / s= longer than the input)")
def constant_pad_nd(x, pad, value=0):
    from .padding import constant_pad_nd as real_pad
    if value != 0:
        raise Unfit(f"complex padding value {value} (the pair's two parts would both take it)")
    if len(pad) % 2 or len(pad) // 2 > len(x.shape):
        raise RuntimeError(f"Padding length must be divisible by 2 and at most twice the input's dimensions "
                           f"({len(x.shape)}), but got {len(pad)}")
    return as_complex(real_pad(as_pair(policy.materialize(x)), [0, 0, *pad], 0.0))


@lowering(aten.stack.default, ttnn=["reshape", "concat"], complex=True)
def stack(tensors, d=0):
    d = dim(d, len(tensors[0].shape) + 1)
    return cat([unsqueeze(_complex_arg(x, x.index), d) for x in tensors], d)
