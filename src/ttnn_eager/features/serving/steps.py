"""The TT-NN ops of each generation step of transformers' continuous batching (benchmarks/cb_decode.py, the
serving tests): ModelRunner.compute_batch wrapped while it lasts.

    with decode_steps() as steps:
        model.generate_batch(...)
    steps   [{"path": "decode" | "varlen", "tokens": padded batch, "ops": Counter by TT-NN op,
              "graph_replays": n, "graph_recaptures": n, "compiled_eager_calls": n}, ...]

A layer's ops are the difference between the same step of a model and of the model with one layer less:
compiled, a decode step is one graph (features/serving/paged.py), so hooks on a layer (which run outside
Dynamo) would break it at every layer and measure another graph.
"""
from __future__ import annotations

import collections
import contextlib

from ... import counters

STATS = ("graph_replays", "graph_recaptures", "compiled_eager_calls")


@contextlib.contextmanager
def decode_steps():
    from transformers.generation.continuous_batching import model_runner
    runner = model_runner.ModelRunner
    inner = runner.compute_batch
    steps: list = []

    def compute_batch(self, model, batch_data):
        ops, stats = counters.ttnn_by_op.copy(), dict(counters.counts)
        inner(self, model, batch_data)
        steps.append({"path": "decode" if self.inputs_and_outputs.use_block_table else "varlen",
                      "tokens": int(batch_data["input_ids"].shape[-1]), "ops": counters.ttnn_by_op - ops,
                      **{k: counters.counts[k] - stats.get(k, 0) for k in STATS}})
    runner.compute_batch = compute_batch
    try:
        yield steps
    finally:
        runner.compute_batch = inner


def warm_decode(steps: list) -> collections.Counter:
    """The ops of the last decode step (a replay, once the graphs of its batch size are captured)."""
    return next(s["ops"] for s in reversed(steps) if s["path"] == "decode")
