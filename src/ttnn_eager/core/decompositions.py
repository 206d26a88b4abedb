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
    # the gradients of views: zeros with the gradient scattered in (diagonal_scatter); select_backward and
    # slice_backward have lowerings of their own (lowerings/backward.py: a concat with zero blocks, cheaper)
    aten.diagonal_backward,
    # torch.nn modules (issue 15): losses, repeat, baddbmm
    aten.mse_loss, aten.smooth_l1_loss, aten.huber_loss, aten.soft_margin_loss,
    aten.binary_cross_entropy, aten.binary_cross_entropy_with_logits,
    aten.nll_loss_forward, aten.nll_loss2d_forward, aten.multi_margin_loss, aten.multilabel_margin_loss_forward,
    aten.repeat, aten.baddbmm,
    # weight normalization (torch.nn.utils.weight_norm, parametrizations.weight_norm): v * g / |v|, computed
    # at every forward (the convolutional positional embedding of wav2vec2-style audio models, issue 23)
    aten._weight_norm_interface, aten.norm,  # (norm: what weight_norm over dim != 0 calls; linalg_vector_norm)
    # torch.istft's overlap-add of its frames: an index_put with accumulate (scatter_add)
    aten.unfold_backward,
    # backward ops of lowered forward ops (training: docs/training.md)
    aten.tanh_backward,
    aten.sigmoid_backward,
    aten.gelu_backward,
    aten.silu_backward,
    aten.threshold_backward,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm_backward,
    aten.native_dropout_backward,
    # losses
    aten._log_softmax,
    aten.mse_loss_backward,
    # optimizer updates
    aten.lerp,
    aten.addcmul,
    aten.addcdiv,
]


@functools.cache
def table() -> dict:
    """aten OpOverload -> decomposition, for the allowlist and the _foreach_* ops (core/foreach.py: loops of
    per-tensor ops); built on first use: torch._decomp is slow to import."""
    from torch._decomp import get_decompositions

    from . import foreach
    return {**get_decompositions(ALLOWLIST), **foreach.table(), **foreach.fused_table()}


def get(func):
    """The decomposition of `func` (PyTorch's, or one of ours in recurrent.TABLE, attention.TABLE,
    convolution.POOLS or embedding_bag.TABLE), or None."""
    from . import attention, convolution, embedding_bag, recurrent
    return (table().get(func) or recurrent.TABLE.get(func) or attention.TABLE.get(func)
            or convolution.POOLS.get(func) or embedding_bag.TABLE.get(func))


def of_refused(func):
    """The decomposition tried when `func`'s lowering refuses the call (convolution.TABLE: 3-D convolutions
    as 2-D ones), or None."""
    from . import convolution
    return convolution.TABLE.get(func)
