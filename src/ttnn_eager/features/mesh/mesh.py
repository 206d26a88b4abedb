"""Mesh mode's surface: open the mesh, name it to PyTorch as a DeviceMesh, and shard by hand where DTensor is
not wanted. See the package docstring for the model (single-controller SPMD)."""
from __future__ import annotations

import torch
import torch.distributed as dist

from ...core import layout, tensor as _tensor
from ...device import api, runtime
from .group import NAME, MeshGroup

_state: dict = {}  # "mesh": the DeviceMesh made by init


def _shape(shape) -> tuple:
    if shape is None:
        found = runtime.mesh_shape()
        if found is not None:
            return found
        n = api.BACKEND.device_count()
        return (1, n)
    if isinstance(shape, int):
        return (1, shape)
    return tuple(int(s) for s in shape)


def _create(opts, pg_options=None):
    """c10d's creator of the mesh backend: a group over some chips of the mesh. A group of a 2-D mesh's row
    (consecutive ranks) exchanges along cluster axis 1, of a column along axis 0; a group over every chip of a
    1-D mesh needs no axis."""
    rows, cols = api.mesh_shape(0) or runtime.mesh_shape()
    ranks = list(getattr(opts, "global_ranks_in_group", None) or range(opts.group_size))
    axis = None
    if rows > 1 and cols > 1:
        if len(ranks) == rows * cols:
            axis = None
        elif ranks == list(range(ranks[0], ranks[0] + len(ranks))):
            axis = 1
        else:
            axis = 0
    return MeshGroup(opts.group_size, axis, ranks)


def init(shape=None, mesh_dim_names=None):
    """Open `ttnn:0` as a mesh of chips (`shape`: (rows, columns), or a chip count for 1 x N; default
    TTNN_EAGER_MESH, else every chip in one row) and return PyTorch's `DeviceMesh` over it, whose ranks are the
    chips: DTensor's placements and `parallelize_module` plans then run on the mesh, their collectives on the
    device fabric. Makes the default process group (backend "ttnn_mesh", world size = chips) unless one
    exists. Call it before the first tensor goes to `ttnn:0`."""
    from torch.distributed.device_mesh import DeviceMesh
    shape = _shape(shape)
    if "mesh" in _state:
        mesh = _state["mesh"]
        if tuple(mesh.mesh.shape) != (shape if shape[0] > 1 else (shape[1],)):
            raise RuntimeError(f"the ttnn mesh is already open as {api.mesh_shape(0)}; one process opens one mesh")
        return mesh
    if api.is_open(0) and api.mesh_shape(0) != shape:
        raise RuntimeError(f"ttnn:0 is already open as one chip: call ttnn_eager.mesh.init({shape}) before the first "
                           f"tensor is placed on ttnn, or set TTNN_EAGER_MESH={shape[0]}x{shape[1]} before starting")
    _open(shape)
    chips = shape[0] * shape[1]
    if NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["ttnn", "cpu"])
    if not dist.is_initialized():
        dist.init_process_group(backend=NAME, store=dist.HashStore(), rank=0, world_size=chips)
    elif dist.get_world_size() != chips:
        raise RuntimeError(f"a process group of world size {dist.get_world_size()} exists; the ttnn mesh has {chips} "
                           f"chips (one process speaks for all of them): destroy it first")
    ranks = torch.arange(chips).reshape(shape) if shape[0] > 1 else torch.arange(chips)
    if mesh_dim_names is None:
        mesh_dim_names = ("dp", "tp") if shape[0] > 1 else ("tp",)
    mesh = DeviceMesh("ttnn", ranks, mesh_dim_names=tuple(mesh_dim_names))
    _install_dtensor_hook()
    _install_linear_rule()
    _state["mesh"] = mesh
    return mesh


def shard(t: torch.Tensor, dim: int, mesh=None, mesh_dim: int = 0) -> torch.Tensor:
    """Chip k's part k of `t` along `dim` (t replicated on the mesh, the same value on every chip; a CPU tensor is
    uploaded first): the local tensor of DTensor's Shard(dim), one ttnn.mesh_partition on the device (along the
    mesh axis of `mesh_dim`'s group). The size of `dim` must be a multiple of the group's chips."""
    t = t.to("ttnn:0") if t.device.type != "ttnn" else t
    dim = dim % t.dim()
    group = _group(mesh, mesh_dim)
    chips = group.size()
    if t.shape[dim] % chips:
        raise ValueError(f"shard: dimension {dim} of a {tuple(t.shape)} tensor is not a multiple of the mesh's "
                         f"{chips} chips; pad it (torch.nn.functional.pad) or shard another dimension")
    h = layout.partition_layout(layout.materialize(_tensor.handle_of(t.contiguous())), dim, chips)
    kwargs = {"dim": dim} if group.axis is None else {"dim": dim, "cluster_axis": group.axis}
    return _tensor.new_tensor(api.run("mesh_partition", h, **kwargs))


def gather(t: torch.Tensor, dim: int, mesh=None, mesh_dim: int = 0) -> torch.Tensor:
    """The whole tensor from every chip's part along `dim` (ttnn.all_gather on the fabric), on every chip."""
    group = _group(mesh, mesh_dim)
    return group._ccl("all_gather", t, dim=dim % t.dim())


def _group(mesh, mesh_dim) -> MeshGroup:
    if isinstance(mesh, MeshGroup):
        return mesh
    mesh = mesh or _state.get("mesh")
    if mesh is None:
        raise RuntimeError("no ttnn mesh is open: call ttnn_eager.mesh.init() (or ttnn_eager.mesh.init) first")
    return mesh.get_group(mesh_dim)


