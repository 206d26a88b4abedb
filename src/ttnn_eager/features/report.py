"""Coverage report: what ran where, per aten op.

    with ttnn_eager.report() as rep:          # or: rep = ttnn_eager.report(model, **inputs)
        model(**inputs)
    print(rep)                                # Markdown table
    rep.as_dict(); rep.save_png("ops.png")    # JSON-able dict; bar chart of time by op family

Per aten op: calls, the TT-NN op(s) it became, CPU fallbacks, and its share of the backend's host time
(exclusive: time in nested aten ops is theirs). Families are the lowering modules (matmul, elementwise,
...), "fallback" for ops run on the CPU, "in-place" for in-place/out= ops run through their functional
lowering.
"""
from __future__ import annotations

import collections
import time

from .. import counters


class _Row:
    __slots__ = ("calls", "ttnn", "fallbacks", "seconds")

    def __init__(self):
        self.calls, self.ttnn, self.fallbacks, self.seconds = 0, collections.Counter(), 0, 0.0


class Report:
    def __init__(self):
        self.rows: dict = collections.defaultdict(_Row)
        self._stack: list = []     # [func, start, time spent in children]
        self._saved = None

    # -- collection (called by dispatch and the device API while the report is active)
    def run(self, func, fn, args, kwargs):
        frame = [func, time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            return fn(func, args, kwargs)
        finally:
            self._stack.pop()
            elapsed = time.perf_counter() - frame[1]
            self.rows[func].seconds += elapsed - frame[2]
            if self._stack:
                self._stack[-1][2] += elapsed

    def on_ttnn(self, op: str) -> None:
        if self._stack:
            self.rows[self._stack[-1][0]].ttnn[op] += 1

    def __enter__(self):
        self._saved = (counters.aten_calls.copy(), counters.fallback_by_op.copy(), counters.profile)
        counters.profile = self
        return self

    def __exit__(self, *exc):
        aten, fallbacks, counters.profile = self._saved
        for func, n in counters.aten_by_op(counters.aten_calls - aten).items():
            self.rows[func].calls = n
        for func, n in (counters.fallback_by_op - fallbacks).items():
            self.rows[func].fallbacks = n
        self.rows = {f: r for f, r in self.rows.items() if r.calls}  # decomposed composites drop out

    # -- results
    @staticmethod
    def family(func) -> str:
        from ..core.dispatch import functional_of
        from ..core.registry import REGISTRY
        entry = REGISTRY.get(func)
        if entry is not None:
            return entry.fn.__module__.rsplit(".", 1)[-1]
        return "in-place" if functional_of(func) is not None else "fallback"

    def as_dict(self) -> dict:
        total = sum(r.seconds for r in self.rows.values()) or 1.0
        ops = []
        for func, r in sorted(self.rows.items(), key=lambda kv: -kv[1].seconds):
            ops.append({"aten_op": str(func), "family": self.family(func), "calls": r.calls,
                        "ttnn_ops": dict(r.ttnn.most_common()), "fallbacks": r.fallbacks,
                        "seconds": r.seconds, "time_share": r.seconds / total})
        return {"aten_calls": sum(r.calls for r in self.rows.values()),
                "fallbacks": sum(r.fallbacks for r in self.rows.values()),
                "seconds": sum(r.seconds for r in self.rows.values()), "ops": ops}

    def by_family(self) -> dict:
        fam = collections.Counter()
        for func, r in self.rows.items():
            fam[self.family(func)] += r.seconds
        return dict(fam.most_common())

    def markdown(self) -> str:
        d = self.as_dict()
        lines = [f"{d['aten_calls']} aten calls, {len(d['ops'])} distinct ops, {d['fallbacks']} CPU fallbacks, "
                 f"{d['seconds'] * 1e3:.1f} ms in the backend\n",
                 "| aten op | family | calls | TT-NN op(s) | fallbacks | time share |",
                 "|---|---|---:|---|---:|---:|"]
        for op in d["ops"]:
            ttnn = ", ".join(f"{k} x{v}" for k, v in op["ttnn_ops"].items()) or "-"
            lines.append(f"| `{op['aten_op']}` | {op['family']} | {op['calls']} | {ttnn} | {op['fallbacks']} | "
                         f"{100 * op['time_share']:.1f}% |")
        return "\n".join(lines) + "\n"

    __str__ = markdown

    def save_png(self, path: str, title: str = "ttnn_eager: backend host time by op family") -> str:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fam = self.by_family()
        names, secs = list(fam)[::-1], [1e3 * s for s in list(fam.values())[::-1]]
        fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.4))
        colors = ["#c0392b" if n == "fallback" else "#2e86c1" for n in names]
        ax.barh(names, secs, color=colors)
        for y, s in enumerate(secs):
            ax.text(s, y, f" {s:.1f} ms", va="center", fontsize=8)
        ax.set_xlabel("milliseconds (exclusive host time in the backend)")
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def report(fn=None, *args, **kwargs):
    """`with report() as rep: ...`, or `report(fn, *args, **kwargs)` to run fn under a report."""
    rep = Report()
    if fn is None:
        return rep
    with rep:
        fn(*args, **kwargs)
    return rep
