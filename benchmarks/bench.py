"""ttnn_eager benchmark: host overhead per aten op, TT-NN ops per BERT-large encoder layer, conversions and
transfers per forward, program-cache hits on the second forward, peak device memory at batch 8 seq 384,
graph replay (torch.ttnn.graph) side by side with the eager forward, a training step (time, fallbacks,
transfers; benchmarks/training.py has the bert-base training figures) and text generation per token.

    .venv/bin/python benchmarks/bench.py [--forwards 5] [--json out.json] [--quick]
    .venv/bin/python benchmarks/bench.py --vision-only [--vision-size 224]   ResNet-50 at batch 1 and 8
    .venv/bin/python benchmarks/bench.py --replay-only [--replay-shapes 1x128,8x384]
    .venv/bin/python benchmarks/bench.py --generation-only [--tokens 32]   (text generation only)

Everything is measured in one run, side by side. On a mock device the counts are exact and host time is
host time; the time inside ttnn calls and in shadow execution (the mock's CPU stand-in for the device) is
measured separately and excluded from "host overhead". Medians over several forwards after a warm-up.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import sys
from time import perf_counter

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import torch  # noqa: E402
import transformers  # noqa: E402

import ttnn_eager  # noqa: E402
from ttnn_eager.tools import bert, models
from ttnn_eager import counters
from ttnn_eager.device import api as device_api
from ttnn_eager.device import mock as shadow_mock  # the mock backend's shadow execution (timed apart)
from ttnn_eager.core import dispatch  # noqa: E402
from ttnn_eager.core.tensor import TtnnTensor  # noqa: E402

# The hand-written TT-NN BERT-large: tenstorrent/tt-metal models/demos/bert/tt/ttnn_optimized_bert.py
# (commit 120b164d). Per encoder layer: linear (fused QKV), split_query_key_value_and_split_heads, matmul,
# attention_softmax_, matmul, concatenate_heads, linear, add, layer_norm, linear (+gelu), linear,
# layer_norm (residual fused) = 12 TT-NN ops (plus one ttnn.reallocate, a memory move).
HAND_WRITTEN_OPS_PER_LAYER = 12
DEV = "ttnn:0"


class _ByOp(dict):
    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, op):
        fn = self[op] = self.make(op)
        return fn


def _by_op(make):
    """A stand-in for device_api._resolve: op name -> make(op), made once; a dict lookup per call, as cheap
    as the lru_cache it replaces (its cost counts as ours)."""
    return _ByOp(make).__getitem__


class HostTimer:
    """Times the backend from inside: top-level dispatch time, and within it the time spent in ttnn calls
    and in shadow execution (golden functions, rounding), which are not host overhead of ours."""

    def __init__(self):
        self.dispatch = self.ttnn = self.shadow = 0.0
        self.depth = 0
        self.inside = False  # inside a timed ttnn call or shadow execution

    def install(self):
        self._orig = (dispatch.dispatch, device_api._resolve, shadow_mock.shadow, shadow_mock._round,
                      device_api.ttnn.from_torch, device_api.ttnn.to_torch)
        orig_dispatch, orig_resolve, orig_shadow, orig_round, from_torch, to_torch = self._orig
        timer = self

        def timed_dispatch(func, args, kwargs):
            if timer.depth:
                return orig_dispatch(func, args, kwargs)
            timer.depth += 1
            start = perf_counter()
            try:
                return orig_dispatch(func, args, kwargs)
            finally:
                timer.dispatch += perf_counter() - start
                timer.depth -= 1

        def wrap(fn, field):
            # as lean as possible: what a wrapper costs outside its own timing window counts as ours.
            # Nested calls (shadow -> _round) are timed once, by the outer call.
            def timed(*a, **k):
                if timer.inside:
                    return fn(*a, **k)
                timer.inside = True
                start = perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    setattr(timer, field, getattr(timer, field) + (perf_counter() - start))
                    timer.inside = False
            timed.golden_function = getattr(fn, "golden_function", None)  # ttnn.get_golden_function reads it
            return timed

        dispatch.dispatch = timed_dispatch
        device_api._resolve = _by_op(lambda op: wrap(orig_resolve(op), "ttnn"))
        shadow_mock.shadow = wrap(orig_shadow, "shadow")
        shadow_mock._round = wrap(orig_round, "shadow")  # uploads round their shadow too
        device_api.ttnn.from_torch = wrap(from_torch, "ttnn")
        device_api.ttnn.to_torch = wrap(to_torch, "ttnn")
        return self

    def uninstall(self):
        (dispatch.dispatch, device_api._resolve, shadow_mock.shadow, shadow_mock._round,
         device_api.ttnn.from_torch, device_api.ttnn.to_torch) = self._orig

    def reset(self):
        self.dispatch = self.ttnn = self.shadow = 0.0

    @property
    def overhead(self):
        return self.dispatch - self.ttnn - self.shadow


def bert_forward(model, ids, mask):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask)
    return out


def host_overhead(model, ids, mask, forwards: int) -> dict:
    """Host overhead per aten op over bert-large forwards, measured two ways in the same run:
    shadow execution off (the mock device running as hardware does: this is the figure against the target)
    and on (the mock's CPU stand-in computing every value; it is excluded from the time, but the megabytes
    it streams leave the caches cold for the code that runs after it, so this figure is higher)."""
    d_ids, d_mask = ids.to(DEV), mask.to(DEV)
    bert_forward(model, d_ids, d_mask)  # warm-up: programs built
    timer = HostTimer().install()
    result = {}
    try:
        for mode in ("shadow_off", "shadow_on"):
            per_op, totals = [], []
            for _ in range(forwards):
                timer.reset()
                ttnn_eager.reset_stats()
                with device_api.shadows_off() if mode == "shadow_off" else contextlib.nullcontext():
                    start = perf_counter()
                    bert_forward(model, d_ids, d_mask)
                    totals.append(perf_counter() - start)
                n = ttnn_eager.stats()["aten_ops"]
                per_op.append(timer.overhead / n)
                breakdown = {"aten_ops": n, "seconds": totals[-1], "us_per_aten_op": {
                    "in_backend": 1e6 * timer.dispatch / n, "in_ttnn_calls": 1e6 * timer.ttnn / n,
                    "in_shadow_execution": 1e6 * timer.shadow / n, "ours": 1e6 * timer.overhead / n}}
            result[mode] = {"host_overhead_us_per_aten_op": 1e6 * statistics.median(per_op),
                            "host_overhead_us_samples": [round(1e6 * x, 2) for x in per_op],
                            "forward_seconds_median": statistics.median(totals),
                            "last_forward": breakdown}
    finally:
        timer.uninstall()
    return result


MICRO_OPS = {
    "add": lambda x, w: x + x, "mul_scalar": lambda x, w: x * 0.5, "view": lambda x, w: x.view(-1),
    "transpose": lambda x, w: x.transpose(0, 1), "linear": lambda x, w: torch.nn.functional.linear(x, w),
    "softmax": lambda x, w: torch.softmax(x, -1), "gelu": lambda x, w: torch.nn.functional.gelu(x),
}


def _median_per_op(fn, args, timer, repeats: int) -> tuple:
    """(our host overhead, wall time) per aten op, medians of 5 rounds of `repeats` calls."""
    ours, wall = [], []
    for _ in range(5):
        timer.reset()
        ttnn_eager.reset_stats()
        start = perf_counter()
        for _ in range(repeats):
            fn(*args)
        elapsed = perf_counter() - start
        n = ttnn_eager.stats()["aten_ops"]
        ours.append(timer.overhead / n)
        wall.append(elapsed / n)
    return statistics.median(ours), statistics.median(wall)


def micro_ops(repeats: int = 300) -> dict:
    """Per-op host overhead on 32x32 tensors (shadow execution off), beside plain PyTorch CPU dispatch of the
    same op, and the same code again with every ttnn call answered instantly by a stand-in returning the
    real call's result ("warm": only our code runs, so the caches stay warm; the difference to the first
    column is what a real ttnn call between two ops costs our code in cache misses)."""
    x, w = torch.randn(32, 32), torch.randn(32, 32)
    dx, dw = x.to(DEV), w.to(DEV)
    rows = {}
    timer = HostTimer().install()
    try:
        with torch.no_grad(), device_api.shadows_off():
            for name, fn in MICRO_OPS.items():
                fn(dx, dw)  # warm-up: the program is built
                ours, wall = _median_per_op(fn, (dx, dw), timer, repeats)
                with _instant_ttnn():
                    warm, _ = _median_per_op(fn, (dx, dw), timer, repeats)
                start = perf_counter()
                for _ in range(repeats):
                    fn(x, w)
                cpu = (perf_counter() - start) / repeats
                rows[name] = {"host_overhead_us": 1e6 * ours, "warm_host_overhead_us": 1e6 * warm,
                              "wall_us_per_aten_op": 1e6 * wall, "cpu_us": 1e6 * cpu, "ratio": ours / cpu}
    finally:
        timer.uninstall()
    return rows


def python_floor(repeats: int = 2000) -> dict:
    """The least a Python backend of this design can cost per op, timed as ours is (shadow execution off,
    the ttnn call excluded): take the argument's handle, call ttnn.gelu, read the result's shape, make its
    Handle and its wrapper tensor -- nothing else (no counting, checks, layouts, dtypes, views). Beside it,
    ours for the same op (F.gelu on a 32x32 tensor) in the same run."""
    x = torch.randn(32, 32).to(DEV)
    timer = HostTimer().install()
    try:
        gelu = device_api._resolve("gelu")  # timed: its time goes to timer.ttnn
        with torch.no_grad(), device_api.shadows_off():
            torch.nn.functional.gelu(x)
            floor = []
            for _ in range(5):
                timer.reset()
                start = perf_counter()
                for _ in range(repeats):
                    h = x._handle
                    out = gelu(h.tt)
                    TtnnTensor(device_api.Handle(out, None, h.dtype, device_api.shape_of(out), h.index))
                floor.append((perf_counter() - start - timer.ttnn) / repeats)
            ours, _ = _median_per_op(torch.nn.functional.gelu, (x,), timer, repeats)
    finally:
        timer.uninstall()
    return {"floor_us": 1e6 * statistics.median(floor), "ours_gelu_us": 1e6 * ours}


@contextlib.contextmanager
def _instant_ttnn():
    """Every ttnn op returns, with no work, the result its real call gave for the same op name."""
    resolve, results = device_api._resolve, {}

    def instant(op):
        real = resolve(op)

        def call(*a, **k):
            if op not in results:
                results[op] = real(*a, **k)
            return results[op]
        return call
    device_api._resolve = _by_op(instant)
    try:
        yield
    finally:
        device_api._resolve = resolve


def cpu_dispatch_per_op(cfg, seq: int, forwards: int) -> dict:
    """Plain PyTorch on the CPU running the same op sequence (same depth, tiny sizes)."""
    tiny = copy.deepcopy(cfg)
    tiny.hidden_size, tiny.num_attention_heads, tiny.intermediate_size = 32, 2, 64
    model = transformers.BertModel(tiny).eval()
    ids, mask = bert.make_inputs(1, seq, tiny.vocab_size)

    class Count(torch.utils._python_dispatch.TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        bert_forward(model, ids, mask)
    bert_forward(model, ids, mask)
    times = []
    for _ in range(forwards):
        start = perf_counter()
        bert_forward(model, ids, mask)
        times.append(perf_counter() - start)
    return {"cpu_aten_ops": Count.n, "cpu_us_per_aten_op": 1e6 * statistics.median(times) / Count.n}


def ops_per_layer(attn: str, seq: int) -> dict:
    counts = {}
    for layers in (2, 4):
        torch.manual_seed(0)
        model = transformers.BertModel(bert.bert_large_config(attn, num_hidden_layers=layers)).eval().to(DEV)
        ids, mask = bert.make_inputs(1, seq, model.config.vocab_size)
        d_ids, d_mask = ids.to(DEV), mask.to(DEV)
        bert_forward(model, d_ids, d_mask)
        with ttnn_eager.record_ops() as rec:
            bert_forward(model, d_ids, d_mask)
        counts[layers] = rec
    per_layer = {op: (counts[4].ttnn[op] - counts[2].ttnn[op]) / 2 for op in counts[4].ttnn}
    per_layer = {op: n for op, n in per_layer.items() if n}
    total = sum(per_layer.values())
    return {"ttnn_ops_per_layer": total, "by_op": per_layer,
            "hand_written_ttnn_bert_ops_per_layer": HAND_WRITTEN_OPS_PER_LAYER,
            "ratio": total / HAND_WRITTEN_OPS_PER_LAYER}


def second_forward(model, ids, mask) -> dict:
    d_ids, d_mask = ids.to(DEV), mask.to(DEV)
    bert_forward(model, d_ids, d_mask)
    entries = device_api.program_cache_entries(0)
    ttnn_eager.reset_stats()
    out = bert_forward(model, d_ids, d_mask)
    in_forward = ttnn_eager.stats()
    syncs = counters.aten_by_op()[torch.ops.aten._local_scalar_dense.default]
    new_programs = device_api.program_cache_entries(0) - entries
    ttnn_eager.reset_stats()
    out.last_hidden_state.cpu(), out.pooler_output.cpu()
    outputs = ttnn_eager.stats()["device_to_host"]
    return {"layout_conversions": in_forward["layout_conversions"],
            "host_to_device_in_forward": in_forward["host_to_device"],
            "device_to_host_in_forward": in_forward["device_to_host"], "syncs_asked_by_model_code": syncs,
            "device_to_host_outputs": outputs, "ttnn_ops": in_forward["ttnn_ops"],
            "new_programs_on_second_forward": new_programs,
            "program_cache_hit_rate": 1 - new_programs / max(1, in_forward["ttnn_ops"])}


def peak_memory(batch: int, seq: int) -> dict:
    torch.manual_seed(0)
    model = transformers.BertModel(bert.bert_large_config()).eval().to(DEV)
    ids, mask = bert.make_inputs(batch, seq, model.config.vocab_size)
    d_ids, d_mask = ids.to(DEV), mask.to(DEV)
    weights = device_api.memory_allocated(0)
    peak = [weights]
    orig = device_api._count

    def sampled(op):
        orig(op)
        peak[0] = max(peak[0], device_api.memory_allocated(0))
    device_api._count = sampled
    try:
        out = bert_forward(model, d_ids, d_mask)
    finally:
        device_api._count = orig
    del out
    return {"batch": batch, "seq": seq, "peak_device_bytes": peak[0], "after_model_to_bytes": weights,
            "peak_activations_bytes": peak[0] - weights}


def vision_host_overhead(batches=(1, 8), size: int = 224, forwards: int = 3) -> dict:
    """torchvision ResNet-50 (seeded random weights), no_grad: host overhead per aten op (shadow execution
    off, as on hardware; ttnn calls excluded), TT-NN ops and conversions per forward, at each batch size.
    The first forward at each size builds the programs and prepares the conv weights (not timed)."""
    from ttnn_eager.tools import vision
    model = vision.load("resnet50").to(DEV)
    out = {}
    timer = HostTimer()
    for batch in batches:
        x = vision.make_input(batch, size).to(DEV)
        with torch.no_grad():
            model(x)  # warm-up: programs, prepared weights
        timer.install()
        per_op, totals = [], []
        try:
            for _ in range(forwards):
                timer.reset()
                ttnn_eager.reset_stats()
                with torch.no_grad(), device_api.shadows_off():
                    start = perf_counter()
                    model(x)
                    totals.append(perf_counter() - start)
                stats = ttnn_eager.stats()
                per_op.append(timer.overhead / stats["aten_ops"])
        finally:
            timer.uninstall()
        out[f"batch_{batch}"] = {
            "host_overhead_us_per_aten_op": 1e6 * statistics.median(per_op),
            "forward_seconds_median": statistics.median(totals), "aten_ops_per_forward": stats["aten_ops"],
            "ttnn_ops_per_forward": stats["ttnn_ops"], "fallbacks": stats["fallbacks"],
            "layout_conversions": stats["layout_conversions"], "ttnn_ops_by_name": dict(counters.ttnn_by_op)}
    return {"model": "torchvision resnet50 (seeded random weights)", "size": size, **out}


def graph_replay(model, cpu_model, batch: int, seq: int, forwards: int, replays: int = 200) -> dict:
    """The same bert-large forward eagerly and as a graph replay (torch.ttnn.graph), shadow execution off
    (host time as on hardware): medians of wall time per forward, the replay's split (inside ttnn calls /
    ours), device memory and program-cache entries over `replays` replays with new ids and masks, and one
    replay with new inputs, shadow execution on, against float32 PyTorch on the CPU and the eager forward."""
    vocab = model.config.vocab_size
    padded = seq // 5 if batch > 1 else 0  # the captured mask pattern (padded or all ones) is kept by replays
    ids, mask = bert.make_inputs(batch, seq, vocab, padded=padded)
    s_ids, s_mask = ids.to(DEV), mask.to(DEV)
    bert_forward(model, s_ids, s_mask)  # warm-up: programs built, embedding tables converted

    def capture():
        g = torch.ttnn.TTNNGraph()
        with torch.no_grad(), torch.ttnn.graph(g):
            out = model(input_ids=s_ids, attention_mask=s_mask)
        return g, out

    start = perf_counter()
    g, out = capture()
    capture_seconds = perf_counter() - start
    eager, replay = [], []
    with device_api.shadows_off():
        g.replay()
        for _ in range(forwards):
            start = perf_counter()
            bert_forward(model, s_ids, s_mask)
            eager.append(perf_counter() - start)
            start = perf_counter()
            g.replay()
            replay.append(perf_counter() - start)
        memory, programs = device_api.memory_allocated(0), device_api.program_cache_entries(0)
        for i in range(replays):
            n_ids, n_mask = bert.make_inputs(batch, seq, vocab, padded=padded and padded + i % 7, seed=i)
            s_ids.copy_(n_ids)
            s_mask.copy_(n_mask)
            g.replay()
        memory_change = device_api.memory_allocated(0) - memory
        new_programs = device_api.program_cache_entries(0) - programs
    # the split: a second graph captured with the timer installed, so its replays time each ttnn call
    timer = HostTimer().install()
    try:
        gt, _ = capture()
        inside = []
        with device_api.shadows_off():
            for _ in range(forwards):
                timer.reset()
                start = perf_counter()
                gt.replay()
                total = perf_counter() - start
                inside.append((timer.ttnn, total - timer.ttnn))
    finally:
        timer.uninstall()
    inside.sort(key=lambda x: x[0] + x[1])
    ttnn_s, ours_s = inside[len(inside) // 2]
    # the replay loop alone: every step's ttnn function answers at once with the result its first call gave
    for st in gt._program.steps:
        if st.fn is not None:
            st.fn = _first_result(st.fn)
    loop = []
    with device_api.shadows_off():
        gt.replay()
        for _ in range(forwards):
            start = perf_counter()
            gt.replay()
            loop.append(perf_counter() - start)
    del gt
    # accuracy: new ids and mask (the captured pattern), shadow execution on
    n_ids, n_mask = bert.make_inputs(batch, seq, vocab, padded=padded and padded + 3, seed=12345)
    s_ids.copy_(n_ids)
    s_mask.copy_(n_mask)
    g.replay()
    hidden, pooled = out.last_hidden_state.cpu(), out.pooler_output.cpu()
    with torch.no_grad():
        ref = cpu_model(input_ids=n_ids, attention_mask=n_mask)
    eager_out = bert_forward(model, n_ids.to(DEV), n_mask.to(DEV))
    valid = n_mask.bool()
    e, r = statistics.median(eager), statistics.median(replay)
    return {"batch": batch, "seq": seq, "ttnn_ops_per_replay": g.num_ops, "capture_seconds": capture_seconds,
            "eager_seconds_median": e, "replay_seconds_median": r, "replay_over_eager": r / e,
            "eager_seconds": eager, "replay_seconds": replay,
            "replay_split_seconds": {"in_ttnn_calls": ttnn_s, "ours": ours_s},
            "replay_loop_alone_seconds_median": statistics.median(loop),
            "replays": replays, "device_memory_change_bytes": memory_change,
            "new_programs_over_replays": new_programs,
            "pcc_last_hidden_state_vs_cpu": bert.pcc(hidden[valid], ref.last_hidden_state[valid]),
            "pcc_pooler_output_vs_cpu": bert.pcc(pooled, ref.pooler_output),
            "max_abs_diff_vs_eager": float(max((hidden - eager_out.last_hidden_state.cpu()).abs().max(),
                                               (pooled - eager_out.pooler_output.cpu()).abs().max()))}


def _first_result(fn):
    """fn, answering every call after the first at once with the first call's result."""
    first = []

    def call(*a, **k):
        if not first:
            first.append(fn(*a, **k))
        return first[0]
    return call


