"""The compiled mode (`ttnn-eager zoo --compile`): a model through torch.compile(backend="ttnn")
against the CPU and against its eager forward (`compare_compiled`)."""
from __future__ import annotations

import collections
import time

import torch

from .outputs import _to, compare_outputs


COMPILED_CALLS = 3  # the first call runs each graph eagerly through the lowerings, the second captures it,
                    # the third replays it (or runs it eagerly again: a graph that could not be captured)


def compare_compiled(model, dinputs: dict, ref, mask, rng, eager: dict) -> dict:
    """`model` (on the device) through torch.compile(backend="ttnn") called COMPILED_CALLS times on `dinputs`
    (each from the CPU generator state `rng`), each output against the CPU's `ref`: the compiled result --
    the worst Pearson of the calls, every call's fallbacks, the last call's op counts (the steady state: the
    first call also computes what compiling folds into constants, the second captures) and whether it was a
    replay (`replayed`: every graph captured; else one ran eagerly) -- with Dynamo's graphs, graph breaks and
    recompiles (graphs the later calls added), the first call's seconds (compiling included), TT-NN ops
    compiled against `eager` (compare's result, kept under "eager")."""
    from torch._dynamo.utils import counters as dynamo
    from ...features.inventory import record_ops
    torch._dynamo.reset()
    dynamo.clear()
    fast = torch.compile(model, backend="ttnn")
    calls = []
    for _ in range(COMPILED_CALLS):
        torch.random.set_rng_state(rng)
        graphs = dynamo["stats"]["unique_graphs"]
        t0 = time.perf_counter()
        with torch.no_grad(), record_ops() as rec:
            out = fast(**dinputs)
        seconds = time.perf_counter() - t0
        out = _to(out, "cpu") if not isinstance(out, torch.Tensor) else out.cpu()
        calls.append((compare_outputs(out, ref, mask), rec, seconds, dynamo["stats"]["unique_graphs"] - graphs))
    (r, _, seconds, graphs), later, rec = calls[0], calls[1:], calls[-1][1]
    pearsons = [c[0]["pearson"] for c in calls]
    fallbacks = collections.Counter()
    for c in calls:
        fallbacks.update(c[1].fallbacks)
    r.update(pearson=None if None in pearsons else min(pearsons, key=lambda p: p if p == p else -2.0),
             same_shapes_dtypes=all(c[0]["same_shapes_dtypes"] for c in calls),
             fallbacks=dict(fallbacks.most_common()), aten_ops=sum(rec.aten.values()),
             ttnn_ops=sum(rec.ttnn.values()), graphs=graphs, recompiles=sum(c[3] for c in later),
             replayed=rec.stats.get("graph_replays", 0) > 0 and not rec.stats.get("compiled_eager_calls", 0),
             graph_breaks=sum(dynamo["graph_break"].values()), compile_s=round(seconds, 2),
             eager={k: eager[k] for k in ("pearson", "fallbacks", "aten_ops", "ttnn_ops")})
    r["ops_ratio"] = round(r["ttnn_ops"] / eager["ttnn_ops"], 3) if eager["ttnn_ops"] else None
    torch._dynamo.reset()
    return r
