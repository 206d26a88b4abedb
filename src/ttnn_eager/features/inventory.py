"""Op inventory: which aten ops (with overload) reach the backend during a piece of code, with counts.

    with ttnn_eager.record_ops() as rec:
        model(**inputs)
    rec.aten      # Counter {"aten.addmm.default": 145, ...}
    rec.ttnn      # Counter {"linear": 145, ...}
    rec.fallbacks # Counter of aten ops that ran on the CPU
"""
from __future__ import annotations

import collections
import contextlib

from .. import counters


class OpRecord:
    def __init__(self):
        self.aten: collections.Counter = collections.Counter()
        self.ttnn: collections.Counter = collections.Counter()
        self.fallbacks: collections.Counter = collections.Counter()
        self.stats: dict = {}

    def as_dict(self) -> dict:
        return {"aten_ops": dict(self.aten.most_common()), "ttnn_ops": dict(self.ttnn.most_common()),
                "fallbacks": dict(self.fallbacks.most_common()), "stats": self.stats}


@contextlib.contextmanager
def record_ops():
    """Record the aten and ttnn ops of the enclosed code (counters are restored afterwards)."""
    saved = (dict(counters.counts), counters.aten_calls.copy(), counters.ttnn_by_op.copy(),
             counters.fallback_by_op.copy())
    counters.reset_stats()
    rec = OpRecord()
    try:
        yield rec
    finally:
        rec.aten.update({str(k): v for k, v in counters.aten_by_op().items()})
        rec.ttnn.update(counters.ttnn_by_op)
        rec.fallbacks.update({str(k): v for k, v in counters.fallback_by_op.items()})
        rec.stats = counters.stats()
        counts, aten, ttnn, fallbacks = saved
        for k, v in counts.items():
            counters.counts[k] += v
        for mine, theirs in ((counters.aten_calls, aten), (counters.ttnn_by_op, ttnn),
                             (counters.fallback_by_op, fallbacks)):
            mine.update(theirs)
