"""The functional collectives on ttnn tensors: PrivateUse1 kernels of the `_c10d_functional` ops.

DTensor, tensor parallelism (`parallelize_module`), FSDP2's helpers and traced graphs call
`torch.distributed._functional_collectives`, whose ops (`_c10d_functional::all_reduce`, ...) are dispatcher
ops with a CompositeExplicitAutograd kernel in C++ (Functional.cpp). That kernel hands the tensors to the
group's C++ *per-device backend* -- for a ttnn tensor the inner gloo our group lends c10d -- and gloo reads
a ttnn tensor's storage as host memory (the process dies: measured, all_gather_into_tensor). A PrivateUse1
kernel of our own wins over the composite one, so these ops on ttnn tensors come here and call the ttnn
process group's methods (process_group.py) with the ttnn tensors: staged, checked and counted like
`dist.*`. The collectives complete before returning, so `wait_tensor` is the identity.

Why kernels registered here rather than lowerings: a lowering receives and returns device Handles and may
import only core/ and device/, while a collective's meaning is the process group's (torch tensors, gloo,
c10d's group registry); and these ops are not aten ops, so core/registration.py would never route them.
Autograd is unchanged: the ops' Autograd kernels (C++) redispatch to PrivateUse1.

    install()     registers the kernels (a few dictionary entries; called by register())
    KERNELS       op name -> kernel, in the `_c10d_functional`, `_c10d_functional_autograd` and `_dtensor`
                  namespaces
A group that is not the ttnn one (a gloo group given ttnn tensors) gets host copies: the op's CPU kernel
runs on them and the results are uploaded.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

_libs: list = []


def _group(group_name):
    if isinstance(group_name, dist.ProcessGroup):
        return group_name
    from torch.distributed.distributed_c10d import _resolve_process_group
    return _resolve_process_group(group_name)


def _ours(pg) -> bool:
    return getattr(pg, "serves_ttnn", False)  # the ttnn group (process_group.py) or a mesh's (features/mesh)


def _reduce_op(name: str):
    op = getattr(dist.ReduceOp, name.upper(), None)
    if op is None:
        raise ValueError(f"unknown reduce op {name!r}")
    return op


def _on_host(op, args, tensors_at):
    """Run `op` on host copies of its tensor arguments (a group other than ttnn's), upload the result."""
    host = list(args)
    device = None
    for i in tensors_at:
        a = args[i]
        if isinstance(a, (list, tuple)):
            device = device or (a[0].device if a else None)
            host[i] = [t.cpu() for t in a]
        else:
            device = device or a.device
            host[i] = a.cpu()
    out = op(*host)
    wait = torch.ops._c10d_functional.wait_tensor
    if isinstance(out, (list, tuple)):
        return [wait(o).to(device) for o in out]
    return wait(out).to(device)


# --------------------------------------------------------------------------------------------- all_reduce
def all_reduce_(input, reduce_op, group_name):
    pg = _group(group_name)
    opts = _c10d.AllreduceOptions()
    opts.reduceOp = _reduce_op(reduce_op)
    if _ours(pg):
        pg.allreduce([input], opts)
    else:
        input.copy_(_on_host(torch.ops._c10d_functional.all_reduce, (input, reduce_op, group_name), (0,)))
    return input


def all_reduce(input, reduce_op, group_name):
    return all_reduce_(input.clone(), reduce_op, group_name)


def all_reduce_coalesced_(inputs, reduce_op, group_name):
    for t in inputs:
        all_reduce_(t, reduce_op, group_name)
    return inputs


def all_reduce_coalesced(inputs, reduce_op, group_name):
    return [all_reduce(t, reduce_op, group_name) for t in inputs]


# --------------------------------------------------------------------------------------------- all_gather
def all_gather_into_tensor_out(input, group_size, group_name, *, out):
    pg = _group(group_name)
    if _ours(pg):
        pg.all_gather_single(out, input.contiguous(), _c10d.AllgatherOptions())
    else:
        out.copy_(_on_host(torch.ops._c10d_functional.all_gather_into_tensor, (input, group_size, group_name),
                           (0,)))
    return out


def all_gather_into_tensor(input, group_size, group_name):
    out = torch.empty((input.shape[0] * group_size, *input.shape[1:]) if input.dim() else (group_size,),
                      dtype=input.dtype, device=input.device)
    return all_gather_into_tensor_out(input, group_size, group_name, out=out)


def all_gather_into_tensor_coalesced(inputs, group_size, group_name):
    return [all_gather_into_tensor(t, group_size, group_name) for t in inputs]


# --------------------------------------------------------------------------------------------- reduce_scatter
def reduce_scatter_tensor_out(input, reduce_op, group_size, group_name, *, out):
    pg = _group(group_name)
    if _ours(pg):
        opts = _c10d.ReduceScatterOptions()
        opts.reduceOp = _reduce_op(reduce_op)
        pg.reduce_scatter_single(out, input.contiguous(), opts)
    else:
        out.copy_(_on_host(torch.ops._c10d_functional.reduce_scatter_tensor,
                           (input, reduce_op, group_size, group_name), (0,)))
    return out


def reduce_scatter_tensor(input, reduce_op, group_size, group_name):
    if input.shape[0] % group_size:
        raise ValueError(f"reduce_scatter_tensor: dim 0 of the input ({input.shape[0]}) is not a multiple of the "
                         f"group size {group_size}")
    out = torch.empty((input.shape[0] // group_size, *input.shape[1:]), dtype=input.dtype, device=input.device)
    return reduce_scatter_tensor_out(input, reduce_op, group_size, group_name, out=out)


def reduce_scatter_tensor_coalesced(inputs, reduce_op, group_size, group_name):
    return [reduce_scatter_tensor(t, reduce_op, group_size, group_name) for t in inputs]


# --------------------------------------------------------------------------------------------- all_to_all, broadcast
def all_to_all_single(input, output_split_sizes, input_split_sizes, group_name):
    pg = _group(group_name)
    rows = sum(output_split_sizes) if output_split_sizes else input.shape[0]
    if not _ours(pg):
        return _on_host(torch.ops._c10d_functional.all_to_all_single,
                        (input, output_split_sizes, input_split_sizes, group_name), (0,))
    out = torch.empty((rows, *input.shape[1:]), dtype=input.dtype, device=input.device)
    pg.all_to_all_single(out, input.contiguous(), list(output_split_sizes), list(input_split_sizes),
                         _c10d.AllToAllOptions())
    return out


def broadcast_(input, src, group_name):
    pg = _group(group_name)
    if _ours(pg):
        opts = _c10d.BroadcastOptions()
        opts.rootRank = src
        pg.broadcast([input], opts)
    else:
        input.copy_(_on_host(torch.ops._c10d_functional.broadcast, (input, src, group_name), (0,)))
    return input


def broadcast(input, src, group_name):
    return broadcast_(input.clone(), src, group_name)


def wait_tensor(tensor):
    return tensor  # every collective of the ttnn group has completed when it returns


def shard_dim_alltoall(input, gather_dim, shard_dim, group_name):
    """DTensor's Shard(a) -> Shard(b) on one mesh dimension: this rank's shard of dim `shard_dim` of the
    tensor gathered along `gather_dim` (its C++ kernel's meaning, as all_gather + chunk)."""
    pg = _group(group_name)
    n = pg.size()
    full = all_gather_into_tensor(input.movedim(gather_dim, 0).contiguous(), n, group_name)
    full = full.movedim(0, gather_dim) if gather_dim else full
    return torch.chunk(full, n, dim=shard_dim)[pg.rank()].contiguous()


KERNELS = {
    "_c10d_functional": {
        "all_reduce": all_reduce, "all_reduce_": all_reduce_,
        "all_reduce_coalesced": all_reduce_coalesced, "all_reduce_coalesced_": all_reduce_coalesced_,
        "all_gather_into_tensor": all_gather_into_tensor, "all_gather_into_tensor_out": all_gather_into_tensor_out,
        "all_gather_into_tensor_coalesced": all_gather_into_tensor_coalesced,
        "reduce_scatter_tensor": reduce_scatter_tensor, "reduce_scatter_tensor_out": reduce_scatter_tensor_out,
        "reduce_scatter_tensor_coalesced": reduce_scatter_tensor_coalesced,
        "all_to_all_single": all_to_all_single, "broadcast": broadcast, "broadcast_": broadcast_,
        "wait_tensor": wait_tensor},
    "_c10d_functional_autograd": {
        "all_gather_into_tensor": all_gather_into_tensor, "reduce_scatter_tensor": reduce_scatter_tensor,
        "all_to_all_single": all_to_all_single},
    "_dtensor": {"shard_dim_alltoall": shard_dim_alltoall},
}


def install() -> None:
    if _libs:
        return
    for ns, kernels in KERNELS.items():
        lib = torch.library.Library(ns, "IMPL")
        for name, fn in kernels.items():
            try:
                if torch._C._dispatch_has_kernel_for_dispatch_key(f"{ns}::{name}", "PrivateUse1"):
                    continue
                lib.impl(name, fn, "PrivateUse1")
            except RuntimeError:  # an op this torch build does not define
                continue
        _libs.append(lib)