def data_parallel(module: torch.nn.Module, mesh=None, mesh_dim: int = 0) -> torch.nn.Module:
    """Data parallelism over the mesh: `module`'s parameters replicated (as `.to("ttnn:0")` leaves them), each
    chip's batch its own shard (`shard(batch, 0)`), and each gradient averaged over the chips on the fabric
    (ttnn.all_reduce) as soon as backward has accumulated it -- DDP's contract, with no buckets and no host."""
    group = _group(mesh, mesh_dim)
    avg = dist.ReduceOp.AVG

    def reduce(p):
        grad = p.grad
        grad = grad.to_local() if hasattr(grad, "to_local") else grad  # a tensor-parallel parameter's: its shard
        dist.all_reduce(grad, op=avg, group=group)

    for p in module.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(reduce)
    return module


def _open(shape: tuple) -> None:
    runtime.set_mesh_shape(shape)
    api.device(0)  # opens the mesh
    from ...core import native
    native.set_device_count(1)  # the device guard: the mesh is one device, ttnn:0


def open_local(shape) -> MeshGroup:
    """The card-shaped launch: in one of several torchrun processes (the default process group spans the
    processes), open this process's card as a mesh of `shape` (TTNN_EAGER_VISIBLE_DEVICES, else its own card:
    runtime.mesh_chips) and return the group of its chips, for collectives on its fabric (shard, gather,
    data_parallel, or dist.all_reduce(t, group=...)). Collectives of the default group (DDP between the
    processes) move every chip's value through the host (features/distributed/host_path). DTensor's DeviceMesh
    cannot span chips of several processes (its ranks are processes): tensor parallelism inside a process is
    then written with this group."""
    shape = _shape(shape)
    if "local" in _state:
        return _state["local"]
    if api.is_open(0) and api.mesh_shape(0) != shape:
        raise RuntimeError(f"ttnn:0 is already open as one chip: call ttnn_eager.mesh.open_local({shape}) before "
                           f"the first tensor is placed on ttnn")
    _open(shape)
    group = _state["local"] = MeshGroup(shape[0] * shape[1], None, list(range(shape[0] * shape[1])))
    return group


def _install_linear_rule() -> None:
    """DTensor has no sharding rule for aten.linear, so it decomposes a linear of DTensors into t + mm (+ views):
    four TT-NN ops for the one ttnn.linear a plain tensor gets (and the transpose of the weight every call).
    This rule keeps it whole under the plans' placements: replicated; colwise (input replicated, weight and bias
    Shard(0) -> output sharded on its last dimension); rowwise without a bias (input sharded on its last
    dimension, weight Shard(1) -> Partial: the plan's all_reduce follows); batch-sharded input, weight replicated.
    A rowwise linear with a bias is not offered (its bias must be added once, which DTensor would do by rank):
    DTensor redistributes to one of the others."""
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.experimental import register_sharding
    from ...core import registration
    aten = torch.ops.aten

    @register_sharding(aten.linear.default)
    def linear(x, weight, bias=None):
        last = x.ndim - 1
        b = (lambda p: None) if bias is None else (lambda p: p)
        rules = [([Replicate()], [Replicate(), Replicate(), b(Replicate())]),
                 ([Shard(last)], [Replicate(), Shard(0), b(Shard(0))])]
        if bias is None:
            rules.append(([Partial()], [Shard(last), Shard(1), None]))
        rules += [([Shard(d)], [Shard(d), Replicate(), b(Replicate())]) for d in range(last)]
        return rules

    registration.WHOLE_FOR_SUBCLASSES.add("aten::linear")


def _install_dtensor_hook() -> None:
    """DTensor's Replicate -> Shard takes *this rank's* chunk by slicing (Shard._replicate_to_shard, and
    Shard._shard_tensor: distribute_tensor's split, then a scatter from the source rank): in one process speaking
    for every chip, that would give every chip rank 0's chunk (and pad uneven chunks by rank). For ttnn tensors on the mesh each chip keeps its own chunk (shard: ttnn.mesh_partition);
    every other tensor takes PyTorch's path."""
    from torch.distributed.tensor.placement_types import Shard
    if getattr(Shard, "_ttnn_mesh", False):
        return
    replicate_to_shard, shard_tensor = Shard._replicate_to_shard, Shard._shard_tensor

    def _replicate_to_shard(self, local_tensor, mesh, mesh_dim, shard_index):
        if local_tensor.device.type == "ttnn" and api.mesh_shape(0) is not None:
            return shard(local_tensor, self.dim, mesh, mesh_dim)
        return replicate_to_shard(self, local_tensor, mesh, mesh_dim, shard_index)

    def _shard_tensor(self, tensor, mesh, mesh_dim, src_data_rank=0):
        # (distribute_tensor: the whole tensor, uploaded to the mesh, is the same on every chip, the source
        # rank's included, so keeping each chip's chunk is the scatter; an uneven split is refused by shard:
        # every chip's local tensor has one shape)
        if tensor.device.type == "ttnn" and api.mesh_shape(0) is not None:
            return shard(tensor, self.dim, mesh, mesh_dim)
        return shard_tensor(self, tensor, mesh, mesh_dim, src_data_rank)

    Shard._replicate_to_shard, Shard._shard_tensor, Shard._ttnn_mesh = _replicate_to_shard, _shard_tensor, True
