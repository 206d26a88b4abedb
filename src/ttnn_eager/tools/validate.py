"""`ttnn-eager validate`: a validation kit for cards. It measures, on whatever device this process finds (a
Tenstorrent card, or the mock device and its shadow), and writes as Markdown and JSON for a user to attach to
an issue:

  * every aten op that a bert-large forward sends to the backend (sdpa and eager attention), at bert-large
    shapes: the first call of each (op, argument shapes) is checked -- its device inputs are downloaded, the
    op is run on them by PyTorch on the CPU in float32, and the device result is compared (max abs error,
    Pearson); calls and ttnn ops per row;
  * the whole forward against float32 PyTorch on the CPU (bert.compare: Pearson and max error of
    last_hidden_state and pooler_output);
  * the device, ttnn version, storage and compute-kernel configs in use (bert.numerics_settings);
  * every lowering in the registry at bert-large shapes (sweep.py: PyTorch's OpInfo samples, scaled), against
    float32 PyTorch on the CPU.

The per-op check hooks the dispatcher's profiling slot (counters.profile, as report.Report does), so it sees
exactly the ops and arguments a real forward produces; nothing is replayed on the device.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import torch

from .. import counters
from .compare import as_float32, compare, fmt, to_cpu

_SKIP = ("aten.empty", "aten.new_empty", "aten.empty_like", "aten.empty_strided")  # undefined values


def _signature(func, args, kwargs) -> tuple:
    def sig(x):
        from ..core.tensor import TtnnTensor
        if isinstance(x, torch.Tensor):
            return (tuple(x.shape), str(x.dtype), type(x) is TtnnTensor)
        if isinstance(x, (list, tuple)):
            return tuple(sig(y) for y in x)
        return repr(x) if isinstance(x, (int, float, bool, str, type(None), torch.dtype)) else type(x).__name__
    return (str(func), sig(list(args)), tuple(sorted((k, sig(v)) for k, v in kwargs.items())))


def _shapes(args) -> str:
    return ", ".join("x".join(map(str, a.shape)) or "scalar" for a in args if isinstance(a, torch.Tensor))


class OpChecker:
    """The dispatcher's profile hook: checks the first call of each (aten op, argument signature)."""

    def __init__(self):
        self.rows: dict = {}
        self._stack: list = []
        self._busy = False

    def __enter__(self):
        self._saved, counters.profile = counters.profile, self
        return self

    def __exit__(self, *exc):
        counters.profile = self._saved

    def on_ttnn(self, op: str) -> None:
        if self._stack and not self._busy:
            self._stack[-1].add(op)

    def run(self, func, fn, args, kwargs):
        if self._busy or str(func).startswith(_SKIP):
            return fn(func, args, kwargs)
        key = _signature(func, args, kwargs)
        row = self.rows.get(key)
        if row is not None:
            row["calls"] += 1
            return fn(func, args, kwargs)
        row = self.rows[key] = {"op": str(func), "shapes": _shapes(args), "calls": 1}
        self._busy = True
        try:
            cpu_args, cpu_kwargs = to_cpu(args), to_cpu(kwargs)
        finally:
            self._busy = False
        fallbacks = sum(counters.fallback_by_op.values())
        ttnn_ops: set = set()
        self._stack.append(ttnn_ops)
        try:
            out = fn(func, args, kwargs)
        finally:
            self._stack.pop()
        row["ttnn_ops"] = sorted(ttnn_ops)
        row["fallback"] = sum(counters.fallback_by_op.values()) > fallbacks
        self._busy = True
        try:
            ref = func(*as_float32(cpu_args), **as_float32(cpu_kwargs))
            got = to_cpu(out)
        except Exception as e:  # the CPU reference itself may not apply (e.g. a device-only argument)
            row["note"] = f"not compared: {type(e).__name__}: {str(e)[:120]}"
            return out
        finally:
            self._busy = False
        refs, gots = (ref, got) if isinstance(ref, (list, tuple)) else ((ref,), (got,))
        results = [compare(g, r) for g, r in zip(gots, refs)
                   if isinstance(g, torch.Tensor) and isinstance(r, torch.Tensor)]
        if results:
            row["max_abs_err"] = max(r["max_abs_err"] for r in results)
            row["pearson"] = min(r["pearson"] for r in results)
            notes = [r["note"] for r in results if "note" in r]
            if notes:
                row["note"] = notes[0]
        return out


