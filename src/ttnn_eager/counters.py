"""Counters of what the backend did: the figures `ttnn_eager.stats()` returns.

    aten_ops            aten ops that reached the backend (one per __torch_dispatch__ / PrivateUse1 call)
    ttnn_ops            ttnn op calls made by the device API (conversions included)
    fallbacks           aten ops run on the CPU because no lowering exists
    layout_conversions  ROW_MAJOR <-> TILE and dtype conversions made by the layout policy
    host_to_device      tensors uploaded (ttnn.from_torch)
    device_to_host      tensors downloaded (ttnn.to_torch): outputs, prints, .item(), syncs

Per-op detail (which aten ops, which ttnn ops) is kept in `aten_by_op` / `ttnn_by_op` for reports.
"""
from __future__ import annotations

import collections

KEYS = ("aten_ops", "ttnn_ops", "fallbacks", "layout_conversions", "host_to_device", "device_to_host")

counts: dict[str, int] = dict.fromkeys(KEYS, 0)
aten_by_op: collections.Counter = collections.Counter()
ttnn_by_op: collections.Counter = collections.Counter()
fallback_by_op: collections.Counter = collections.Counter()
profile = None  # the active report.Report, if any (it times dispatch and attributes ttnn ops)


def stats() -> dict:
    """The counters since the last `reset_stats()`, as a plain dict."""
    return dict(counts)


def reset_stats() -> None:
    for k in KEYS:
        counts[k] = 0
    aten_by_op.clear()
    ttnn_by_op.clear()
    fallback_by_op.clear()
