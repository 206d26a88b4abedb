"""A bug of the plain tensor worked around here until core/ fixes it (reported; see docs/distributed.md).

core/dispatch.py defines `_meta_of` twice (the merge of main's dtype-widening fallback into the plain tensor):
the second definition (a contiguous meta tensor of x's shape, for the widened CPU fallback) replaces the
first (a meta alias with x's strides and storage offset), which `_aliases_of` needs. So every view op of a
ttnn tensor with a storage offset returns an alias at offset 0: `flat.narrow(0, 2048, 32).view(32)` reads
`flat[0:32]`. DDP's `_broadcast_coalesced` (torch._C._nn.unflatten_dense_tensors: narrow + view) then
writes the wrong slices of the flat buffer into the parameters.

`fix_view_offsets()` installs one `_meta_of` that serves both callers: ttnn tensors become meta aliases with
their own geometry (what the first definition did), CPU tensors contiguous meta tensors (what the widened
fallback asks for), a ttnn device the meta device. It does nothing once core/ has its own fix (its
`_meta_of` then builds aliases with as_strided).
"""
from __future__ import annotations

import torch


def fix_view_offsets() -> bool:
    """Install the fix if core/dispatch.py needs it; True if it did."""
    from ...core import dispatch
    if "as_strided" in dispatch._meta_of.__code__.co_names:
        return False
    meta = torch.device("meta")

    def _meta_of(x):
        if isinstance(x, torch.Tensor):
            if x.device.type == "ttnn":
                n = -(-x.untyped_storage().nbytes() // x.dtype.itemsize)
                return torch.empty(n, dtype=x.dtype, device=meta).as_strided(x.shape, x.stride(),
                                                                            x.storage_offset())
            return torch.empty(x.shape, dtype=x.dtype, device=meta)
        if isinstance(x, torch.device) and x.type == "ttnn":
            return meta
        return x

    dispatch._meta_of = _meta_of
    return True
