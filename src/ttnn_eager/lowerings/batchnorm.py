"""Batch and group normalization as compositions of TT-NN elementwise ops and reductions.

The input [N, C, *] is viewed as [N, C, L] (L = the product of the spatial sizes, 1 for BatchNorm1d on
[N, C]) so that per-channel values broadcast as [1, C, 1].

Eval (running statistics): y = x * scale + shift with scale = weight / sqrt(running_var + eps) and
shift = bias - running_mean * scale, folded once per (parameters, versions) by the layout policy
(layout.prepared on the running mean: a write into any of them, e.g. load_state_dict, refolds), so a
steady-state forward is one multiply and one add per BatchNorm (and a slice for each of scale and shift).
The fold is computed on the host in float32 from the parameters' values and kept as two columns of a shared
pack (layout.pack): alone, a [1, C, 1] vector takes [1, C, 32] in TILE (32x) and at least a tile in each of
the 12 DRAM banks (24 KiB), which made batch norms a third of mobilenet_v2's device memory. (During a graph
capture the fold is computed by device ops, as separate tensors.) The folded form holds its parameters only
weakly (to tell a parameter from a later one at the same id): a form that held them -- the running mean
among them, its own handle -- kept all six tensors of every BatchNorm on the device after its model was
deleted, when the forms were kept in a weak-keyed cache. Once folded, the four tensors are staged back to the
host (api.release): the folded scale and shift replace them on the device, so the lowerings take them as
they are (STAGED) and put them on the device only where they compute with them (training).

Training (batch statistics, also InstanceNorm and GroupNorm): mean and biased variance over (N, L) in
float32 (a bfloat16 variance loses its small values), normalized in float32, the result stored back in the
input's dtype. With running statistics the running mean and (unbiased) variance are updated in place, as
PyTorch does. The saved mean and inverse standard deviation (for autograd) are returned as PyTorch does;
eval returns empty ones.
"""
from __future__ import annotations

import weakref

import torch

from ..core import layout as policy
from ..core.layout import STAGED, TILE_FLOAT, TILE_FLOAT_CL
from ..core.registry import Unfit, lowering
from ..device import api
from .views import reshape

aten = torch.ops.aten


def _empty(x):
    """The empty saved-statistics result of eval batch norm: no device memory."""
    return api.Handle(None, None, x.dtype, (0,), x.index)


def _channels(t, c: int):
    return reshape(t, (1, c, 1))


def _write(h: api.Handle, value: api.Handle) -> None:
    """h (a running-statistics buffer) now holds value: an in-place update, as PyTorch's kernel does."""
    h.assign(policy.stored(reshape(value, h.shape)))
    h.version += 1


def _fold(x, weight, bias, mean, var, eps, rows: bool = False):
    """(scale, shift) of eval batch norm as [1, C, 1] -- or, `rows`, as [1, C] rows for a channels-last input
    -- folded once per parameter versions (one form per running mean, eps and shape, made again when a
    parameter is replaced or written)."""
    c = x.shape[1]
    parts = (weight, bias, mean, var)
    versions = tuple(None if p is None else p.version for p in parts)
    packed = api.recording is None  # (a graph capture records device ops: the fold is computed by them)

    def fold(_):
        # the parts by weak reference: the form must not keep its parameters (its own handle among them) alive
        refs = tuple(None if p is None else weakref.ref(p) for p in parts)
        if packed:  # on the host, in float32, from the parts' values (staged: no device read)
            w, b, m, v = (None if p is None else policy.download(p).float() for p in parts)
            scale = torch.rsqrt(v + float(eps))
            scale = scale * w if w is not None else scale
            shift = b - m * scale if b is not None else -(m * scale)
            if rows:
                scale, shift = scale.reshape(1, -1), shift.reshape(1, -1)
            return (policy.pack(scale, x.index, x.dtype), policy.pack(shift, x.index, x.dtype),
                    refs, versions)
        w, b, m, v = (None if p is None else policy.ensure(p, TILE_FLOAT) for p in parts)
        inv = api.run("rsqrt", api.run("add", v, float(eps)))
        scale = api.run("multiply", inv, w) if w is not None else inv
        shift = api.run("multiply", m, scale)
        shift = api.run("subtract", b, shift) if b is not None else api.run("neg", shift)
        if rows:
            return reshape(scale, (1, c)), reshape(shift, (1, c)), refs, versions
        return _channels(scale, c), _channels(shift, c), refs, versions

    def stale(form):  # a parameter replaced (another tensor, perhaps at the same id) or written since
        return form[3] != versions or any((r is None) != (p is None) or (r is not None and r() is not p)
                                          for r, p in zip(form[2], parts))

    scale, shift, _, _ = policy.prepared(mean, ("batch_norm", float(eps), x.dtype, rows), fold, stale)
    if api.recording is None:
        for p in parts:  # the folded form replaces them on the device
            if p is not None and p.tt is not None:
                api.release(p)
    if type(scale) is not api.Handle and rows:  # packed rows: one slice each
        scale, shift = policy.unpack(scale), policy.unpack(shift)
    elif type(scale) is not api.Handle:  # packed columns: one slice each
        scale, shift = (_channels(policy.unpack(e), c) for e in (scale, shift))
    return scale, shift


def _resident(x) -> bool:
    return x.tt is not None and len(x.shape) == 4 and policy.is_channels_last(x)


