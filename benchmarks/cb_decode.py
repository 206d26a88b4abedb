"""TT-NN ops of transformers' own compiled decode path for continuous batching (ContinuousBatchingConfig(
decode_compile_config=CompileConfig(backend="ttnn"))), step by step: the tiny seeded Llama (2 layers, hidden 128,
4 heads / 2 key-value heads of 32), 4 requests of 2, 9, 4 and 17 prompt tokens, 8 new tokens each, bfloat16
storage, blocks of 32 (the decode steps on TT-NN's paged ops), one generate_batch.

    PYTHONPATH=src .venv/bin/python benchmarks/cb_decode.py [--eager] [--layers 1|2] [--json PATH]

Prints a row a generation step (varlen or decode, the padded batch, TT-NN ops, graph replays and recaptures) and the
TT-NN ops of the last decoder layer on each decode step by kind (forward hooks, run by Python: not traced).
`TORCH_LOGS=recompiles,graph_breaks` shows where Dynamo breaks and which guard sends it to a new graph.
"""
from __future__ import annotations

import argparse
import json


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eager", action="store_true", help="transformers' decode path not compiled")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch
    import ttnn_eager
    import ttnn_eager.lowerings  # noqa: F401  (torch.ops.ttnn_eager: the paged ops)
    from transformers import CompileConfig, ContinuousBatchingConfig, GenerationConfig
    from transformers.generation.continuous_batching import model_runner
    from ttnn_eager import counters
    from ttnn_eager.features.inventory import module_calls
    from ttnn_eager.tools import models

    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="exact")
    model, _ = models.build("llama")
    model.model.layers = model.model.layers[:a.layers]
    model.config.num_hidden_layers = a.layers
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:a.layers]
    prompts = [models.prompt_ids(model.config.vocab_size, length=n, seed=i)[0].tolist()
               for i, n in enumerate([2, 9, 4, 17])]
    model.to("ttnn:0")

    steps = []
    inner = model_runner.ModelRunner.compute_batch

    def compute_batch(self, m, batch_data):
        ops, stats = counters.ttnn_by_op.copy(), dict(counters.counts)
        inner(self, m, batch_data)
        steps.append({"path": "decode" if self.inputs_and_outputs.use_block_table else "varlen",
                      "tokens": int(batch_data["input_ids"].shape[-1]),
                      "ttnn_ops": sum((counters.ttnn_by_op - ops).values()),
                      **{k: counters.counts[k] - stats.get(k, 0)
                         for k in ("graph_replays", "graph_recaptures", "compiled_eager_calls")}})

    layer_calls, hooks = module_calls(model.model.layers[-1],
                                      lambda ops: ops["transformer.paged_scaled_dot_product_attention_decode"])
    model_runner.ModelRunner.compute_batch = compute_batch
    kw = {} if a.eager else {"decode_compile_config": CompileConfig(backend="ttnn", fullgraph=False, dynamic=False)}
    cb = ContinuousBatchingConfig(max_batch_tokens=64, page_size=32, seed=0, max_memory_percent=0.01, **kw)
    gen = GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    ttnn_eager.reset_stats()
    try:
        with ttnn_eager.record_ops() as rec:
            model.generate_batch(inputs=prompts, generation_config=gen, continuous_batching_config=cb)
    finally:
        model_runner.ModelRunner.compute_batch = inner
        for h in hooks:
            h.remove()
    print(f"{'compiled' if not a.eager else 'eager'} decode path, {a.layers} layers: {sum(rec.ttnn.values())} "
          f"TT-NN ops in all, CPU fallbacks {dict(rec.fallbacks)}")
    print("| step | path | tokens (padded) | TT-NN ops | replays | recaptures | eager calls |\n|---|---|---|---|---|---|---|")
    for i, s in enumerate(steps):
        print(f"| {i} | {s['path']} | {s['tokens']} | {s['ttnn_ops']} | {s['graph_replays']} | "
              f"{s['graph_recaptures']} | {s['compiled_eager_calls']} |")
    per_layer = [sum(c.values()) for c in layer_calls]
    print(f"TT-NN ops of the last decoder layer, each decode step: {per_layer}")
    if layer_calls:
        print("last:", ", ".join(f"{k} {v}" for k, v in sorted(layer_calls[-1].items(), key=lambda kv: -kv[1])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"steps": steps, "layer": layer_calls, "total": sum(rec.ttnn.values())}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
