"""Op inventory: which aten ops (with overload) reach the backend during a piece of code, with counts.

    with ttnn_eager.record_ops() as rec:
        model(**inputs)
    rec.aten      # Counter {"aten.addmm.default": 145, ...}
    rec.ttnn      # Counter {"linear": 145, ...}
    rec.fallbacks # Counter of aten ops that ran on the CPU

    calls, hooks = module_calls(layer, keep)   # the TT-NN ops of each call of one module (forward hooks)
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


def module_calls(module, keep=None) -> tuple:
    """(calls, hooks): forward hooks on `module` that append the TT-NN ops (a Counter by op) of each of its calls
    for which `keep(ops)` is true (every call without `keep`) to `calls`; remove the hooks when done. The hooks run
    in Python, not traced, when the model is compiled (a traced read of the counters would be a constant); so
    under torch.compile they break the graph at the module's edges, and what they count is the ops of those
    smaller graphs -- a compiled layer of a whole-step graph is measured as a difference of whole steps instead
    (features/serving/steps.py)."""
    import torch
    calls, before = [], {}

    @torch.compiler.disable
    def pre(module, args, kwargs):
        before["ops"] = counters.ttnn_by_op.copy()

    @torch.compiler.disable
    def post(module, args, kwargs, out):
        ops = counters.ttnn_by_op - before["ops"]
        if keep is None or keep(ops):
            calls.append(ops)
    return calls, [module.register_forward_pre_hook(pre, with_kwargs=True),
                   module.register_forward_hook(post, with_kwargs=True)]
