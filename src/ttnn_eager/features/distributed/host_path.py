"""The host path: device tensors staged through host memory for PyTorch's gloo, with the PCIe bytes counted.

    down(t)         the host copy of t (t itself for a CPU tensor); a ttnn tensor's device buffer is counted
                    in collective_d2h_bytes
    host_like(t)    a host buffer of t's shape and dtype, for a result (nothing is read from the device)
    up(dst, host)   write host into the device tensor dst (nothing for a CPU dst: gloo wrote it);
                    counted in collective_h2d_bytes
Written with public tensor APIs (`.cpu()`, `.copy_()`), whatever the ttnn tensor class is; only the byte
counts read the device buffer's size (its shape in its device dtype and transfer layout: layout.py).
"""
from __future__ import annotations

import torch

from ... import counters
from ...core import tensor as _tensor


def is_device(t: torch.Tensor) -> bool:
    return t.device.type == "ttnn"


def _bytes(t: torch.Tensor) -> int:
    """The bytes moving t across PCIe moves: its device buffer in its transfer layout (core/layout.py: a 1-D
    tensor, such as DDP's gradient bucket, moves ROW_MAJOR, not padded to 32 rows)."""
    from ...core import layout
    h = _tensor.maybe_handle(t)
    return 0 if h is None else layout.transfer_bytes(h)


def down(t: torch.Tensor) -> torch.Tensor:
    if not is_device(t):
        return t
    counters.counts["collective_d2h_bytes"] += _bytes(t)
    return t.detach().cpu().contiguous()  # gloo reads host buffers as contiguous (a column chunk is not)


def host_like(t: torch.Tensor) -> torch.Tensor:
    return t if not is_device(t) else torch.empty(t.shape, dtype=t.dtype)


def up(dst: torch.Tensor, host: torch.Tensor) -> None:
    if dst is host:
        return
    with torch.no_grad():
        dst.copy_(host)
    counters.counts["collective_h2d_bytes"] += _bytes(dst)
