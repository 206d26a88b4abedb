"""torch.compile(backend="ttnn") against eager mode, side by side in one run: TT-NN ops per layer, host time
per forward (mock device, shadow execution off: host time as on hardware), Pearson against float32 PyTorch on
the CPU (shadow execution on), CPU fallbacks, graph breaks, compile time and recompiles. (The decoders read
values back in eager mode, so theirs run with shadow execution on and its time is subtracted.)

    .venv/bin/python benchmarks/compile.py [--shapes 1x128,8x384] [--layers 24] [--forwards 5] [--json out.json]
    .venv/bin/python benchmarks/compile.py --quick        bert-large b1 s128 only, 4 layers, and the decoders
    .venv/bin/python benchmarks/compile.py --generation-only [--tokens 16]

Models: bert-large (seeded random weights, sdpa attention), a Llama-style decoder's prefill (Llama-3.2-1B's
layer shapes) and GPT-2 (gpt2's layer shapes) -- both with a 4096-token vocabulary, which changes no layer -- and greedy generation with a static cache
(`cache_implementation="static"`, `model.forward = torch.compile(model.forward, backend="ttnn", fullgraph=True)`,
transformers' own recipe). "ops per layer" is the difference between the same model at 2 and 1 layers. Host
times are medians after warm-up; these machines are noisy, so read ratios.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import torch  # noqa: E402
import transformers  # noqa: E402

import ttnn_eager  # noqa: E402
from ttnn_eager import counters  # noqa: E402
from ttnn_eager.device import api  # noqa: E402
from ttnn_eager.device import mock  # noqa: E402  (its shadow execution, timed apart for the decoders)
from ttnn_eager.tools import bert  # noqa: E402

DEV = "ttnn:0"


def _dynamo_counts() -> dict:
    c = torch._dynamo.utils.counters
    return {"graph_breaks": sum(c["graph_break"].values()), "unique_graphs": c["stats"]["unique_graphs"]}


def _models(name: str, layers: int):
    torch.manual_seed(0)
    if name == "bert-large":
        model = transformers.BertModel(bert.bert_large_config(num_hidden_layers=layers), add_pooling_layer=False)
    elif name == "llama":
        model = transformers.LlamaModel(transformers.LlamaConfig(
            hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8,
            num_hidden_layers=layers, vocab_size=4096, max_position_embeddings=2048, use_cache=False))
    else:
        model = transformers.GPT2Model(transformers.GPT2Config(n_layer=layers, vocab_size=4096, use_cache=False))
    return model.eval()


def _inputs(name, batch, seq, vocab):
    """Token ids and an attention mask (bert-large: the last sequence padded when batch > 1; the decoders:
    all ones -- a decoder given none reads its positions back to look for packed sequences)."""
    ids, mask = bert.make_inputs(batch, seq, vocab, padded=None if name == "bert-large" else 0)
    return {"input_ids": ids, "attention_mask": mask}


def _on(inputs):
    return {k: v.to(DEV) for k, v in inputs.items()}


def _hidden(out):
    return out.last_hidden_state


# Eager decoders read values back on the host (transformers' mask helpers ask `padding_mask.all()` of a mask
# computed on the device), which needs shadow execution on: their host time is wall time minus the time
# spent in shadow execution (ShadowClock). bert-large runs with shadow execution off.
NEEDS_VALUES = {"llama", "gpt2"}


class ShadowClock:
    """Time spent in the mock's shadow execution (mock.shadow, mock._round) while installed."""

    def __init__(self):
        self.seconds = self.cpu_seconds = 0.0
        self.inside = False

    def __enter__(self):
        self._orig = (mock.shadow, mock._round)

        def wrap(fn):
            def timed(*a, **k):
                if self.inside:
                    return fn(*a, **k)
                self.inside = True
                start, cpu = time.perf_counter(), time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    self.seconds += time.perf_counter() - start
                    self.cpu_seconds += time.thread_time() - cpu
                    self.inside = False
            return timed
        mock.shadow, mock._round = wrap(mock.shadow), wrap(mock._round)
        return self

    def __exit__(self, *exc):
        mock.shadow, mock._round = self._orig
        return False


