"""MeshGroup: the c10d process group of a mesh in one process (world size = chips, rank 0 speaks for all).

In single-controller SPMD every "rank" is a chip of the one MeshDevice, and a collective is one TT-NN collective
on the fabric over all of them. A ttnn tensor's value on chip k is rank k's tensor; a CPU tensor is the same on
every rank (the one controller made it), so its collectives are computed here exactly (a sum is N times it).
On a 2-D mesh a group spans one mesh axis (`axis`: TT-NN's cluster_axis), as DeviceMesh's per-dimension groups
do; a group over all chips of a 1-D mesh needs none.

What each collective is on the device (N chips in the group, t a ttnn tensor):
    all_reduce     SUM: ttnn.all_reduce; AVG: the sum / N; MAX, MIN, PRODUCT: ttnn.all_gather of t
                   along a new leading dimension, then amax / amin / prod of it on every chip
    all_gather     ttnn.all_gather (into one tensor along dim 0; into a list: gathered, then each rank's part)
    reduce_scatter ttnn.reduce_scatter along dim 0 (AVG: / N)
    broadcast      ttnn.all_gather along a new leading dimension, then the root's part
    scatter        the root's list stacked, then ttnn.mesh_partition: chip k keeps part k
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

from ... import counters
from ...core import layout, tensor as _tensor
from ...device import api
from ..distributed import work

NAME = "ttnn_mesh"
_RED = dist.ReduceOp.RedOpType


def _kind(opts) -> object:
    red = opts.reduceOp
    return red.op if hasattr(red, "op") else red


class MeshGroup(dist.ProcessGroup):
    serves_ttnn = True  # the functional collectives (features/distributed/functional.py) hand it ttnn tensors

    def __init__(self, size: int, axis: int | None, ranks: list):
        super().__init__(0, size)
        self.axis, self.ranks = axis, ranks
        # c10d reads a group's name (DeviceMesh, the functional collectives' registry) from a backend registered
        # under it: lend it a placeholder that moves nothing (every collective of this group is a method here)
        inner = _c10d.FakeProcessGroup._create_internal(0, size)
        for device in ("cpu", "ttnn"):
            self._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM, inner)

    def getBackendName(self) -> str:
        return NAME

    def name(self) -> str:
        return NAME

    # ------------------------------------------------------------------------------- the fabric
    def _ccl(self, op: str, t: torch.Tensor, **kwargs) -> torch.Tensor:
        """ttnn.<op> over this group's chips on t's device value; a new ttnn tensor."""
        h = layout.materialize(_tensor.handle_of(t.contiguous()))
        if self.axis is not None:
            kwargs["cluster_axis"] = self.axis
        return _tensor.new_tensor(api.run(op, h, **kwargs))

    def _stacked_gather(self, t: torch.Tensor) -> torch.Tensor:
        """[N, *t.shape]: every chip's t, on every chip."""
        return self._ccl("all_gather", t.unsqueeze(0), dim=0)

    def _done(self, op: str, outputs: list):
        counters.counts["collectives"] += 1
        counters.collective_by_op[op] += 1
        return work.completed(outputs)

    @staticmethod
    def _set(dst: torch.Tensor, value: torch.Tensor) -> None:
        with torch.no_grad():
            dst.copy_(value)

    # ------------------------------------------------------------------------------- reductions
    def _reduced(self, op: str, t: torch.Tensor, kind) -> torch.Tensor:
        n = self.size()
        if kind == _RED.PREMUL_SUM:
            raise NotImplementedError(f"{op}: ReduceOp.PREMUL_SUM is not supported on a ttnn mesh; scale the "
                                      f"tensor and use SUM")
        if t.device.type != "ttnn":  # the same tensor on every rank
            if kind == _RED.SUM:
                return t * n
            return t.clone()
        if kind in (_RED.SUM, _RED.AVG):
            if t.dtype == torch.bool or not t.dtype.is_floating_point and kind == _RED.AVG:
                raise ValueError(f"{op}: ReduceOp.AVG of {t.dtype} tensors is not defined")
            total = self._ccl("all_reduce", t)
            return total / n if kind == _RED.AVG else total
        stacked = self._stacked_gather(t)
        if kind == _RED.MAX:
            return stacked.amax(0)
        if kind == _RED.MIN:
            return stacked.amin(0)
        if kind == _RED.PRODUCT:
            return stacked.prod(0).to(t.dtype)
        raise NotImplementedError(f"{op}: ReduceOp {kind} is not supported on a ttnn mesh")

    def allreduce(self, tensors, opts=None):
        opts = opts or _c10d.AllreduceOptions()
        for t in tensors:
            self._set(t, self._reduced("all_reduce", t, _kind(opts)))
        return self._done("all_reduce", tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        o = _c10d.AllreduceOptions()
        o.reduceOp = (opts or _c10d.AllreduceCoalescedOptions()).reduceOp
        for t in tensors:
            self.allreduce([t], o)
        return work.completed(tensors)

    def reduce(self, tensors, opts=None):  # every rank ends with the reduction: the root's is what reduce promises
        o = _c10d.AllreduceOptions()
        o.reduceOp = (opts or _c10d.ReduceOptions()).reduceOp
        return self.allreduce(tensors, o)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        n, kind = self.size(), _kind(opts)
        if input.numel() != output.numel() * n:
            raise ValueError(f"reduce_scatter_tensor: the input has {input.numel()} elements, not world size {n} x "
                             f"the output's {output.numel()}")
        if input.device.type != "ttnn" or kind not in (_RED.SUM, _RED.AVG):
            part = self._reduced("reduce_scatter_tensor", input, kind)
            part = self._partition(part.reshape(n, *output.shape)) if input.device.type == "ttnn" else \
                part.reshape(n, *output.shape)[0]
            self._set(output, part.reshape(output.shape))
        else:
            part = self._ccl("reduce_scatter", input.reshape(n * output.shape[0] if output.dim() else n,
                                                              *output.shape[1:]), dim=0)
            self._set(output, (part / n if kind == _RED.AVG else part).reshape(output.shape))
        return self._done("reduce_scatter_tensor", [output])

    # ------------------------------------------------------------------------------- gathers, scatters
    def all_gather_single(self, output, input, opts=None):
        n = self.size()
        if output.numel() != input.numel() * n:
            raise ValueError(f"all_gather_into_tensor: the output has {output.numel()} elements, not world size "
                             f"{n} x the input's {input.numel()}")
        if input.device.type != "ttnn":
            self._set(output, torch.cat([input.reshape(-1)] * n).reshape(output.shape))
        else:
            flat = input.reshape(1, -1) if input.dim() == 0 else input
            self._set(output, self._ccl("all_gather", flat, dim=0).reshape(output.shape))
        return self._done("all_gather_into_tensor", [output])

    def allgather(self, output_lists, inputs, opts=None):
        for outs, t in zip(output_lists, inputs):
            stacked = self._stacked_gather(t) if t.device.type == "ttnn" else None
            for k, o in enumerate(outs):
                self._set(o, t if stacked is None else stacked[k])
        return self._done("all_gather", output_lists)

    def _partition(self, stacked: torch.Tensor) -> torch.Tensor:
        """Part k of a [N, ...] tensor on chip k (ttnn.mesh_partition), its leading dimension dropped."""
        return self._ccl("mesh_partition", stacked, dim=0).squeeze(0)

    def broadcast(self, tensors, opts=None):
        root = (opts or _c10d.BroadcastOptions()).rootRank
        for t in tensors:
            if t.device.type == "ttnn":
                self._set(t, self._stacked_gather(t)[root])
        return self._done("broadcast", tensors)

    def scatter(self, outputs, input_lists, opts=None):
        root = (opts or _c10d.ScatterOptions()).rootRank
        for o, parts in zip(outputs, input_lists or [[]] * len(outputs)):
            if not parts:
                raise ValueError("scatter on a ttnn mesh: this process is every rank, the root included: pass "
                                 "the scatter list")
            stacked = torch.stack([p.to(o.device) for p in parts])
            if o.device.type != "ttnn":
                self._set(o, parts[0])
                continue
            if root:
                stacked = self._stacked_gather(stacked)[root]
            self._set(o, self._partition(stacked))
        return self._done("scatter", outputs)

    def barrier(self, opts=None):
        api.synchronize(0)
        return self._done("barrier", [])

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        raise NotImplementedError("all_to_all on a ttnn mesh is not built yet (TT-NN 0.81 has no all_to_all "
                                  "collective); use all_gather and a slice")

    def send(self, tensors, dst: int, tag: int = 0):
        raise NotImplementedError("send/recv on a ttnn mesh: the ranks are chips of this one process; use the "
                                  "collectives")

    recv = send
