"""Losses. cross_entropy is log_softmax (PyTorch's decomposition, allowlisted) + nll_loss, lowered here over a
one-hot matrix of the targets made on the device: the picked log-probability of each row is
sum(log_probs * one_hot, -1), its gradient -one_hot * weight. No gather/scatter, no host round trip.
mse_loss and binary_cross_entropy_with_logits are PyTorch's decompositions (decompositions.ALLOWLIST), the
latter over log_sigmoid (lowered in activation.py; its backward here).

Targets out of range raise IndexError ("Target 7 is out of bounds."), as on the CPU: targets uploaded from
the host carry known bounds (no device read); targets computed on the device, or whose minimum is
ignore_index (other negative values could hide behind it), are read once to check (a counted transfer).
"""
from __future__ import annotations

import torch

from ..core import layout as policy
from ..core.layout import TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import is_handle
from .backward import one_hot
from .views import reshape

aten = torch.ops.aten
_NONE, _MEAN, _SUM = 0, 1, 2


def _check_targets(target: api.Handle, classes: int, ignore_index: int) -> None:
    if target.shape.numel() == 0:
        return
    if target.bounds is not None and target.bounds[2] and target.bounds[0] != ignore_index:
        lo, hi = target.bounds[0], target.bounds[1]
    else:  # unknown (or only a range), or the minimum is ignore_index (other negative targets could hide behind it): read
        value = api.download(target)
        valid = value[value != ignore_index]
        if not valid.numel():
            return
        lo, hi = int(valid.min()), int(valid.max())
    for t in (hi, lo):
        if t != ignore_index and not 0 <= t < classes:
            raise IndexError(f"Target {t} is out of bounds.")


def _rows(x: api.Handle, target: api.Handle):
    """2-D log-probs [N, C] and targets [N] (a single sample [C] with a 0-d target is one row)."""
    if len(x.shape) == 1:
        return reshape(x, (1, x.shape[0])), reshape(target, (1,))
    if len(x.shape) != 2:
        raise Unfit("nll_loss_forward takes 1-D or 2-D input")
    return x, target


def _row_weights(hot, target, weight, ignore_index, n):
    """The weight of each row: weight[target] (1 without weight), 0 where target == ignore_index: [n, 1]."""
    keep = api.run("ne", policy.ensure(reshape(target, (n, 1)), policy.SIGNED), ignore_index,
                   dtype=api.BFLOAT16, out_dtype=torch.float32)
    if weight is None:
        return keep
    picked = api.run("sum", api.run("multiply", hot, reshape(weight, (1, weight.shape[0])), out_dtype=weight.dtype),
                     dim=-1, keepdim=True)
    return api.run("multiply", picked, keep)


@lowering(aten.nll_loss_forward.default, ttnn=["arange", "eq", "ne", "multiply", "sum", "divide"],
          needs={"self": TILE_FLOAT, "target": TILE, "weight": TILE_FLOAT},
          notes="one-hot of the targets on the device; out-of-range targets raise IndexError")
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    rows, tgt = _rows(x, target)
    n, classes = rows.shape
    if tgt.shape.numel() != n:
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size ({tgt.shape.numel()}).")
    _check_targets(tgt, classes, ignore_index)
    hot = one_hot(tgt, classes)                                              # [n, C]
    w = _row_weights(hot, tgt, weight, ignore_index, n)                     # [n, 1]
    picked = api.run("sum", api.run("multiply", rows, hot), dim=-1, keepdim=True)
    losses = api.run("multiply", api.run("multiply", picked, w), -1.0)      # [n, 1]
    if reduction == _NONE:  # (PyTorch leaves total_weight 0 then)
        from .factory import full_handle
        return reshape(losses, tuple(target.shape)), full_handle((), 0.0, x.dtype, x.index)
    total_weight = reshape(api.run("sum", w), ())
    total = reshape(api.run("sum", losses), ())
    if reduction == _MEAN:
        total = api.run("divide", total, total_weight)
    return total, total_weight


@lowering(aten.nll_loss_backward.default, ttnn=["arange", "eq", "ne", "multiply", "divide"],
          needs={"grad_output": TILE_FLOAT, "self": TILE_FLOAT, "target": TILE, "weight": TILE_FLOAT,
                 "total_weight": TILE_FLOAT})
def nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    rows, tgt = _rows(x, target)
    n, classes = rows.shape
    hot = one_hot(tgt, classes)
    w = api.run("multiply", _row_weights(hot, tgt, weight, ignore_index, n), -1.0)   # [n, 1]
    if reduction == _NONE:
        w = api.run("multiply", w, reshape(grad_output, (n, 1)))
    else:  # (0-d CPU tensors arrive as Python numbers)
        scale = reshape(grad_output, (1, 1)) if is_handle(grad_output) else float(grad_output)
        if reduction == _MEAN:
            if is_handle(total_weight):
                tw = reshape(total_weight, (1, 1))
                scale = api.run("divide", scale, tw) if is_handle(scale) else \
                    api.run("multiply", api.run("reciprocal", tw), scale)
            else:
                scale = api.run("multiply", scale, 1.0 / total_weight) if is_handle(scale) else scale / total_weight
        w = api.run("multiply", w, scale)
    grad = api.run("multiply", hot, w, out_dtype=x.dtype)
    return reshape(grad, x.shape)


@lowering(aten.log_sigmoid_backward.default, ttnn=["neg", "sigmoid", "multiply"], needs=TILE_FLOAT,
          notes="grad * sigmoid(-x)")
def log_sigmoid_backward(grad_output, x, buffer):
    return api.run("multiply", grad_output, api.run("sigmoid", api.run("neg", x)))