def _host_seconds(fn, inputs, values: bool) -> tuple:
    """(wall seconds, CPU seconds of this thread) of one call: the CPU time is what the call itself cost, with
    the time other processes of a shared machine took the core left out."""
    if not values:
        with api.shadows_off():
            start, cpu = time.perf_counter(), time.thread_time()
            fn(**inputs)
            return time.perf_counter() - start, time.thread_time() - cpu
    with ShadowClock() as clock:
        start, cpu = time.perf_counter(), time.thread_time()
        fn(**inputs)
        return time.perf_counter() - start - clock.seconds, time.thread_time() - cpu - clock.cpu_seconds


def _ops_per_forward(fn, inputs, values: bool, calls: int = 3) -> dict:
    """ttnn calls (by op) of the last of `calls` calls."""
    with torch.no_grad(), (contextlib.nullcontext() if values else api.shadows_off()):
        for _ in range(calls - 1):
            fn(**inputs)
        before = dict(counters.ttnn_by_op)
        fn(**inputs)
    return {k: v - before.get(k, 0) for k, v in counters.ttnn_by_op.items() if v - before.get(k, 0)}


def ops_per_layer(name: str, batch: int, seq: int) -> dict:
    out = {}
    for mode in ("eager", "compiled"):
        per = {}
        for layers in (1, 2):
            torch._dynamo.reset()
            model = _models(name, layers).to(DEV)
            fn = model if mode == "eager" else torch.compile(model, backend="ttnn", fullgraph=True)
            per[layers] = _ops_per_forward(fn, _on(_inputs(name, batch, seq, model.config.vocab_size)),
                                           name in NEEDS_VALUES)
            del model, fn
        layer = {k: per[2].get(k, 0) - per[1].get(k, 0) for k in set(per[1]) | set(per[2])}
        out[mode] = {"total": sum(layer.values()), "by_op": {k: v for k, v in sorted(layer.items()) if v}}
    return out


def _replay_ttnn_seconds(compiled, inputs, values: bool, forwards: int) -> float:
    """The median time a compiled call spends inside the ttnn functions its replay issues (on the mock, ttnn's
    own host work per op; on a card a trace replays them with none): every captured step's function timed."""
    import gc
    from ttnn_eager.features.compile.replay import Replayed
    spent = [0.0]

    def timed(fn):
        def call(*a, **k):
            start = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                spent[0] += time.thread_time() - start
        call.timed = True
        return call
    for r in [o for o in gc.get_objects() if isinstance(o, Replayed)]:
        for state in r.states.values():
            program = getattr(getattr(state, "graph", None), "_program", None)
            for st in program.steps if program is not None else ():
                if st.fn is not None and not getattr(st.fn, "timed", False):
                    st.fn = timed(st.fn)
    samples = []
    for _ in range(forwards):
        spent[0] = 0.0
        with api.shadows_off() if not values else ShadowClock():
            compiled(**inputs)
        samples.append(spent[0])
    return statistics.median(samples)


