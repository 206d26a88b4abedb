"""Decompositions of the fused recurrent cells PyTorch picks for non-CPU devices.

nn.LSTM/LSTMCell and nn.GRU/GRUCell on any device but the CPU call `_thnn_fused_lstm_cell` /
`_thnn_fused_gru_cell` with the two gate matmuls already done. Only CUDA implements them, and torch._decomp
has no decomposition, so the CPU fallback would have nothing to run. These are the cells' documented math
(torch.nn.LSTM / torch.nn.GRU) in aten ops that are lowered, so the cells run on the device.

Each returns PyTorch's outputs plus the workspace CUDA keeps for the backward pass, with CUDA's shapes
([B, 4H] activated gates for LSTM; [B, 5H] for GRU: reset, update, input-side new gate, hidden-side new gate,
previous hidden state).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _add_bias(gates, bias):
    return gates if bias is None else gates + bias


def thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = _add_bias(input_gates, input_bias) + _add_bias(hidden_gates, hidden_bias)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    ir, iz, in_ = _add_bias(input_gates, input_bias).chunk(3, 1)
    hr, hz, hn = _add_bias(hidden_gates, hidden_bias).chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)  # (1 - z) * n + z * hx
    return hy, torch.cat([r, z, in_, hn, hx], 1)


TABLE = {
    aten._thnn_fused_lstm_cell.default: thnn_fused_lstm_cell,
    aten._thnn_fused_gru_cell.default: thnn_fused_gru_cell,
}
