"""TtnnProcessGroup: the c10d process group of the "ttnn" backend, a thin adapter over PyTorch's gloo.

c10d's creator returns it in place of its per-device groups, so every collective of the group reaches it,
for CPU and ttnn tensors alike; the C++ trampoline (torch/csrc/distributed/c10d/py/PyProcessGroup.hpp) calls
these methods by name. Each collective:

 1. agrees: one all_gather of a 16-int signature per rank (collective, device type, dtype, shape) over the
    inner gloo; if the ranks disagree, every rank raises the same ValueError naming each rank's tensor
    (without it, gloo aborts the receiving process on a size mismatch and silently mixes bytes on a dtype
    mismatch). Point-to-point ops are not checked (the peer is not in a collective);
 2. stages: ttnn tensors are downloaded (host_path.down), CPU tensors used as they are;
 3. runs gloo's own collective on the host tensors and waits for it;
 4. uploads the results into the ttnn outputs (host_path.up) and returns a completed Work.
AVG is SUM then a division (gloo has no AVG; integers divide truncating, as NCCL does).
"""
from __future__ import annotations

import datetime
import os
import zlib

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d
from torch._C._distributed_c10d import ProcessGroupGloo

from ... import counters
from . import NAME, host_path, work
from .host_path import down, host_like, up

_SIG = 16  # signature length: [collective, device, dtype, ndim, numel, dims...]
_MAX_DIMS = _SIG - 5
_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.int16,
           torch.int8, torch.uint8, torch.bool]
_RED = dist.ReduceOp.RedOpType


def _dtype_code(dtype) -> int:
    return _DTYPES.index(dtype) if dtype in _DTYPES else 100 + (zlib.crc32(str(dtype).encode()) % 1000)


def _describe(row: list) -> str:
    dtype = _DTYPES[row[2]] if row[2] < len(_DTYPES) else f"dtype#{row[2]}"
    device = {0: "cpu", 1: "ttnn"}.get(row[1], "?")
    shape = tuple(row[5:5 + row[3]]) if row[3] >= 0 else "(no tensor)"
    return f"{dtype} {shape} on {device}"