def _replay_rows(results: dict) -> list:
    rows = []
    for key, r in results.items():
        b, s = r["batch"], r["seq"]
        sp = r["replay_split_seconds"]
        rows += [
            (f"graph replay b{b} s{s}: host time per forward eager / replay",
             f"{1e3 * r['eager_seconds_median']:.1f} / {1e3 * r['replay_seconds_median']:.1f} ms "
             f"({100 * r['replay_over_eager']:.0f}%)", "replay <= 50% of eager"),
            ("  replay split: inside ttnn calls / ours",
             f"{1e3 * sp['in_ttnn_calls']:.1f} / {1e3 * sp['ours']:.1f} ms ({r['ttnn_ops_per_replay']} ttnn ops)", "-"),
            ("  the replay loop alone (ttnn answering at once)",
             f"{1e3 * r['replay_loop_alone_seconds_median']:.2f} ms "
             f"({1e6 * r['replay_loop_alone_seconds_median'] / r['ttnn_ops_per_replay']:.1f} us per ttnn op)", "-"),
            (f"  replayed vs CPU (new ids, mask): Pearson hidden / pooled",
             f"{r['pcc_last_hidden_state_vs_cpu']:.5f} / {r['pcc_pooler_output_vs_cpu']:.5f}", ">= 0.999"),
            ("  replayed vs eager forward: max abs difference", f"{r['max_abs_diff_vs_eager']:g}", "0"),
            (f"  over {r['replays']} replays: device memory change / new programs",
             f"{r['device_memory_change_bytes']} B / {r['new_programs_over_replays']}", "0 / 0"),
        ]
    return rows


