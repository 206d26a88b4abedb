"""PyTorch's own decompositions (`torch._decomp`), tried for an aten op that has no lowering before the CPU
fallback: many composite, backward and loss ops become ops that are lowered, so they run on the device with
no lowering of their own (tinygrad's torch backend does the same).

An op is listed here only when its decomposition is known to produce lowered ops (or ops that decompose
further into lowered ones) with PyTorch's semantics; anything else stays on the counted CPU fallback, where a
missing lowering is visible. docs/ops.md lists this allowlist beside the lowerings.
"""
from __future__ import annotations

import functools

import torch

aten = torch.ops.aten

# aten op packets (every overload PyTorch decomposes) or single overloads
ALLOWLIST = [
    aten.leaky_relu,
    aten.hardtanh,
    # the gradients of views: zeros with the gradient scattered in (slice/select/diagonal_scatter)
    aten.select_backward,
    aten.slice_backward,
    aten.diagonal_backward,
    # torch.nn modules (issue 15): losses, repeat, baddbmm
    aten.mse_loss, aten.smooth_l1_loss, aten.huber_loss, aten.soft_margin_loss,
    aten.binary_cross_entropy, aten.binary_cross_entropy_with_logits,
    aten.nll_loss_forward, aten.nll_loss2d_forward, aten.multi_margin_loss, aten.multilabel_margin_loss_forward,
    aten.repeat, aten.baddbmm,
]


@functools.cache
def table() -> dict:
    """aten OpOverload -> decomposition, for the allowlist (built on first use: torch._decomp is slow to
    import)."""
    from torch._decomp import get_decompositions
    return get_decompositions(ALLOWLIST)


def get(func):
    """The decomposition of `func` (PyTorch's, or one of ours in recurrent.TABLE), or None."""
    from . import recurrent
    return table().get(func) or recurrent.TABLE.get(func)
