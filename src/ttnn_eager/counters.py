"""Counters of what the backend did: the figures `ttnn_eager.stats()` returns.

    aten_ops            aten ops that reached the backend (one per __torch_dispatch__ / PrivateUse1 call)
    ttnn_ops            ttnn op calls made by the device API (conversions included)
    fallbacks           aten ops run on the CPU because no lowering exists
    layout_conversions  ROW_MAJOR <-> TILE and dtype conversions made by the layout policy
    nchw_conversions    channels-last images (a convolution's or pool's result kept as TT-NN wrote it) permuted
                        to NCHW on the device for an op that needs NCHW (core/layout.py, to_nchw)
    host_to_device      tensors uploaded (ttnn.from_torch)
    device_to_host      tensors downloaded (ttnn.to_torch): outputs, prints, .item(), syncs
    graph_replays       replays of torch.compile(backend="ttnn") graphs (features/compile)
    compiled_eager_calls  calls of compiled graphs that ran eagerly (their capture was refused)
    graph_recaptures    compiled graphs captured again (a weight they read was written, or replaced)
    collectives         torch.distributed collectives and point-to-point ops run by the ttnn process group
    collective_d2h_bytes, collective_h2d_bytes
                        bytes of device buffers the collectives moved across PCIe (device -> host, host ->
                        device): the device tensors' sizes in their device dtype and transfer layout
                        (core/layout.py: TILE padding included, except for 1-D and flat tensors, which move
                        ROW_MAJOR), not numel*itemsize

Per-op detail for reports: `aten_by_op()` (aten op -> calls), `ttnn_by_op` (ttnn op name -> calls),
`fallback_by_op` (aten op -> CPU runs), `collective_by_op` (collective -> calls). Aten calls are counted by id(op) in `aten_calls` (an aten OpOverload
hashes in Python, which would cost two hashes on every op); `aten_ops` maps the ids back to the ops.
"""
from __future__ import annotations

import collections

# aten_ops and ttnn_ops are the sums of the per-op Counters below (one increment per op, not two)
counts: dict[str, int] = dict.fromkeys(("fallbacks", "layout_conversions", "nchw_conversions", "host_to_device",
                                        "device_to_host",
                                        "graph_replays", "compiled_eager_calls", "graph_recaptures",
                                        "collectives", "collective_d2h_bytes", "collective_h2d_bytes"), 0)
aten_calls: collections.Counter = collections.Counter()  # id(aten op) -> calls
aten_ops: dict = {}                                      # id(aten op) -> aten op (never reset)
ttnn_by_op: collections.Counter = collections.Counter()
fallback_by_op: collections.Counter = collections.Counter()
collective_by_op: collections.Counter = collections.Counter()
profile = None  # the active report.Report, if any (it times dispatch and attributes ttnn ops)


def count_aten(func) -> None:
    """One call of aten op `func`."""
    aten_calls[id(func)] += 1
    aten_ops.setdefault(id(func), func)


def aten_by_op(calls: collections.Counter | None = None) -> collections.Counter:
    """aten op -> calls since the last reset (or of `calls`, a Counter by id such as a difference of two
    copies of `aten_calls`)."""
    return collections.Counter({aten_ops[k]: n for k, n in (aten_calls if calls is None else calls).items()})


def stats() -> dict:
    """The counters since the last `reset_stats()`, as a plain dict."""
    return {"aten_ops": sum(aten_calls.values()), "ttnn_ops": sum(ttnn_by_op.values()), **counts}


def reset_stats() -> None:
    for k in counts:
        counts[k] = 0
    aten_calls.clear()
    ttnn_by_op.clear()
    fallback_by_op.clear()
    collective_by_op.clear()