class TtnnProcessGroup(dist.ProcessGroup):
    serves_ttnn = True  # the functional collectives hand it ttnn tensors (functional.py)

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)
        self._gloo = ProcessGroupGloo(dist.PrefixStore(f"{NAME}/gloo", store), rank, size, timeout)
        self._check = os.environ.get("TTNN_EAGER_DIST_CHECK", "1") != "0"
        # c10d asks the group for per-device backends (device_id=..., splitting, object collectives' device):
        # lend it the inner gloo for both devices
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self._gloo)
        self._register_backend(torch.device("ttnn"), dist.ProcessGroup.BackendType.CUSTOM, self._gloo)

    # ------------------------------------------------------------------------------- identity
    def getBackendName(self) -> str:
        return NAME

    def name(self) -> str:
        return NAME

    # ------------------------------------------------------------------------------- the agreement check
    def _agree(self, op: str, t: torch.Tensor | None, *, shape: bool = True) -> None:
        """All ranks call `op` on a tensor of t's dtype (and shape, unless shape=False: only its trailing
        dimensions), or every rank raises the same ValueError."""
        if not self._check or self.size() == 1:
            return
        row = [0] * _SIG
        row[0] = zlib.crc32(op.encode()) & 0x7FFFFFFF  # a stable hash: Python's hash(str) differs per process
        if t is None:
            row[3] = -1
        else:
            dims = list(t.shape) if shape else list(t.shape[1:])
            row[1] = 1 if host_path.is_device(t) else 0
            row[2] = _dtype_code(t.dtype)
            row[3] = len(dims) if len(dims) <= _MAX_DIMS else _MAX_DIMS
            row[4] = t.numel() if shape else 0
            row[5:5 + row[3]] = dims[:_MAX_DIMS]
        mine = torch.tensor(row, dtype=torch.int64)
        rows = [torch.empty_like(mine) for _ in range(self.size())]
        self._gloo.allgather([rows], [mine]).wait()
        rows = [r.tolist() for r in rows]
        if any(r[0] != rows[0][0] for r in rows):
            raise ValueError(f"{op}: the ranks called different collectives at once (rank {self.rank()}: {op}); "
                             f"every rank must issue the same collectives in the same order")
        keep = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
        if any([r[i] for i in keep] != [rows[0][i] for i in keep] for r in rows):
            what = "the dtype and trailing dimensions" if not shape else "the tensor's device, dtype and shape"
            ranks = ", ".join(f"rank {i}: {_describe(r)}" for i, r in enumerate(rows))
            raise ValueError(f"{op}: ranks disagree on {what}: {ranks}")

    def _done(self, op: str, outputs: list):
        counters.counts["collectives"] += 1
        counters.collective_by_op[op] += 1
        return work.completed(outputs)

    # ------------------------------------------------------------------------------- reductions
    def _reduce_opts(self, op: str, opts_type, opts):
        """gloo's options for `opts` and the division AVG needs afterwards (None for none)."""
        red = opts.reduceOp
        kind = red.op if hasattr(red, "op") else red
        if kind == _RED.PREMUL_SUM:
            raise NotImplementedError(f"{op}: ReduceOp.PREMUL_SUM is not supported by the ttnn backend's host "
                                      f"path (gloo has none); scale the tensor and use SUM")
        g = opts_type()
        if hasattr(opts, "timeout"):
            g.timeout = opts.timeout
        if kind == _RED.AVG:
            g.reduceOp = dist.ReduceOp.SUM
            return g, self.size()
        g.reduceOp = red
        return g, None

    @staticmethod
    def _divide(host: torch.Tensor, n, op: str) -> None:
        if n is None:
            return
        if host.dtype == torch.bool:
            raise ValueError(f"{op}: ReduceOp.AVG is undefined for torch.bool tensors")
        if host.dtype.is_floating_point:
            host.div_(n)
        else:
            host.copy_(torch.div(host, n, rounding_mode="trunc"))

    def allreduce(self, tensors, opts=None):
        opts = opts or _c10d.AllreduceOptions()
        gopts, avg = self._reduce_opts("all_reduce", _c10d.AllreduceOptions, opts)
        for t in tensors:
            self._agree("all_reduce", t)
        if avg is not None and any(t.dtype == torch.bool for t in tensors):  # before any data moves
            raise ValueError("all_reduce: ReduceOp.AVG is undefined for torch.bool tensors")
        hosts = [down(t) for t in tensors]
        self._gloo.allreduce(hosts, gopts).wait()
        for t, h in zip(tensors, hosts):
            self._divide(h, avg, "all_reduce")
            up(t, h)
        return self._done("all_reduce", tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts or _c10d.AllreduceCoalescedOptions()
        o = _c10d.AllreduceOptions()
        o.reduceOp = opts.reduceOp
        for t in tensors:
            self.allreduce([t], o)
        return work.completed(tensors)

    def reduce(self, tensors, opts=None):
        opts = opts or _c10d.ReduceOptions()
        gopts, avg = self._reduce_opts("reduce", _c10d.ReduceOptions, opts)
        gopts.rootRank, gopts.rootTensor = opts.rootRank, opts.rootTensor
        for t in tensors:
            self._agree("reduce", t)
        hosts = [down(t) for t in tensors]
        self._gloo.reduce(hosts, gopts).wait()
        if self.rank() == opts.rootRank:
            for t, h in zip(tensors, hosts):
                self._divide(h, avg, "reduce")
                up(t, h)
        return self._done("reduce", tensors)

    # ------------------------------------------------------------------------------- broadcast, barrier
    def broadcast(self, tensors, opts=None):
        opts = opts or _c10d.BroadcastOptions()
        for t in tensors:
            self._agree("broadcast", t)
        src = self.rank() == opts.rootRank
        hosts = [down(t) if src else host_like(t) for t in tensors]  # only the source reads its device
        self._gloo.broadcast(hosts, opts).wait()
        if not src:
            for t, h in zip(tensors, hosts):
                up(t, h)
        return self._done("broadcast", tensors)

    def barrier(self, opts=None):
        self._agree("barrier", None)
        self._gloo.barrier(opts or _c10d.BarrierOptions()).wait()
        return self._done("barrier", [])

    # ------------------------------------------------------------------------------- gathers, scatters
    def _gather(self, op: str, gloo_fn, output_lists, inputs, opts):
        """all_gather / gather: inputs downloaded, gloo_fn on host buffers, the output lists uploaded."""
        for t in inputs:
            self._agree(op, t)
        hosts_in = [down(t) for t in inputs]
        hosts_out = [[host_like(o) for o in outs] for outs in output_lists]
        gloo_fn(hosts_out, hosts_in, opts).wait()
        for outs, houts in zip(output_lists, hosts_out):
            for o, h in zip(outs, houts):
                up(o, h)
        return self._done(op, output_lists)

    def allgather(self, output_lists, inputs, opts=None):
        return self._gather("all_gather", self._gloo.allgather, output_lists, inputs,
                            opts or _c10d.AllgatherOptions())

    def all_gather_single(self, output, input, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        host_path.refuse_mesh("all_gather_into_tensor", input)
        self._agree("all_gather_into_tensor", input)
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"all_gather_into_tensor: the output has {output.numel()} elements, not "
                             f"world size {self.size()} x the input's {input.numel()}")
        h_in = down(input)  # first: FSDP2's input is a narrow of the output
        h_out = host_like(output)
        self._gloo._allgather_base(h_out, h_in.contiguous(), opts).wait()
        up(output, h_out)
        return self._done("all_gather_into_tensor", [output])

    def gather(self, output_lists, inputs, opts=None):
        return self._gather("gather", self._gloo.gather, output_lists, inputs, opts or _c10d.GatherOptions())

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts or _c10d.ScatterOptions()
        for t in outputs:
            self._agree("scatter", t)
        hosts_in = [[down(t) for t in ins] for ins in input_lists]
        hosts_out = [host_like(o) for o in outputs]
        self._gloo.scatter(hosts_out, hosts_in, opts).wait()
        for o, h in zip(outputs, hosts_out):
            up(o, h)
        return self._done("scatter", outputs)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        gopts, avg = self._reduce_opts("reduce_scatter", _c10d.ReduceScatterOptions, opts)
        for t in outputs:
            self._agree("reduce_scatter", t)
        hosts_in = [[down(t) for t in ins] for ins in input_lists]
        hosts_out = [host_like(o) for o in outputs]
        self._gloo.reduce_scatter(hosts_out, hosts_in, gopts).wait()
        for o, h in zip(outputs, hosts_out):
            self._divide(h, avg, "reduce_scatter")
            up(o, h)
        return self._done("reduce_scatter", outputs)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        gopts, avg = self._reduce_opts("reduce_scatter_tensor", _c10d.ReduceScatterOptions, opts)
        host_path.refuse_mesh("reduce_scatter_tensor", input)
        self._agree("reduce_scatter_tensor", input)
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"reduce_scatter_tensor: the input has {input.numel()} elements, not "
                             f"world size {self.size()} x the output's {output.numel()}")
        h_in = down(input).contiguous()
        h_out = host_like(output)
        self._gloo._reduce_scatter_base(h_out, h_in, gopts).wait()
        self._divide(h_out, avg, "reduce_scatter_tensor")
        up(output, h_out)
        return self._done("reduce_scatter_tensor", [output])

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts or _c10d.AllToAllOptions()
        host_path.refuse_mesh("all_to_all_single", input)
        self._agree("all_to_all_single", input, shape=False)
        h_in = down(input).contiguous()
        h_out = host_like(output)
        self._gloo.alltoall_base(h_out, h_in, output_split_sizes, input_split_sizes, opts).wait()
        up(output, h_out)
        return self._done("all_to_all_single", [output])

    # ------------------------------------------------------------------------------- point to point
    def send(self, tensors, dst: int, tag: int = 0):
        hosts = [down(t).contiguous() for t in tensors]
        counters.counts["collectives"] += 1
        counters.collective_by_op["send"] += 1
        return self._gloo.send(hosts, dst, tag)  # gloo's Work keeps the host copies alive until sent

    def recv(self, tensors, src: int, tag: int = 0):
        hosts = [host_like(t) if host_path.is_device(t) or not t.is_contiguous() else t for t in tensors]
        inner = self._gloo.recv(hosts, src, tag)
        counters.counts["collectives"] += 1
        counters.collective_by_op["recv"] += 1

        def finish():
            for t, h in zip(tensors, hosts):
                up(t, h)
        return work.CopyBack(inner, finish, list(tensors))