def training_steps(steps: int = 4) -> dict:
    """Per step of a tiny BertForSequenceClassification fine-tuning (hidden 128, 2 layers, batch 8, seq 128,
    AdamW): wall time, fallbacks, transfers, ops (benchmarks/training.py measures bert-base once)."""
    import training
    model = training.make_model("tiny")
    ids, labels = training.make_batch("tiny", 8, 128)
    rows, _ = training.run(model, DEV, ids, labels, steps)
    last = rows[1:]
    med = lambda k: statistics.median(r[k] for r in last)  # noqa: E731
    return {"step_seconds": med("seconds"), "fallbacks_per_step": med("fallbacks"),
            "device_to_host_per_step": med("device_to_host"), "host_to_device_per_step": med("host_to_device"),
            "aten_ops_per_step": med("aten_ops"), "ttnn_ops_per_step": med("ttnn_ops")}


# A Llama-style decoder (rotary, RMSNorm, SwiGLU, grouped-query attention) with Llama's vocabulary, small
# enough for the mock device's shadow execution: the shapes per token are those of a real model's layer.
LLAMA_STYLE = dict(vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048)


class _StepClock:
    """A logits processor that changes nothing: at every generation step it records the clock, the timer's
    split, the counters, the program cache size and the device memory."""

    def __init__(self, timer):
        self.timer, self.marks = timer, []

    def __call__(self, input_ids, scores):
        t = self.timer
        self.marks.append((perf_counter(), t.dispatch, t.ttnn, t.shadow, ttnn_eager.stats(),
                           device_api.program_cache_entries(0), device_api.memory_allocated(0)))
        return scores


