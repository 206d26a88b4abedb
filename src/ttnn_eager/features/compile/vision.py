"""Fusion passes of vision graphs (issue 36): a convolution with the eval batch norm and activation after it,
and a residual add with the activation after it, as the fused ops of lowerings/conv.py (ttnn_eager.conv_bn_act,
ttnn_eager.add_act). Each pass is a search pattern and its replacement, both ordinary PyTorch (aten ops), and
matches only where every intermediate has no other user:

    conv_bn_act     search:  y = convolution(x, w, b, stride, padding, dilation, False, [0, 0], groups)
                             z = _native_batch_norm_legit_no_training(y, bn_w, bn_b, mean, var, momentum, eps)[0]
                             out = act(z)                      act: relu, relu6 (hardtanh 0..6), silu; or none
                    replace: out = ttnn_eager.conv_bn_act(x, w, b, stride, padding, dilation, groups,
                                                          bn_w, bn_b, mean, var, eps, act)
    add_act         search:  out = act(a + b)                  (a, b: one shape; act: relu, relu6, silu)
                    replace: out = ttnn_eager.add_act(a, b, act)

conv_bn_act runs first (with an activation, then without: a batch norm whose result goes to a residual add),
then add_act. A ResNet bottleneck goes from 11 aten ops (3 convolutions, 3 batch norms, 3 relus, 1 add, in
eager mode 11 TT-NN ops with channels-last residency plus the 6 slices of the packed folds) to 4 fused ops
(3 conv_bn_act, 1 add_act): 4 TT-NN ops.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .passes import _is, _only_user, _replace, _shape

aten = torch.ops.aten
_BN = aten._native_batch_norm_legit_no_training.default


def _act(n):
    """The activation node n computes, by the fused ops' name (relu, relu6, silu), or None."""
    if _is(n, aten.relu.default):
        return "relu"
    if _is(n, aten.silu.default):
        return "silu"
    if _is(n, aten.hardtanh.default) and tuple(n.args[1:3]) == (0.0, 6.0):
        return "relu6"
    return None


def _conv_bn(z):
    """(conv node, bn node, getitem node) when z is getitem(bn(conv(...)), 0), each used once; else None."""
    if not (_is(z, operator.getitem) and z.args[1] == 0):
        return None
    bn = z.args[0]
    if not (_is(bn, _BN) and len(bn.users) == 1):  # (its two empty statistics are never read)
        return None
    conv = bn.args[0]
    if not (_is(conv, aten.convolution.default) and _only_user(conv)):
        return None
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = conv.args
    if transposed or len(stride) != 2 or _shape(conv) is None or len(_shape(conv)) != 4:
        return None
    return conv, bn, z


def _fuse(out, found, act):
    conv, bn, z = found
    x, w, b, stride, padding, dilation, _, _, groups = conv.args
    _, bn_w, bn_b, mean, var, _, eps = bn.args
    g = out.graph
    with g.inserting_before(out):
        new = g.call_function(torch.ops.ttnn_eager.conv_bn_act.default,
                              (x, w, b, list(stride), list(padding), list(dilation), groups, bn_w, bn_b, mean, var,
                               float(eps), act))
    _replace(out, new, (z, bn, conv) if out is not z else (bn, conv))


def conv_bn_act(g: fx.Graph) -> int:
    done = 0
    for n in list(g.nodes):  # with an activation
        act = _act(n)
        if act is None or not _only_user(n.args[0]):
            continue
        found = _conv_bn(n.args[0])
        if found is not None:
            _fuse(n, found, act)
            done += 1
    for n in list(g.nodes):  # without
        if getattr(n, "_erased", False) or n.graph is not g:
            continue
        found = _conv_bn(n)
        if found is not None:
            _fuse(n, found, None)
            done += 1
    return done


def add_act(g: fx.Graph) -> int:
    done = 0
    for n in list(g.nodes):
        act = _act(n)
        if act is None:
            continue
        add = n.args[0]
        if not (_is(add, aten.add.Tensor) and _only_user(add) and len(add.args) == 2 and not add.kwargs):
            continue
        a, b = add.args
        if not (isinstance(a, fx.Node) and isinstance(b, fx.Node)) or _shape(a) is None or _shape(a) != _shape(b):
            continue
        with g.inserting_before(n):
            new = g.call_function(torch.ops.ttnn_eager.add_act.default, (a, b, act))
        _replace(n, new, (add,))
        done += 1
    return done


PASSES = (conv_bn_act, add_act)
