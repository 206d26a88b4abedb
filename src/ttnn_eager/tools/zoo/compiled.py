"""The compiled mode (`ttnn-eager zoo --compile`): a model through torch.compile(backend="ttnn")
against the CPU and against its eager forward (`compare_compiled`)."""
from __future__ import annotations

import collections
import statistics
import time

import torch

from .outputs import _fmt_p, _to, classify, compare_outputs


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


def compiled_summary(results: dict) -> dict:
    """The compiled sweep in figures: entries that ran, clean compiled, clean eagerly (from each result's
    "eager"), clean both ways, those clean eagerly but not compiled, the ops eager mode did not send to the fallback but the
    compiled run did (op -> entries), the TT-NN ops ratio compiled / eager (median, max) and the entries
    above 1.0 (more ops compiled than eager), graph breaks and recompiles summed."""
    ran = {n: r for n, r in results.items() if r.get("status") == "ran" and "eager" in r}
    clean = {n for n, r in ran.items() if (r.get("class_") or classify(r)) == "clean"}
    clean_eager = {n for n, r in ran.items()
                   if classify(dict(r["eager"], status="ran", same_shapes_dtypes=True)) == "clean"}
    compiled_only = collections.defaultdict(list)
    for n, r in sorted(ran.items()):
        for op in r.get("fallbacks") or {}:
            if op not in (r["eager"].get("fallbacks") or {}):
                compiled_only[op].append(n)
    ratios = sorted(r["ops_ratio"] for r in ran.values() if r.get("ops_ratio") is not None)
    return {"entries": len(results), "ran": len(ran), "clean": len(clean), "clean_eager": len(clean_eager),
            "clean_both": len(clean & clean_eager),
            "clean_eager_not_compiled": sorted(clean_eager - clean), "compiled_only_fallbacks": dict(compiled_only),
            "ratio_median": statistics.median(ratios) if ratios else None, "ratio_max": max(ratios, default=None),
            "above_eager": sorted(n for n, r in ran.items() if (r.get("ops_ratio") or 0) > 1.0),
            "not_ran": sorted(set(results) - set(ran)),
            "graph_breaks": sum(r.get("graph_breaks", 0) for r in ran.values()),
            "recompiles": sum(r.get("recompiles", 0) for r in ran.values()),
            "not_replayed": sorted(n for n, r in ran.items() if not r.get("replayed"))}


def compiled_md(data: dict) -> list:
    """docs/zoo.md's section on `ttnn-eager zoo --compile` (docs/zoo_compile.json): the summary and a row a type."""
    results = data.get("results", {})
    if not results:
        return []
    s = compiled_summary(results)

    def names(xs):
        return ", ".join(xs) or "none"
    med = "-" if s["ratio_median"] is None else f"{s['ratio_median']:.3f}"
    not_ran = [f"{n} ({results[n].get('status')})" for n in s["not_ran"]]
    top = "-" if s["ratio_max"] is None else f"{s['ratio_max']:.3f}"
    commits = collections.Counter(r.get("commit", "?") for r in results.values())
    out = [f"\n## Compiled: `torch.compile(backend=\"ttnn\")` (`ttnn-eager zoo --compile`)\n\n",
           f"{s['entries']} types measured (docs/zoo_compile.json, commit(s) "
           f"{', '.join(f'`{c}` ({n})' for c, n in commits.most_common())}), each eagerly on `ttnn:0` then compiled "
           f"and called {COMPILED_CALLS} times (the first runs each graph through the lowerings, the second captures "
           "it, the third replays it), every call against the CPU's float32 output; classified by the compiled "
           "result (its worst Pearson, every call's fallbacks), TT-NN ops of the last call against eager mode's.\n\n",
           f"- ran: {s['ran']}; clean compiled: **{s['clean_both']}** of the {s['clean_eager']} clean eagerly "
           f"({s['clean']} clean compiled in all); clean eagerly but not compiled: "
           f"{names(s['clean_eager_not_compiled'])}\n",
           f"- fallbacks compiled that eager mode does not have: "
           f"{names([f'`{op}` ({len(ns)}: {names(ns)})' for op, ns in s['compiled_only_fallbacks'].items()])}\n",
           f"- TT-NN ops a forward, compiled / eager: median **{med}**, max {top}; more than eager: "
           f"{names(s['above_eager'])}\n",
           f"- graph breaks (transformers' own code; counted, not failures): {s['graph_breaks']}; recompiles: "
           f"{s['recompiles']}; not replayed (a graph runs eagerly every call): {names(s['not_replayed'])}\n",
           f"- did not run: {names(not_ran)}\n\n",
           "| type | class | Pearson compiled (eager) | TT-NN ops compiled / eager | ratio | replayed | graphs | "
           "breaks | recompiles | first call s | error |\n|---|---|---|---|---|---|---|---|---|---|---|\n"]
    from .notes import COMPILED_NOTES
    notes = [n for n in sorted(results) if n in COMPILED_NOTES]
    if notes:
        out.insert(-1, "Notes:\n\n" + "".join(f"- **{n}**: {COMPILED_NOTES[n]}\n" for n in notes) + "\n")
    for n in sorted(results):
        r = results[n]
        e = r.get("eager") or {}
        ops = f"{r['ttnn_ops']} / {e['ttnn_ops']}" if "ttnn_ops" in r and "ttnn_ops" in e else "-"
        err = (r.get("error") or "").replace("|", "/").replace("\n", " ")[:160]
        out.append(f"| {n} | {r.get('class_') or classify(r)} | {_fmt_p(r.get('pearson'))} "
                   f"({_fmt_p(e.get('pearson'))}) | {ops} | {r.get('ops_ratio', '-')} | "
                   f"{'yes' if r.get('replayed') else 'no'} | {r.get('graphs', '-')} | {r.get('graph_breaks', '-')} | "
                   f"{r.get('recompiles', '-')} | {r.get('compile_s', '-')} | {err} |\n")
    return out