def generation(cache: str, prompt: int = 32, tokens: int = 32) -> dict:
    """Greedy generate() of `tokens` tokens after a `prompt`-token prompt on a Llama-style model with
    DynamicCache or StaticCache (cache_implementation="static"): per decode step (prefill excluded), wall
    time, host time without the mock's shadow execution, our backend's own share, TT-NN ops, transfers,
    programs built, device memory. A first run builds the programs; the second is measured."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_STYLE)).eval().to(DEV)
    ids = torch.randint(3, LLAMA_STYLE["vocab_size"], (1, prompt)).to(DEV)
    kw = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    if cache == "static":
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        first = _StepClock(HostTimer())  # warm-up: programs built (counted per step: new shapes each token?)
        model.generate(ids, logits_processor=transformers.LogitsProcessorList([first]), **kw)
        timer = HostTimer().install()
        clock = _StepClock(timer)
        buffers = models._CacheBuffers(model)
        try:
            ttnn_eager.reset_stats()
            model.generate(ids, logits_processor=transformers.LogitsProcessorList([clock]), **kw)
        finally:
            timer.uninstall()
            buffers = buffers.summary()
    steps = list(zip(clock.marks, clock.marks[1:]))  # decode steps: between consecutive snapshots
    n = len(steps)

    def per(i, field=None):
        return sum((b[i][field] - a[i][field]) if field else (b[i] - a[i]) for a, b in steps) / n
    wall = per(0)
    result = {"cache": cache, "prompt": prompt, "new_tokens": tokens, "decode_steps": n,
              "wall_ms_per_token": 1e3 * wall,
              "host_ms_per_token_without_shadow": 1e3 * (wall - per(3)),
              "ours_ms_per_token": 1e3 * (per(1) - per(2) - per(3)),
              "in_ttnn_calls_ms_per_token": 1e3 * per(2), "shadow_ms_per_token": 1e3 * per(3)}
    for k in ("aten_ops", "ttnn_ops", "fallbacks", "layout_conversions", "host_to_device", "device_to_host"):
        result[f"{k}_per_token"] = per(4, k)
    result["new_programs_per_token"] = per(5)
    first_steps = [b[5] - a[5] for a, b in zip(first.marks, first.marks[1:])]
    result["first_run_new_programs_per_token"] = sum(first_steps) / max(len(first_steps), 1)
    result["device_bytes_first_step"] = clock.marks[1][6]
    result["device_bytes_last_step"] = clock.marks[-1][6]
    result["cache_device_tensors"], result["cache_tensors_reallocated"] = buffers["tensors"], buffers["reallocated"]
    del model
    return result


def _write_json(results: dict, path) -> None:
    """--json PATH: the results as JSON, to PATH (- for stdout); nothing when PATH is None."""
    if not path:
        return
    text = json.dumps(results, indent=1, default=str)
    if path == "-":
        print(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def _split(run: dict) -> str:
    """Host time per aten op of the last forward: outside the backend (PyTorch's dispatch, the model's
    Python), ours, inside ttnn calls."""
    per = run["last_forward"]["us_per_aten_op"]
    wall = 1e6 * run["last_forward"]["seconds"] / run["last_forward"]["aten_ops"]
    return f"{wall - per['in_backend']:.0f} / {per['ours']:.0f} / {per['in_ttnn_calls']:.0f} us"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--forwards", type=int, default=5)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--quick", action="store_true", help="skip the batch 8 x seq 384 peak-memory forward and replay rows")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON (- for stdout only)")
    p.add_argument("--vision", action="store_true", help="also measure ResNet-50 at batch 1 and 8")
    p.add_argument("--vision-only", action="store_true", help="only the ResNet-50 section")
    p.add_argument("--vision-size", type=int, default=224, help="ResNet-50 image size (default 224)")
    p.add_argument("--replay-shapes", default="1x128,8x384",
                   help="batch x seq of the graph-replay rows, comma-separated (default 1x128,8x384; --quick: 1x128)")
    p.add_argument("--replay-only", action="store_true", help="only the graph-replay rows")
    p.add_argument("--generation-only", action="store_true",
                   help="only the text-generation section (Llama-style model, dynamic and static cache)")
    p.add_argument("--tokens", type=int, default=32, help="generated tokens per generation run")
    args = p.parse_args(argv)
    if args.vision_only:
        return vision_main(args)
    if args.generation_only:
        return _generation_main(args)

    torch.manual_seed(0)
    model = transformers.BertModel(bert.bert_large_config()).eval()
    cfg = copy.deepcopy(model.config)
    cpu_model = copy.deepcopy(model)
    model.to(DEV)
    ids, mask = bert.make_inputs(args.batch, args.seq, cfg.vocab_size)
    results = {"device": torch.ttnn.get_device_name(), "model": "bert-large (seeded random weights)",
               "batch": args.batch, "seq": args.seq}
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.replay_shapes.split(",")]
    if args.quick:
        shapes = shapes[:1]
    replay = {f"{b}x{s}": graph_replay(model, cpu_model, b, s, args.forwards) for b, s in shapes}
    results["graph_replay"] = replay
    del cpu_model
    if args.replay_only:
        return _report(results, _replay_rows(replay), args)
    results["host"] = host_overhead(model, ids, mask, args.forwards)
    results["cpu_reference"] = cpu_dispatch_per_op(cfg, args.seq, args.forwards)
    results["host"]["ratio_to_cpu_dispatch"] = (results["host"]["shadow_off"]["host_overhead_us_per_aten_op"]
                                                / results["cpu_reference"]["cpu_us_per_aten_op"])
    results["micro_ops"] = micro_ops()
    results["python_floor"] = python_floor()
    results["second_forward"] = second_forward(model, ids, mask)
    del model
    results["ops_per_layer"] = {attn: ops_per_layer(attn, args.seq) for attn in ("sdpa", "eager")}
    if not args.quick:
        results["peak_memory"] = peak_memory(8, 384)
    results["training"] = training_steps()
    results["generation"] = {c: generation(c, tokens=args.tokens) for c in ("dynamic", "static")}

    h, c, s = results["host"], results["cpu_reference"], results["second_forward"]
    off, on = h["shadow_off"], h["shadow_on"]
    rows = [
        ("host overhead per aten op, bert-large forward (median)", f"{off['host_overhead_us_per_aten_op']:.1f} us",
         "<= 10 us"),
        ("  same, shadow execution on (cold caches)", f"{on['host_overhead_us_per_aten_op']:.1f} us", "-"),
        ("plain PyTorch CPU dispatch per aten op", f"{c['cpu_us_per_aten_op']:.1f} us", "-"),
        ("ratio ours / PyTorch CPU", f"{h['ratio_to_cpu_dispatch']:.1f}x", "-"),
        ("bert-large forward wall time (mock, shadow off / on)",
         f"{off['forward_seconds_median']:.3f} s / {on['forward_seconds_median']:.3f} s", "-"),
        ("  per aten op (shadow off): PyTorch+model / ours / ttnn", _split(off), "-"),
        ("micro ops (32x32): ours / ours warm / wall / CPU", "", "<= 10 us (ours)"),
    ]
    for name, r in results["micro_ops"].items():
        rows.append((f"  {name}", f"{r['host_overhead_us']:.1f} / {r['warm_host_overhead_us']:.1f} / "
                     f"{r['wall_us_per_aten_op']:.1f} / {r['cpu_us']:.1f} us", ""))
    f = results["python_floor"]
    rows.append(("  floor of any Python backend (gelu): bare path / ours", f"{f['floor_us']:.1f} / "
                 f"{f['ours_gelu_us']:.1f} us", ""))
    for attn, r in results["ops_per_layer"].items():
        rows.append((f"TT-NN ops per encoder layer ({attn})", f"{r['ttnn_ops_per_layer']:g}",
                     f"<= {2 * HAND_WRITTEN_OPS_PER_LAYER} (2x hand-written {HAND_WRITTEN_OPS_PER_LAYER}), "
                     f"ratio {r['ratio']:.2f}"))
    rows += [
        ("layout conversions in 2nd forward", str(s["layout_conversions"]), "0"),
        ("host->device in 2nd forward", str(s["host_to_device_in_forward"]), "0 (inputs uploaded before)"),
        ("device->host in 2nd forward", str(s["device_to_host_in_forward"]),
         f"<= syncs the model asks for ({s['syncs_asked_by_model_code']} .item())"),
        ("program-cache hit rate, 2nd forward", f"{100 * s['program_cache_hit_rate']:.1f}%", "100%"),
    ]
    if "peak_memory" in results:
        m = results["peak_memory"]
        rows.append(("peak device memory, batch 8 seq 384", f"{m['peak_device_bytes'] / 2**20:.0f} MiB "
                     f"(weights {m['after_model_to_bytes'] / 2**20:.0f} MiB)", "-"))
    t = results["training"]
    rows.append(("training step, tiny BERT batch 8 seq 128 (mock, shadow on)", f"{t['step_seconds']:.2f} s, "
                 f"{t['aten_ops_per_step']:g} aten ops", "-"))
    rows.append(("  fallbacks / device->host / host->device per step", f"{t['fallbacks_per_step']:g} / "
                 f"{t['device_to_host_per_step']:g} / {t['host_to_device_per_step']:g}", "0 / 1 (loss.item()) / 0"))
    rows += _generation_rows(results["generation"])
    return _report(results, rows + _replay_rows(replay), args)


def _report(results: dict, rows: list, args) -> int:
    width = max(len(r[0]) for r in rows)
    print(f"ttnn_eager benchmark: {results['model']}, batch {args.batch}, seq {args.seq}, {results['device']}")
    print(f"{'measure':<{width}}  {'value':<30}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:<30}  {target}")
    if args.vision:
        results["vision"] = vision_host_overhead(size=args.vision_size)
        results["vision"]["layers"] = vision_layers_overhead()
        _print_vision(results["vision"])
    _write_json(results, args.json)
    return 0


def vision_layers_overhead(repeats: int = 20) -> dict:
    """Host overhead per aten op of ResNet's layers one at a time (64x56x56, batch 1, shadow execution off):
    ours and the time inside ttnn calls, per aten op, with the TT-NN ops each makes."""
    torch.manual_seed(0)
    x = torch.randn(1, 64, 56, 56).to(DEV)
    layers = {"conv 3x3": torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), "batch norm (eval)":
              torch.nn.BatchNorm2d(64).eval(), "relu": torch.nn.ReLU(), "max pool 3x3/2": torch.nn.MaxPool2d(3, 2, 1),
              "add": None}
    out = {}
    for name, m in layers.items():
        f = (lambda t: t + t) if m is None else m.to(DEV)
        with torch.no_grad():
            f(x)  # programs built, weights prepared
        timer = HostTimer().install()
        ours, inside = [], []
        try:
            for _ in range(repeats):
                timer.reset()
                ttnn_eager.reset_stats()
                with torch.no_grad(), device_api.shadows_off():
                    f(x)
                stats = ttnn_eager.stats()
                ours.append(timer.overhead / stats["aten_ops"])
                inside.append(timer.ttnn / stats["aten_ops"])
        finally:
            timer.uninstall()
        out[name] = {"ours_us_per_aten_op": 1e6 * statistics.median(ours),
                     "ttnn_us_per_aten_op": 1e6 * statistics.median(inside),
                     "aten_ops": stats["aten_ops"], "ttnn_ops": stats["ttnn_ops"]}
    return out


def _print_vision(v: dict) -> None:
    print(f"\n{v['model']}, {v['size']}x{v['size']}, no_grad, shadow execution off")
    print(f"{'batch':<6} {'host us/aten op':>16} {'aten ops':>9} {'TT-NN ops':>10} {'fallbacks':>10} "
          f"{'conversions':>12} {'forward s (mock)':>17}")
    for key, r in v.items():
        if key.startswith("batch_"):
            print(f"{key[6:]:<6} {r['host_overhead_us_per_aten_op']:>16.1f} {r['aten_ops_per_forward']:>9} "
                  f"{r['ttnn_ops_per_forward']:>10} {r['fallbacks']:>10} {r['layout_conversions']:>12} "
                  f"{r['forward_seconds_median']:>17.3f}")
    if "layers" in v:
        print(f"\nper layer (64x56x56): {'ours us/aten op':>16} {'in ttnn us/aten op':>19} {'aten ops':>9} {'TT-NN ops':>10}")
        for name, r in v["layers"].items():
            print(f"  {name:<18} {r['ours_us_per_aten_op']:>16.1f} {r['ttnn_us_per_aten_op']:>19.1f} "
                  f"{r['aten_ops']:>9} {r['ttnn_ops']:>10}")


def vision_main(args) -> int:
    v = vision_host_overhead(size=args.vision_size, forwards=args.forwards)
    v["layers"] = vision_layers_overhead()
    _print_vision(v)
    _write_json({"device": torch.ttnn.get_device_name(), "vision": v}, args.json)
    return 0


def _generation_rows(gen: dict) -> list:
    rows = []
    for cache, g in gen.items():
        rows += [
            (f"generate() per token, {cache} cache: wall / without shadow / ours",
             f"{g['wall_ms_per_token']:.1f} / {g['host_ms_per_token_without_shadow']:.1f} / "
             f"{g['ours_ms_per_token']:.1f} ms", "-"),
            (f"  TT-NN ops / aten ops per token", f"{g['ttnn_ops_per_token']:.1f} / {g['aten_ops_per_token']:.1f}", "-"),
            (f"  D2H / H2D / fallbacks per token", f"{g['device_to_host_per_token']:.2f} / "
             f"{g['host_to_device_per_token']:.2f} / {g['fallbacks_per_token']:.2f}", "D2H: the stopping check"),
            (f"  programs built per token: first run / after warm-up",
             f"{g['first_run_new_programs_per_token']:.1f} / {g['new_programs_per_token']:.1f}", "0"),
            (f"  device memory, first -> last decode step",
             f"{g['device_bytes_first_step'] / 2**20:.1f} -> {g['device_bytes_last_step'] / 2**20:.1f} MiB", "-"),
            (f"  KV-cache device tensors: reallocated / held",
             f"{g['cache_tensors_reallocated']} / {g['cache_device_tensors']}", "static: 0 (written in place)"),
        ]
    return rows


def decode_replay(tokens: int = 16, prompt: int = 32) -> dict:
    """The StaticCache decode step of the Llama-style model eagerly and as a captured graph replayed per
    token (torch.ttnn.graph): host time per token with shadow execution off (as on hardware; the token is
    not read back, so both loops are pure host work), and the greedy tokens of the replay (shadow on) against
    the eager decode."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**LLAMA_STYLE)
    model = transformers.LlamaForCausalLM(cfg).eval().to(DEV)
    ids = torch.randint(3, cfg.vocab_size, (1, prompt))

    def decode(use_graph: bool, timed: bool):
        cache = transformers.StaticCache(config=cfg, max_cache_len=prompt + tokens + 1)
        out = model(ids.to(DEV), past_key_values=cache, cache_position=torch.arange(prompt).to(DEV))
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        s_tok, s_pos = tok.clone(), torch.tensor([prompt]).to(DEV)
        step = lambda: model(s_tok, past_key_values=cache, cache_position=s_pos).logits  # noqa: E731
        if use_graph:  # the capture runs the first decode step (it writes the cache): replays do the rest
            g = torch.ttnn.TTNNGraph()
            with torch.ttnn.graph(g):
                logits = step()
        seen, times = [], []
        for t in range(tokens):
            start = perf_counter()
            with device_api.shadows_off() if timed else contextlib.nullcontext():
                if not use_graph:
                    logits = step()
                elif t:
                    g.replay()
            if t or not use_graph:
                times.append(perf_counter() - start)
            if not timed:
                tok = logits[:, -1].argmax(-1, keepdim=True)
                seen.append(tok.item())
                s_tok.copy_(tok)
            s_pos.copy_(torch.tensor([prompt + 1 + t]))
        return seen, statistics.median(times)

    with torch.no_grad():
        eager_tokens, _ = decode(False, False)
        replay_tokens, _ = decode(True, False)
        _, eager_s = decode(False, True)
        _, replay_s = decode(True, True)
    return {"model": f"Llama-style {LLAMA_STYLE}", "tokens": tokens, "eager_host_ms_per_token": 1e3 * eager_s,
            "replay_host_ms_per_token": 1e3 * replay_s, "ratio": replay_s / eager_s,
            "replay_tokens_equal_eager": replay_tokens == eager_tokens}


def _generation_main(args) -> int:
    results = {"device": torch.ttnn.get_device_name(), "model": f"Llama-style {LLAMA_STYLE} (seeded random)",
               "generation": {c: generation(c, tokens=args.tokens) for c in ("dynamic", "static")}}
    results["decode_replay"] = d = decode_replay()
    rows = _generation_rows(results["generation"]) + [
        ("StaticCache decode step, host ms per token: eager / graph replay",
         f"{d['eager_host_ms_per_token']:.1f} / {d['replay_host_ms_per_token']:.1f} ({100 * d['ratio']:.0f}%)",
         "replay tokens == eager: " + str(d["replay_tokens_equal_eager"]))]
    width = max(len(r[0]) for r in rows)
    print(f"ttnn_eager generation benchmark: {results['model']}, {results['device']}")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:<30}  {target}")
    _write_json(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
