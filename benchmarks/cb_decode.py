"""TT-NN ops of transformers' own compiled decode path for continuous batching (ContinuousBatchingConfig(
decode_compile_config=CompileConfig(backend="ttnn"))), step by step: the tiny seeded Llama (2 layers, hidden 128,
4 heads / 2 key-value heads of 32), 4 requests of 2, 9, 4 and 17 prompt tokens, 8 new tokens each, bfloat16
storage, blocks of 32 (the decode steps on TT-NN's paged ops), one generate_batch.

    PYTHONPATH=src .venv/bin/python benchmarks/cb_decode.py [--eager] [--layers 1|2] [--json PATH]

Prints a row a generation step (varlen or decode, the padded batch, TT-NN ops, graph replays and recaptures) and the
TT-NN ops of a decoder layer by kind: a warm decode step's ops less those of the same model with one layer less
(run first; compiled, a step is one graph, which hooks on a layer would break).
`TORCH_LOGS=recompiles,graph_breaks` shows where Dynamo breaks and which guard sends it to a new graph.
"""
from __future__ import annotations

import argparse
import json


def _run(layers: int, eager: bool) -> tuple:
    import ttnn_eager
    from transformers import CompileConfig, ContinuousBatchingConfig, GenerationConfig
    from ttnn_eager.features.serving.steps import decode_steps
    from ttnn_eager.tools import models

    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="exact")
    model, _ = models.build("llama")
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:layers]
    prompts = [models.prompt_ids(model.config.vocab_size, length=n, seed=i)[0].tolist()
               for i, n in enumerate([2, 9, 4, 17])]
    model.to("ttnn:0")
    kw = {} if eager else {"decode_compile_config": CompileConfig(backend="ttnn", fullgraph=False, dynamic=False)}
    cb = ContinuousBatchingConfig(max_batch_tokens=64, page_size=32, seed=0, max_memory_percent=0.01, **kw)
    gen = GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    ttnn_eager.reset_stats()
    with ttnn_eager.record_ops() as rec, decode_steps() as steps:
        model.generate_batch(inputs=prompts, generation_config=gen, continuous_batching_config=cb)
    return steps, rec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eager", action="store_true", help="transformers' decode path not compiled")
    p.add_argument("--layers", type=int, default=2, help="layers of the model (>= 2: a layer is the difference "
                                                         "from the model with one layer less)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch
    import ttnn_eager.lowerings  # noqa: F401  (torch.ops.ttnn_eager: the paged ops)
    from ttnn_eager.features.serving.steps import warm_decode

    runs = {}
    for layers in (a.layers - 1, a.layers):
        torch._dynamo.reset()
        runs[layers] = _run(layers, a.eager)
    steps, rec = runs[a.layers]
    print(f"{'compiled' if not a.eager else 'eager'} decode path, {a.layers} layers: {sum(rec.ttnn.values())} "
          f"TT-NN ops in all, CPU fallbacks {dict(rec.fallbacks)}")
    print("| step | path | tokens (padded) | TT-NN ops | replays | recaptures | eager calls |\n|---|---|---|---|---|---|---|")
    for i, s in enumerate(steps):
        print(f"| {i} | {s['path']} | {s['tokens']} | {sum(s['ops'].values())} | {s['graph_replays']} | "
              f"{s['graph_recaptures']} | {s['compiled_eager_calls']} |")
    layer = warm_decode(steps) - warm_decode(runs[a.layers - 1][0])
    print(f"TT-NN ops of a decoder layer (a warm decode step, {a.layers} layers against {a.layers - 1}): "
          f"{sum(layer.values())}")
    print("a layer:", ", ".join(f"{k} {v}" for k, v in sorted(layer.items(), key=lambda kv: -kv[1])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"steps": [{**s, "ops": dict(s["ops"])} for s in steps], "layer": dict(layer),
                       "total": sum(rec.ttnn.values())}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
