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


def _chips(t: torch.Tensor) -> int:
    """The chips of the mesh t lives on (the card-shaped launch: each rank drives a mesh), else 0."""
    from ...device import api
    mesh = api.mesh_shape(t.device.index or 0)
    return mesh[0] * mesh[1] if mesh else 0


def refuse_mesh(op: str, t: torch.Tensor) -> None:
    """Between processes that each drive a mesh, a collective combines chip k of every rank with chip k of the
    others (each tensor moves as [chips, *shape]); the ones into one flat tensor (all_gather_into_tensor,
    reduce_scatter_tensor, all_to_all_single) would interleave the chips, and are refused."""
    if is_device(t) and _chips(t):
        raise NotImplementedError(f"{op} between processes that each drive a ttnn mesh is not supported (use the "
                                  f"list forms: all_gather, reduce_scatter, or all_reduce)")


def down(t: torch.Tensor) -> torch.Tensor:
    """t's host copy; a mesh tensor's is every chip's value, stacked [chips, *shape] (its chips may hold
    different values: tensor-parallel shards), so that gloo reduces chip k of every rank together."""
    if not is_device(t):
        return t
    chips = _chips(t)
    counters.counts["collective_d2h_bytes"] += _bytes(t) * max(chips, 1)
    if chips:
        from ...core import layout
        from ...device import api
        return api.download_chips(layout.materialize(_tensor.handle_of(t.detach().contiguous())))
    return t.detach().cpu().contiguous()  # gloo reads host buffers as contiguous (a column chunk is not)


def host_like(t: torch.Tensor) -> torch.Tensor:
    if not is_device(t):
        return t
    chips = _chips(t)
    return torch.empty((chips, *t.shape) if chips else t.shape, dtype=t.dtype)


def up(dst: torch.Tensor, host: torch.Tensor) -> None:
    if dst is host:
        return
    chips = _chips(dst) if is_device(dst) else 0
    with torch.no_grad():
        if chips:  # every chip its own value
            from ...core import layout
            from ...device import api
            like = layout.materialize(_tensor.handle_of(dst.detach().contiguous()))
            dst.copy_(_tensor.new_tensor(api.upload_chips(host, like)))
        else:
            dst.copy_(host)
    counters.counts["collective_h2d_bytes"] += _bytes(dst) * max(chips, 1)
