"""Mesh mode: one process drives a board's chips as one TT-NN MeshDevice on the device fabric (docs/distributed.md).

Single-controller SPMD, as TT-NN's own multi-chip models run: `ttnn:0` is the mesh; a tensor on it is a TT-NN
mesh tensor, replicated (the default: every upload and factory op) or holding a different value on each chip
(a shard, a partial sum); every lowering runs unchanged on every chip, on the chip's local tensor, whose shape
is what PyTorch sees -- DTensor's "local tensor" of rank 0, which every chip shares the shape of. What to shard is
said in DTensor's vocabulary (placements, `parallelize_module` plans) over a `DeviceMesh` whose ranks are the
chips; DTensor's own sharding rules place the collectives, and they run as TT-NN's collectives on the fabric:

    mesh.py    init(shape) -> torch.distributed DeviceMesh over the chips of ttnn:0 (opens the mesh, makes the
               process group); open_local(shape) -> the group of this torchrun process's card (the card-shaped
               launch: a mesh per process, gloo between them); shard(t, dim) / gather(t, dim) by hand; data_parallel(module) (gradients
               all-reduced on the fabric); the one DTensor hook: a replicated tensor's local chunk per rank is
               ttnn.mesh_partition (every chip keeps its own chunk), not rank 0's slice
    group.py   MeshGroup: the c10d process group of a mesh (world size = chips, this process speaks for every
               rank): all_reduce / all_gather / reduce_scatter / broadcast / scatter of ttnn tensors as
               ttnn.all_reduce / all_gather / reduce_scatter / mesh_partition, no host in between; reductions
               TT-NN's collectives lack (max, min, product) as all_gather + a local reduction

Imports: the core, the device layer, config and counters, and features.distributed (the `_c10d_functional`
kernels route DTensor's collectives to the group).
"""

from .mesh import data_parallel, gather, init, open_local, shard  # noqa: E402,F401

__all__ = ["init", "open_local", "shard", "gather", "data_parallel"]