def _eval(x, weight, bias, mean, var, eps):
    if _resident(x):  # channels-last [1, 1, N*H*W, C] (layout.py): the rows broadcast over the pixels
        scale, shift = _fold(x, weight, bias, mean, var, eps, rows=True)
        out = api.run("add", api.run("multiply", policy.flat(x), scale), shift)
        return policy.channels_last(out, x.shape), _empty(x), _empty(x)
    n, c = x.shape[0], x.shape[1]
    x3 = reshape(x, (n, c, -1))
    scale, shift = _fold(x, weight, bias, mean, var, eps)
    out = api.run("add", api.run("multiply", x3, scale), shift)
    return reshape(out, x.shape), _empty(x), _empty(x)


def _stats(x3, dims):
    """mean and biased variance of float32 x3 over dims (kept), and the centered values."""
    mean = api.run("mean", x3, dim=dims, keepdim=True)
    centered = api.run("subtract", x3, mean)
    var = api.run("mean", api.run("multiply", centered, centered), dim=dims, keepdim=True)
    return mean, var, centered


def _train(x, weight, bias, running_mean, running_var, momentum, eps):
    if _resident(x):
        policy.to_nchw(x)  # (batch statistics are reduced in NCHW)
    weight, bias, running_mean, running_var = (None if p is None else policy.ensure(p, TILE_FLOAT)
                                               for p in (weight, bias, running_mean, running_var))
    n, c = x.shape[0], x.shape[1]
    count = x.shape.numel() // c
    x3 = policy.to_float32(reshape(x, (n, c, -1)))
    mean, var, centered = _stats(x3, [0, 2])
    invstd = api.run("rsqrt", api.run("add", var, float(eps)))
    out = api.run("multiply", centered, invstd)
    out = policy.stored(_affine(out, weight, bias, c))
    if running_mean is not None:  # (1 - momentum) * running + momentum * batch, in float32
        _write(running_mean, api.run("add", api.run("multiply", policy.to_float32(running_mean), 1.0 - momentum),
                                     api.run("multiply", reshape(mean, (c,)), float(momentum))))
    if running_var is not None:  # with the unbiased batch variance
        unbiased = api.run("multiply", reshape(var, (c,)), float(count) / max(count - 1, 1))
        _write(running_var, api.run("add", api.run("multiply", policy.to_float32(running_var), 1.0 - momentum),
                                    api.run("multiply", unbiased, float(momentum))))
    saved_mean = policy.stored(reshape(mean, (c,)))
    saved_invstd = policy.stored(reshape(invstd, (c,)))
    return reshape(out, x.shape), saved_mean, saved_invstd


def _affine(out, weight, bias, c):
    if weight is not None:
        out = api.run("multiply", out, _channels(policy.to_float32(weight), c))
    if bias is not None:
        out = api.run("add", out, _channels(policy.to_float32(bias), c))
    return out


# the input on the device; weight, bias and statistics as they are (staged once folded: see the docstring)
_NEEDS = {"input": TILE_FLOAT_CL, "*": STAGED}


def _check(x):
    if len(x.shape) < 2 or x.shape.numel() == 0:
        raise Unfit(f"batch_norm: input of shape {list(x.shape)}")


@lowering(aten.native_batch_norm.default, ttnn=["multiply", "add", "mean", "subtract", "rsqrt", "slice"],
          needs=_NEEDS, notes="eval: one multiply-add with scale/shift folded once (on the host, kept in a shared pack); training: float32 "
                                  "batch statistics, running statistics updated in place")
def native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    _check(x)
    if training or running_mean is None or running_var is None:
        return _train(x, weight, bias, running_mean if training else None, running_var if training else None,
                      momentum, eps)
    return _eval(x, weight, bias, running_mean, running_var, eps)


@lowering(aten._native_batch_norm_legit_no_training.default, ttnn=["multiply", "add", "slice"], needs=_NEEDS)
def native_batch_norm_legit_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    _check(x)
    return _eval(x, weight, bias, running_mean, running_var, eps)


@lowering(aten._native_batch_norm_legit.default, aten._native_batch_norm_legit.no_stats,
          ttnn=["multiply", "add", "mean", "subtract", "rsqrt", "slice"], needs=_NEEDS)
def native_batch_norm_legit(x, weight, bias, *args):
    _check(x)
    if len(args) == 5:  # running_mean, running_var, training, momentum, eps
        running_mean, running_var, training, momentum, eps = args
        if not training:
            return _eval(x, weight, bias, running_mean, running_var, eps)
        return _train(x, weight, bias, running_mean, running_var, momentum, eps)
    training, momentum, eps = args  # no_stats: batch statistics, nothing to update
    return _train(x, weight, bias, None, None, momentum, eps)


@lowering(aten.native_group_norm.default, ttnn=["mean", "subtract", "multiply", "rsqrt", "add"],
          needs=TILE_FLOAT, notes="float32 group statistics")
def native_group_norm(x, weight, bias, n, c, hxw, group, eps):
    if x.shape.numel() == 0 or c % group:
        raise Unfit(f"native_group_norm: {c} channels in {group} groups")
    xg = policy.to_float32(reshape(x, (n, group, -1)))
    mean, var, centered = _stats(xg, [2])
    invstd = api.run("rsqrt", api.run("add", var, float(eps)))
    out = reshape(api.run("multiply", centered, invstd), (n, c, -1))
    out = policy.stored(_affine(out, weight, bias, c))
    stat = (n, group)
    return (reshape(out, x.shape), policy.stored(reshape(mean, stat)),
            policy.stored(reshape(invstd, stat)))