def run(layers: int | None = None, batch: int = 2, seq: int = 128, model: str | None = None,
        attns: tuple = ("sdpa", "eager"), forward: bool = True, sweep_dims=None) -> dict:
    """The validation report (a dict; see `markdown` and `write`). `attns`: the attention implementations
    whose ops are checked one by one (the forward figures are those of sdpa attention). `forward`: run the
    model (its ops and the forward); `sweep_dims` (sweep.Dims): run the lowering sweep at those dimensions."""
    from importlib import metadata

    import ttnn_eager
    from . import bert, sweep
    from ..device import api as device_api

    start = time.perf_counter()
    report = {"ttnn_eager": ttnn_eager.__version__, "ttnn": metadata.version("ttnn"),
              "torch": torch.__version__, "batch": batch, "seq": seq, "layers": layers, "ops": [],
              "device": f"{device_api.device_name(0)}, arch {device_api.arch_name()}", "mock": device_api.RUNTIME.mock,
              "numerics": bert.numerics_settings()}
    if sweep_dims is not None:
        report["sweep_dims"] = dataclasses.asdict(sweep_dims)
        report["sweep"] = sweep.run(sweep_dims)
    if forward:
        _forward(report, layers, batch, seq, model, attns)
    report["seconds"] = time.perf_counter() - start
    return report


def _forward(report: dict, layers, batch, seq, model, attns) -> None:
    from . import bert
    for attn in attns:
        net, source = bert.load_bert(model, attn, layers=layers)
        ids, mask = bert.make_inputs(batch, seq, net.config.vocab_size)
        net.to("ttnn:0")
        with torch.no_grad(), OpChecker() as checker:
            net(input_ids=ids.to("ttnn:0"), attention_mask=mask.to("ttnn:0"))
        for row in checker.rows.values():
            report["ops"].append({"attention": attn, **row})
        del net
    net, source = bert.load_bert(model, "sdpa", layers=layers)
    ids, mask = bert.make_inputs(batch, seq, net.config.vocab_size)
    report["model"] = source
    report["forward"] = bert.compare(net, ids, mask)


def markdown(report: dict) -> str:
    n = report["numerics"]
    where = ("mock device: values from the shadow (numerics model: " + n["shadow_numerics"] + ")"
             if report["mock"] else "real device: values read back from the card")
    lines = [
        "# ttnn_eager validation report", "",
        f"- device: {report['device']} ({where})",
        f"- versions: ttnn {report['ttnn']}, ttnn_eager {report['ttnn_eager']}, torch {report['torch']}",
        *([f"- model: {report['model']}; batch {report['batch']}, seq {report['seq']}"] if "forward" in report else []),
        f"- matmul weights: {n['weight_dtype']}",
        "- compute-kernel configs: " + "; ".join(
            f"{k} {v['math_fidelity']}, fp32_dest_acc {v['fp32_dest_acc']}, math_approx {v['math_approx']}"
            for k, v in n["compute_configs"].items()),
        f"- run time: {report['seconds']:.1f} s", "",
    ]
    if "forward" in report:
        lines += _forward_md(report)
    if "sweep" in report:
        from . import sweep
        lines += sweep.markdown(report["sweep"], report["sweep_dims"])
    return "\n".join(lines) + "\n"


def _forward_md(report: dict) -> list:
    f = report["forward"]
    lines = [
        "## Forward against float32 PyTorch on the CPU", "",
        "| output | Pearson | max abs error |", "|---|---|---|",
        f"| last_hidden_state | {f['pcc_last_hidden_state']:.6f} | {f['max_abs_err_last_hidden_state']:.4g} |",
        f"| pooler_output | {f['pcc_pooler_output']:.6f} | {f['max_abs_err_pooler_output']:.4g} |", "",
        f"Counts of one forward: {f['aten_ops']} aten ops, {f['ttnn_ops']} ttnn ops, {f['fallbacks']} fallbacks, "
        f"{f['layout_conversions']} layout conversions.", "",
        "## Each op at bert-large shapes (first call of each op and argument shapes)", "",
        "| attention | aten op | argument shapes | calls | ttnn ops | max abs error | Pearson | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["ops"]:
        note = r.get("note", "") + (" CPU fallback" if r.get("fallback") else "")
        lines.append(f"| {r['attention']} | {r['op']} | {r['shapes']} | {r['calls']} | "
                     f"{', '.join(r.get('ttnn_ops', [])) or '-'} | {fmt(r.get('max_abs_err'))} | "
                     f"{fmt(r.get('pearson'))} | {note.strip()} |")
    return lines + [""]


def _plain(x):
    """Strict JSON: non-finite floats as strings ("nan", "inf")."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def write(report: dict, out_dir: str) -> tuple:
    """Write validation.md and validation.json into out_dir; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    md, js = os.path.join(out_dir, "validation.md"), os.path.join(out_dir, "validation.json")
    with open(md, "w") as fh:
        fh.write(markdown(report))
    with open(js, "w") as fh:
        json.dump(_plain(report), fh, indent=1, default=str)
    return md, js
