"""FSDP2 on ttnn tensors: its storage free/alloc, shimmed.

FSDP2 (`torch.distributed.fsdp.fully_shard`) frees an unsharded parameter's memory after use with
`tensor.untyped_storage().resize_(0)` and gets it back with `resize_(nbytes)` before the next all-gather
writes it (`_fully_shard/_fsdp_param.py`: free_storage, alloc_storage). A Python backend cannot resize a
device storage (core/tensor.py refuses it), so for ttnn tensors the two functions are replaced:

    free(t)     the storage's device tensor is released: its base Handle becomes an unwritten one of the
                same shape and dtype (reads as zeros, holds no device memory), its view Handles dropped
    alloc(t)    a fresh device tensor of zeros for the storage, which FSDP2's all-gather copy-out
                (split_with_sizes_copy into views of it) then writes
Other tensors keep FSDP2's own functions. install() patches the functions in the two FSDP2 modules that
use them (they import them by name) once; called when a ttnn process group is made.

FSDP2's three custom ops (`fsdp::all_gather_copy_in`, `fsdp::split_with_sizes_copy`, `fsdp::chunk_cat`) get
PrivateUse1 kernels of their own here, written as per-tensor `copy_` into views (which the backend writes
through): FSDP2's kernels call `_foreach_copy_`, `split_with_sizes_copy(out=)` and `_chunk_cat(out=)`, which
have no lowering, and the CPU fallback drops their writes into views of the output (measured: the
unsharded parameters stayed zero) -- a dispatch bug to fix there; then these kernels can go.
"""
from __future__ import annotations

_installed: list = []


def _free(tensor) -> None:
    from ...core import tensor as _tensor
    from ...device import api
    s = tensor.untyped_storage()
    h = getattr(s, "_ttnn_handle", None)
    if h is None or (h.tt is None and h.host is None):
        return
    s._ttnn_handle = api.Handle(None, None, h.dtype, h.shape, h.index)
    if getattr(s, "_ttnn_views", None):
        s._ttnn_views = {}


def _alloc(tensor) -> None:
    import torch
    from ...core import tensor as _tensor
    s = tensor.untyped_storage()
    h = getattr(s, "_ttnn_handle", None)
    if h is None or h.tt is not None or h.host is not None:
        return
    # a device tensor for the storage (writes through views of an unwritten base would have nothing to reach)
    fresh = torch.zeros(h.shape, dtype=h.dtype, device=tensor.device)
    s._ttnn_handle = _tensor.handle_of(fresh)
    if getattr(s, "_ttnn_views", None):
        s._ttnn_views = {}


def all_gather_copy_in(all_gather_inputs, all_gather_output, inp_split_sizes, all_gather_input_numel, rank):
    import torch
    all_gather_input = all_gather_output.narrow(0, all_gather_input_numel * rank, all_gather_input_numel)
    with torch.no_grad():
        for dst, src in zip(torch.split(all_gather_input, list(inp_split_sizes)), all_gather_inputs):
            dst.copy_(src.reshape(dst.shape))
    return all_gather_input, all_gather_output


def split_with_sizes_copy(all_gather_output, all_gather_input_split_sizes, dim=0, *, out):
    import torch
    with torch.no_grad():
        for dst, src in zip(out, torch.split(all_gather_output, list(all_gather_input_split_sizes), dim=dim)):
            dst.copy_(src)


def chunk_cat(tensors, dim, num_chunks, *, out):
    """torch._chunk_cat for dim 0 (FSDP2's reduce-scatter input): each tensor padded to a multiple of
    num_chunks rows, viewed (num_chunks, -1), the views concatenated along dim 1."""
    import torch
    if dim != 0:
        raise NotImplementedError("fsdp::chunk_cat on ttnn tensors: dim 0 only")
    rows = []
    for t in tensors:
        n = t.shape[0]
        c = -(-n // num_chunks)
        if c * num_chunks != n:
            t = torch.cat([t, t.new_zeros((c * num_chunks - n, *t.shape[1:]))])
        rows.append(t.reshape(num_chunks, -1))
    with torch.no_grad():
        out.copy_(torch.cat(rows, dim=1).reshape(out.shape))


def install() -> None:
    if _installed:
        return
    import warnings

    import torch
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group
    orig_free, orig_alloc = _fsdp_param.free_storage, _fsdp_param.alloc_storage

    def free_storage(tensor):
        if tensor.device.type == "ttnn":
            return _free(tensor)
        return orig_free(tensor)

    def alloc_storage(tensor):
        if tensor.device.type == "ttnn":
            return _alloc(tensor)
        return orig_alloc(tensor)

    for mod in (_fsdp_param, _fsdp_param_group):
        if getattr(mod, "free_storage", None) is orig_free:
            mod.free_storage = free_storage
        if getattr(mod, "alloc_storage", None) is orig_alloc:
            mod.alloc_storage = alloc_storage
    lib = torch.library.Library("fsdp", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": FSDP2's own, on purpose
        for name, fn in (("all_gather_copy_in", all_gather_copy_in),
                         ("split_with_sizes_copy", split_with_sizes_copy), ("chunk_cat", chunk_cat)):
            lib.impl(name, fn, "PrivateUse1")
    _installed.append((orig_free, orig_alloc, lib))