def compare(name: str, layers: int, batch: int, seq: int, forwards: int) -> dict:
    """Eager and compiled forwards of one model: host time (shadows off, or minus their time), Pearson vs the
    CPU (shadows on),
    fallbacks, graph breaks, compile time, recompiles for another sequence length."""
    cpu = _models(name, layers)
    model = copy.deepcopy(cpu).to(DEV)
    inputs = _inputs(name, batch, seq, cpu.config.vocab_size)
    dev_inputs = _on(inputs)
    torch._dynamo.reset()
    dyn0 = _dynamo_counts()
    fb0 = ttnn_eager.stats()["fallbacks"]
    compiled = torch.compile(model, backend="ttnn", fullgraph=True)
    row = {"model": name, "layers": layers, "batch": batch, "seq": seq}
    with torch.no_grad():
        start = time.perf_counter()
        compiled(**dev_inputs)
        row["compile_seconds"] = time.perf_counter() - start            # Dynamo + aot + passes + eager run
        start = time.perf_counter()
        compiled(**dev_inputs)
        row["capture_seconds"] = time.perf_counter() - start            # the capture run
        model(**dev_inputs)  # eager warm-up
        times = {"eager": [], "compiled": []}
        for _ in range(forwards):
            for mode, fn in (("eager", model), ("compiled", compiled)):
                times[mode].append(_host_seconds(fn, _on(inputs), name in NEEDS_VALUES))
        for mode in times:
            row[f"{mode}_ms"] = 1e3 * statistics.median(w for w, _ in times[mode])
            row[f"{mode}_cpu_ms"] = 1e3 * statistics.median(c for _, c in times[mode])
        row["compiled_over_eager"] = row["compiled_ms"] / row["eager_ms"]
        row["compiled_over_eager_cpu"] = row["compiled_cpu_ms"] / row["eager_cpu_ms"]
        row["compiled_in_ttnn_ms"] = 1e3 * _replay_ttnn_seconds(compiled, _on(inputs), name in NEEDS_VALUES, forwards)
        row["compiled_ours_ms"] = row["compiled_cpu_ms"] - row["compiled_in_ttnn_ms"]
        ref = _hidden(cpu(**inputs))
        row["pcc_eager"] = bert.pcc(_hidden(model(**_on(inputs))).cpu(), ref)
        row["pcc_compiled"] = bert.pcc(_hidden(compiled(**_on(inputs))).cpu(), ref)
        row["fallbacks"] = ttnn_eager.stats()["fallbacks"] - fb0
        dyn1 = _dynamo_counts()
        other = _on(_inputs(name, batch, seq // 2, cpu.config.vocab_size))
        compiled(**other)
        dyn2 = _dynamo_counts()
    row["graph_breaks"] = dyn1["graph_breaks"] - dyn0["graph_breaks"]
    row["graphs"] = dyn1["unique_graphs"] - dyn0["unique_graphs"]
    row["recompiles_for_seq_half"] = dyn2["unique_graphs"] - dyn1["unique_graphs"]
    return row


def generation(tokens: int, prompt: int = 16) -> dict:
    """Greedy generation with a static cache, eager and compiled: tokens, TT-NN ops per decoded token, host
    time per decode step (shadows off), recompiles over the tokens."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=512, intermediate_size=1024, num_attention_heads=8,
                                   num_key_value_heads=4, num_hidden_layers=2, vocab_size=1000,
                                   max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(cfg).eval().to(DEV)
    ids = torch.randint(0, cfg.vocab_size, (1, prompt)).to(DEV)
    out = {}
    with torch.no_grad():
        for mode in ("eager", "compiled"):
            if mode == "compiled":
                torch._dynamo.reset()
                model.forward = torch.compile(model.forward, backend="ttnn", fullgraph=True)
                model.generate(ids, max_new_tokens=3, do_sample=False, cache_implementation="static")  # compile
            dyn0 = _dynamo_counts()
            st0 = dict(ttnn_eager.stats())
            start = time.perf_counter()
            seq = model.generate(ids, max_new_tokens=tokens, do_sample=False, cache_implementation="static")
            wall = time.perf_counter() - start
            st1 = ttnn_eager.stats()
            out[mode] = {"tokens": seq[0, prompt:].cpu().tolist(), "seconds_with_shadow": wall,
                         "ttnn_ops_per_token": (st1["ttnn_ops"] - st0["ttnn_ops"]) / tokens,
                         "replays": st1["graph_replays"] - st0["graph_replays"],
                         "recompiles": _dynamo_counts()["unique_graphs"] - dyn0["unique_graphs"]}
        # host time per decode step, shadows off: one generate of `tokens` tokens each way
        for mode in ("eager", "compiled"):
            fwd = model.forward if mode == "compiled" else model.forward._torchdynamo_orig_callable
            steps = []
            with api.shadows_off():
                cache = transformers.StaticCache(config=cfg, max_cache_len=prompt + tokens + 1)
                pos = torch.arange(prompt).to(DEV)
                fwd(input_ids=ids, cache=cache, cache_position=pos, use_cache=True)
                nxt = ids[:, -1:]
                ops = []
                for i in range(tokens):
                    p = torch.tensor([prompt + i]).to(DEV)
                    n = ttnn_eager.stats()["ttnn_ops"]
                    start = time.perf_counter()
                    fwd(input_ids=nxt, cache=cache, cache_position=p, use_cache=True)
                    steps.append(time.perf_counter() - start)
                    ops.append(ttnn_eager.stats()["ttnn_ops"] - n)
            out[mode]["decode_step_ms"] = 1e3 * statistics.median(steps[2:])
            out[mode]["ttnn_ops_per_decode_step"] = statistics.median(ops[2:])
    out["tokens_equal"] = out["eager"]["tokens"] == out["compiled"]["tokens"]
    out["compiled_over_eager"] = out["compiled"]["decode_step_ms"] / out["eager"]["decode_step_ms"]
    return out


def _table(rows: list, cols: list) -> str:
    lines = ["| " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f(r) for _, f in cols) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="1x128,8x384", help="bert-large batch x seq, comma-separated")
    p.add_argument("--layers", type=int, default=24, help="bert-large layers for time and Pearson (default 24)")
    p.add_argument("--decoder-layers", type=int, default=2)
    p.add_argument("--forwards", type=int, default=5)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--quick", action="store_true", help="bert-large b1 s128 at 4 layers, decoders, generation")
    p.add_argument("--generation-only", action="store_true")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    layers = args.layers
    if args.quick:
        shapes, layers = shapes[:1], 4
    results = {"device": torch.ttnn.get_device_name(), "torch": torch.__version__}
    if not args.generation_only:
        results["ops_per_layer"] = {name: ops_per_layer(name, 1, 128) for name in ("bert-large", "llama", "gpt2")}
        rows = [compare("bert-large", layers, b, s, args.forwards) for b, s in shapes]
        rows += [compare(name, args.decoder_layers, 1, 128, args.forwards) for name in ("llama", "gpt2")]
        results["forwards"] = rows
        print("## TT-NN ops per layer (b1 s128)\n")
        print(_table([{"name": k, **v} for k, v in results["ops_per_layer"].items()], [
            ("model", lambda r: r["name"]), ("eager", lambda r: str(r["eager"]["total"])),
            ("compiled", lambda r: str(r["compiled"]["total"])),
            ("compiled, by op", lambda r: ", ".join(f"{k} {v}" for k, v in r["compiled"]["by_op"].items()))]))
        print("\n## Forward: eager vs compiled (host time with shadow execution off; Pearson with it on)\n")
        print(_table(rows, [
            ("model", lambda r: f"{r['model']} ({r['layers']} layers)"), ("b x s", lambda r: f"{r['batch']}x{r['seq']}"),
            ("eager ms", lambda r: f"{r['eager_ms']:.1f}"), ("compiled ms", lambda r: f"{r['compiled_ms']:.1f}"),
            ("compiled/eager", lambda r: f"{r['compiled_over_eager']:.2f}"),
            ("CPU ms eager / compiled", lambda r: f"{r['eager_cpu_ms']:.1f} / {r['compiled_cpu_ms']:.1f}"),
            ("compiled/eager CPU", lambda r: f"{r['compiled_over_eager_cpu']:.2f}"),
            ("compiled CPU: in ttnn calls / ours ms", lambda r: f"{r['compiled_in_ttnn_ms']:.1f} / {r['compiled_ours_ms']:.1f}"),
            ("PCC eager", lambda r: f"{r['pcc_eager']:.5f}"), ("PCC compiled", lambda r: f"{r['pcc_compiled']:.5f}"),
            ("fallbacks", lambda r: str(r["fallbacks"])), ("graph breaks", lambda r: str(r["graph_breaks"])),
            ("compile s", lambda r: f"{r['compile_seconds']:.1f}"), ("capture s", lambda r: f"{r['capture_seconds']:.1f}"),
            ("recompiles, seq/2", lambda r: str(r["recompiles_for_seq_half"]))]))
    gen = generation(args.tokens)
    results["generation"] = gen
    print("\n## Greedy generation, static cache (Llama-style, 2 layers)\n")
    print(_table([{"mode": m, **gen[m]} for m in ("eager", "compiled")], [
        ("mode", lambda r: r["mode"]), ("TT-NN ops/token in generate", lambda r: f"{r['ttnn_ops_per_token']:.0f}"),
        ("TT-NN ops/decode step", lambda r: f"{r['ttnn_ops_per_decode_step']:.0f}"),
        ("decode step ms (shadows off)", lambda r: f"{r['decode_step_ms']:.1f}"),
        ("replays", lambda r: str(r["replays"])), ("recompiles", lambda r: str(r["recompiles"]))]))
    print(f"\ntokens equal: {gen['tokens_equal']}; decode step compiled/eager: {gen['compiled_over_eager']:.2f}")
    if args.json:
        text = json.dumps(results, indent=2, default=str)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
