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
]


@functools.cache
def table() -> dict:
    """aten OpOverload -> decomposition, for the allowlist (built on first use: torch._decomp is slow to
    import)."""
    from torch._decomp import get_decompositions
    return get_decompositions(ALLOWLIST)


def get(func):
    """The decomposition of `func`, or None."""
    return table().get(func)
